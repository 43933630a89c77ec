//! Running a queue's statements on a session: for an item, for a whole batch (as
//! one JSON array in `:batch`), counting the rows the first one matched, or until
//! told to stop, when the running statement is interrupted.

use std::future::Future;

use mysql_async::prelude::Queryable;
use mysql_async::{Params, Value};
use tokio::time::Instant;

use super::interrupt::{Interrupt, Ran};
use super::{answer, Session};
use crate::db::bind::{bind, bind_batch, ParamSource};
use crate::db::connect::Database;
use crate::db::error::DbError;
use crate::db::item::{Item, OutcomeParams};
use crate::db::prepared::Statements;
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
            let params = self.fitting(what, params(&bound.sources))?;
            let statement = self.conn.exec_drop(&bound.statement, params);
            answer(&self.watch, self.deadline, what, statement).await?;
        }
        Ok(())
    }

    /// `params`, if the server takes them in one packet; else [`DbError::TooLarge`]
    /// before anything is sent (the connection and the transaction live on).
    fn fitting(&self, what: &'static str, params: Params) -> Result<Params, DbError> {
        let size = match &params {
            Params::Positional(values) => values.iter().map(value_size).sum(),
            _ => 0,
        };
        // Room for the packet's header, the statement id and the types.
        let limit = self.max_packet.saturating_sub(1024);
        if size > limit {
            return Err(DbError::TooLarge {
                what,
                size,
                limit: self.max_packet,
            });
        }
        Ok(params)
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
            let params = self.fitting(what, bind(&bound.sources, item, queue, outcome))?;
            let statement = self.conn.exec_drop(&bound.statement, params);
            answer(&self.watch, self.deadline, what, statement).await?;
            first.get_or_insert(self.conn.affected_rows());
        }
        Ok(first.unwrap_or_default())
    }

    /// Runs `which` for `item` until `stopped` completes (the action's deadline). A
    /// statement still running then is interrupted with KILL QUERY from a side
    /// connection to the session's database; one that will not stop (or a server
    /// that cannot be reached) ends the session, so the server lets go of the locks
    /// now. Each of those steps waits at most the queue's `database_timeout`.
    pub async fn run_until(
        &mut self,
        which: Statements,
        item: &Item,
        queue: &str,
        stopped: impl Future<Output = ()>,
    ) -> Result<Ran, DbError> {
        let params = |sources: &[ParamSource]| bind(sources, item, queue, &OutcomeParams::NONE);
        self.run_bound_until(which, params, stopped).await
    }

    /// As [`Session::run_until`], once for all of `items` (batch scope), as one JSON
    /// array in `:batch`.
    pub async fn run_batch_until(
        &mut self,
        which: Statements,
        items: &[Item],
        queue: &str,
        stopped: impl Future<Output = ()>,
    ) -> Result<Ran, DbError> {
        let batch = batch_json(items.iter().map(|item| (item, None)));
        let params = |sources: &[ParamSource]| bind_batch(sources, &batch, queue);
        self.run_bound_until(which, params, stopped).await
    }

    async fn run_bound_until(
        &mut self,
        which: Statements,
        params: impl Fn(&[ParamSource]) -> Params,
        stopped: impl Future<Output = ()>,
    ) -> Result<Ran, DbError> {
        let what = which.waiting_for();
        tokio::pin!(stopped);
        for bound in self.prepared.statements(which) {
            let params = match self.fitting(what, params(&bound.sources)) {
                Ok(params) => params,
                Err(too_large) => return Ok(Ran::Failed(too_large)),
            };
            let started = Instant::now();
            let connection_id = self.conn.id();
            self.watch.abandoned.sent();
            let execution = self.conn.exec_drop(&bound.statement, params);
            tokio::pin!(execution);
            let watched = Watched {
                database: &self.database,
                limit: self.deadline,
            };
            let result = match watched.run(&mut execution, &mut stopped).await {
                Watch::Answered(result) => result.map_err(DbError::from),
                Watch::Stopped => {
                    // From here on the worker waits for the database, not for its work.
                    self.watch.unanswered.begin(what);
                    let stop = Interrupt {
                        database: &self.database,
                        connection_id,
                        what,
                        limit: self.deadline,
                    };
                    return stop.statement(execution).await;
                }
                Watch::Unreachable => {
                    // Stalled since the statement was sent: it shows at once.
                    self.watch.unanswered.stalled_since(started, what);
                    return Err(DbError::Deadline {
                        waiting_for: what,
                        limit: self.deadline,
                    });
                }
            };
            self.watch.abandoned.answered();
            match result {
                Ok(()) => {}
                Err(e) if e.is_statement_error() => return Ok(Ran::Failed(e)),
                Err(e) => return Err(e),
            }
        }
        Ok(Ran::Completed)
    }
}

/// A statement that may take long (an SQL action, up to its timeout), watched until
/// it is told to stop: once it has run for `limit` (`database_timeout`, longer than
/// any round trip), and at every `limit` after, a side connection asks whether the
/// server is reachable at all; if it is not, the worker is stalled, not busy.
struct Watched<'a> {
    database: &'a Database,
    limit: std::time::Duration,
}

enum Watch<T> {
    Answered(T),
    Stopped,
    Unreachable,
}

impl Watched<'_> {
    async fn run<T>(
        &self,
        execution: &mut (impl Future<Output = T> + Unpin),
        stopped: &mut (impl Future<Output = ()> + Unpin),
    ) -> Watch<T> {
        loop {
            tokio::select! {
                result = &mut *execution => return Watch::Answered(result),
                () = &mut *stopped => return Watch::Stopped,
                () = tokio::time::sleep(self.limit) => {}
            }
            if !self.database.reachable().await {
                return Watch::Unreachable;
            }
        }
    }
}

/// About how many bytes `value` takes in an execute packet.
fn value_size(value: &Value) -> usize {
    match value {
        Value::Bytes(bytes) => bytes.len() + 9,
        _ => 9,
    }
}
