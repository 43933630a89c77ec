//! Stopping a statement that ran past its deadline: KILL QUERY from a side
//! connection, and if it will not stop, KILL CONNECTION and the session given up.

use std::future::Future;
use std::time::Duration;

use super::Ran;
use crate::db::connect::{Database, Kill};
use crate::db::error::DbError;

/// Stopping a statement that ran past its deadline, from a side connection.
pub(super) struct Interrupt<'a> {
    pub database: &'a Database,
    pub connection_id: u32,
    /// How long each step may wait: the queue's `database_timeout`.
    pub limit: Duration,
    pub what: &'static str,
}

impl Interrupt<'_> {
    /// KILL QUERY, then the statement's return; if either does not come, KILL
    /// CONNECTION and give the session up.
    pub async fn statement(
        &self,
        execution: impl Future<Output = Result<(), mysql_async::Error>>,
    ) -> Result<Ran, DbError> {
        let killed = self
            .database
            .kill_within(self.connection_id, Kill::Query, self.limit);
        let stopped = match killed.await {
            Ok(()) => tokio::time::timeout(self.limit, execution).await.ok(),
            Err(_) => None,
        };
        match stopped.map(|result| result.map_err(DbError::from)) {
            Some(Ok(())) => Ok(Ran::TimedOut),
            Some(Err(e)) if e.is_statement_error() || e.is_interrupted() => Ok(Ran::TimedOut),
            Some(Err(e)) => Err(e),
            None => {
                let kill = Kill::Connection;
                let _ = self
                    .database
                    .kill_within(self.connection_id, kill, self.limit)
                    .await;
                Err(DbError::Deadline {
                    waiting_for: self.what,
                    limit: self.limit,
                })
            }
        }
    }
}
