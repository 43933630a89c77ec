//! The one recorder: what becomes of each item once its action ran, for every mode
//! and scope. The policy is here, once — which outcome SQL an item gets (a release,
//! or a handler that died under the item, goes to `[on_release]`), an item
//! left as it was, outcome SQL that fails or is too large to send, a lease found
//! lost, an outcome the database refuses for now — each item then settled
//! (`engine::turn::settle`), and a [`Store`] writes the statements where the mode keeps
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
pub mod transaction;

use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use crate::action::{Blame, Outcome};
use crate::db::{DbError, Item, Refusal, Statements};
use crate::engine::policy::retry::{Next, Retry};
use crate::engine::queue::QueueRuntime;
use crate::engine::turn::report::{BatchReport, Fate, Returned};
use crate::engine::turn::settle::outcome_span;
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

    /// Whether `item`'s row is in `[failed] select` now that its failure was
    /// written (seen from the transaction that wrote it); `None` when this store
    /// cannot tell, or the question failed.
    async fn gave_up(&mut self, _item: &Item) -> Option<bool> {
        None
    }
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
    let mut released = Vec::new();
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
            Verdict::Release => released.push((item, outcome)),
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
    let gave_up = gave_up(queue, store, &failed, &recorded).await;
    let first = report.attempts.len();
    tally(queue, &failed, recorded, Statements::OnFailure, report);
    for attempt in &mut report.attempts[first..] {
        attempt.gave_up = gave_up
            .iter()
            .find(|(key, _)| *key == attempt.key)
            .map(|(_, g)| *g);
    }
    let put_back = store.write(Statements::OnRelease, &released).await?;
    tally(queue, &released, put_back, Statements::OnRelease, report);
    Ok(())
}

/// For the history: of the failures just recorded, which left their row in
/// `[failed] select` (asked only when the copy keeps a history and the queue says
/// what gave up), by key.
async fn gave_up<S: Store>(
    queue: &QueueRuntime,
    store: &mut S,
    failed: &[(&Item, &Outcome)],
    recorded: &[Written],
) -> Vec<(String, bool)> {
    let mut found = Vec::new();
    if queue.config.failed.is_none() || !queue.stats.observed.history.connected() {
        return found;
    }
    for ((item, _), written) in failed.iter().zip(recorded) {
        if let (Written::Recorded, Some(gave_up)) = (written, store.gave_up(item).await) {
            found.push((item.key_text(), gave_up));
        }
    }
    found
}

/// Which outcome SQL an item gets, if any.
#[derive(Debug)]
enum Verdict {
    Success,
    Failure,
    /// `[on_release]`: the handler released the item, or died under it.
    Release,
    /// Left as it was claimed: the failure is the queue's or the database's, or
    /// there is no `[on_failure]` to record it.
    Leave(Returned),
}

