//! What happens to a queue that is both logged and counted, one type per event:
//! [`Event::emit`] writes the log line *and* counts it, so the two cannot drift
//! (a line with no count behind it, a count nobody hears of). The line goes to the
//! caller's span (its queue, worker and item key).

use std::time::Duration;

use tracing::{debug, error, info, warn};

use super::stats::history_tap::FailedAttempt;
use super::stats::{CircuitState, QueueStats};
use crate::db::{Database, DbError, ErrorKind, OpenError};
use crate::duration::rounded;

/// An event of a queue: logged and counted together.
pub trait Event {
    fn emit(self, stats: &QueueStats);
}

/// An item's action failed for its own sake; its failure is on the status page.
pub struct ItemFailed<'a> {
    pub attempt: &'a FailedAttempt,
}

impl Event for ItemFailed<'_> {
    fn emit(self, stats: &QueueStats) {
        stats.observed.record_failure(self.attempt);
        let error = &self.attempt.error;
        if self.attempt.recorded {
            warn!(%error, "item failed");
        } else {
            warn!(%error, "item failed; with no [on_failure] it is waiting again");
        }
    }
}

/// Outcome SQL (or lease SQL) failed on its own error: the item is as it was
/// claimed, and is tried again.
pub struct OutcomeSqlFailed<'a> {
    /// `[on_success] SQL`, `[on_failure] SQL`, `[lease] sql`.
    pub which: &'a str,
    pub error: &'a DbError,
    /// Why the action failed, for `[on_failure]`.
    pub action_error: &'a str,
    /// Said in full the first time for this key only.
    pub first: bool,
    /// Lease mode: the row comes back when its lease expires.
    pub leased: bool,
}

impl Event for OutcomeSqlFailed<'_> {
    fn emit(self, stats: &QueueStats) {
        stats.record_outcome_sql_failure();
        let which = self.which;
        if !self.first {
            debug!(error = %self.error, "{which} failed again; the item is waiting again");
            return;
        }
        let when = if self.leased {
            "when its lease expires"
        } else {
            "at once"
        };
        error!(error = %self.error, action_error = %self.action_error,
            "{which} failed; the item is rolled back and waiting again ({when}), and is retried \
             until the SQL works: fix it (a column too small for :error or :output? :error holds up \
             to 8 KiB and :output up to 64 KiB: use TEXT or MEDIUMBLOB, or LEFT(:error, n)); said \
             once per item");
    }
}

/// Where a lease was found lost.
#[derive(Debug, Clone, Copy)]
pub enum LostAt {
    /// A renewal matched no row: the action is cancelled.
    Renewal,
    /// The outcome SQL matched no row: the outcome is not recorded.
    Outcome,
}

/// A lease found lost: another worker has the row now, or the row was changed.
pub struct LeaseLost<'a> {
    pub lease_id: &'a str,
    pub at: LostAt,
}

impl Event for LeaseLost<'_> {
    fn emit(self, stats: &QueueStats) {
        stats.record_lease_lost();
        let lease_id = self.lease_id;
        match self.at {
            LostAt::Renewal => warn!(%lease_id,
                "lease lost: the renewal matched no row (the lease expired and another worker took \
                 the row, or the row was changed); the action is cancelled and its outcome is not \
                 recorded"),
            LostAt::Outcome => warn!(%lease_id,
                "lease lost: the outcome SQL matched no row (the lease expired and another worker \
                 took the row, or the row was changed); this worker's outcome is not recorded"),
        }
    }
}

/// A renewal failed; it is tried again at the next one.
pub struct RenewalFailed<'a> {
    pub error: &'a str,
    pub kind: ErrorKind,
}

impl Event for RenewalFailed<'_> {
    fn emit(self, stats: &QueueStats) {
        stats.observed.record_db_error(self.kind);
        warn!(error = %self.error,
            "could not renew the lease; trying again at the next renewal (the outcome SQL's lease \
             check says whether it still held)");
    }
}

/// An item completed again within `loop_window`: its row is still in the select.
pub struct LoopSeen<'a> {
    pub key: &'a str,
    pub repeats: u32,
    pub window: Duration,
}

impl Event for LoopSeen<'_> {
    fn emit(self, stats: &QueueStats) {
        stats.record_loop();
        error!(key = %self.key, repeats = self.repeats, window = %rounded(self.window),
            "an item completed again: its row is still in the select after [on_success]; change \
             the row so the select no longer returns it (a status, a delete), or set loop_window = \
             \"0s\" for rows re-armed on purpose");
    }
}

/// A row came back `loop_limit` times: the queue stops claiming.
pub struct QueueLooping<'a> {
    pub key: &'a str,
    pub repeats: u32,
}

impl Event for QueueLooping<'_> {
    fn emit(self, stats: &QueueStats) {
        stats.set_looping();
        error!(key = %self.key, repeats = self.repeats,
            "the queue loops: it stops claiming until the files are reloaded");
    }
}

/// The circuit breaker changed state.
pub struct CircuitChanged<'a> {
    pub to: CircuitState,
    /// Why, when it opens.
    pub why: &'a str,
    /// When the next probe is due, when it opens.
    pub retry_in: Duration,
}

