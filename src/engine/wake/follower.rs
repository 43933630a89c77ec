//! The followers of a run, one per database ([`Followers`]), and one database's
//! binary log, followed for the queues on it ([`Follower`]): open the stream from
//! the log's current end, nudge every queue whose tables a commit changed, and when
//! the stream breaks, let the queues poll every `poll_interval` while it reconnects
//! with a jittered backoff. Where the server or the grants allow no stream, say why
//! once (with what would allow it), let the queues poll, and look again now and then.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

use crate::config::WakeSource;
use crate::db::binlog::{self, BinlogReader, Commit, OpenFailure, StreamLost};
use crate::db::Database;
use crate::engine::policy::retry::{Failure, Next, Retry};
use crate::engine::queue::QueueRuntime;
use crate::engine::wake::tables::pause_changed;
use crate::lock::lock;

/// The server sends a heartbeat after this long without events; three missed ones
/// and the stream counts as lost.
const HEARTBEAT: Duration = Duration::from_secs(5);
/// The first wait before reconnecting a lost stream; it doubles up to two seconds
/// while the database worked lately, then up to a minute (see `Retry::reconnecting`).
const FIRST_RETRY: Duration = Duration::from_secs(1);
/// How often a database that allows no stream is asked again (a grant may come).
const UNAVAILABLE_RETRY: Duration = Duration::from_secs(300);

/// How long a stop waits for an open under way to say whether the server allows
/// a stream at all (see [`Follower::stream`]).
const VERDICT_GRACE: Duration = Duration::from_secs(2);

/// A stream that lived this long was a real one: the next loss starts the backoff
/// afresh.
const STEADY: Duration = Duration::from_secs(30);

/// The followers of a run, one per database, started as queues need them and
/// stopped once no queue they wake runs.
#[derive(Default)]
pub struct Followers {
    running: Vec<(Arc<Follower>, CancellationToken)>,
    tasks: TaskTracker,
}

impl Followers {
    /// Has `queue` woken by its database's follower (started now if it is the first
    /// queue on that database — the same options, credentials included — to want
    /// one). A queue with `wake = "poll"` is only told so.
    pub fn subscribe(&mut self, queue: &Arc<QueueRuntime>, stop: &CancellationToken) {
        if queue.config.wake.source == WakeSource::Poll {
            let why = "wake = \"poll\" in its queue file".to_string();
            queue.stats.set_wake("poll", Some(why));
            return;
        }
        let found = self
            .running
            .iter()
            .find(|(follower, _)| *follower.database() == queue.database);
        if let Some((follower, _)) = found {
            follower.subscribe(queue);
            return;
        }
        // Subscribed before it runs: what its first look finds is said for this queue.
        let follower = Arc::new(Follower::new(queue.database.clone()));
        follower.subscribe(queue);
        let own = stop.child_token();
        self.tasks.spawn(follower.clone().run(own.clone()));
        self.running.push((follower, own));
    }

    /// Stops the followers no running queue needs any more (after a reload removed
    /// or moved their queues): their replica connections close.
    pub fn prune(&mut self) {
        self.running.retain(|(follower, stop)| {
            let needed = follower.needed();
            if !needed {
                stop.cancel();
            }
            needed
        });
    }

    /// Waits for every follower to end (after `stop`).
    pub async fn stopped(&self) {
        self.tasks.close();
        self.tasks.wait().await;
    }
}

/// A database's binary log and the queues it wakes.
pub struct Follower {
    database: Database,
    /// The subscribers, and whether the stream is followed, under one lock: a queue
    /// subscribing never misses a change of the two.
    state: Mutex<State>,
}

struct State {
    subscribers: Vec<Subscriber>,
    /// Why the queues poll now; `None` while the stream is followed.
    polling: Option<String>,
}

/// Why the queues poll instead of following the stream.
struct Polling {
    why: String,
    /// The server or the grants allow no stream: asked again after
    /// [`UNAVAILABLE_RETRY`], not the backoff.
    unavailable: bool,
}

struct Subscriber {
    queue: Weak<QueueRuntime>,
}

impl Follower {
    pub fn new(database: Database) -> Follower {
        Follower {
            database,
            state: Mutex::new(State {
                subscribers: Vec::new(),
                polling: Some("the binary log stream is opening".to_string()),
            }),
        }
    }

    pub fn database(&self) -> &Database {
        &self.database
    }

    /// Wakes `queue` from now on.
    pub fn subscribe(&self, queue: &Arc<QueueRuntime>) {
        let mut state = lock(&self.state);
        tell(queue, state.polling.as_deref());
        state.subscribers.push(Subscriber {
            queue: Arc::downgrade(queue),
        });
    }

    /// Whether a queue it wakes still runs.
    pub fn needed(&self) -> bool {
        let mut state = lock(&self.state);
        state.subscribers.retain(|s| s.queue.strong_count() > 0);
        !state.subscribers.is_empty()
    }

