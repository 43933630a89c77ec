//! A worker's session: one connection set up for queue work (READ COMMITTED,
//! verified; autocommit off), with the queue's SQL prepared on it, and the few
//! things the engine does with it — claim, run a queue's statements for an item,
//! savepoints, commit. `run`, `count` and `check` all open sessions here.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};
use tokio::time::Instant;

use super::connect::{Database, Kill, QUICK_TIMEOUT};
use super::error::{DbError, ER_UNKNOWN_SYSTEM_VARIABLE};
use super::item::{bind, Item, OutcomeParams};
use super::prepared::{prepare_queue, BoundStatement, PrepareError, PreparedQueue};
use crate::config::QueueConfig;
use crate::diagnostic::{Finding, Severity};

/// How far the session's `wait_timeout` sits above the longest expected silence.
const WAIT_TIMEOUT_MARGIN: Duration = Duration::from_secs(30);

const SAVEPOINT: &str = "SAVEPOINT tableq_item";
const ROLLBACK_TO_SAVEPOINT: &str = "ROLLBACK TO SAVEPOINT tableq_item";

pub struct Session {
    conn: Conn,
    prepared: PreparedQueue,
    last_used: Instant,
    longest_silence: Duration,
}

/// Why a session could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The database could not be reached or the connection failed; try again later.
    #[error("{0}")]
    Unreachable(DbError),
    /// The queue's SQL, or the server's settings, are wrong for this queue.
    #[error("{}", crate::diagnostic::messages(.0))]
    Invalid(Vec<Finding>),
}

/// A connection that could not be set up as a worker's.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("{0}")]
    Database(#[from] DbError),
    #[error("the server kept the session at {0} after SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED; tableq needs READ COMMITTED")]
    Isolation(String),
}

/// Which of a queue's statement lists to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Statements {
    /// The action's statements, for `type = "sql"`.
    Action,
    OnSuccess,
    OnFailure,
}

/// How statements run against a deadline ended.
#[derive(Debug)]
pub enum Ran {
    Completed,
    /// A statement's own error; the transaction lives on.
    Failed(DbError),
    /// The deadline passed; the statement was interrupted and the transaction lives on.
    TimedOut,
}

impl Session {
    /// Connects to `database` and prepares `queue` on the new connection, claiming
    /// `queue.batch` rows at a time.
    pub async fn open(queue: &QueueConfig, database: &Database) -> Result<Session, OpenError> {
        Session::open_with_limit(queue, database, queue.batch).await
    }

    /// As [`Session::open`], claiming at most `limit` rows at a time.
    pub async fn open_with_limit(
        queue: &QueueConfig,
        database: &Database,
        limit: usize,
    ) -> Result<Session, OpenError> {
        let longest_silence = queue.action.timeout().max(queue.poll_interval);
        let mut conn = match worker_connection(database, longest_silence).await {
            Ok(conn) => conn,
            Err(SessionError::Database(e)) => return Err(OpenError::Unreachable(e)),
            Err(e @ SessionError::Isolation(_)) => {
                let finding = queue.finding(Severity::Error, &["database_url"], e.to_string());
                return Err(OpenError::Invalid(vec![finding]));
            }
        };
        let prepared = match prepare_queue(&mut conn, queue, limit).await {
            Ok(prepared) => prepared,
            Err(PrepareError::Invalid(findings)) => return Err(OpenError::Invalid(findings)),
            Err(PrepareError::Database(e)) => return Err(OpenError::Unreachable(e)),
        };
        Ok(Session {
            conn,
            prepared,
            last_used: Instant::now(),
            longest_silence,
        })
    }

    /// The server's id for this session, for KILL.
    pub fn id(&self) -> u32 {
        self.conn.id()
    }

    /// The connection and the queue's prepared SQL, for `check`'s deeper looks.
    pub fn parts(&mut self) -> (&mut Conn, &PreparedQueue) {
        (&mut self.conn, &self.prepared)
    }

    /// True if the server may have closed this connection for being idle too long;
    /// checked with a ping before the next claim.
    pub async fn still_alive(&mut self) -> bool {
        self.last_used.elapsed() < self.longest_silence || self.ping().await.is_ok()
    }

    /// Closes the connection politely (COM_QUIT), without waiting long for it.
    pub async fn close(self) {
        let _ = tokio::time::timeout(QUICK_TIMEOUT, self.conn.disconnect()).await;
    }

    /// Notes that the connection was just used.
    pub fn touch(&mut self) {
        self.last_used = Instant::now();
    }

    /// Pings the server, giving up after [`QUICK_TIMEOUT`]. The ping is awaited to its
    /// end: one dropped between request and reply would leave every later reply on
    /// the connection one statement late.
    pub async fn ping(&mut self) -> Result<(), DbError> {
        match tokio::time::timeout(QUICK_TIMEOUT, self.conn.ping()).await {
            Ok(result) => Ok(result?),
            Err(_) => Err(DbError::other("the database did not answer a ping")),
        }
    }

