//! A worker's session: one connection set up for queue work (READ COMMITTED,
//! verified; autocommit off), with the queue's SQL prepared on it, and the few
//! things the engine does with it — claim, run a queue's statements for an item,
//! savepoints, commit. `run`, `count` and `check` all open sessions here.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Params, Row};
use tokio::time::Instant;

use super::connect::{Database, Kill, QUICK_TIMEOUT};
use super::error::{DbError, ER_UNKNOWN_SYSTEM_VARIABLE};
use super::item::{bind, bind_batch, Item, OutcomeParams, ParamSource};
use super::prepared::{prepare_queue, PrepareError, PreparedQueue};
use super::row_json::batch_json;
use super::waiting::Waiting;
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
    /// How long one of tableq's own calls may wait for its answer.
    deadline: Duration,
    /// Set while a call waits for its answer: the worker's, for readiness.
    waiting: Arc<Waiting>,
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
    /// `[lease] sql`: takes a claimed row out of the select.
    Lease,
    /// `[lease] renew_sql`.
    Renew,
    /// `[lease] release_sql`.
    Release,
}

impl Statements {
    /// What a worker running them waits for, in a log line.
    fn waiting_for(self) -> &'static str {
        match self {
            Statements::Action => "the SQL action",
            Statements::OnSuccess => "[on_success]",
            Statements::OnFailure => "[on_failure]",
            Statements::Lease => "[lease] sql",
            Statements::Renew => "[lease] renew_sql",
            Statements::Release => "[lease] release_sql",
        }
    }
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
        Session::open_with_limit(queue, database, queue.batch, Arc::default()).await
    }

    /// As [`Session::open`], claiming at most `limit` rows at a time, and keeping
    /// `waiting` up to date while it waits for the database.
    pub async fn open_with_limit(
        queue: &QueueConfig,
        database: &Database,
        limit: usize,
        waiting: Arc<Waiting>,
    ) -> Result<Session, OpenError> {
        waiting.begin("a connection");
        let settings = SessionSettings::for_queue(queue);
        let mut conn = match worker_connection(database, &settings).await {
            Ok(conn) => conn,
            Err(SessionError::Database(e)) => return Err(OpenError::Unreachable(e)),
            Err(e @ SessionError::Isolation(_)) => {
                waiting.answered();
                let finding = queue.finding(Severity::Error, &["database_url"], e.to_string());
                return Err(OpenError::Invalid(vec![finding]));
            }
        };
        let preparing = prepare_queue(&mut conn, queue, limit);
        let prepared = match tokio::time::timeout(settings.database_timeout, preparing).await {
            Err(_) => {
                return Err(OpenError::Unreachable(DbError::Deadline {
                    waiting_for: "the queue's statements to be prepared",
                    limit: settings.database_timeout,
                }))
            }
            Ok(Ok(prepared)) => prepared,
            Ok(Err(PrepareError::Invalid(findings))) => {
                waiting.answered();
                return Err(OpenError::Invalid(findings));
            }
            Ok(Err(PrepareError::Database(e))) => return Err(OpenError::Unreachable(e)),
        };
        waiting.answered();
        Ok(Session {
            conn,
            prepared,
            last_used: Instant::now(),
            longest_silence: settings.longest_silence,
            deadline: queue.database_timeout,
            waiting,
        })
    }

    /// Keeps `waiting` up to date from now on (a session opened before its worker).
    pub fn watched_by(mut self, waiting: Arc<Waiting>) -> Session {
        self.waiting = waiting;
        self
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
        let limit = self.deadline.min(QUICK_TIMEOUT);
        answer(&self.waiting, limit, "a ping", self.conn.ping()).await
    }

    /// Claims up to the session's limit of waiting rows: the claim opens the
    /// transaction (autocommit is off) and locks them.
    pub async fn claim(&mut self, queue: &str) -> Result<Vec<Item>, DbError> {
        let prepared = &self.prepared;
        let claim = self
            .conn
            .exec(&prepared.claim, prepared.claim_params(queue));
        let rows: Vec<Row> = answer(&self.waiting, self.deadline, "the claim", claim).await?;
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
    /// interrupted with KILL QUERY from a side connection to `database`; one that will
    /// not stop (or a server that cannot be reached) ends the session, so the server
    /// lets go of the locks now. Each of those steps waits at most the queue's
    /// `database_timeout`.
    pub async fn run_until(
        &mut self,
        which: Statements,
        item: &Item,
        queue: &str,
        deadline: Instant,
        database: &Database,
    ) -> Result<Ran, DbError> {
        let params = |sources: &[ParamSource]| bind(sources, item, queue, &OutcomeParams::NONE);
        self.run_bound_until(which, params, deadline, database)
            .await
    }

    /// As [`Session::run_until`], once for all of `items` (batch scope), as one JSON
    /// array in `:batch`.
    pub async fn run_batch_until(
        &mut self,
        which: Statements,
        items: &[Item],
        queue: &str,
        deadline: Instant,
        database: &Database,
    ) -> Result<Ran, DbError> {
        let batch = batch_json(items.iter().map(|item| (item, None)));
        let params = |sources: &[ParamSource]| bind_batch(sources, &batch, queue);
        self.run_bound_until(which, params, deadline, database)
            .await
    }

    async fn run_bound_until(
        &mut self,
        which: Statements,
        params: impl Fn(&[ParamSource]) -> Params,
        deadline: Instant,
        database: &Database,
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
                        database,
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

    pub async fn savepoint(&mut self) -> Result<(), DbError> {
        self.simple(SAVEPOINT, "a SAVEPOINT").await
    }

    pub async fn rollback_to_savepoint(&mut self) -> Result<(), DbError> {
        self.simple(ROLLBACK_TO_SAVEPOINT, "a ROLLBACK TO SAVEPOINT")
            .await
    }

    pub async fn rollback(&mut self) -> Result<(), DbError> {
        self.simple("ROLLBACK", "a ROLLBACK").await
    }

    /// ROLLBACK within [`QUICK_TIMEOUT`]; false if the connection cannot be trusted.
    pub async fn rollback_quickly(&mut self) -> bool {
        matches!(
            tokio::time::timeout(QUICK_TIMEOUT, self.rollback()).await,
            Ok(Ok(()))
        )
    }

    pub async fn commit(&mut self) -> Result<(), DbError> {
        self.simple("COMMIT", "the COMMIT").await
    }

    async fn simple(&mut self, sql: &'static str, what: &'static str) -> Result<(), DbError> {
        answer(
            &self.waiting,
            self.deadline,
            what,
            self.conn.query_drop(sql),
        )
        .await
    }
}

/// Awaits `call` for at most `limit`, keeping `waiting` up to date: any answer from
/// the server — a statement's own error included — ends the wait; no answer leaves
/// it set, and the connection is given up.
async fn answer<T>(
    waiting: &Waiting,
    limit: Duration,
    what: &'static str,
    call: impl Future<Output = Result<T, mysql_async::Error>>,
) -> Result<T, DbError> {
    waiting.begin(what);
    let result = match tokio::time::timeout(limit, call).await {
        Ok(result) => result.map_err(DbError::from),
        Err(_) => {
            return Err(DbError::Deadline {
                waiting_for: what,
                limit,
            })
        }
    };
    if result.is_ok() || matches!(&result, Err(e) if e.server_code().is_some()) {
        waiting.answered();
    }
    result
}

/// Stopping a statement that ran past its deadline, from a side connection.
struct Interrupt<'a> {
    database: &'a Database,
    connection_id: u32,
    /// How long each step may wait: the queue's `database_timeout`.
    limit: Duration,
    what: &'static str,
}