    /// Follows the log until `stop`, reconnecting whenever the stream is lost.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        let mut retry = Retry::new(FIRST_RETRY, &stop)
            .afresh_after(STEADY)
            .reconnecting();
        // Each reason is said once, until a stream lives long enough to count.
        let mut said: Option<String> = None;
        let stream = || self.stream(&stop);
        let polling = |polling: &Polling, failure: Failure| {
            if failure.times == 1 {
                said = None;
            }
            let wait = match polling.unavailable {
                true => UNAVAILABLE_RETRY,
                false => failure.retry_in,
            };
            if said.as_deref() != Some(polling.why.as_str()) {
                self.say_polling(&polling.why, wait);
                said = Some(polling.why.clone());
            }
            self.set_polling(Some(polling.why.clone()));
            Next::After(wait)
        };
        let _stopped = retry.run(stream, polling).await;
    }

    /// Opens the stream and follows it: `Ok` once `stop` came; else why the queues
    /// poll meanwhile (also when the server refused the stream as `stop` came, for
    /// a run that ends before the open did: up to [`VERDICT_GRACE`] later).
    async fn stream(&self, stop: &CancellationToken) -> Result<(), Polling> {
        let open = binlog::open(&self.database, HEARTBEAT);
        tokio::pin!(open);
        let opened = tokio::select! {
            opened = &mut open => opened,
            // The stream is no longer wanted, but a run that ended quickly still says
            // why its queues polled: an open the server refuses ends at once.
            _ = stop.cancelled() => match tokio::time::timeout(VERDICT_GRACE, open).await {
                Ok(Err(OpenFailure::Unavailable(why))) => {
                    let why = why.to_string();
                    return Err(Polling { why, unavailable: true });
                }
                _ => return Ok(()),
            },
        };
        let why = match opened {
            Ok(reader) => match self.follow(reader, stop).await {
                None => return Ok(()),
                Some(lost) => format!("reconnecting to the binary log ({lost})"),
            },
            Err(OpenFailure::Unavailable(why)) => {
                let why = why.to_string();
                return Err(Polling {
                    why,
                    unavailable: true,
                });
            }
            Err(e) => format!("the binary log stream cannot open: {e}"),
        };
        let unavailable = false;
        Err(Polling { why, unavailable })
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
        let mut state = lock(&self.state);
        state.subscribers.retain(|s| s.queue.strong_count() > 0);
        for subscriber in state.subscribers.iter() {
            let Some(queue) = subscriber.queue.upgrade() else {
                continue;
            };
            if queue.wake.binlog().woken_by(commit, queue.database.name()) {
                if pause_changed(commit, queue.database.name()) {
                    queue.pausing.read_now();
                }
                queue.stats.record_wake_event();
                queue.wake.binlog().saw_change();
                queue.idle.nudge();
            }
        }
    }

    /// Says why the queues poll (once per reason, by the caller): a warning for the
    /// queues that asked for the log (`wake = "binlog"`), or when a stream was lost;
    /// a note for the others.
    fn say_polling(&self, why: &str, retry_in: Duration) {
        let (insisting, auto): (Vec<Arc<QueueRuntime>>, Vec<Arc<QueueRuntime>>) = self
            .queues()
            .into_iter()
            .partition(|q| q.config.wake.source == WakeSource::Binlog);
        let retry_in = crate::duration::rounded(retry_in);
        let was_following = lock(&self.state).polling.is_none();
        if !insisting.is_empty() || was_following {
            let all: Vec<Arc<QueueRuntime>> = insisting.into_iter().chain(auto).collect();
            warn!(database = %self.database, queues = %names(&all), %retry_in,
                "{why}; the queues poll every poll_interval until the binary log can be followed");
        } else if !auto.is_empty() {
            info!(database = %self.database, queues = %names(&auto), %retry_in,
                "the queues poll every poll_interval, not woken by the binary log: {why}");
        }
    }

    /// The queues poll now, for `why`, or (`None`) follow the stream. When they
    /// switch between the two, each is nudged to look once: a change may have gone
    /// unseen while the stream was not followed.
    fn set_polling(&self, why: Option<String>) {
        let mut state = lock(&self.state);
        if state.polling == why {
            return;
        }
        let switched = state.polling.is_some() != why.is_some();
        state.polling = why;
        for queue in state.subscribers.iter().filter_map(|s| s.queue.upgrade()) {
            tell(&queue, state.polling.as_deref());
            if switched {
                queue.idle.nudge();
            }
        }
    }

    fn queues(&self) -> Vec<Arc<QueueRuntime>> {
        lock(&self.state)
            .subscribers
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
    queue.wake.binlog().set_following(polling.is_none());
    match polling {
        None => queue.wake.binlog().say_following(),
        Some(why) => queue.stats.set_wake("poll", Some(why.to_string())),
    }
}
