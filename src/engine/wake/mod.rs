//! Waking idle queues on the binary log: one [`follower`] per database follows the
//! server's log and, when a committed transaction changed a table a queue's select
//! reads, nudges that queue's watcher to claim now. The binary log only says *when*
//! to look, never *what* to take: the claim alone decides, and every queue still
//! polls — seldom while its follower streams, every `poll_interval` while it does
//! not — so a missed event, a broken stream or a row due by time alone is found.

pub mod follower;
pub mod tables;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

use crate::config::wake::binlog_refused;
use crate::config::{QueueConfig, WakeSource};
use crate::db::binlog;
use crate::db::Database;
use crate::diagnostic::{Finding, Severity};
pub use follower::Followers;

/// A queue's side of its follower: whether the follower streams now, and a signal
/// for the background count that the queue's tables changed.
#[derive(Debug, Default)]
pub struct QueueWake {
    following: AtomicBool,
    changed: Notify,
}

impl QueueWake {
    /// How long the watcher waits between polls now.
    pub fn poll_interval(&self, config: &QueueConfig) -> Duration {
        match self.following() {
            true => config.wake.poll_on_binlog,
            false => config.poll_interval,
        }
    }

    /// Whether the queue's follower streams the binary log now.
    pub fn following(&self) -> bool {
        self.following.load(Ordering::Acquire)
    }

    /// Waits until the queue's tables changed since the last wait (a change while
    /// nobody waited is kept for the next).
    pub async fn changed(&self) {
        self.changed.notified().await
    }

    fn set_following(&self, following: bool) {
        self.following.store(following, Ordering::Release);
    }

    fn note_change(&self) {
        self.changed.notify_one();
    }
}

/// The queues with `wake = "binlog"` whose database will not stream its binary log
/// to them, each a finding that says why and what would allow it. A database that
/// cannot be reached is no finding: the queue starts once it can.
pub async fn refused_binlog(queues: &[(QueueConfig, Database)]) -> Vec<Finding> {
    let mut verdicts = binlog::Verdicts::default();
    let mut findings = Vec::new();
    for (config, database) in queues {
        if config.wake.source != WakeSource::Binlog {
            continue;
        }
        if let Ok(Some(why)) = verdicts.of(database).await {
            let message = binlog_refused(&why);
            findings.push(config.finding(Severity::Error, &["wake"], message));
        }
    }
    findings
}
