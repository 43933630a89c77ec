//! The one place an action runs: an item's, or a batch's, for every kind and every
//! mode, under the queue's policy — `[recurring]` reads the row's cron first (and
//! gives the outcome `:next_run`), `max_in_flight` and `rate_limit` admit it, the
//! circuit breaker's ticket lets it through (or not, while the circuit is open: the
//! item waits, or where its claim moved the row on, fails), the
//! deadline is set from the action's timeout and enforced, and its time is observed.
//! A setting that bounds or paces actions changes here and nowhere else.
//!
//! The deadline is the queue's alone: no kind watches the time. A run still going
//! at its deadline has failed, `timed out after …`, with the output it had captured
//! by then; an action outside the database
//! is dropped then (a command's process group is killed, a request aborted), and
//! one in the transaction is told to stop and awaited (an SQL statement is
//! interrupted on the server, and the transaction lives on).

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::SemaphorePermit;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::action::capture::Captured;
use crate::action::progress::Progress;
use crate::action::{Blame, External, InTransaction, Job, Outcome};
use crate::config::Mode;
use crate::db::{DbError, Item, Session};
use crate::engine::policy::recurring::Rearming;
use crate::engine::queue::QueueRuntime;
use crate::telemetry::trace::otlp;

/// What one run of the queue's action is for.
#[derive(Clone, Copy)]
pub struct Work<'a> {
    pub items: &'a [Item],
    /// `scope = "batch"`: the items go as one batch.
    pub batch: bool,
}

impl<'a> Work<'a> {
    /// One item, in the queue's scope (in batch scope, a batch of one).
    pub fn item(queue: &QueueRuntime, item: &'a Item) -> Work<'a> {
        Work {
            items: std::slice::from_ref(item),
            batch: queue.batch_scope(),
        }
    }

    /// A whole batch, in batch scope.
    pub fn batch(items: &'a [Item]) -> Work<'a> {
        Work { items, batch: true }
    }
}

impl QueueRuntime {
    /// Runs `action`, which reaches outside the database, for `work` (`progress` for
    /// lease mode's `:progress`). `None`: the circuit kept it from running, or it
    /// failed downstream while the circuit is open — it is to be left as claimed
    /// (never where the claim moved the row on: see [`QueueRuntime::held_back`]).
    pub async fn execute<'j>(
        &'j self,
        action: &'j dyn External,
        work: Work<'j>,
        progress: Option<Arc<Progress>>,
    ) -> Option<Outcome> {
        // A free connection first: waiting for one is not the action's time —
        // unless a lease that is never renewed must outlast the whole run.
        let charged = matches!(&self.config.mode, Mode::Lease(lease) if lease.renew_sql.is_none());
        let _slot = match charged {
            false => slot(action).await,
            true => None,
        };
        let run = move |job, _| async move {
            let _slot = match charged {
                true => slot(action).await,
                false => None,
            };
            Ok::<_, Infallible>(action.run(job).await)
        };
        let late = Late::Dropped(action);
        match self.under_policy(work, progress, late, run).await {
            Ok(outcome) => outcome,
            Err(never) => match never {},
        }
    }

    /// Runs `action` for `work` on `session`, in its transaction. An `Err` means the
    /// transaction is lost.
    pub async fn execute_in<'j>(
        &'j self,
        action: &'j dyn InTransaction,
        session: &'j mut Session,
        work: Work<'j>,
    ) -> Result<Option<Outcome>, DbError> {
        self.under_policy(work, None, Late::Stopped, |job, stop| {
            action.run(session, job, stop)
        })
        .await
    }

