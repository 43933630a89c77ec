//! `type = "sql"`: the action's statements run in the item's own transaction, so the
//! work and the row's change commit together — exactly once by construction.
//!
//! - [`config`]: its `[action]` table (`sql`, `timeout`).

pub mod config;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::{Action, ActionError, Blame, InTransaction, Job, Outcome, Ready};
use crate::db::{DbError, Ran, Session, Statements};
use config::SqlAction;

/// The SQL action of a queue (its statements are prepared on every session).
pub struct Sql;

impl Sql {
    /// Runs the action's statements for the job, stopping at the first that fails. A
    /// statement's own error is a failed [`Outcome`]; an `Err` means the transaction
    /// is lost and the items return to the queue. Once `stop` is cancelled the
    /// running statement is interrupted on the server, and the transaction lives on.
    async fn run_statements(
        session: &mut Session,
        job: Job<'_>,
        stop: CancellationToken,
    ) -> Result<Outcome, DbError> {
        let stopped = stop.cancelled();
        let ran = match (job.batch, job.items) {
            (false, [item]) => {
                let run = session.run_until(Statements::Action, item, job.queue, stopped);
                run.await?
            }
            (_, items) => {
                let run = session.run_batch_until(Statements::Action, items, job.queue, stopped);
                run.await?
            }
        };
        Ok(Sql::outcome(ran))
    }

    fn outcome(ran: Ran) -> Outcome {
        match ran {
            Ran::Completed => Outcome::success(),
            Ran::Failed(e) => Outcome {
                blame: match (e.refuses_writes(), e.is_queue_fault()) {
                    (Some(why), _) => Blame::Database(why),
                    (None, true) => Blame::Queue,
                    (None, false) => Blame::Item,
                },
                ..Outcome::failure(e.to_string())
            },
            // Past the deadline: `engine::turn::execute` says how long it ran.
            Ran::Stopped => Outcome::failure("stopped"),
        }
    }
}


impl Ready for SqlAction {
    fn ready(&self) -> Result<Action, ActionError> {
        Ok(Action::in_transaction(Sql))
    }
}

impl InTransaction for Sql {
    fn run<'a>(
        &'a self,
        session: &'a mut Session,
        job: Job<'a>,
        stop: CancellationToken,
    ) -> BoxFuture<'a, Result<Outcome, DbError>> {
        Box::pin(Sql::run_statements(session, job, stop))
    }
}
