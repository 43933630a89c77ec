//! The one recorder: what becomes of each item once its action ran, for every mode
//! and scope. The policy is here, once — which outcome SQL an item gets, the "item
//! failed" line and its place on the status page, an item left as it was, outcome
//! SQL that fails (counted every time, said in full once per key), a lease found
//! lost — and a [`Store`] writes the statements where the mode keeps them:
//!
//! - [`item::ItemStore`]: in the batch's transaction, item by item, each undone alone
//!   when its SQL fails (transaction mode, item scope; and batch scope's fallback);
//! - [`set::SetStore`]: in the batch's transaction, each statement once for all the
//!   items with the same outcome (`scope = "batch"`);
//! - [`leased::LeaseStore`]: in a short transaction of its own, guarded by the lease
//!   (lease mode).

pub mod item;
pub mod leased;
pub mod set;

use tracing::{warn, Instrument, Span};

use super::queue::QueueRuntime;
use super::report::{BatchReport, Fate};
use crate::action::http::traceparent::Parent;
use crate::action::{Blame, Outcome};
use crate::db::{DbError, Item, Refusal, Statements};
use crate::telemetry::events::{Event, ItemFailed, LeaseLost, LostAt, OutcomeSqlFailed};
use crate::telemetry::trace::otlp;
use crate::telemetry::trace::spans::ItemTrace;

/// How writing one item's outcome SQL went.
#[derive(Debug)]
pub enum Written {
    /// Written (committed, or to be with the batch's transaction).
    Recorded,
    /// The SQL failed on its own error; undone, the item is as it was claimed.
    SqlFailed(DbError),
    /// The lease was lost meanwhile: nothing was recorded (lease mode).
    LeaseLost { lease_id: String },
    /// Not written (the database could not be reached), or not known whether it
    /// was (a COMMIT with no answer): the item comes back when its lease expires.
    Unknown(String),
}

/// Where outcomes are written.
pub trait Store {
    /// An error that loses the batch (its transaction, and every lock with it).
    type Error;

    /// Writes `which` for each item of `set`, with its outcome.
    async fn write(
        &mut self,
        which: Statements,
        set: &[(&Item, &Outcome)],
    ) -> Result<Vec<Written>, Self::Error>;

    /// Leaves an item that will not be recorded as it was claimed: what its action
    /// wrote is undone, and in lease mode its lease released.
    async fn leave(&mut self, item: &Item) -> Result<(), Self::Error>;
}

/// Records each item's outcome through `store`, counting its fate in `report`. An
/// outcome of `None` — the item did not run, or failed downstream while the circuit
/// is open — leaves the item as it was claimed, its attempt not spent.
pub async fn record<S: Store>(
    queue: &QueueRuntime,
    store: &mut S,
    entries: &[(&Item, Option<&Outcome>)],
    report: &mut BatchReport,
) -> Result<(), S::Error> {
    let mut succeeded = Vec::new();
    let mut failed = Vec::new();
    for &(item, outcome) in entries {
        let Some(outcome) = outcome else {
            store.leave(item).await?;
            report.count(Fate::Returned, String::new);
            let why = "left as claimed: the circuit breaker is open".to_string();
            trace(report, item, None, Fate::Returned, Some(why));
            continue;
        };
        if outcome.blame != Blame::Item && !outcome.succeeded() {
            report.not_the_items += 1;
        }
        match judge(queue, item, outcome) {
            Verdict::Success => succeeded.push((item, outcome)),
            Verdict::Failure => failed.push((item, outcome)),
            Verdict::Leave => {
                store.leave(item).instrument(span(item, outcome)).await?;
                report.count(Fate::Returned, String::new);
                trace(report, item, Some(outcome), Fate::Returned, None);
            }
        }
    }
    let done = store.write(Statements::OnSuccess, &succeeded).await?;
    let too_large = tally(queue, &succeeded, done, Fate::Done, report);
    // A row whose `[on_success]` is too large to send fails, with why, so it does not
    // block the queue: `[on_failure]` gets the message.
    let failing: Vec<(&Item, Outcome)> = too_large
        .into_iter()
        .map(|(item, e)| (item, Outcome::failure(e.to_string())))
        .collect();
    failed.extend(failing.iter().map(|(item, outcome)| (*item, outcome)));
    let recorded = store.write(Statements::OnFailure, &failed).await?;
    tally(queue, &failed, recorded, Fate::Failed, report);
    Ok(())
}

