//! A worker's session: one connection set up for queue work (READ COMMITTED,
//! verified; autocommit off), with the queue's SQL prepared on it, and the few
//! things the engine does with it — claim, run a queue's statements, savepoints,
//! commit. `run`, `count` and `check` all open sessions here.
//!
//! - [`setup`]: the connection set up as a worker's.
//! - `claim`: the claim, in one statement; key first after a row too large to read.
//! - `run`: the queue's statements run on it, for an item or a batch, or until told
//!   to stop.
//! - `interrupt`: a statement told to stop, stopped from a side connection.

mod interrupt;
use interrupt::Abandoned;
pub use interrupt::Ran;
mod claim;
mod run;
pub mod setup;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use tokio::time::Instant;

use super::budget::{Place, Seat};
use super::connect::{Database, Kill, QUICK_TIMEOUT};
use super::deadline::within;
use super::due::{self, DueQuery};
use super::error::DbError;
use super::item::Item;
use super::key_claim::KeyFirst;
use super::key_lock::KeyLocks;
use super::pause::{self, Paused};
use super::prepared::{prepare_queue, PrepareError, PreparedQueue};
use super::unanswered::Unanswered;
use super::views;
use crate::config::QueueConfig;
use crate::diagnostic::{Finding, Severity};
use crate::sql::tables::TableRef;
pub use setup::{set_up, worker_connection, SessionError, SessionSettings};

const SAVEPOINT: &str = "SAVEPOINT tableq_item";
const ROLLBACK_TO_SAVEPOINT: &str = "ROLLBACK TO SAVEPOINT tableq_item";

