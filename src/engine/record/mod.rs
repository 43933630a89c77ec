//! The one recorder: what becomes of each item once its action ran, for every mode
//! and scope. The policy is here, once — which outcome SQL an item gets, an item
//! left as it was, outcome SQL that fails or is too large to send, a lease found
//! lost, an outcome the database refuses for now — each item then settled
//! (`engine::settle`), and a [`Store`] writes the statements where the mode keeps
//! them:
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

use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use super::queue::QueueRuntime;
use super::report::{BatchReport, Fate, Returned};
use super::retry::{Next, Retry};
use super::settle::outcome_span;
use crate::action::{Blame, Outcome};
use crate::db::{DbError, Item, Refusal, Statements};
use crate::telemetry::events::LostAt;

/// How writing one item's outcome SQL went.
#[derive(Debug)]
pub enum Written {
    /// Written (committed, or to be with the batch's transaction).
    Recorded,
    /// The SQL failed on its own error; undone, the item is as it was claimed. (One
    /// error may stand for a whole set written as one statement.)
    SqlFailed(Arc<DbError>),
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

/// Records each item's outcome through `store`, settling its fate in `report`. An
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
            queue.settle(report, item, Fate::Returned(Returned::CircuitOpen), None);
            store.leave(item).await?;
            continue;
        };
        if outcome.blame != Blame::Item && !outcome.succeeded() {
            report.not_the_items += 1;
        }
        match judge(queue, item, outcome) {
            Verdict::Success => succeeded.push((item, outcome)),
            Verdict::Failure => failed.push((item, outcome)),
            Verdict::Leave(why) => {
                queue.settle(report, item, Fate::Returned(why), Some(outcome));
                let span = outcome_span(item, Some(outcome));
                store.leave(item).instrument(span).await?;
            }
        }
    }
    let done = store.write(Statements::OnSuccess, &succeeded).await?;
    let too_large = tally(queue, &succeeded, done, Statements::OnSuccess, report);
    // A row whose `[on_success]` is too large to send fails, with why, so it does not
    // block the queue: `[on_failure]` gets the message.
    let failing: Vec<(&Item, Outcome)> = too_large
        .into_iter()
        .map(|(item, e)| (item, Outcome::failure(e.to_string())))
        .collect();
    failed.extend(failing.iter().map(|(item, outcome)| (*item, outcome)));
    let recorded = store.write(Statements::OnFailure, &failed).await?;
    tally(queue, &failed, recorded, Statements::OnFailure, report);
    Ok(())
}

/// Which outcome SQL an item gets, if any.
#[derive(Debug)]
enum Verdict {
    Success,
    Failure,
    /// Left as it was claimed: the failure is the queue's or the database's, or
    /// there is no `[on_failure]` to record it.
    Leave(Returned),
}

fn judge(queue: &QueueRuntime, item: &Item, outcome: &Outcome) -> Verdict {
    if outcome.succeeded() {
        return Verdict::Success;
    }
    match outcome.blame {
        Blame::Queue => return Verdict::Leave(Returned::QueueFault),
        Blame::Database(why) => {
            // Nothing of the action is kept: the row waits, its attempt not spent,
            // and nobody claims on this database until it takes writes again.
            let _span = outcome_span(item, Some(outcome)).entered();
            queue.gate.refused(why.as_str(), REFUSED_RETRY);
            queue.stats.set_refusing(Some(why.as_str()));
            return Verdict::Leave(Returned::WritesRefused);
        }
        Blame::Item | Blame::Downstream => {}
    }
    match queue.config.on_failure {
        None => Verdict::Leave(Returned::NoOnFailure),
        Some(_) => Verdict::Failure,
    }
}

/// Settles each item of `set` by what writing `which` did for it. Returns the
/// items whose `[on_success]` was too large to send, with why, when `[on_failure]`
/// can record them instead.
fn tally<'i>(
    queue: &QueueRuntime,
    set: &[(&'i Item, &Outcome)],
    written: Vec<Written>,
    which: Statements,
    report: &mut BatchReport,
) -> Vec<(&'i Item, Arc<DbError>)> {
    let mut too_large = Vec::new();
    for (&(item, outcome), written) in set.iter().zip(written) {
        let fate = match written {
            Written::Recorded if which == Statements::OnSuccess => Fate::Done,
            Written::Recorded => Fate::Failed,
            Written::SqlFailed(e)
                if e.is_too_large()
                    && which == Statements::OnSuccess
                    && queue.config.on_failure.is_some() =>
            {
                too_large.push((item, e));
                continue;
            }
            Written::SqlFailed(error) => Fate::Returned(Returned::SqlFailed { which, error }),
            Written::LeaseLost { lease_id } => Fate::Returned(Returned::LeaseLost {
                lease_id,
                at: LostAt::Outcome,
            }),
            Written::Unknown(why) => Fate::Returned(Returned::NotKnown(why)),
        };
        queue.settle(report, item, fate, Some(outcome));
    }
    too_large
}

/// The longest a worker waits between two tries of an outcome the database refused:
/// well within any session's `wait_timeout`, so the session holding the row's lock
/// stays alive.
pub const REFUSED_RETRY: Duration = Duration::from_secs(10);

/// An outcome the database refused because it takes no writes for now (see
/// [`DbError::refuses_writes`]), kept and written again until it is taken, rather
/// than the action done again: the gate of its database closes meanwhile — no
/// worker claims there — and opens once it is taken. The waits back off, and a
/// reconnect does not reset them.
pub struct UntilTaken<'q> {
    queue: &'q QueueRuntime,
    retry: Retry<'q>,
    refused: bool,
}

impl<'q> UntilTaken<'q> {
    pub fn new(queue: &'q QueueRuntime) -> Self {
        UntilTaken {
            queue,
            retry: Retry::new(queue.config.error_backoff, &queue.abort).at_most(REFUSED_RETRY),
            refused: false,
        }
    }

    /// After a try of the write: true to write again — the database refused it,
    /// and the wait is over. False once it is settled: taken (the gate opens if it
    /// closed), or failed for another reason, or the shutdown timeout passed.
    pub async fn again<T, E: RefusesWrites>(&mut self, written: &Result<T, E>) -> bool {
        let Err(error) = written else {
            if self.refused {
                self.queue.gate.writable();
                self.queue.stats.set_refusing(None);
            }
            return false;
        };
        let queue = self.queue;
        let refused = &mut self.refused;
        let began = tokio::time::Instant::now();
        self.retry
            .after(error, began, |error, _| {
                let Some(why) = error.refuses_writes().map(Refusal::as_str) else {
                    return Next::GiveUp;
                };
                queue.gate.refused(why, REFUSED_RETRY);
                queue.stats.set_refusing(Some(why));
                *refused = true;
                Next::Again
            })
            .await
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
