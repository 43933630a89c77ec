//! What a queue's metrics and status page show beyond the committed counts: its
//! timings, items rolled back, database errors by kind, busy workers, the backlog
//! the background count saw, the last 15 minutes minute by minute, and the last
//! failures. Kept in memory; read by the scrape and the status page, which never
//! ask the database.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::by_label::ByLabel;
use super::failure_kinds::{FailureKind, FailureKinds};
use super::history_tap::{FailedAttempt, HistoryTap};
use super::in_flight::InFlight;
use super::limited::Limited;
use super::recent::Recent;
use crate::db::schedules::ScheduleRow;
use crate::db::{DbClock, ErrorKind};
use crate::lock::lock;
use crate::telemetry::metrics::histograms::Timings;

/// Minutes of history the status page charts.
pub const HISTORY_MINUTES: usize = 15;
/// Failures kept per queue.
pub const RECENT_FAILURES: usize = 20;

#[derive(Debug, Default)]
pub struct Observed {
    /// How long each action took.
    pub action: Timings,
    /// The same, over the last minutes: the status page's percentiles.
    pub action_recent: Recent,
    /// How long each transaction held its rows locked: claim to commit or rollback.
    pub transaction: Timings,
    /// How long each claim query took (empty ones included).
    pub claim: Timings,
    /// How long each claimed item had waited (`waiting_since`), by the database clock.
    pub queue_wait: Timings,
    /// The queue has `waiting_since`: its lag is measured.
    lag: AtomicBool,
    rolled_back: AtomicU64,
    db_errors: [AtomicU64; ErrorKind::ALL.len()],
    busy: AtomicUsize,
    /// The action's runs under way, for the status page.
    pub in_flight: InFlight,
    /// What the queue's limits shared with other copies and `[concurrency]` do.
    pub limited: Limited,
    /// Items by the queue's `label` column (a job's class).
    pub by_label: ByLabel,
    /// Where failed attempts go to be kept in the database, when the copy keeps
    /// a history.
    pub history: HistoryTap,
    backlog: Mutex<Backlog>,
    /// A schedule queue's row of `tableq_schedules`, as the count last read it.
    schedule: Mutex<Option<ScheduleRow>>,
    minutes: Mutex<[Minute; HISTORY_MINUTES]>,
    failures: Mutex<VecDeque<Failure>>,
    kinds: Mutex<FailureKinds>,
}

/// What the background count last saw.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Backlog {
    /// Waiting rows, up to the cap; `None` before the first count.
    pub waiting: Option<usize>,
    /// More rows wait than the cap.
    pub capped: bool,
    /// How long the oldest waiting row has waited, in seconds.
    pub oldest_seconds: Option<f64>,
    /// The database's clock, for ages measured at the claim.
    pub clock: Option<DbClock>,
    /// Rows that gave up (`[failed] select`), up to the cap; `None` without
    /// `[failed]` or before the first count.
    pub gave_up: Option<usize>,
}

/// One minute's committed items.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Minute {
    /// Minutes since the epoch; in JSON, `at`: when the minute began, in seconds
    /// since the epoch.
    #[serde(rename = "at", serialize_with = "minute_start")]
    pub minute: u64,
    pub done: u64,
    pub failed: u64,
    pub returned: u64,
    /// Rows `[concurrency]` held back (not counted in `returned`).
    pub held_back: u64,
}

/// One failed item, as the status page lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    pub key: String,
    /// Unix time, in seconds.
    pub at: u64,
    pub error: String,
    pub status: Option<i64>,
}

