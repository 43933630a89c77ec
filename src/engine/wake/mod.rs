//! Waking idle queues on the binary log: one [`follower`] per database follows the
//! server's log and, when a committed transaction changed a table a queue's select
//! reads, nudges that queue's watcher to claim now. The binary log only says *when*
//! to look, never *what* to take: the claim alone decides, and every queue still
//! polls — seldom while its follower streams, every `poll_interval` while it does
//! not — so a missed event, a broken stream or a row due by time alone is found.

pub mod blind;
pub mod due;
pub mod follower;
pub mod idle;
pub mod tables;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tracing::{info, warn};

use crate::config::queue::wake::binlog_refused;
use crate::config::{QueueConfig, WakeSource};
use crate::db::binlog;
use crate::db::Database;
use crate::diagnostic::{Finding, Severity};
use crate::telemetry::stats::QueueStats;
use blind::{Look, OwnCommits, BLIND};
pub use follower::Followers;

/// A queue's side of its follower: whether the follower streams now, and a signal
/// for the background count that the queue's tables changed.
#[derive(Debug, Default)]
pub struct QueueWake {
    following: AtomicBool,
    changed: Notify,
    /// Whether the stream shows the queue's own commits.
    own: OwnCommits,
}

impl QueueWake {
    /// How long the watcher waits between polls now: `poll_interval` unless the
    /// stream is followed and shows the queue's own commits (a blind stream is said
    /// once, and shown in `stats`).
    pub fn poll_interval(&self, config: &QueueConfig, stats: &QueueStats) -> Duration {
        if !self.following() {
            return config.poll_interval;
        }
        match self.own.look() {
            Look::Seeing => config.wake.poll_on_binlog,
            Look::Unseen(left) => config.wake.poll_on_binlog.min(left),
            Look::Blind { newly } => {
                if newly {
                    let every = humantime::format_duration(config.poll_interval);
                    warn!("{BLIND}; the queue polls every poll_interval ({every}) until they show");
                    stats.set_wake("poll", Some(BLIND.to_string()));
                }
                config.poll_interval
            }
        }
    }

    /// tableq committed a change to the queue's tables, in a transaction begun at
    /// `began`: the stream should show it.
    pub fn committed(&self, began: std::time::SystemTime) {
        if self.following() {
            self.own.committed(began);
        }
    }

    /// The stream showed a change of the queue's tables: a blind stream sees again.
    fn saw_change(&self, stats: &QueueStats) {
        if self.own.seen() && self.following() {
            info!("the binary log shows the queue's own commits again: it is woken by them");
            stats.set_wake("binlog", None);
        }
        self.changed.notify_one();
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
        // Commits made while the stream was not followed were never to be seen.
        self.own.reset();
        self.following.store(following, Ordering::Release);
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
