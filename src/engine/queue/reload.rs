//! The daemon around the [`Supervisor`]: SIGHUP reloads the queue files.
//!
//! A reload loads the files and prepares every new or changed queue on its database
//! first; if anything is wrong, the error is logged and every queue keeps running as
//! it was. Otherwise only what changed is touched (see [`crate::engine::queue::supervisor`]), with
//! one log line per queue: unchanged, changed, added or removed.

use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

use crate::action::RawAction;
use crate::config::{LoadError, QueueConfig, QueueSource};
use crate::diagnostic::{Finding, Findings};
use crate::engine::queue::launch::one_line;
use crate::engine::queue::supervisor::{Event, RunOptions, Supervisor};

/// Listens for SIGHUP from now on: from here, a SIGHUP no longer ends the process
/// (its default action) but waits to be read as a reload. Called first thing, before
/// the files are loaded.
pub fn listen_for_hangups() -> std::io::Result<Signal> {
    signal(SignalKind::hangup())
}

/// Runs `queues` until `shutdown`, reloading them from `source` on every SIGHUP that
/// `hangups` hears. Only the first start can fail the process.
pub async fn run_with_reload(
    source: QueueSource,
    queues: Vec<QueueConfig>,
    options: RunOptions,
    shutdown: CancellationToken,
    mut hangups: Signal,
) -> Result<(), Findings> {
    let lifecycle = options.lifecycle.clone();
    let mut supervisor = Supervisor::new(options, shutdown);
    if !supervisor.start(queues).await? {
        return Ok(());
    }
    loop {
        let hangup = async {
            if hangups.recv().await.is_none() {
                std::future::pending::<()>().await;
            }
        };
        match supervisor.next_event(hangup).await {
            Event::Reload => {
                info!("SIGHUP: reloading the queue files");
                lifecycle.reloading();
                match reload(&mut supervisor, &source).await {
                    Ok(false) => {} // shutdown came first
                    Ok(true) => {
                        info!("reloaded");
                        lifecycle.reloaded(Ok(&supervisor.status()));
                    }
                    Err(findings) => {
                        for finding in &findings.0 {
                            error!(%finding, "reload refused; the queues keep running as they were");
                        }
                        let why = format!("reload refused: {}", one_line(&findings.0));
                        lifecycle.reloaded(Err(&why));
                    }
                }
                // Nothing fed the watchdog while the reload prepared the changed
                // queues, and the next tick is a whole period away: feed it now.
                supervisor.feed_watchdog();
            }
            Event::Finished | Event::Shutdown => break,
        }
    }
    supervisor.stop().await;
    Ok(())
}

/// Loads the queue files again and hands them to the supervisor, which prepares
/// what changed before touching anything.
async fn reload(supervisor: &mut Supervisor, source: &QueueSource) -> Result<bool, Findings> {
    let queues = source
        .load::<RawAction>(&|name| std::env::var(name).ok())
        .map_err(|e| match e {
            LoadError::Files(findings) => findings,
            unknown => Findings(vec![Finding::error(&source.paths[0], unknown.to_string())]),
        })?;
    supervisor.reload(queues).await
}
