//! Programs tableq starts, for `type = "command"` (one per item) and `type =
//! "worker"` (kept for many): each the leader of a process group of its own,
//! killed whole when it is done with ([`ProcessGroup`]), seeing only the
//! environment its table allows, its exit told in one way.
//!
//! - [`config`]: the keys both kinds share (`workdir`, `env`), and finding the
//!   program.
//! - `group`: the process group, and every group running now (for the reaper, and
//!   for an exit that runs no destructors).

pub mod config;
mod group;

use std::ffi::OsStr;
use std::future::Future;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::process::Command as Process;

pub use group::{kill_all, owns, ProcessGroup};

use config::{inherited, Surroundings};

/// `program` with `args`, ready to spawn: in `surroundings`' working directory,
/// with its environment (see [`environment`]), stdin, stdout and stderr piped, the
/// leader of a new process group, killed if its handle is dropped.
pub fn prepare(
    program: &OsStr,
    args: &[impl AsRef<OsStr>],
    surroundings: &Surroundings,
) -> Process {
    let mut process = Process::new(program);
    environment(&mut process, surroundings);
    process
        .args(args)
        .current_dir(&surroundings.workdir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    process
}

/// The environment is an allowlist: [`inherited`] variables, those the queue names
/// in `env`; the caller adds its `TABLEQ_*`.
fn environment(process: &mut Process, surroundings: &Surroundings) {
    process.env_clear();
    for (name, value) in std::env::vars_os() {
        if name.to_str().is_some_and(inherited) {
            process.env(name, value);
        }
    }
    for (name, value) in &surroundings.env {
        match value {
            Some(value) => {
                process.env(name, value);
            }
            None => {
                if let Some(value) = std::env::var_os(name) {
                    process.env(name, value);
                }
            }
        }
    }
}

/// Makes the process die (SIGKILL) when tableq does, however tableq ends — even
/// by `kill -9`, which runs nothing of tableq's: for a process kept between items,
/// which nothing else would end.
pub fn dies_with_tableq(process: &mut Process) {
    let tableq = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the child between fork and exec, and calls only
    // async-signal-safe functions (prctl, getppid, _exit).
    unsafe {
        process.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // tableq died before the line above: nobody would ever kill this one.
            if libc::getppid() != tableq {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

/// Waits for what follows a program's end — its exit once its input or output
/// ended, the rest of what it wrote — for at most `grace`; `None` if it did not
/// come (the caller kills its group, or does without the rest). The one grace
/// every program tableq starts is given.
pub async fn grace<T>(grace: Duration, what: impl Future<Output = T>) -> Option<T> {
    tokio::time::timeout(grace, what).await.ok()
}

/// How a process ended, in one phrase: `exit status 3`, `killed by signal 9 (SIGKILL)`.
pub fn ended(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal} ({})", signal_name(signal)),
        (None, None) => "ended without an exit status".to_string(),
    }
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGPIPE => "SIGPIPE",
        _ => "signal",
    }
}
