//! `type = "sql"`: the action's statements run in the item's own transaction, so the
//! work and the row's change commit together — exactly once by construction.

pub mod config;
use std::time::Duration;

use futures::future::BoxFuture;

use super::{Action, ActionError, Blame, InTransaction, Job, Outcome, Ready};
use config::SqlAction;
use crate::db::{DbError, Ran, Session, Statements};

/// The SQL action of a queue (its statements are prepared on every session).
pub struct Sql {
    timeout: Duration,
}

impl Sql {
    pub fn new(config: &SqlAction) -> Sql {
        Sql {
            timeout: config.common.timeout,
        }
    }

    /// Runs the action's statements for the job, stopping at the first that fails. A
    /// statement's own error, or running past the deadline, is a failed [`Outcome`];
    /// an `Err` means the transaction is lost and the items return to the queue.
    async fn run_statements(
        &self,
        session: &mut Session,
        job: Job<'_>,
    ) -> Result<Outcome, DbError> {
        let ran = match (job.batch, job.items) {
            (false, [item]) => {
                let run = session.run_until(Statements::Action, item, job.queue, job.deadline);
                run.await?
            }
            (_, items) => {
                let run =
                    session.run_batch_until(Statements::Action, items, job.queue, job.deadline);
                run.await?
            }
        };
        Ok(self.outcome(ran))
    }

    fn outcome(&self, ran: Ran) -> Outcome {
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
            Ran::TimedOut => Outcome::failure(format!(
                "timed out after {}",
                humantime::format_duration(self.timeout)
            )),
        }
    }
}


impl Ready for SqlAction {
    fn ready(&self) -> Result<Action, ActionError> {
        Ok(Action::in_transaction(Sql::new(self)))
    }
}

impl InTransaction for Sql {
    fn run<'a>(
        &'a self,
        session: &'a mut Session,
        job: Job<'a>,
    ) -> BoxFuture<'a, Result<Outcome, DbError>> {
        Box::pin(self.run_statements(session, job))
    }
}
