//! What the daemon tells its service manager, and when: ready once every queue has
//! prepared, reloading and reloaded (or refused) around a SIGHUP, stopping at
//! shutdown, a one-line status, and a watchdog heartbeat given only while the
//! queues make progress. The engine says when; `commands` says how (systemd's
//! notify socket).

use std::time::Duration;

/// Hears the daemon's life events. Every method does nothing by default.
pub trait Lifecycle: Send + Sync + std::fmt::Debug {
    /// Every queue has prepared its SQL (or is waiting for its database).
    fn ready(&self, _status: &str) {}
    /// A reload begins.
    fn reloading(&self) {}
    /// A reload ended: applied (`Ok`, with the new status) or refused (`Err`, why).
    fn reloaded(&self, _outcome: Result<&str, &str>) {}
    /// Shutdown begins: no new claims.
    fn stopping(&self) {}
    /// How often the watchdog wants to hear that all is well; `None`: never.
    fn watchdog_every(&self) -> Option<Duration> {
        None
    }
    /// Every queue is making progress or idling normally.
    fn alive(&self) {}
    /// A new one-line status: a queue stalled, or all are well again.
    fn status(&self, _status: &str) {}
}

/// A service manager that listens to nothing.
#[derive(Debug, Default)]
pub struct Silent;

impl Lifecycle for Silent {}