impl Event for CircuitChanged<'_> {
    fn emit(self, stats: &QueueStats) {
        stats.note_circuit(self.to, self.why, self.retry_in);
        stats.set_circuit(self.to);
        match self.to {
            CircuitState::Open => error!(reason = self.why, retry_in = %rounded(self.retry_in),
                "the circuit is open: the queue stops claiming, so no row spends an attempt on an \
                 outage downstream; one item is tried when the cool-down is over"),
            CircuitState::HalfOpen => {
                info!("the circuit's cool-down is over: one item is tried as a probe")
            }
            CircuitState::Closed => {
                info!("the probe got through: the circuit is closed, the queue claims again")
            }
        }
    }
}

/// The queue's handler could not be reached (a connection refused, a socket or
/// program missing): the circuit opens, nothing claims, no attempt is spent, and
/// the handler is tried with one item every `retry_in` until it answers.
pub struct HandlerUnreached<'a> {
    /// The action's own words: they name the handler.
    pub error: &'a str,
    pub retry_in: Duration,
    /// Whether the item is left waiting; false where its claim moved the row on (a
    /// schedule with `overlap = true`: the run is counted missed).
    pub item_waits: bool,
}

impl Event for HandlerUnreached<'_> {
    fn emit(self, stats: &QueueStats) {
        stats.note_circuit(CircuitState::Open, self.error, self.retry_in);
        stats.set_circuit(CircuitState::Open);
        let (error, retry_in) = (self.error, rounded(self.retry_in));
        match self.item_waits {
            true => warn!(%error, %retry_in,
                "the handler cannot be reached: the queue stops claiming, the item is waiting \
                 again with its attempt not spent, and one item is tried every second until \
                 the handler answers"),
            false => warn!(%error, %retry_in,
                "the handler cannot be reached: the run's due time is counted missed, and \
                 each due time tries the handler again until it answers"),
        }
    }
}

/// The handler answered again after `after` unreachable: the circuit closes.
pub struct HandlerBack {
    pub after: Duration,
}

impl Event for HandlerBack {
    fn emit(self, stats: &QueueStats) {
        stats.note_circuit(CircuitState::Closed, "", Duration::ZERO);
        stats.set_circuit(CircuitState::Closed);
        info!(unreachable_for = %rounded(self.after),
            "the handler answers again: the queue claims again");
    }
}

/// A session could not be opened; the worker retries after `retry_in`. Counted
/// every time; said when `times` is due (once a minute per queue: every worker and
/// every attempt would say the same), with how many times since.
pub struct NotConnected<'a> {
    pub error: &'a OpenError,
    pub database: &'a Database,
    pub retry_in: Duration,
    pub times: Option<u64>,
}

impl Event for NotConnected<'_> {
    fn emit(self, stats: &QueueStats) {
        let (error, database, retry_in) = (self.error, self.database, rounded(self.retry_in));
        if let OpenError::Unreachable(_) = error {
            stats.observed.record_db_error(ErrorKind::Connect);
        }
        match (error, self.times) {
            (OpenError::Unreachable(e), Some(times)) => warn!(error = %e, %database, %retry_in,
                times, "cannot connect to the database; retrying (said once a minute, with the \
                times since)"),
            (OpenError::Unreachable(e), None) => {
                debug!(error = %e, %retry_in, "cannot connect to the database; retrying")
            }
            (OpenError::Invalid(_), Some(times)) => error!(%error, %retry_in, times,
                "the queue's SQL does not work on its database; retrying (said once a minute)"),
            (OpenError::Invalid(_), None) => {
                debug!(%error, %retry_in, "the queue's SQL does not work on its database; retrying")
            }
        }
    }
}

/// The server refused a connection for being full: counted every time, said once a
/// minute at most, with how many it refused since (`refused`, when it is due).
pub struct DatabaseFull<'a> {
    pub error: &'a DbError,
    pub database: &'a Database,
    pub refused: Option<u64>,
}

impl Event for DatabaseFull<'_> {
    fn emit(self, stats: &QueueStats) {
        stats.observed.record_db_error(ErrorKind::Connect);
        let Some(refused) = self.refused else {
            return;
        };
        warn!(error = %self.error, refused, database = %self.database,
            "the database refused connections: it is full (max_connections or \
             max_user_connections); lower `workers` (summed over every copy of tableq) or raise \
             the server's limit");
    }
}

/// The server refused tableq's login (a wrong password, a user without access to
/// the database): counted every time, said once a minute at most (`times`, when it
/// is due), with what to check.
pub struct LoginRefused<'a> {
    pub error: &'a DbError,
    pub database: &'a Database,
    pub retry_in: Duration,
    pub times: Option<u64>,
}

impl Event for LoginRefused<'_> {
    fn emit(self, stats: &QueueStats) {
        stats.observed.record_db_error(ErrorKind::Connect);
        let Some(times) = self.times else {
            return;
        };
        error!(retry_in = %rounded(self.retry_in), times, "{}", self.database.refused_login(self.error));
    }
}

/// The background count could not read the backlog.
pub struct CountFailed<'a> {
    pub error: &'a dyn std::fmt::Display,
    pub kind: ErrorKind,
}

impl Event for CountFailed<'_> {
    fn emit(self, stats: &QueueStats) {
        stats.observed.record_db_error(self.kind);
        debug!(error = %self.error, "could not count the waiting rows; trying again later");
    }
}