impl Interrupt<'_> {
    /// KILL QUERY, then the statement's return; if either does not come, KILL
    /// CONNECTION and give the session up.
    async fn statement(
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

/// How a worker's session is set up for its queue.
pub struct SessionSettings {
    /// The longest the connection may sit silent: the action's timeout or the poll
    /// interval. The server's `wait_timeout` sits just above it.
    pub longest_silence: Duration,
    /// The queue's `database_timeout`: the server gives up on a silent client after
    /// it too (`net_read_timeout`, `net_write_timeout`), and a row lock is waited for
    /// at most three quarters of it (`innodb_lock_wait_timeout`, if the server's is
    /// longer), so a lock wait ends as an error before the deadline would cut it.
    pub database_timeout: Duration,
}

impl SessionSettings {
    pub fn for_queue(queue: &QueueConfig) -> SessionSettings {
        SessionSettings {
            longest_silence: queue.action.timeout().max(queue.poll_interval),
            database_timeout: queue.database_timeout,
        }
    }

    fn statement(&self) -> String {
        let wait_timeout = (self.longest_silence + WAIT_TIMEOUT_MARGIN)
            .as_secs()
            .max(1);
        let net_timeout = self.database_timeout.as_secs().max(1);
        let lock_wait = (self.database_timeout.as_secs() * 3 / 4).max(1);
        format!(
            "SET SESSION autocommit = 0, SESSION wait_timeout = {wait_timeout}, \
             SESSION net_read_timeout = {net_timeout}, SESSION net_write_timeout = {net_timeout}, \
             SESSION innodb_lock_wait_timeout = LEAST(@@SESSION.innodb_lock_wait_timeout, {lock_wait})"
        )
    }
}

/// A connection set up to be a worker's: READ COMMITTED (verified, so a server that
/// ignores the setting is caught), autocommit off so the claim opens the transaction
/// itself, and a `wait_timeout` just above `longest_silence`, so the server drops a
/// vanished worker's locks soon after its action could have ended.
pub async fn worker_connection(
    database: &Database,
    settings: &SessionSettings,
) -> Result<Conn, SessionError> {
    let mut conn = database.connect_within(settings.database_timeout).await?;
    let setup = async {
        conn.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
            .await?;
        conn.query_drop(settings.statement()).await?;
        isolation_level(&mut conn).await
    };
    let isolation = tokio::time::timeout(settings.database_timeout, setup)
        .await
        .map_err(|_| DbError::Deadline {
            waiting_for: "the session's settings",
            limit: settings.database_timeout,
        })?
        .map_err(DbError::from)?;
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
