//! One database's binary log, followed for the queues on it: open the stream from
//! the log's current end, nudge every queue whose tables a commit changed, and when
//! the stream breaks, let the queues poll every `poll_interval` while it reconnects
//! with a jittered backoff. Where the server or the grants allow no stream, say why
//! once (with what would allow it), let the queues poll, and look again now and then.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::tables::Watched;
use crate::config::WakeSource;
use crate::db::binlog::{self, BinlogReader, Commit, OpenFailure, StreamLost};
use crate::db::Database;
use crate::engine::backoff::{pause, Backoff};
use crate::engine::queue::QueueRuntime;
use crate::lock::lock;

/// The server sends a heartbeat after this long without events; three missed ones
/// and the stream counts as lost.
const HEARTBEAT: Duration = Duration::from_secs(5);
/// The first wait before reconnecting a lost stream; it doubles up to a minute.
const FIRST_RETRY: Duration = Duration::from_secs(1);
/// How often a database that allows no stream is asked again (a grant may come).
const UNAVAILABLE_RETRY: Duration = Duration::from_secs(300);

/// A database's binary log and the queues it wakes.
pub struct Follower {
    database: Database,
    subscribers: Mutex<Vec<Subscriber>>,
    /// Why the queues poll now; `None` while the stream is followed.
    polling: Mutex<Option<String>>,
}

struct Subscriber {
    queue: Weak<QueueRuntime>,
    watched: Watched,
}

impl Follower {
    pub fn new(database: Database) -> Follower {
        Follower {
            database,
            subscribers: Mutex::default(),
            polling: Mutex::new(Some("the binary log stream is opening".to_string())),
        }
    }

    /// Wakes `queue` from now on.
    pub fn subscribe(&self, queue: &Arc<QueueRuntime>) {
        let polling = lock(&self.polling).clone();
        tell(queue, polling.as_deref());
        lock(&self.subscribers).push(Subscriber {
            queue: Arc::downgrade(queue),
            watched: Watched::of(&queue.config.select.text),
        });
    }

    /// Follows the log until `stop`, reconnecting whenever the stream is lost.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        let mut backoff = Backoff::new(FIRST_RETRY);
        let mut said: Option<String> = None;
        loop {
            let opened = tokio::select! {
                _ = stop.cancelled() => return,
                opened = binlog::open(&self.database, HEARTBEAT) => opened,
            };
            let wait = match opened {
                Ok(reader) => {
                    backoff.reset();
                    said = None;
                    let Some(lost) = self.follow(reader, &stop).await else {
                        return;
                    };
                    let wait = backoff.next_wait();
                    self.lost(&lost, wait);
                    wait
                }
                Err(OpenFailure::Unavailable(why)) => {
                    let why = why.to_string();
                    if said.as_deref() != Some(why.as_str()) {
                        self.unavailable(&why);
                        said = Some(why.clone());
                    }
                    self.set_polling(Some(why));
                    UNAVAILABLE_RETRY
                }
                Err(OpenFailure::Failed(e)) => {
                    let wait = backoff.next_wait();
                    let why = format!("the binary log stream cannot open: {e}");
                    if said.as_deref() != Some(why.as_str()) {
                        warn!(database = %self.database, retry_in = %crate::duration::rounded(wait), "{why}; the queues poll every poll_interval meanwhile");
                        said = Some(why.clone());
                    }
                    self.set_polling(Some(why));
                    wait
                }
            };
            if !pause(&stop, wait).await {
                return;
            }
        }
    }

    /// Reads commits until the stream is lost (`Some`) or `stop` (`None`).
    async fn follow(
        &self,
        mut reader: BinlogReader,
        stop: &CancellationToken,
    ) -> Option<StreamLost> {
        info!(database = %self.database, queues = %names(&self.queues()),
            "following the binary log: the queues claim as soon as a commit changes their tables");
        // Whatever committed before the stream opened was not seen: look once now.
        self.set_polling(None);
        loop {
            let next = tokio::select! {
                _ = stop.cancelled() => return None,
                next = reader.next_commit() => next,
            };
            match next {
                Ok(commit) => self.wake(&commit),
                Err(lost) => return Some(lost),
            }
        }
    }

    /// Nudges every queue `commit` changed a table of.
    fn wake(&self, commit: &Commit) {
        debug!(database = %self.database, commit = %commit, "binary log: a commit");
        let mut subscribers = lock(&self.subscribers);
        subscribers.retain(|s| s.queue.strong_count() > 0);
        for subscriber in subscribers.iter() {
            let Some(queue) = subscriber.queue.upgrade() else {
                continue;
            };
            if subscriber.watched.woken_by(commit, queue.database.name()) {
                queue.stats.record_wake_event();
                queue.wake.note_change();
                queue.idle.nudge();
            }
        }
    }

    fn lost(&self, lost: &StreamLost, wait: Duration) {
        warn!(database = %self.database, retry_in = %crate::duration::rounded(wait),
            "{lost}; the queues poll every poll_interval until it is back");
        self.set_polling(Some(format!("reconnecting to the binary log ({lost})")));
    }

    /// Says once why the log cannot be followed: a warning for the queues that
    /// asked for it (`wake = "binlog"`), a note for the others.
    fn unavailable(&self, why: &str) {
        let (insisting, auto): (Vec<Arc<QueueRuntime>>, Vec<Arc<QueueRuntime>>) = self
            .queues()
            .into_iter()
            .partition(|q| q.config.wake.source == WakeSource::Binlog);
        if !insisting.is_empty() {
            warn!(database = %self.database, queues = %names(&insisting),
                "wake = \"binlog\", but {why}; the queues poll every poll_interval until it can be followed");
        }
        if !auto.is_empty() {
            info!(database = %self.database, queues = %names(&auto),
                "the queues poll every poll_interval, not woken by the binary log: {why}");
        }
    }

    /// The queues poll now, for `why`, or (`None`) follow the stream. When they
    /// switch between the two, each is nudged to look once: a change may have gone
    /// unseen while the stream was not followed.
    fn set_polling(&self, why: Option<String>) {
        let switched = lock(&self.polling).is_some() != why.is_some();
        let changed = *lock(&self.polling) != why;
        *lock(&self.polling) = why.clone();
        if !changed {
            return;
        }
        for queue in self.queues() {
            tell(&queue, why.as_deref());
            if switched {
                queue.idle.nudge();
            }
        }
    }

    fn queues(&self) -> Vec<Arc<QueueRuntime>> {
        lock(&self.subscribers)
            .iter()
            .filter_map(|s| s.queue.upgrade())
            .collect()
    }
}

/// `a, b, c`: the queues' names.
fn names(queues: &[Arc<QueueRuntime>]) -> String {
    let names: Vec<&str> = queues.iter().map(|q| q.config.name.as_str()).collect();
    names.join(", ")
}

/// Tells `queue` where its wake-ups come from now.
fn tell(queue: &QueueRuntime, polling: Option<&str>) {
    queue.wake.set_following(polling.is_none());
    match polling {
        None => queue.stats.set_wake("binlog", None),
        Some(why) => queue.stats.set_wake("poll", Some(why.to_string())),
    }
}
