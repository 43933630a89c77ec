//! Per-queue counters, and the minute-by-minute progress line in the log.

pub mod by_label;
pub mod failure_kinds;
pub mod history_tap;
pub mod in_flight;
pub mod limited;
pub mod monitor;
pub mod observed;
pub mod recent;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::db::pause::Paused;
use crate::db::Database;
use crate::db::Unanswered;
use crate::duration::rounded;
use crate::lock::lock;
use observed::Observed;

/// Counts of committed work, since the daemon started.
#[derive(Debug, Default)]
pub struct QueueStats {
    /// Workers holding a database session now.
    connected: AtomicUsize,
    claims: AtomicU64,
    done: AtomicU64,
    failed: AtomicU64,
    returned: AtomicU64,
    /// Outcome SQL that failed, leaving its item waiting.
    outcome_sql_failures: AtomicU64,
    /// Items completed again within the loop window.
    loops: AtomicU64,
    /// Lease mode: leases found lost by a renewal or an outcome.
    leases_lost: AtomicU64,
    /// The queue stopped claiming because a row kept coming back.
    looping: AtomicBool,
    /// The queue's database refuses writes, and why (`read-only`, …).
    refusing: Mutex<Option<&'static str>>,
    /// The queue's database, for the host in use of a URL that lists several.
    database: Mutex<Option<Database>>,
    /// The queue is paused (`tableq pause`), as its workers last read it.
    paused: Mutex<Option<Paused>>,
    /// Each worker's wait for the database, and how long a wait may last.
    waits: Mutex<Waits>,
    /// The circuit breaker's state, as a [`CircuitState`].
    circuit: AtomicU8,
    /// While the circuit is not closed: since when, why, and when the next probe is due.
    circuit_open: Mutex<Option<CircuitOpen>>,
    /// Changes of the circuit's state, by the state it changed to.
    circuit_transitions: [AtomicU64; 3],
    /// Where the queue's wake-ups come from now, and why.
    wake: Mutex<WakeStatus>,
    /// Wake-ups from the binary log: committed transactions that changed its tables.
    wake_events: AtomicU64,
    /// Timings, rollbacks, errors, the backlog, recent history and failures.
    pub observed: Observed,
}

/// Where a queue's wake-ups come from now: `binlog` (it still polls, seldom) or
/// `poll`, and why it polls when it does.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct WakeStatus {
    pub source: &'static str,
    pub why: Option<String>,
}

/// A circuit that is not closed, as the status page shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CircuitOpen {
    /// When it opened (the first time, if probes failed since).
    pub since: SystemTime,
    /// Why it opened last.
    pub why: String,
    /// When the next probe is due; `None` while a probe runs (half-open).
    pub next_probe: Option<SystemTime>,
}

/// A queue's circuit breaker, as the metrics and `/readyz` show it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CircuitState {
    /// Items run as usual (also when the breaker is off).
    #[default]
    Closed = 0,
    /// Failures downstream: the queue does not claim until the cool-down is over.
    Open = 1,
    /// One item runs as a probe.
    HalfOpen = 2,
}

impl CircuitState {
    pub const ALL: [CircuitState; 3] = [
        CircuitState::Closed,
        CircuitState::Open,
        CircuitState::HalfOpen,
    ];

    /// The state's name in metrics and messages.
    pub fn name(self) -> &'static str {
        match self {
            CircuitState::Closed => "closed",
            CircuitState::Open => "open",
            CircuitState::HalfOpen => "half_open",
        }
    }
}

#[derive(Debug, Default)]
struct Waits {
    workers: Vec<Arc<Unanswered>>,
    deadline: Duration,
    /// When a claim last had its answer.
    reached: Option<Instant>,
    /// How long a queue that takes turns may go between claims (two polls and a
    /// deadline).
    turns_within: Duration,
}

/// A worker's database session, counted in [`QueueStats::connected`] while it lives.
#[derive(Debug)]
pub struct Connected(std::sync::Arc<QueueStats>);

