//! The binary log as a queue's source of wake-ups: its database's [`super::follower`]
//! nudges the queue when a commit changed its tables, and, while it streams, the
//! queue polls seldom (`poll_on_binlog`) — every `poll_interval` again when the
//! stream is not followed, or shows none of the queue's own commits
//! ([`super::blind`]), or shows nothing of a view it reads whose tables cannot be
//! told.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tracing::{info, warn};

use super::blind::{Look, OwnCommits, BLIND};
use super::source::{Poll, WakeSource};
use super::tables::Watched;
use crate::config::{QueueConfig, WakeSource as WakeSetting};
use crate::db::binlog::Commit;
use crate::db::Session;
use crate::lock::lock;
use crate::sql::tables::TableRef;
use crate::telemetry::stats::QueueStats;

/// A queue's side of its follower: whether the follower streams now, and a signal
/// for the background count that the queue's tables changed.
#[derive(Debug)]
pub struct BinlogWake {
    following: AtomicBool,
    changed: Notify,
    /// Whether the stream shows the queue's own commits.
    own: OwnCommits,
    /// How often the queue polls while the stream is followed, and otherwise.
    poll_on_binlog: Duration,
    poll_interval: Duration,
    stats: Arc<QueueStats>,
    /// The tables whose changes wake the queue.
    watched: Mutex<Watched>,
    /// Why the queue polls although the stream is followed: views of the select
    /// whose tables cannot be told. While set, it polls every `poll_interval`.
    unseen: Mutex<Option<String>>,
}

impl BinlogWake {
    /// `config`'s binary log source, not followed yet, saying its state in `stats`.
    pub fn of(config: &QueueConfig, stats: &Arc<QueueStats>) -> BinlogWake {
        BinlogWake {
            following: AtomicBool::new(false),
            changed: Notify::new(),
            own: OwnCommits::default(),
            poll_on_binlog: config.wake.poll_on_binlog,
            poll_interval: config.poll_interval,
            stats: stats.clone(),
            watched: Mutex::new(Watched::of(&config.select.text)),
            unseen: Mutex::new(None),
        }
    }

    /// Whether `commit` changed a table the queue's select reads (`database`: the
    /// queue's own, for the names it does not qualify).
    pub fn woken_by(&self, commit: &Commit, database: &str) -> bool {
        lock(&self.watched).woken_by(commit, database)
    }

    /// Watches the base tables behind the views `config`'s select reads, as the
    /// binary log names them, read on `session` before the queue's workers start;
    /// a view whose tables cannot be told is said, and the queue polls every
    /// `poll_interval` for it.
    pub async fn see_through_views(&self, config: &QueueConfig, session: &mut Session) {
        let Some(tables) = lock(&self.watched).tables().map(<[_]>::to_vec) else {
            return;
        };
        if config.wake.source == WakeSetting::Poll {
            return;
        }
        let seen = match session.seen_through_views(&tables).await {
            Ok(seen) => seen,
            Err(e) => {
                warn!(queue = %config.name, error = %e,
                    "could not read which tables the select's views read: a change made through one may wait for the next poll");
                return;
            }
        };
        if !seen.views.is_empty() {
            let behind: Vec<String> = seen
                .views
                .iter()
                .map(|(view, bases)| format!("{} ({})", view.name, names(bases)))
                .collect();
            info!(queue = %config.name, views = %behind.join(", "),
                "the select reads views: the queue is woken by the tables behind them");
        }
        if !seen.unseen.is_empty() {
            let every = humantime::format_duration(self.poll_interval);
            warn!(queue = %config.name, views = %names(&seen.unseen),
                "the binary log names the tables behind a view, never the view, and which tables these views read cannot be told (grant SHOW VIEW on them, or select from their tables): the queue polls every poll_interval ({every}) for changes made through them");
            let why = format!(
                "the binary log shows no change through view {}",
                names(&seen.unseen)
            );
            *lock(&self.unseen) = Some(why);
            if self.following() {
                self.say_following();
            }
        }
        let mut watched = lock(&self.watched);
        *watched = watched.seen_through(seen.tables);
    }

    /// tableq committed a change to the queue's tables, in a transaction begun at
    /// `began`: the stream should show it.
    pub fn committed(&self, began: std::time::SystemTime) {
        if self.following() {
            self.own.committed(began);
        }
    }

    /// The stream showed a change of the queue's tables: a blind stream sees again.
    pub(super) fn saw_change(&self) {
        if self.own.seen() && self.following() {
            info!("the binary log shows the queue's own commits again: it is woken by them");
            self.say_following();
        }
        self.changed.notify_one();
    }

    /// Says in `stats` that the stream is followed: the queue is woken by it, or
    /// polls for the views it cannot see through.
    pub fn say_following(&self) {
        match lock(&self.unseen).clone() {
            None => self.stats.set_wake("binlog", None),
            Some(why) => self.stats.set_wake("poll", Some(why)),
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

    pub(super) fn set_following(&self, following: bool) {
        // Commits made while the stream was not followed were never to be seen.
        self.own.reset();
        self.following.store(following, Ordering::Release);
    }
}

impl WakeSource for BinlogWake {
    /// While the stream is followed and shows the queue's own commits, it announces
    /// every change (a blind stream is said once, and shown in `stats`).
    fn poll(&self) -> Poll {
        if !self.following() || lock(&self.unseen).is_some() {
            return Poll::Silent;
        }
        match self.own.look() {
            Look::Seeing => Poll::Announces(self.poll_on_binlog),
            Look::Unseen(left) => Poll::Announces(self.poll_on_binlog.min(left)),
            Look::Blind { newly } => {
                if newly {
                    let every = humantime::format_duration(self.poll_interval);
                    warn!("{BLIND}; the queue polls every poll_interval ({every}) until they show");
                    self.stats.set_wake("poll", Some(BLIND.to_string()));
                }
                Poll::Silent
            }
        }
    }
}

/// `a, b`: the tables' names.
fn names(tables: &[TableRef]) -> String {
    let names: Vec<&str> = tables.iter().map(|t| t.name.as_str()).collect();
    names.join(", ")
}
