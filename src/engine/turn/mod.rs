//! One turn of a worker — a claim carried to its end — as the metrics and the idle
//! queue see it: how long the claim took, how long its rows had waited, how long
//! they stayed locked, the items rolled back when the transaction did not commit,
//! the worker busy meanwhile; and, as soon as the claim finds rows, the idle
//! watcher's role handed on (and every sleeper woken by a full claim), so someone
//! keeps polling while this turn takes its time.

pub mod admit;
pub mod execute;
pub mod record;
pub mod report;
pub mod settle;

use std::sync::Mutex;
use std::time::SystemTime;

use tokio::time::Instant;

use crate::db::{DbError, Item};
use crate::engine::queue::QueueRuntime;
use crate::engine::wake::idle::Watch;
use crate::lock::lock;
use crate::telemetry::stats::observed::Busy;

/// Watches one turn, from its claim to its commit or rollback.
pub struct Turn<'a> {
    queue: &'a QueueRuntime,
    started: Mutex<Instant>,
    /// When the claim answered, and how many rows it locked.
    claimed: Mutex<Option<(Instant, usize)>>,
    /// The first claimed row's key, to name in a certification conflict.
    first_key: Mutex<Option<String>>,
    busy: Mutex<Option<Busy<'a>>>,
    /// The idle watcher's role, if this worker had it when the turn began.
    watch: Mutex<Option<Watch<'a>>>,
}

impl<'a> Turn<'a> {
    /// A turn of a worker holding `watch` (the idle watcher's role), if any.
    pub fn new(queue: &'a QueueRuntime, watch: Option<Watch<'a>>) -> Self {
        Turn {
            queue,
            started: Mutex::new(Instant::now()),
            claimed: Mutex::new(None),
            first_key: Mutex::new(None),
            busy: Mutex::new(None),
            watch: Mutex::new(watch),
        }
    }

    /// The claim is about to be sent: counted, and its time starts — unless the
    /// queue was paused since the worker looked (by the console, or as another
    /// worker read): false then, and the claim is not sent.
    #[must_use]
    pub fn claiming(&self) -> bool {
        let queue = self.queue;
        queue.pausing.unless_paused(|| {
            queue.stats.record_claim();
            *lock(&self.started) = Instant::now();
        })
    }

    /// The claim answered with `items`: its time, each item's wait, the worker busy
    /// if it found any, the watch handed on, and — a full claim: more rows may be
    /// waiting — every sleeping worker woken.
    pub fn claimed(&self, items: &[Item]) {
        let observed = &self.queue.stats.observed;
        let now = Instant::now();
        self.queue.stats.reached();
        observed.claim.observe(now - *lock(&self.started));
        *lock(&self.claimed) = Some((now, items.len()));
        let Some(first) = items.first() else {
            return;
        };
        *lock(&self.first_key) = Some(first.key_text());
        *lock(&self.busy) = Some(observed.busy());
        // Dropping the watch wakes a sleeper to take it over.
        lock(&self.watch).take();
        if items.len() == self.queue.config.batch {
            self.queue.idle.wake_all();
        }
        self.waited(items);
    }

    /// How long each claimed item had waited (`waiting_since`), by the database clock.
    fn waited(&self, items: &[Item]) {
        let observed = &self.queue.stats.observed;
        let since = self.queue.config.monitoring.waiting_since.as_deref();
        let (Some(since), Some(clock)) = (since, observed.backlog().clock) else {
            return;
        };
        let wall = SystemTime::now();
        for item in items {
            let Some(index) = item.columns.find(since) else {
                return;
            };
            if let Some(age) = clock.age(&item.values[index], wall) {
                observed.queue_wait.observe(age);
            }
        }
    }

    /// The claim's transaction committed: its rows are no longer locked.
    pub fn committed(&self) {
        self.locked_for();
    }

    /// The transaction rolled back (or was killed): its items are waiting again.
    pub fn rolled_back(&self) {
        if let Some(items) = self.locked_for() {
            self.queue.stats.observed.record_rolled_back(items);
        }
    }

    /// The transaction was lost to `error`. A certification conflict is said (once a
    /// minute per queue, with how many since).
    pub fn failed(&self, error: &DbError) {
        self.queue.stats.observed.record_db_error(error.kind());
        let items = self.locked_for();
        if let Some(items) = items {
            self.queue.stats.observed.record_rolled_back(items);
        }
        if error.is_certification() {
            let key = lock(&self.first_key).take().unwrap_or_default();
            self.queue
                .certification_conflict(&key, items.unwrap_or_default());
        }
    }

    /// The watcher's role, if the claim did not hand it on.
    pub fn into_watch(self) -> Option<Watch<'a>> {
        self.watch
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records how long the rows stayed locked; the number of rows, if any.
    fn locked_for(&self) -> Option<usize> {
        let (claimed_at, items) = lock(&self.claimed).take().filter(|(_, n)| *n > 0)?;
        let observed = &self.queue.stats.observed;
        observed.transaction.observe(claimed_at.elapsed());
        Some(items)
    }
}
