//! Stopping what the server would otherwise run to its end: a statement told to
//! stop at its action's deadline (KILL QUERY from a side connection, quickly, and if it will not stop,
//! the session given up), and the statement of a session given up mid-call (KILL
//! CONNECTION, off the worker's path) — a claim abandoned at `database_timeout`, a
//! renewal let go, a worker cut off at shutdown — so no orphaned query holds locks
//! or burns the server's CPU after tableq has moved on. And how statements run
//! against a deadline ended ([`Ran`]).

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::db::connect::{Database, Kill, QUICK_TIMEOUT};
use crate::db::error::DbError;

/// How statements run until told to stop ended.
#[derive(Debug)]
pub enum Ran {
    Completed,
    /// A statement's own error; the transaction lives on.
    Failed(DbError),
    /// Told to stop (the action's deadline passed): the statement was interrupted
    /// and the transaction lives on.
    Stopped,
}

/// Stopping a statement told to stop (its action's deadline), from a side connection.
pub(super) struct Interrupt<'a> {
    pub database: &'a Database,
    pub connection_id: u32,
    /// What the worker waited for, for the error.
    pub what: &'static str,
    /// The queue's `database_timeout`, for the error.
    pub limit: Duration,
}

impl Interrupt<'_> {
    /// KILL QUERY, then the statement's return, each within [`QUICK_TIMEOUT`]; if
    /// either does not come, the session is given up (and its connection killed as
    /// it is dropped).
    pub async fn statement(
        &self,
        execution: impl Future<Output = Result<(), mysql_async::Error>>,
    ) -> Result<Ran, DbError> {
        let killed = self
            .database
            .kill_within(self.connection_id, Kill::Query, QUICK_TIMEOUT);
        let stopped = match killed.await {
            Ok(()) => tokio::time::timeout(QUICK_TIMEOUT, execution).await.ok(),
            Err(_) => None,
        };
        match stopped.map(|result| result.map_err(DbError::from)) {
            Some(Ok(())) => Ok(Ran::Stopped),
            Some(Err(e)) if e.is_statement_error() || e.is_interrupted() => Ok(Ran::Stopped),
            Some(Err(e)) => Err(e),
            None => Err(DbError::Deadline {
                waiting_for: self.what,
                limit: self.limit,
            }),
        }
    }
}

/// Kills a session's connection from a side connection when the session is dropped
/// while one of its calls has had no answer.
#[derive(Debug)]
pub(super) struct Abandoned {
    database: Database,
    connection_id: u32,
    unanswered: AtomicBool,
}

impl Abandoned {
    pub fn new(database: &Database, connection_id: u32) -> Abandoned {
        Abandoned {
            database: database.clone(),
            connection_id,
            unanswered: AtomicBool::new(false),
        }
    }

    /// A call was sent.
    pub fn sent(&self) {
        self.unanswered.store(true, Ordering::Release);
    }

    /// Whether a call is still unanswered.
    pub fn pending(&self) -> bool {
        self.unanswered.load(Ordering::Acquire)
    }

    /// Its answer came (an error from the server included).
    pub fn answered(&self) {
        self.unanswered.store(false, Ordering::Release);
    }
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        if !self.unanswered.load(Ordering::Acquire) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (database, id) = (self.database.clone(), self.connection_id);
        runtime.spawn(async move {
            // The server rolls the session's transaction back; a session that ended
            // meanwhile is no error.
            let _ = database
                .kill_within(id, Kill::Connection, QUICK_TIMEOUT)
                .await;
        });
    }
}