    /// Claims up to the session's limit of waiting rows: the claim opens the
    /// transaction (autocommit is off) and locks them.
    pub async fn claim(&mut self, queue: &str) -> Result<Vec<Item>, DbError> {
        let prepared = &self.prepared;
        let rows: Vec<Row> = self
            .conn
            .exec(&prepared.claim, prepared.claim_params(queue))
            .await?;
        Ok(rows
            .into_iter()
            .map(|row| Item::new(prepared.columns.clone(), row.unwrap(), prepared.key_index))
            .collect())
    }

    /// Whether the queue has `[on_failure]`.
    pub fn has_on_failure(&self) -> bool {
        self.prepared.on_failure.is_some()
    }

    /// Runs `which` of the queue's statements for `item`, stopping at the first error.
    pub async fn run(
        &mut self,
        which: Statements,
        item: &Item,
        queue: &str,
        outcome: &OutcomeParams<'_>,
    ) -> Result<(), DbError> {
        for bound in self.prepared.statements(which) {
            let params = bind(&bound.sources, item, queue, outcome);
            self.conn.exec_drop(&bound.statement, params).await?;
        }
        Ok(())
    }

    /// Runs `which` for `item` until `deadline`. A statement still running then is
    /// interrupted with KILL QUERY from a side connection to `database`; one that will
    /// not stop ends the session, so the server lets go of the locks now.
    pub async fn run_until(
        &mut self,
        which: Statements,
        item: &Item,
        queue: &str,
        deadline: Instant,
        database: &Database,
    ) -> Result<Ran, DbError> {
        let statements: &[BoundStatement] = self.prepared.statements(which);
        for bound in statements {
            let params = bind(&bound.sources, item, queue, &OutcomeParams::NONE);
            let connection_id = self.conn.id();
            let execution = self.conn.exec_drop(&bound.statement, params);
            tokio::pin!(execution);
            let result = match tokio::time::timeout_at(deadline, &mut execution).await {
                Ok(result) => result.map_err(DbError::from),
                Err(_elapsed) => {
                    let stopped = match database.kill(connection_id, Kill::Query).await {
                        Ok(()) => tokio::time::timeout(QUICK_TIMEOUT, execution).await.ok(),
                        Err(_) => None,
                    };
                    return match stopped.map(|r| r.map_err(DbError::from)) {
                        Some(Ok(())) => Ok(Ran::TimedOut),
                        Some(Err(e)) if e.is_statement_error() || e.is_interrupted() => {
                            Ok(Ran::TimedOut)
                        }
                        Some(Err(e)) => Err(e),
                        None => {
                            let _ = database.kill(connection_id, Kill::Connection).await;
                            Err(DbError::other(
                                "the action's statement could not be interrupted",
                            ))
                        }
                    };
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

    pub async fn savepoint(&mut self) -> Result<(), DbError> {
        Ok(self.conn.query_drop(SAVEPOINT).await?)
    }

    pub async fn rollback_to_savepoint(&mut self) -> Result<(), DbError> {
        Ok(self.conn.query_drop(ROLLBACK_TO_SAVEPOINT).await?)
    }

    pub async fn rollback(&mut self) -> Result<(), DbError> {
        Ok(self.conn.query_drop("ROLLBACK").await?)
    }

    /// ROLLBACK within [`QUICK_TIMEOUT`]; false if the connection cannot be trusted.
    pub async fn rollback_quickly(&mut self) -> bool {
        matches!(
            tokio::time::timeout(QUICK_TIMEOUT, self.rollback()).await,
            Ok(Ok(()))
        )
    }

    pub async fn commit(&mut self) -> Result<(), DbError> {
        Ok(self.conn.query_drop("COMMIT").await?)
    }
}

/// A connection set up to be a worker's: READ COMMITTED (verified, so a server that
/// ignores the setting is caught), autocommit off so the claim opens the transaction
/// itself, and a `wait_timeout` just above `longest_silence`, so the server drops a
/// vanished worker's locks soon after its action could have ended.
pub async fn worker_connection(
    database: &Database,
    longest_silence: Duration,
) -> Result<Conn, SessionError> {
    let mut conn = database.connect().await?;
    let wait_timeout = (longest_silence + WAIT_TIMEOUT_MARGIN).as_secs().max(1);
    let setup = async {
        conn.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
            .await?;
        conn.query_drop(format!(
            "SET SESSION autocommit = 0, SESSION wait_timeout = {wait_timeout}"
        ))
        .await?;
        isolation_level(&mut conn).await
    };
    let isolation = setup.await.map_err(DbError::from)?;
    if isolation != "READ-COMMITTED" {
        return Err(SessionError::Isolation(isolation));
    }
    Ok(conn)
}

/// The session's isolation level as the server reports it (`READ-COMMITTED`, …).
pub async fn isolation_level(conn: &mut Conn) -> Result<String, mysql_async::Error> {
    // MySQL 8 and MariaDB ≥ 11.1 call it transaction_isolation; older MariaDB, tx_isolation.
    match conn
        .query_first::<String, _>("SELECT @@SESSION.transaction_isolation")
        .await
    {
        Ok(level) => Ok(level.unwrap_or_default()),
        Err(mysql_async::Error::Server(e)) if e.code == ER_UNKNOWN_SYSTEM_VARIABLE => Ok(conn
            .query_first::<String, _>("SELECT @@SESSION.tx_isolation")
            .await?
            .unwrap_or_default()),
        Err(e) => Err(e),
    }
}