fn judge(queue: &QueueRuntime, item: &Item, outcome: &Outcome) -> Verdict {
    if outcome.succeeded() {
        return Verdict::Success;
    }
    let releases = queue.config.on_release.is_some();
    if outcome.release_after.is_some() {
        // Without `[on_release]`, `[on_failure]` records it (with `:retry_after`).
        if releases {
            return Verdict::Release;
        }
    }
    let moved_on = queue.config.claim_moves_on();
    match outcome.blame {
        // Its claim moved the row on: left, the run would be neither done nor
        // missed. Recorded as a failure, it is counted missed, with its error.
        Blame::Queue | Blame::Unreached if moved_on => {}
        Blame::Queue => return Verdict::Leave(Returned::QueueFault),
        Blame::Database(why) => {
            // Nothing of the action is kept: the row waits, its attempt not spent,
            // and nobody claims on this database until it takes writes again.
            let _span = outcome_span(item, Some(outcome)).entered();
            queue.writes_refused(why, REFUSED_RETRY);
            return Verdict::Leave(Returned::WritesRefused);
        }
        // Never recorded: the circuit leaves such an item as claimed (`execute`).
        Blame::Unreached => return Verdict::Leave(Returned::CircuitOpen),
        // The handler died, hung or was cut off under the item: the row is put back,
        // and the framework's own count of attempts judges it at its next claim.
        _ if releases && (outcome.interrupted || outcome.blame == Blame::Downstream) => {
            return Verdict::Release
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
            Written::Recorded
                if which == Statements::OnRelease && outcome.release_after.is_some() =>
            {
                Fate::Returned(Returned::Released)
            }
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

/// The longest a worker waits between two tries of an outcome the database refused
/// (and the write gate between two looks): well within any session's
/// `wait_timeout`, so the session holding the row's lock stays alive, and short
/// enough that every queue claims again within seconds of writes returning.
pub const REFUSED_RETRY: Duration = Duration::from_secs(5);

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
                let Some(why) = error.refuses_writes() else {
                    return Next::GiveUp;
                };
                queue.writes_refused(why, REFUSED_RETRY);
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

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use super::*;
    use crate::telemetry::log::capture;

    /// A store that writes nothing: it answers each write as `answer` says for its
    /// statements, and notes what it was asked to write and to leave.
    struct FakeStore {
        answer: fn(Statements) -> Written,
        written: Vec<(Statements, String)>,
        left: Vec<String>,
    }

    impl FakeStore {
        fn answering(answer: fn(Statements) -> Written) -> FakeStore {
            FakeStore {
                answer,
                written: Vec::new(),
                left: Vec::new(),
            }
        }
    }

    impl Store for FakeStore {
        type Error = Infallible;

        async fn write(
            &mut self,
            which: Statements,
            set: &[(&Item, &Outcome)],
        ) -> Result<Vec<Written>, Infallible> {
            let keys = set.iter().map(|(item, _)| (which, item.key_text()));
            self.written.extend(keys);
            Ok(set.iter().map(|_| (self.answer)(which)).collect())
        }

        async fn leave(&mut self, item: &Item) -> Result<(), Infallible> {
            self.left.push(item.key_text());
            Ok(())
        }
    }

    const ON_FAILURE: &str = r#"
        select = "SELECT id FROM job WHERE state = 'waiting'"
        [action]
        type = "http"
        url = "http://127.0.0.1:1/hook"
        [on_success]
        sql = "UPDATE job SET state = 'done' WHERE id = :id"
        [on_failure]
        sql = "UPDATE job SET state = 'failed', error = :error WHERE id = :id"
    "#;

    /// The same queue with no `[on_failure]`.
    fn without_on_failure() -> QueueRuntime {
        let file = ON_FAILURE.split("[on_failure]").next().unwrap();
        QueueRuntime::for_tests(file)
    }

    fn written(_: Statements) -> Written {
        Written::Recorded
    }

    /// Records item 1 with `outcome` through `store`: what the turn's report says.
    async fn recorded(
        queue: &QueueRuntime,
        store: &mut FakeStore,
        outcome: Option<Outcome>,
    ) -> BatchReport {
        let item = Item::with_id(1);
        let mut report = BatchReport::claimed(1);
        let Ok(()) = record(queue, store, &[(&item, outcome.as_ref())], &mut report).await;
        report
    }

    fn failure(blame: Blame) -> Outcome {
        Outcome {
            blame,
            ..Outcome::failure("HTTP 422: unknown recipient")
        }
    }

    /// A success writes `[on_success]` and is done; a failure of the item's own
    /// writes `[on_failure]`, is failed, and shows on the status page.
    #[tokio::test]
    async fn a_success_is_done_and_a_failure_recorded() {
        let queue = QueueRuntime::for_tests(ON_FAILURE);
        let mut store = FakeStore::answering(written);
        let report = recorded(&queue, &mut store, Some(Outcome::success())).await;
        assert_eq!((report.done, report.completed), (1, vec!["1".to_string()]));
        let report = recorded(&queue, &mut store, Some(failure(Blame::Item))).await;
        assert_eq!((report.failed, report.returned), (1, 0));
        let expected = [(Statements::OnSuccess, "1"), (Statements::OnFailure, "1")];
        let expected: Vec<(Statements, String)> =
            expected.iter().map(|(w, k)| (*w, k.to_string())).collect();
        assert_eq!(store.written, expected);
        assert!(store.left.is_empty());
        let failures = queue.stats.observed.failures();
        assert_eq!(failures[0].error, "HTTP 422: unknown recipient");
    }

    /// With no `[on_failure]`, a failure leaves the row as it was claimed (it waits
    /// again) and says so.
    #[tokio::test]
    async fn a_failure_with_no_on_failure_leaves_the_row() {
        let queue = without_on_failure();
        let mut store = FakeStore::answering(written);
        let (log, _guard) = capture();
        let report = recorded(&queue, &mut store, Some(failure(Blame::Item))).await;
        assert_eq!((report.failed, report.returned), (0, 1));
        assert!(store.written.is_empty());
        assert_eq!(store.left, ["1"]);
        assert!(log
            .text()
            .contains("with no [on_failure] it is waiting again"));
    }

    /// A failure that is the queue's, the database's or downstream's while the
    /// circuit is open (no outcome) spends no attempt: the row is left as claimed.
    #[tokio::test]
    async fn a_failure_not_the_items_leaves_the_row() {
        let queue = QueueRuntime::for_tests(ON_FAILURE);
        let (log, _guard) = capture();
        let read_only = Blame::Database(Refusal::ReadOnly);
        for outcome in [Some(failure(Blame::Queue)), Some(failure(read_only)), None] {
            let mut store = FakeStore::answering(written);
            let report = recorded(&queue, &mut store, outcome).await;
            assert_eq!((report.failed, report.returned), (0, 1));
            assert!(store.written.is_empty());
            assert_eq!(store.left, ["1"]);
        }
        assert!(log.text().contains("is the queue's, not the row's"));
        assert_eq!(queue.gate.refusing(), Some("read-only"));
        assert!(queue.stats.observed.failures().is_empty());
    }

    /// `[on_success]` too large to send fails the item through `[on_failure]`, with
    /// why, so that it does not block the queue; with no `[on_failure]`, the row
    /// waits again, the failure counted.
    #[tokio::test]
    async fn outcome_sql_too_large_to_send_fails_the_item() {
        fn too_large(which: Statements) -> Written {
            match which {
                Statements::OnSuccess => Written::SqlFailed(Arc::new(DbError::TooLarge {
                    what: "[on_success] SQL",
                    size: 5_000_000,
                    limit: 4_194_304,
                })),
                _ => Written::Recorded,
            }
        }
        let queue = QueueRuntime::for_tests(ON_FAILURE);
        let mut store = FakeStore::answering(too_large);
        let report = recorded(&queue, &mut store, Some(Outcome::success())).await;
        assert_eq!((report.done, report.failed), (0, 1));
        assert_eq!(store.written.last().unwrap().0, Statements::OnFailure);
        let failures = queue.stats.observed.failures();
        assert!(
            failures[0].error.contains("max_allowed_packet"),
            "{failures:?}"
        );
        let queue = without_on_failure();
        let mut store = FakeStore::answering(too_large);
        let report = recorded(&queue, &mut store, Some(Outcome::success())).await;
        assert_eq!((report.done, report.failed, report.returned), (0, 0, 1));
        assert_eq!(queue.stats.counts().outcome_sql_failures, 1);
    }

    /// Outcome SQL that fails on its own error, a lease lost meanwhile and an
    /// outcome not known to be written each return the row, counted and said.
    #[tokio::test]
    async fn an_outcome_not_written_returns_the_row() {
        let queue = QueueRuntime::for_tests(ON_FAILURE);
        let (log, _guard) = capture();
        let answers: [fn(Statements) -> Written; 3] = [
            |_| Written::SqlFailed(Arc::new(DbError::server(1406, "Data too long"))),
            |_| Written::LeaseLost {
                lease_id: "f00d".to_string(),
            },
            |_| Written::Unknown("no answer to the COMMIT".to_string()),
        ];
        for answer in answers {
            let mut store = FakeStore::answering(answer);
            let report = recorded(&queue, &mut store, Some(Outcome::success())).await;
            assert_eq!((report.done, report.returned), (0, 1));
            assert!(report.completed.is_empty());
        }
        let counts = queue.stats.counts();
        assert_eq!((counts.outcome_sql_failures, counts.leases_lost), (1, 1));
        let log = log.text();
        for said in [
            "[on_success] SQL failed",
            "lease lost",
            "the outcome is not recorded",
        ] {
            assert!(log.contains(said), "{said}: {log}");
        }
    }
}
