//! Waking idle queues on the binary log: one [`follower`] per database follows the
//! server's log and, when a committed transaction changed a table a queue's select
//! reads, nudges that queue's watcher to claim now. The binary log only says *when*
//! to look, never *what* to take: the claim alone decides, and every queue still
//! polls — seldom while its follower streams, every `poll_interval` while it does
//! not — so a missed event, a broken stream or a row due by time alone is found.

pub mod follower;
pub mod tables;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::queue::QueueRuntime;
use crate::config::{QueueConfig, WakeSource};
use crate::db::binlog;
use crate::db::Database;
use crate::diagnostic::{Finding, Severity};
use follower::Follower;

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

/// The followers of a run, one per database, started as queues need them.
#[derive(Default)]
pub struct Followers {
    by_database: BTreeMap<String, Arc<Follower>>,
    tasks: TaskTracker,
}

impl Followers {
    /// Has `queue` woken by its database's follower (started now if it is the first
    /// queue on that database to want one). A queue with `wake = "poll"` is only
    /// told so.
    pub fn subscribe(&mut self, queue: &Arc<QueueRuntime>, stop: &CancellationToken) {
        if queue.config.wake.source == WakeSource::Poll {
            let why = "wake = \"poll\" in its queue file".to_string();
            queue.stats.set_wake("poll", Some(why));
            return;
        }
        let key = queue.database.to_string();
        let follower = self.by_database.entry(key).or_insert_with(|| {
            let follower = Arc::new(Follower::new(queue.database.clone()));
            self.tasks.spawn(follower.clone().run(stop.clone()));
            follower
        });
        follower.subscribe(queue);
    }

    /// Waits for every follower to end (after `stop`).
    pub async fn stopped(&self) {
        self.tasks.close();
        self.tasks.wait().await;
    }
}

/// The queues with `wake = "binlog"` whose database will not stream its binary log
/// to them, each a finding that says why and what would allow it. A database that
/// cannot be reached is no finding: the queue starts once it can.
pub async fn refused_binlog(queues: &[(QueueConfig, Database)]) -> Vec<Finding> {
    let mut verdicts: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut findings = Vec::new();
    for (config, database) in queues {
        if config.wake.source != WakeSource::Binlog {
            continue;
        }
        let key = database.to_string();
        if !verdicts.contains_key(&key) {
            verdicts.insert(key.clone(), binlog_refusal(database).await);
        }
        if let Some(why) = &verdicts[&key] {
            let message = format!(
                "`wake = \"binlog\"`, but {why}; or set `wake = \"auto\"` to poll where the \
                 binary log cannot be followed"
            );
            findings.push(config.finding(Severity::Error, &["wake"], message));
        }
    }
    findings
}

/// Why `database` will not stream its binary log, if it will not.
async fn binlog_refusal(database: &Database) -> Option<String> {
    binlog::refusal(database)
        .await
        .ok()
        .flatten()
        .map(|why| why.to_string())
}
