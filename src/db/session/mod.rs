//! A worker's session: one connection set up for queue work (READ COMMITTED,
//! verified; autocommit off), with the queue's SQL prepared on it, and the few
//! things the engine does with it — claim, run a queue's statements, savepoints,
//! commit. `run`, `count` and `check` all open sessions here.
//!
//! - [`setup`]: the connection set up as a worker's.
//! - `run`: the queue's statements run on it, for an item or a batch, or until told
//!   to stop.
//! - `interrupt`: a statement told to stop, stopped from a side connection.

mod interrupt;
use interrupt::Abandoned;
pub use interrupt::Ran;
mod run;
pub mod setup;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};
use tokio::time::Instant;

use super::budget::Place;
use super::connect::{Database, QUICK_TIMEOUT};
use super::error::DbError;
use super::item::Item;
use super::key_lock::KeyLocks;
use super::pause::{self, Paused};
use super::prepared::{prepare_queue, PrepareError, PreparedQueue};
use super::unanswered::Unanswered;
use crate::config::QueueConfig;
use crate::diagnostic::{Finding, Severity};
pub use setup::{worker_connection, SessionError, SessionSettings};

const SAVEPOINT: &str = "SAVEPOINT tableq_item";
const ROLLBACK_TO_SAVEPOINT: &str = "ROLLBACK TO SAVEPOINT tableq_item";

pub struct Session {
    conn: Conn,
    /// Its place in the process's connection budget, for as long as it lives.
    _place: Option<Place>,
    /// The database it is connected to, for KILL from a side connection.
    database: Database,
    /// The largest packet the server takes (`max_allowed_packet`).
    max_packet: usize,
    prepared: PreparedQueue,
    /// `[concurrency]`'s key slots this session takes and holds.
    keys: Option<KeyLocks>,
    last_used: Instant,
    longest_silence: Duration,
    /// How long one of tableq's own calls may wait for its answer.
    deadline: Duration,
    watch: Calls,
}

/// What a session's calls tell: how long its worker has waited for an answer (for
/// readiness), and whether a call is unanswered (its connection is killed if the
/// session is dropped then).
struct Calls {
    unanswered: Arc<Unanswered>,
    abandoned: Abandoned,
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

impl OpenError {
    /// The database's error, when it could not be reached.
    pub fn unreachable(&self) -> Option<&DbError> {
        match self {
            OpenError::Unreachable(e) => Some(e),
            OpenError::Invalid(_) => None,
        }
    }
}

impl Session {
    /// Connects to `database` and prepares `queue` on the new connection, claiming
    /// `queue.batch` rows at a time.
    pub async fn open(queue: &QueueConfig, database: &Database) -> Result<Session, OpenError> {
        Session::open_with_limit(queue, database, queue.batch, Arc::default()).await
    }