    /// The queue's policy around one run of its action.
    async fn under_policy<'j, F, R, E>(
        &'j self,
        work: Work<'j>,
        progress: Option<Arc<Progress>>,
        late: Late<'j>,
        run: F,
    ) -> Result<Option<Outcome>, E>
    where
        F: FnOnce(Job<'j>, CancellationToken) -> R,
        R: Future<Output = Result<Outcome, E>>,
    {
        // `[recurring]`: a row whose cron cannot be read fails, its action not run.
        let rearm = match self.rearm(work.items) {
            Ok(rearm) => rearm,
            Err(failure) => return Ok(Some(failure)),
        };
        let _admitted = self.limits.admit().await;
        let Some(ticket) = self.circuit.admit() else {
            return Ok(self.held_back(rearm.as_ref()));
        };
        let started = Instant::now();
        let began = SystemTime::now();
        let _listed = self
            .stats
            .observed
            .in_flight
            .start(work.items, progress.clone());
        let output = Arc::new(Captured::default());
        let job = Job {
            items: work.items,
            batch: work.batch,
            queue: &self.config.name,
            progress,
            output: output.clone(),
        };
        let timeout = self.config.action.timeout();
        let stop = CancellationToken::new();
        let ran = late
            .by(started + timeout, &stop, run(job, stop.clone()))
            .await?;
        let mut outcome = ran.unwrap_or_else(|| Outcome {
            output: output.take(),
            ..late.timed_out(timeout)
        });
        // Kept for spans, and for a failure's attempt in the history.
        if otlp::enabled() || outcome.error.is_some() {
            outcome.trace.get_or_insert_default().ran = Some((began, SystemTime::now()));
        }
        self.stats.observed.record_action(started.elapsed());
        self.rearmed(rearm.as_ref(), &mut outcome);
        Ok(ticket.finished(&outcome).then_some(outcome))
    }

    /// What becomes of an item the open circuit holds back, its action not run:
    /// left waiting (`None`), unless its claim moved the row on (a schedule with
    /// `overlap = true`) — then nothing waits, and the run fails, counted missed.
    fn held_back(&self, rearm: Option<&Rearming>) -> Option<Outcome> {
        if !self.config.claim_moves_on() {
            return None;
        }
        let mut outcome = Outcome {
            blame: Blame::Queue,
            ..Outcome::failure("not run: the circuit breaker is open")
        };
        self.rearmed(rearm, &mut outcome);
        Some(outcome)
    }
}

/// A permit of `action`'s slots, when the kind bounds its runs at once.
async fn slot(action: &dyn External) -> Option<SemaphorePermit<'_>> {
    action.slots()?.acquire().await.ok()
}

/// How a run still going at its deadline is ended.
enum Late<'a> {
    /// Dropped, which cancels it: an action outside the database. It failed
    /// downstream, waiting for what the kind says (`for RabbitMQ at … to confirm`).
    Dropped(&'a dyn External),
    /// Told to stop, and awaited: an action in the transaction, whose session must
    /// stay usable for the item's outcome. It failed, as the item's own failure.
    Stopped,
}

impl Late<'_> {
    /// `run`'s outcome, or `None` when its deadline came first. `Err`: the run's own
    /// (the transaction is lost), even while it stops.
    async fn by<R, E>(
        &self,
        deadline: Instant,
        stop: &CancellationToken,
        run: R,
    ) -> Result<Option<Outcome>, E>
    where
        R: Future<Output = Result<Outcome, E>>,
    {
        tokio::pin!(run);
        tokio::select! {
            ended = &mut run => return ended.map(Some),
            () = tokio::time::sleep_until(deadline) => {}
        }
        if let Late::Stopped = self {
            stop.cancel();
            run.await?;
        }
        Ok(None)
    }

    /// The one message for a run past its deadline.
    fn timed_out(&self, timeout: Duration) -> Outcome {
        let after = format!("timed out after {}", humantime::format_duration(timeout));
        match self {
            Late::Dropped(action) => match action.waiting_for() {
                Some(waiting) => Outcome::downstream(format!("{after} waiting {waiting}")),
                None => Outcome::downstream(after),
            },
            Late::Stopped => Outcome::failure(after),
        }
    }
}
