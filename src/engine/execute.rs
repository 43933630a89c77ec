//! The one place an action runs: an item's, or a batch's, for every kind and every
//! mode, under the queue's policy — `max_in_flight` and `rate_limit` admit it, the
//! circuit breaker's ticket lets it through (or not, while the circuit is open), the
//! deadline is set from the action's timeout, and its time is observed. A setting
//! that bounds or paces actions changes here and nowhere else.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::SystemTime;

use tokio::time::Instant;

use super::queue::QueueRuntime;
use crate::action::progress::Progress;
use crate::action::{External, InTransaction, Job, Outcome};
use crate::db::{DbError, Item, Session};
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
    /// failed downstream while the circuit is open — it is to be left as claimed.
    pub async fn execute<'j>(
        &'j self,
        action: &'j dyn External,
        work: Work<'j>,
        progress: Option<Arc<Progress>>,
    ) -> Option<Outcome> {
        let run = |job| async move { Ok::<_, Infallible>(action.run(job).await) };
        match self.under_policy(work, progress, run).await {
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
        self.under_policy(work, None, |job| action.run(session, job))
            .await
    }

    /// The queue's policy around one run of its action.
    async fn under_policy<'j, F, R, E>(
        &'j self,
        work: Work<'j>,
        progress: Option<Arc<Progress>>,
        run: F,
    ) -> Result<Option<Outcome>, E>
    where
        F: FnOnce(Job<'j>) -> R,
        R: Future<Output = Result<Outcome, E>>,
    {
        let _admitted = self.limits.admit().await;
        let Some(ticket) = self.circuit.admit() else {
            return Ok(None);
        };
        let started = Instant::now();
        let began = SystemTime::now();
        let _listed = self
            .stats
            .observed
            .in_flight
            .start(work.items, progress.clone());
        let job = Job {
            items: work.items,
            batch: work.batch,
            queue: &self.config.name,
            deadline: started + self.config.action.timeout(),
            progress,
        };
        let mut outcome = run(job).await?;
        if otlp::enabled() {
            outcome.trace.get_or_insert_default().ran = Some((began, SystemTime::now()));
        }
        self.stats.observed.record_action(started.elapsed());
        Ok(ticket.finished(&outcome).then_some(outcome))
    }
}
