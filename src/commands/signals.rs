//! Unix signals: SIGTERM or SIGINT begins a graceful shutdown; a second one exits at
//! once (every open transaction rolls back as the connections drop).

use tokio::signal::unix::{signal, SignalKind};
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

/// Exit status after a second stop signal: work in flight was abandoned.
pub const FORCED_EXIT: i32 = 1;

/// Cancels `shutdown` on the first SIGTERM/SIGINT; exits the process on the second.
pub fn install(shutdown: CancellationToken) -> std::io::Result<()> {
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        info!(
            signal = name,
            "stop requested; send it again to exit at once"
        );
        shutdown.cancel();
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        error!(
            signal = name,
            "second stop signal: exiting now; items in flight roll back"
        );
        // Exiting runs no destructors: kill the commands' process groups by hand.
        crate::action::process::kill_all();
        std::process::exit(FORCED_EXIT);
    });
    Ok(())
}
