//! systemd's notify protocol: `READY=1` once every queue has prepared,
//! `RELOADING=1` with `MONOTONIC_USEC=` then `READY=1` around a reload (with
//! `ERRNO=` and `STATUS=` when the reload is refused), `STOPPING=1` at shutdown,
//! a one-line `STATUS=`, and `WATCHDOG=1` only while the queues make progress.
//! Outside systemd (no `NOTIFY_SOCKET`) every message is dropped.

use std::time::Duration;

use sd_notify::NotifyState;
use tracing::debug;

use crate::engine::queue::lifecycle::Lifecycle;

/// `EINVAL`: the reloaded files are not valid.
const RELOAD_REFUSED: u32 = 22;

/// The service manager at `$NOTIFY_SOCKET`, and its watchdog interval, if any.
#[derive(Debug)]
pub struct Systemd {
    watchdog: Option<Duration>,
}

impl Systemd {
    pub fn from_env() -> Systemd {
        Systemd {
            watchdog: sd_notify::watchdog_enabled(),
        }
    }

    fn send(&self, states: &[NotifyState]) {
        if let Err(e) = sd_notify::notify(states) {
            debug!(error = %e, "cannot notify the service manager");
        }
    }
}

/// A status is one line.
fn line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

impl Lifecycle for Systemd {
    fn ready(&self, status: &str) {
        self.send(&[NotifyState::Ready, NotifyState::Status(&line(status))]);
    }

    fn reloading(&self) {
        let mut states = vec![
            NotifyState::Reloading,
            NotifyState::Status("reloading the queue files"),
        ];
        // systemd 253 and later need the time to match the reload with its request.
        if let Ok(now) = NotifyState::monotonic_usec_now() {
            states.push(now);
        }
        self.send(&states);
    }

    fn reloaded(&self, outcome: Result<&str, &str>) {
        match outcome {
            Ok(status) => self.send(&[NotifyState::Ready, NotifyState::Status(&line(status))]),
            Err(why) => self.send(&[
                NotifyState::Status(&line(why)),
                NotifyState::Errno(RELOAD_REFUSED),
                NotifyState::Ready,
            ]),
        }
    }

    fn stopping(&self) {
        self.send(&[
            NotifyState::Stopping,
            NotifyState::Status("stopping: finishing the items in flight"),
        ]);
    }

    fn watchdog_every(&self) -> Option<Duration> {
        self.watchdog
    }

    fn alive(&self) {
        self.send(&[NotifyState::Watchdog]);
    }

    fn status(&self, status: &str) {
        self.send(&[NotifyState::Status(&line(status))]);
    }
}