/// Which outcome SQL an item gets, if any.
enum Verdict {
    Success,
    Failure,
    /// Left as it was claimed: the failure is the queue's, or there is no
    /// `[on_failure]` to record it.
    Leave,
}

fn judge(queue: &QueueRuntime, item: &Item, outcome: &Outcome) -> Verdict {
    if outcome.succeeded() {
        return Verdict::Success;
    }
    let _span = span(item, outcome).entered();
    let error = outcome.error.as_deref().unwrap_or_default();
    match outcome.blame {
        Blame::Queue => {
            queue_fault(queue, error);
            return Verdict::Leave;
        }
        Blame::Database(why) => {
            // Nothing of the action is kept: the row waits, its attempt not spent,
            // and nobody claims on this database until it takes writes again.
            queue.gate.refused(why.as_str(), REFUSED_RETRY);
            queue.stats.set_refusing(Some(why.as_str()));
            return Verdict::Leave;
        }
        Blame::Item | Blame::Downstream => {}
    }
    if queue.config.on_failure.is_none() {
        failed(queue, item, outcome, false);
        return Verdict::Leave;
    }
    Verdict::Failure
}

/// The item's failure said and shown on the status page.
fn failed(queue: &QueueRuntime, item: &Item, outcome: &Outcome, recorded: bool) {
    let failed = ItemFailed {
        key: item.key_text(),
        error: outcome.error.as_deref().unwrap_or_default(),
        status: outcome.status,
        recorded,
    };
    failed.emit(&queue.stats);
}

/// A failure that is the queue's: said in full once per error, and counted with the
/// items returned.
fn queue_fault(queue: &QueueRuntime, error: &str) {
    if queue.queue_faults.first(error) {
        tracing::error!(%error,
            "the action failed for a reason that is the queue's, not the row's (a column, table \
             or procedure that is not there, or a privilege its user lacks): the item is waiting \
             again, its attempt not spent, and the queue backs off until it is fixed; said once \
             per error");
    } else {
        tracing::debug!(%error, "the queue's action failed again for a reason that is not the row's");
    }
}

/// Counts what writing `which` did for each item of `set`. Returns the items whose
/// `[on_success]` was too large to send, with why, when `[on_failure]` can record
/// them instead.
fn tally<'i>(
    queue: &QueueRuntime,
    set: &[(&'i Item, &Outcome)],
    written: Vec<Written>,
    fate: Fate,
    report: &mut BatchReport,
) -> Vec<(&'i Item, DbError)> {
    let mut too_large = Vec::new();
    for (&(item, outcome), written) in set.iter().zip(written) {
        let _span = span(item, outcome).entered();
        match written {
            Written::Recorded => {
                if fate == Fate::Failed {
                    failed(queue, item, outcome, true);
                }
                report.count(fate, || item.key_text());
                trace(report, item, Some(outcome), fate, None);
            }
            Written::SqlFailed(e)
                if e.is_too_large() && fate == Fate::Done && queue.config.on_failure.is_some() =>
            {
                too_large.push((item, e));
            }
            Written::SqlFailed(e) => {
                let which = match fate {
                    Fate::Done => Statements::OnSuccess,
                    _ => Statements::OnFailure,
                };
                sql_failed(queue, item, which, &e, outcome.error.as_deref());
                report.count(Fate::Returned, String::new);
                let why = format!("outcome SQL failed: {e}");
                trace(report, item, Some(outcome), Fate::Returned, Some(why));
            }
            Written::LeaseLost { lease_id } => {
                let lost = LeaseLost {
                    lease_id: &lease_id,
                    at: LostAt::Outcome,
                };
                lost.emit(&queue.stats);
                report.count(Fate::Returned, String::new);
                let why = "the lease was lost".to_string();
                trace(report, item, Some(outcome), Fate::Returned, Some(why));
            }
            Written::Unknown(why) => {
                warn!(error = %why, "the outcome is not recorded; the row is worked on again when its lease expires");
                report.count(Fate::Returned, String::new);
                trace(report, item, Some(outcome), Fate::Returned, Some(why));
            }
        }
    }
    too_large
}

/// Notes `item`'s fate for its trace span, when spans are exported: `why` it was
/// returned, when its outcome does not say.
pub fn trace(
    report: &mut BatchReport,
    item: &Item,
    outcome: Option<&Outcome>,
    fate: Fate,
    why: Option<String>,
) {
    if !otlp::enabled() {
        return;
    }
    let notes = outcome.and_then(|o| o.trace.as_deref());
    report.traced.push(ItemTrace {
        key: item.key_text(),
        parent: Parent::of(item),
        sent: notes.and_then(|n| n.sent.clone()),
        outcome: match fate {
            Fate::Done => "done",
            Fate::Failed => "failed",
            Fate::Returned => "returned",
        },
        error: why.or_else(|| outcome.and_then(|o| o.error.clone())),
        action: notes.and_then(|n| n.ran),
        recorded: std::time::SystemTime::now(),
    });
}

/// The longest a worker waits between two tries of an outcome the database refused:
/// well within any session's `wait_timeout`, so the session holding the row's lock
/// stays alive.
pub const REFUSED_RETRY: std::time::Duration = std::time::Duration::from_secs(10);

/// An outcome the database refused because it takes no writes now (see
/// [`DbError::refuses_writes`]), kept and tried again until it is taken: the gate of
/// its database closes meanwhile — no worker claims there — and opens when it is
/// taken. The waits back off, and a reconnect does not reset them.
pub struct Refused<'q> {
    queue: &'q QueueRuntime,
    backoff: crate::engine::retry::Backoff,
    waited: bool,
}