pub struct Session {
    conn: Conn,
    /// Its place in the process's connection budget, for as long as it lives.
    _place: Option<Place>,
    /// The host it is connected to, for KILL from a side connection.
    database: Database,
    /// The largest packet the server takes (`max_allowed_packet`).
    max_packet: usize,
    prepared: PreparedQueue,
    /// The queue and the claim's limit it was opened for, to open it again.
    queue: Arc<QueueConfig>,
    limit: usize,
    /// Whether it claims key first for now (after a row too large to read).
    key_first: KeyFirst,
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

/// Whether an idle session may serve the next turn ([`Session::reusable`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reuse {
    Yes,
    /// It is on another host than the one the connections go to now: closed, and
    /// opened again there.
    OtherHost,
    /// Its connection is gone.
    Dead,
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
        // A seat in the budget first: waiting for one is no wait for the database.
        let seat = database.seat().await;
        let opening = Session::opening(queue, database, limit, unanswered.clone(), seat);
        Session::within_deadline(queue.database_timeout, &unanswered, opening).await
    }

    /// `opening`, waiting at most `limit`, keeping `unanswered` up to date.
    async fn within_deadline(
        limit: Duration,
        unanswered: &Unanswered,
        opening: impl Future<Output = Result<Session, OpenError>>,
    ) -> Result<Session, OpenError> {
        unanswered.begin("a connection");
        match tokio::time::timeout(limit, opening).await {
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
                limit,
            })),
        }
    }

    async fn opening(
        queue: &QueueConfig,
        database: &Database,
        limit: usize,
        unanswered: Arc<Unanswered>,
        seat: Option<Seat>,
    ) -> Result<Session, OpenError> {
        let settings = SessionSettings::for_queue(queue);
        let (conn, place) = database
            .connect_seated(seat, settings.database_timeout)
            .await
            .map_err(OpenError::Unreachable)?;
        let mut conn = match set_up(conn, &settings).await {
            Ok(conn) => conn,
            Err(SessionError::Database(e)) => return Err(OpenError::Unreachable(e)),
            Err(e @ SessionError::Isolation(_)) => {
                let finding = queue.finding(Severity::Error, &["database_url"], e.to_string());
                return Err(OpenError::Invalid(vec![finding]));
            }
        };
        let max_packet = max_packet(&mut conn)
            .await
            .map_err(|e| OpenError::Unreachable(e.into()))?;
        // A schedule's select reads its row: the table and the row come first.
        if let Some(schedule) = &queue.schedule {
            use crate::db::schedules::{ready, ReadyError};
            match ready(&mut conn, &queue.name, schedule).await {
                Ok(()) => {}
                Err(e @ ReadyError::CannotCreate { .. }) => {
                    let finding = queue.finding(Severity::Error, &["schedule"], e.to_string());
                    return Err(OpenError::Invalid(vec![finding]));
                }
                Err(ReadyError::Database(e)) => return Err(OpenError::Unreachable(e)),
            }
        }
        let prepared = match prepare_queue(&mut conn, queue, limit, max_packet).await {
            Ok(prepared) => prepared,
            Err(PrepareError::Invalid(findings)) => return Err(OpenError::Invalid(findings)),
            Err(PrepareError::Database(e)) => return Err(OpenError::Unreachable(e)),
        };
        // A KILL must reach this connection's own host, of the several a URL may list.
        let database = &database.host_of(&conn);
        let database_name = conn.opts().db_name().unwrap_or_default().to_string();
        let keys = KeyLocks::new(queue, &prepared.columns, &database_name)
            .map_err(|finding| OpenError::Invalid(vec![finding]))?;
        Ok(Session {
            _place: place,
            queue: Arc::new(queue.clone()),
            limit,
            key_first: KeyFirst::default(),
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

    /// Kills this session's connection from a side connection to its own host: the
    /// server rolls its transaction back.
    pub async fn kill_from_aside(&self) -> Result<(), DbError> {
        self.database.kill(self.conn.id(), Kill::Connection).await
    }

    /// The connection and the queue's prepared SQL, for `check`'s deeper looks.
    pub fn parts(&mut self) -> (&mut Conn, &PreparedQueue) {
        (&mut self.conn, &self.prepared)
    }

    /// Whether this idle session may serve its worker's next turn, in either mode:
    /// it must be on the host `database`'s connections go to now — a URL of several
    /// hosts moves on to an earlier one that takes writes again, found by any new
    /// connection (the background count's among them: see
    /// [`Database::look_back_due`]), so that every session converges on one node —
    /// and still alive.
    pub async fn reusable(&mut self, database: &Database) -> Reuse {
        if !self.on_host_in_use(database) {
            tracing::debug!(
                "the database's connections go to another host now; reconnecting there"
            );
            return Reuse::OtherHost;
        }
        match self.still_alive().await {
            true => Reuse::Yes,
            false => {
                tracing::debug!("the idle connection was closed; reconnecting");
                Reuse::Dead
            }
        }
    }

    /// Whether this session is on the host `database`'s connections go to now.
    pub fn on_host_in_use(&self, database: &Database) -> bool {
        database
            .host_in_use()
            .is_none_or(|host| host == self.database.server())
    }

    /// True if the server may have closed this connection for being idle too long;
    /// checked with a ping before the next claim.
    pub async fn still_alive(&mut self) -> bool {
        self.last_used.elapsed() < self.longest_silence || self.ping().await.is_ok()
    }

    /// Gives the session up: its connection passes to the next queue waiting for a
    /// place in the budget on the same database, if one waits, or is closed
    /// politely (COM_QUIT), without waiting long for it.
    pub async fn close(self) {
        if self.watch.abandoned.pending() {
            // A call still unanswered: the connection is killed as it drops.
            return;
        }
        self.database.give_up(self.conn, self._place).await;
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

    /// Takes a `[concurrency]` key slot for each of `items`: whether it got one for
    /// each (every one, without `[concurrency]`); those it did not are at their
    /// key's limit, not to be started.
    pub async fn take_keys(&mut self, items: &[Item]) -> Result<Vec<bool>, DbError> {
        let Some(keys) = &mut self.keys else {
            return Ok(vec![true; items.len()]);
        };
        let take = keys.take_all(&mut self.conn, items);
        answer(&self.watch, self.deadline, "the keys' named locks", take).await
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
        within("a ROLLBACK", QUICK_TIMEOUT, self.rollback())
            .await
            .is_ok()
    }

    /// COMMIT; a deadlock it answers is a certification conflict (a multi-primary
    /// cluster's: [`DbError::Certification`]).
    pub async fn commit(&mut self) -> Result<(), DbError> {
        let committed = self.simple("COMMIT", "the COMMIT").await;
        committed.map_err(DbError::at_commit)
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

    /// How long until the queue's next row falls due by time ([`crate::db::due`]):
    /// one read, its transaction rolled back, so the session holds nothing (no
    /// metadata lock either) while its worker waits.
    pub async fn next_due(
        &mut self,
        query: &DueQuery,
        queue: &str,
    ) -> Result<Option<Duration>, DbError> {
        let read = due::next_due(&mut self.conn, query, queue);
        let next = answer(&self.watch, self.deadline, "the next due time", read).await;
        self.touch();
        let ended = self.rollback().await;
        let next = next?;
        ended.map(|()| next)
    }

    /// `tables` as the binary log names them: each view replaced by the base tables
    /// behind it ([`crate::db::views`]); read in a transaction rolled back.
    pub async fn seen_through_views(
        &mut self,
        tables: &[TableRef],
    ) -> Result<views::SeenThrough, DbError> {
        let read = views::seen_through(&mut self.conn, tables);
        let seen = answer(&self.watch, self.deadline, "the tables behind views", read).await;
        self.touch();
        let ended = self.rollback().await;
        let seen = seen?;
        ended.map(|()| seen)
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
    let result = within(what, limit, call).await;
    if matches!(result, Err(DbError::Deadline { .. })) {
        return result;
    }
    if result.is_ok() || matches!(&result, Err(e) if e.server_code().is_some()) {
        watch.unanswered.answered();
        watch.abandoned.answered();
    }
    result
}

/// The server's `max_allowed_packet`.
pub async fn max_packet(conn: &mut Conn) -> Result<usize, mysql_async::Error> {
    let value: Option<u64> = conn.query_first("SELECT @@max_allowed_packet").await?;
    Ok(value.map_or(4 * 1024 * 1024, |v| v as usize))
}
