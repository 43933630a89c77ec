//! Running a queue's statements on a session: for an item, for a whole batch (as
//! one JSON array in `:batch`), counting the rows the first one matched, or against
//! a deadline past which the running statement is interrupted.

use mysql_async::prelude::Queryable;
use mysql_async::Params;
use tokio::time::Instant;

use super::interrupt::Interrupt;
use super::{answer, Ran, Session, Statements};
use crate::db::error::DbError;
use crate::db::item::{bind, bind_batch, Item, OutcomeParams, ParamSource};
use crate::db::row_json::batch_json;

impl Session {
    /// Runs `which` of the queue's statements for `item`, stopping at the first error.
    pub async fn run(
        &mut self,
        which: Statements,
        item: &Item,
        queue: &str,
        outcome: &OutcomeParams<'_>,
    ) -> Result<(), DbError> {
        self.run_bound(which, |sources| bind(sources, item, queue, outcome))
            .await
    }

    /// Runs `which` once for all of `items` (batch scope), each with its outcome,
    /// as one JSON array in `:batch`; stops at the first error.
    pub async fn run_batch(
        &mut self,
        which: Statements,
        items: &[(&Item, OutcomeParams<'_>)],
        queue: &str,
    ) -> Result<(), DbError> {
        let batch = batch_json(items.iter().map(|(item, outcome)| (*item, Some(*outcome))));
        self.run_bound(which, |sources| bind_batch(sources, &batch, queue))
            .await
    }

    async fn run_bound(
        &mut self,
        which: Statements,
        params: impl Fn(&[ParamSource]) -> Params,
    ) -> Result<(), DbError> {
        let what = which.waiting_for();
        for bound in self.prepared.statements(which) {
            let statement = self
                .conn
                .exec_drop(&bound.statement, params(&bound.sources));
            answer(&self.waiting, self.deadline, what, statement).await?;
        }
        Ok(())
    }

    /// As [`Session::run`], and says how many rows the first statement matched (the
    /// lease's guard in lease mode, whose sessions count matched rows, not changed).
    pub async fn run_counted(
        &mut self,
        which: Statements,
        item: &Item,
        queue: &str,
        outcome: &OutcomeParams<'_>,
    ) -> Result<u64, DbError> {
        let what = which.waiting_for();
        let mut first = None;
        for bound in self.prepared.statements(which) {
            let params = bind(&bound.sources, item, queue, outcome);
            let statement = self.conn.exec_drop(&bound.statement, params);
            answer(&self.waiting, self.deadline, what, statement).await?;
            first.get_or_insert(self.conn.affected_rows());
        }
        Ok(first.unwrap_or_default())
    }

    /// Runs `which` for `item` until `deadline`. A statement still running then is
    /// interrupted with KILL QUERY from a side connection to the session's database;
    /// one that will not stop (or a server that cannot be reached) ends the session,
    /// so the server lets go of the locks now. Each of those steps waits at most the
    /// queue's `database_timeout`.
    pub async fn run_until(
        &mut self,
        which: Statements,
        item: &Item,
        queue: &str,
        deadline: Instant,
    ) -> Result<Ran, DbError> {
        let params = |sources: &[ParamSource]| bind(sources, item, queue, &OutcomeParams::NONE);
        self.run_bound_until(which, params, deadline).await
    }

    /// As [`Session::run_until`], once for all of `items` (batch scope), as one JSON
    /// array in `:batch`.
    pub async fn run_batch_until(
        &mut self,
        which: Statements,
        items: &[Item],
        queue: &str,
        deadline: Instant,
    ) -> Result<Ran, DbError> {
        let batch = batch_json(items.iter().map(|item| (item, None)));
        let params = |sources: &[ParamSource]| bind_batch(sources, &batch, queue);
        self.run_bound_until(which, params, deadline).await
    }

    async fn run_bound_until(
        &mut self,
        which: Statements,
        params: impl Fn(&[ParamSource]) -> Params,
        deadline: Instant,
    ) -> Result<Ran, DbError> {
        for bound in self.prepared.statements(which) {
            let params = params(&bound.sources);
            let connection_id = self.conn.id();
            let execution = self.conn.exec_drop(&bound.statement, params);
            tokio::pin!(execution);
            let result = match tokio::time::timeout_at(deadline, &mut execution).await {
                Ok(result) => result.map_err(DbError::from),
                Err(_elapsed) => {
                    // From here on the worker waits for the database, not for its work.
                    self.waiting.begin(which.waiting_for());
                    let limit = self.deadline;
                    let stop = Interrupt {
                        database: &self.database,
                        connection_id,
                        limit,
                        what: which.waiting_for(),
                    };
                    return stop.statement(execution).await;
                }
            };
            match result {
                Ok(()) => {}
                Err(e) if e.is_statement_error() => return Ok(Ran::Failed(e)),
                Err(e) => return Err(e),
            }
        }
        Ok(Ran::Completed)
    }
}