impl<'q> Refused<'q> {
    pub fn new(queue: &'q QueueRuntime) -> Self {
        Refused {
            queue,
            backoff: crate::engine::retry::Backoff::new(queue.config.error_backoff),
            waited: false,
        }
    }

    /// If `error` says the database refuses writes: closes the gate and waits before
    /// the next try, true. False — give up — for any other error, or once the
    /// shutdown timeout has passed.
    pub async fn again(&mut self, error: &impl RefusesWrites) -> bool {
        let Some(why) = error.refuses_writes().map(Refusal::as_str) else {
            return false;
        };
        let queue = self.queue;
        queue.gate.refused(why, REFUSED_RETRY);
        queue.stats.set_refusing(Some(why));
        self.waited = true;
        let wait = self.backoff.next_wait().min(REFUSED_RETRY);
        crate::engine::retry::sleep_unless_stopped(&queue.abort, wait).await
    }

    /// The write went through: if it had been refused, the gate opens.
    pub fn taken(self) {
        if self.waited {
            self.queue.gate.writable();
            self.queue.stats.set_refusing(None);
        }
    }
}

/// An error that may say the database refuses writes.
pub trait RefusesWrites {
    fn refuses_writes(&self) -> Option<Refusal>;
}

impl RefusesWrites for DbError {
    fn refuses_writes(&self) -> Option<Refusal> {
        DbError::refuses_writes(self)
    }
}

impl RefusesWrites for crate::engine::lease::LeaseError {
    fn refuses_writes(&self) -> Option<Refusal> {
        self.db_error().and_then(DbError::refuses_writes)
    }
}

/// `which` SQL failed for `item`: counted every time, said in full once per key.
pub fn sql_failed(
    queue: &QueueRuntime,
    item: &Item,
    which: Statements,
    e: &DbError,
    action_error: Option<&str>,
) {
    let outcome = matches!(which, Statements::OnSuccess | Statements::OnFailure);
    let failed = OutcomeSqlFailed {
        which: which.label(),
        error: e,
        action_error: action_error.unwrap_or_default(),
        first: queue.outcome_sql_failed.first(&item.key_text()),
        // A leased row comes back when its lease expires.
        leased: outcome && queue.config.is_lease(),
    };
    failed.emit(&queue.stats);
}

/// The span an item's work runs in: its key on every log line, and the trace id
/// of its HTTP delivery once it has one.
pub fn item_span(item: &Item) -> Span {
    tracing::info_span!("item", key = %item.key_text(), trace_id = tracing::field::Empty)
}

/// The span an item's outcome is recorded in: its key, and the trace id its
/// delivery sent, if any.
fn span(item: &Item, outcome: &Outcome) -> Span {
    let span = item_span(item);
    if let Some(trace_id) = outcome.trace_id() {
        span.record("trace_id", trace_id);
    }
    span
}