impl Drop for Connected {
    fn drop(&mut self) {
        self.0.connected.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A snapshot of [`QueueStats`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Claim queries sent (empty ones included).
    pub claims: u64,
    pub done: u64,
    pub failed: u64,
    /// Left waiting, not counting the rows `[concurrency]` held back
    /// ([`observed::Observed::limited`]).
    pub returned: u64,
    /// Outcome SQL that failed, leaving its item waiting.
    pub outcome_sql_failures: u64,
    /// Items completed again within the loop window.
    pub loops: u64,
    /// Lease mode: leases found lost by a renewal or an outcome.
    pub leases_lost: u64,
    /// Wake-ups from the binary log.
    pub wake_events: u64,
}

impl QueueStats {
    /// Counts a worker as connected until the returned guard is dropped.
    pub fn connection(self: &std::sync::Arc<Self>) -> Connected {
        self.connected.fetch_add(1, Ordering::Relaxed);
        Connected(self.clone())
    }

    /// Gets ready for `workers` workers whose database calls may each wait `deadline`,
    /// as the queue (re)starts: a queue stopped for looping claims again.
    pub fn expect_workers(&self, workers: usize, deadline: Duration) {
        self.looping.store(false, Ordering::Release);
        let mut waits = self.waits();
        waits.workers = (0..workers).map(|_| Arc::default()).collect();
        waits.deadline = deadline;
    }

    /// A queue with more queues than places in the connection budget gives its
    /// connection up between polls: it is working while it claims at least once
    /// every `window`.
    pub fn expect_turns_within(&self, window: Duration) {
        self.waits().turns_within = window;
    }

    /// A claim had its answer.
    pub fn reached(&self) {
        self.waits().reached = Some(Instant::now());
    }

    /// A worker lost the database, or could not reach it: the queue is not taking
    /// its turns until a claim has its answer again.
    pub fn unreached(&self) {
        self.waits().reached = None;
    }

    /// Whether the queue claimed within its turn's window (see
    /// [`QueueStats::expect_turns_within`]).
    pub fn taking_turns(&self) -> bool {
        let waits = self.waits();
        waits
            .reached
            .is_some_and(|at| at.elapsed() <= waits.turns_within)
    }

    /// Where worker `index` keeps its wait for the database.
    pub fn unanswered(&self, index: usize) -> Arc<Unanswered> {
        self.waits().workers.get(index).cloned().unwrap_or_default()
    }

    /// `worker 3 has waited 12s for the claim`, for each worker that has waited for
    /// the database longer than the deadline.
    pub fn stalled(&self) -> Vec<String> {
        let waits = self.waits();
        waits
            .workers
            .iter()
            .enumerate()
            .filter_map(|(index, unanswered)| {
                let (waited, what) = unanswered.longer_than(waits.deadline)?;
                let waited = rounded(waited);
                Some(format!("worker {index} has waited {waited} for {what}"))
            })
            .collect()
    }

    fn waits(&self) -> std::sync::MutexGuard<'_, Waits> {
        lock(&self.waits)
    }

    pub fn connected(&self) -> usize {
        self.connected.load(Ordering::Relaxed)
    }

    /// Records a claim query, whatever it found.
    pub fn record_claim(&self) {
        self.claims.fetch_add(1, Ordering::Relaxed);
    }

    /// Records a committed batch: its items done, failed, and returned to the queue
    /// (rows held back by `[concurrency]` are counted apart, as they are settled).
    pub fn record(&self, done: usize, failed: usize, returned: usize) {
        self.done.fetch_add(done as u64, Ordering::Relaxed);
        self.failed.fetch_add(failed as u64, Ordering::Relaxed);
        self.returned.fetch_add(returned as u64, Ordering::Relaxed);
        self.observed.record_minute(done, failed, returned);
    }

    /// Records outcome SQL that failed (its item is waiting again).
    pub fn record_outcome_sql_failure(&self) {
        self.outcome_sql_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// Records an item completed again within the loop window.
    pub fn record_loop(&self) {
        self.loops.fetch_add(1, Ordering::Relaxed);
    }

    /// Records a lease found lost (lease mode): its action cancelled or its outcome
    /// not recorded.
    pub fn record_lease_lost(&self) {
        self.leases_lost.fetch_add(1, Ordering::Relaxed);
    }

    /// The queue stopped claiming: a row kept coming back.
    pub fn set_looping(&self) {
        self.looping.store(true, Ordering::Release);
    }

    pub fn looping(&self) -> bool {
        self.looping.load(Ordering::Acquire)
    }

    /// The queue runs on `database`.
    pub fn set_database(&self, database: Database) {
        *lock(&self.database) = Some(database);
    }

    /// The host its connections go to, when its database URL lists several.
    pub fn database_host(&self) -> Option<String> {
        lock(&self.database).as_ref()?.host_in_use()
    }

    /// The queue's database refuses writes (`why`), or takes them again (`None`).
    pub fn set_refusing(&self, why: Option<&'static str>) {
        *lock(&self.refusing) = why;
    }

    pub fn refusing(&self) -> Option<&'static str> {
        *lock(&self.refusing)
    }

    /// The queue is paused (`Some`), or not, as its workers just read.
    pub fn set_paused(&self, paused: Option<Paused>) {
        *lock(&self.paused) = paused;
    }

    pub fn paused(&self) -> Option<Paused> {
        lock(&self.paused).clone()
    }

    /// The circuit changed to `to`: when it opened (first, if a probe failed and it
    /// opened again), why, and when the next probe is due (`retry_in`).
    pub fn note_circuit(&self, to: CircuitState, why: &str, retry_in: Duration) {
        let mut open = lock(&self.circuit_open);
        let now = SystemTime::now();
        *open = match to {
            CircuitState::Closed => None,
            CircuitState::Open => Some(CircuitOpen {
                since: open.as_ref().map_or(now, |o| o.since),
                why: why.to_string(),
                next_probe: Some(now + retry_in),
            }),
            CircuitState::HalfOpen => open.take().map(|o| CircuitOpen {
                next_probe: None,
                ..o
            }),
        };
    }

    pub fn circuit_open(&self) -> Option<CircuitOpen> {
        lock(&self.circuit_open).clone()
    }

    /// The circuit changed to `state` (counted as a transition unless it already was).
    pub fn set_circuit(&self, state: CircuitState) {
        let before = self.circuit.swap(state as u8, Ordering::AcqRel);
        if before != state as u8 {
            self.circuit_transitions[state as usize].fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn circuit(&self) -> CircuitState {
        match self.circuit.load(Ordering::Acquire) {
            1 => CircuitState::Open,
            2 => CircuitState::HalfOpen,
            _ => CircuitState::Closed,
        }
    }

    /// The queue's wake-ups come from `source` now, for `why`.
    pub fn set_wake(&self, source: &'static str, why: Option<String>) {
        *lock(&self.wake) = WakeStatus { source, why };
    }

    pub fn wake(&self) -> WakeStatus {
        lock(&self.wake).clone()
    }

    /// The binary log woke the queue.
    pub fn record_wake_event(&self) {
        self.wake_events.fetch_add(1, Ordering::Relaxed);
    }

    /// How many times the circuit changed to `state`.
    pub fn circuit_transitions(&self, state: CircuitState) -> u64 {
        self.circuit_transitions[state as usize].load(Ordering::Relaxed)
    }

    pub fn counts(&self) -> Counts {
        Counts {
            claims: self.claims.load(Ordering::Relaxed),
            done: self.done.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            returned: self.returned.load(Ordering::Relaxed),
            outcome_sql_failures: self.outcome_sql_failures.load(Ordering::Relaxed),
            loops: self.loops.load(Ordering::Relaxed),
            leases_lost: self.leases_lost.load(Ordering::Relaxed),
            wake_events: self.wake_events.load(Ordering::Relaxed),
        }
    }
}

/// Logs, every `every`, what `queue` did since the last line (the first line: since
/// `counted_from`), until `stop`.
pub async fn report_progress(
    queue: String,
    stats: std::sync::Arc<QueueStats>,
    counted_from: Counts,
    every: Duration,
    stop: CancellationToken,
) {
    let mut last = counted_from;
    // Items rolled back (a deadlock, a certification conflict, a lost connection):
    // counted apart from the queue's counts, since this queue started.
    let mut last_rolled_back = stats.observed.rolled_back();
    let mut last_held_back = stats.observed.limited.held_back_total();
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let now = stats.counts();
        let rolled_back = stats.observed.rolled_back();
        let held_back = stats.observed.limited.held_back_total();
        info!(
            queue = %queue,
            done = now.done - last.done,
            failed = now.failed - last.failed,
            returned = now.returned - last.returned,
            held_back = held_back - last_held_back,
            rolled_back = rolled_back - last_rolled_back,
            claims = now.claims - last.claims,
            per_seconds = every.as_secs(),
            "progress"
        );
        last = now;
        last_rolled_back = rolled_back;
        last_held_back = held_back;
    }
}