/// A worker counted busy while this lives.
pub struct Busy<'a>(&'a Observed);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Observed {
    /// Counts the worker busy until the guard drops.
    pub fn busy(&self) -> Busy<'_> {
        self.busy.fetch_add(1, Ordering::Relaxed);
        Busy(self)
    }

    pub fn busy_workers(&self) -> usize {
        self.busy.load(Ordering::Relaxed)
    }

    /// How long an action took: for Prometheus's histogram and the recent percentiles.
    pub fn record_action(&self, took: Duration) {
        self.action.observe(took);
        self.action_recent.observe(took);
    }

    /// Whether the queue measures its lag (it has `waiting_since`).
    pub fn set_measures_lag(&self, lag: bool) {
        self.lag.store(lag, Ordering::Relaxed);
    }

    pub fn measures_lag(&self) -> bool {
        self.lag.load(Ordering::Relaxed)
    }

    /// Items claimed whose transaction did not commit: shutdown, a lost connection,
    /// a deadline, contention, or an optimistic batch that had a failure.
    pub fn record_rolled_back(&self, items: usize) {
        self.rolled_back.fetch_add(items as u64, Ordering::Relaxed);
    }

    pub fn rolled_back(&self) -> u64 {
        self.rolled_back.load(Ordering::Relaxed)
    }

    pub fn record_db_error(&self, kind: ErrorKind) {
        let index = ErrorKind::ALL.iter().position(|k| *k == kind).unwrap_or(0);
        self.db_errors[index].fetch_add(1, Ordering::Relaxed);
    }

    /// Each kind with its count.
    pub fn db_errors(&self) -> Vec<(ErrorKind, u64)> {
        ErrorKind::ALL
            .iter()
            .zip(&self.db_errors)
            .map(|(kind, count)| (*kind, count.load(Ordering::Relaxed)))
            .collect()
    }

    /// Adds a committed batch to this minute's history.
    pub fn record_minute(&self, done: usize, failed: usize, returned: usize) {
        self.this_minute(|slot| {
            slot.done += done as u64;
            slot.failed += failed as u64;
            slot.returned += returned as u64;
        });
    }

    /// Rows `[concurrency]` held back: counted in total and in this minute.
    pub fn record_held_back(&self, rows: usize) {
        self.limited.held_back(rows);
        self.this_minute(|slot| slot.held_back += rows as u64);
    }

    fn this_minute(&self, change: impl FnOnce(&mut Minute)) {
        let minute = minute_now();
        let mut minutes = lock(&self.minutes);
        let slot = &mut minutes[(minute % HISTORY_MINUTES as u64) as usize];
        if slot.minute != minute {
            *slot = Minute {
                minute,
                ..Minute::default()
            };
        }
        change(slot);
    }

    /// Minute `at` (minutes since the epoch), if it is among the last
    /// [`HISTORY_MINUTES`] (empty if nothing happened in it).
    pub fn minute(&self, at: u64) -> Option<Minute> {
        let now = minute_now();
        if at > now || now - at >= HISTORY_MINUTES as u64 {
            return None;
        }
        let slot = lock(&self.minutes)[(at % HISTORY_MINUTES as u64) as usize];
        Some(match slot.minute == at {
            true => slot,
            false => Minute {
                minute: at,
                ..Minute::default()
            },
        })
    }

    /// The last [`HISTORY_MINUTES`] minutes, oldest first, this one last.
    pub fn minutes(&self) -> Vec<Minute> {
        let now = minute_now();
        let minutes = lock(&self.minutes);
        (0..HISTORY_MINUTES as u64)
            .rev()
            .map(|ago| now.saturating_sub(ago))
            .map(|minute| {
                let slot = minutes[(minute % HISTORY_MINUTES as u64) as usize];
                if slot.minute == minute {
                    slot
                } else {
                    Minute {
                        minute,
                        ..Minute::default()
                    }
                }
            })
            .collect()
    }

    /// Keeps a failed item among the last [`RECENT_FAILURES`], and counts it in its
    /// kind.
    pub fn record_failure(&self, attempt: &FailedAttempt) {
        let FailedAttempt {
            key, error, status, ..
        } = attempt;
        let at = unix_seconds(attempt.at);
        lock(&self.kinds).record(key, at, (error, attempt.kind.as_deref()), *status);
        let (key, status) = (key.clone(), *status);
        let mut failures = lock(&self.failures);
        if failures.len() == RECENT_FAILURES {
            failures.pop_front();
        }
        failures.push_back(Failure {
            key,
            at,
            error: error.chars().take(500).collect(),
            status,
        });
    }

    /// The last failures, newest first.
    pub fn failures(&self) -> Vec<Failure> {
        lock(&self.failures).iter().rev().cloned().collect()
    }

    /// The failures since the process started, by kind, the latest seen first.
    pub fn failure_kinds(&self) -> Vec<FailureKind> {
        lock(&self.kinds).all()
    }

    /// What the background count saw: waiting rows (up to the cap), and the oldest
    /// one's age.
    pub fn set_backlog(&self, waiting: usize, capped: bool, oldest: Option<Duration>) {
        let mut backlog = lock(&self.backlog);
        backlog.waiting = Some(waiting);
        backlog.capped = capped;
        backlog.oldest_seconds = oldest.map(|age| age.as_secs_f64());
    }

    /// What the background count saw of the rows that gave up.
    pub fn set_gave_up(&self, gave_up: Option<usize>) {
        lock(&self.backlog).gave_up = gave_up;
    }

    pub fn set_clock(&self, clock: DbClock) {
        lock(&self.backlog).clock = Some(clock);
    }

    pub fn backlog(&self) -> Backlog {
        *lock(&self.backlog)
    }

    /// What the background count read of a schedule queue's row.
    pub fn set_schedule(&self, row: Option<ScheduleRow>) {
        *lock(&self.schedule) = row;
    }

    /// A schedule queue's row, as the count last read it (`None` for other queues,
    /// and before the first count).
    pub fn schedule(&self) -> Option<ScheduleRow> {
        lock(&self.schedule).clone()
    }
}

fn minute_start<S: serde::Serializer>(minute: &u64, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_u64(minute * 60)
}

fn minute_now() -> u64 {
    unix_seconds(SystemTime::now()) / 60
}

fn unix_seconds(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_failures_and_this_minute() {
        let observed = Observed::default();
        for n in 0..25 {
            observed.record_failure(&FailedAttempt::new(format!("{n}"), "boom", Some(500)));
        }
        let failures = observed.failures();
        assert_eq!(failures.len(), RECENT_FAILURES);
        assert_eq!(failures[0].key, "24");
        assert_eq!(failures[19].key, "5");
        observed.record_minute(3, 2, 1);
        observed.record_minute(1, 0, 0);
        observed.record_held_back(2);
        let minutes = observed.minutes();
        assert_eq!(minutes.len(), HISTORY_MINUTES);
        let last = minutes[HISTORY_MINUTES - 1];
        assert_eq!((last.done, last.failed, last.returned), (4, 2, 1));
        assert_eq!(last.held_back, 2);
        assert_eq!(observed.minute(last.minute), Some(last));
        assert_eq!(observed.minute(last.minute + 1), None);
        assert!(minutes[..HISTORY_MINUTES - 1].iter().all(|m| m.done == 0));
    }
}