    /// As [`Session::open`], claiming at most `limit` rows at a time, and keeping
    /// `unanswered` up to date while it waits for the database. The whole opening —
    /// connecting, the settings, preparing — waits at most `database_timeout`.
    pub async fn open_with_limit(
        queue: &QueueConfig,
        database: &Database,
        limit: usize,
        unanswered: Arc<Unanswered>,
    ) -> Result<Session, OpenError> {
        // A place in the budget first: waiting for one is no wait for the database.
        let place = database.place().await;
        unanswered.begin("a connection");
        let opening = Session::opening(queue, database, limit, unanswered.clone(), place);
        match tokio::time::timeout(queue.database_timeout, opening).await {
            Ok(Ok(session)) => {
                unanswered.answered();
                Ok(session)
            }
            Ok(Err(e @ OpenError::Invalid(_))) => {
                unanswered.answered();
                Err(e)
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Err(OpenError::Unreachable(DbError::Deadline {
                waiting_for: "a connection",
                limit: queue.database_timeout,
            })),
        }
    }

    async fn opening(
        queue: &QueueConfig,
        database: &Database,
        limit: usize,
        unanswered: Arc<Unanswered>,
        place: Option<Place>,
    ) -> Result<Session, OpenError> {
        let settings = SessionSettings::for_queue(queue);
        let mut conn = match worker_connection(database, &settings).await {
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
        let database_name = conn.opts().db_name().unwrap_or_default().to_string();
        let keys = KeyLocks::new(queue, &prepared.columns, &database_name)
            .map_err(|finding| OpenError::Invalid(vec![finding]))?;
        let max_packet = max_packet(&mut conn)
            .await
            .map_err(|e| OpenError::Unreachable(e.into()))?;
        Ok(Session {
            _place: place,
            database: database.clone(),
            max_packet,
            prepared,
            keys,
            last_used: Instant::now(),
            longest_silence: settings.longest_silence,
            deadline: queue.database_timeout,
            watch: Calls {
                unanswered,
                abandoned: Abandoned::new(database, conn.id()),
            },
            conn,
        })
    }

    /// Keeps `unanswered` up to date from now on (a session opened before its worker).
    pub fn watched_by(mut self, unanswered: Arc<Unanswered>) -> Session {
        self.watch.unanswered = unanswered;
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
        answer(&self.watch, limit, "a ping", self.conn.ping()).await
    }

    /// Claims up to the session's limit of waiting rows: the claim opens the
    /// transaction (autocommit is off) and locks them.
    pub async fn claim(&mut self, queue: &str) -> Result<Vec<Item>, DbError> {
        let prepared = &self.prepared;
        let claim = self
            .conn
            .exec(&prepared.claim, prepared.claim_params(queue));
        let rows: Vec<Row> = answer(&self.watch, self.deadline, "the claim", claim).await?;
        Ok(rows.into_iter().map(|row| prepared.item(row)).collect())
    }

    /// Takes a `[concurrency]` key slot for each of `items` (all of them, without
    /// `[concurrency]`): the items it holds a slot for, and those whose key is at
    /// its limit — not to be started.
    pub async fn hold_keys(&mut self, items: Vec<Item>) -> Result<(Vec<Item>, Vec<Item>), DbError> {
        let Some(keys) = &mut self.keys else {
            return Ok((items, Vec::new()));
        };
        let take = keys.take_all(&mut self.conn, &items);
        let got = answer(&self.watch, self.deadline, "the keys' named locks", take).await?;
        let (held, at_limit): (Vec<_>, Vec<_>) =
            items.into_iter().zip(got).partition(|(_, got)| *got);
        let items = |pairs: Vec<(Item, bool)>| pairs.into_iter().map(|(item, _)| item).collect();
        Ok((items(held), items(at_limit)))
    }

    /// Gives back every `[concurrency]` key slot the session holds.
    pub async fn release_keys(&mut self) -> Result<(), DbError> {
        match &mut self.keys {
            Some(keys) if keys.holding() => {
                let release = keys.release_all(&mut self.conn);
                answer(&self.watch, self.deadline, "the keys' named locks", release).await
            }
            _ => Ok(()),
        }
    }

    /// How many `[concurrency]` keys the session holds every slot of now.
    pub fn keys_at_limit(&self) -> usize {
        self.keys.as_ref().map_or(0, KeyLocks::keys_at_limit)
    }

    /// Whether the queue has `[on_failure]`.
    pub fn has_on_failure(&self) -> bool {
        self.prepared.on_failure.is_some()
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

    /// Whether `queue` is paused (see [`crate::db::pause`]): one read, and the
    /// transaction it opened rolled back, so the session holds nothing after —
    /// unless `claim_follows` and the queue is not paused: then the transaction is
    /// left to the claim about to run in it, which ends it (under READ COMMITTED the
    /// read keeps no snapshot and locks no row), saving a ROLLBACK per poll.
    pub async fn read_pause(
        &mut self,
        queue: &str,
        claim_follows: bool,
    ) -> Result<Option<Paused>, DbError> {
        let read = pause::read(&mut self.conn, queue);
        let paused = answer(&self.watch, self.deadline, "the pause", read).await;
        self.touch();
        if claim_follows && matches!(paused, Ok(None)) {
            return paused;
        }
        let ended = self.rollback().await;
        let paused = paused?;
        ended.map(|()| paused)
    }

    async fn simple(&mut self, sql: &'static str, what: &'static str) -> Result<(), DbError> {
        answer(&self.watch, self.deadline, what, self.conn.query_drop(sql)).await
    }
}

/// Awaits `call` for at most `limit`, keeping `watch` up to date: any answer from
/// the server — a statement's own error included — ends the wait; no answer leaves
/// it set, and the connection is given up (and killed from a side connection as the
/// session is dropped, so the server does not run the call on).
async fn answer<T>(
    watch: &Calls,
    limit: Duration,
    what: &'static str,
    call: impl Future<Output = Result<T, mysql_async::Error>>,
) -> Result<T, DbError> {
    watch.unanswered.begin(what);
    watch.abandoned.sent();
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
        watch.unanswered.answered();
        watch.abandoned.answered();
    }
    result
}

/// The server's `max_allowed_packet`.
async fn max_packet(conn: &mut Conn) -> Result<usize, mysql_async::Error> {
    let value: Option<u64> = conn.query_first("SELECT @@max_allowed_packet").await?;
    Ok(value.map_or(4 * 1024 * 1024, |v| v as usize))
}
