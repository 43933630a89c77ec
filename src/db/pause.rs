//! A queue paused by `tableq pause`, as the queue's database keeps it: one row per
//! paused queue in a table of tableq's own, [`TABLE`], in the database the queue's
//! URL names (created by the first `pause`). Every copy of tableq on every host
//! reads it there, so a pause reaches them all; the queue's own tables get nothing.
//! Times are the server's, in UTC, so the hosts' clocks do not matter.

use std::time::{Duration, SystemTime};

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use super::error::DbError;
use super::Database;

/// The table's name, in the queue's database.
pub const TABLE: &str = "tableq_paused";

/// Creates [`TABLE`] when it is not there.
pub const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS tableq_paused (
  queue VARCHAR(191) NOT NULL PRIMARY KEY COMMENT 'the queue''s name',
  paused_at DATETIME(6) NOT NULL COMMENT 'UTC',
  until_at DATETIME(6) NULL COMMENT 'UTC; NULL: until tableq resume',
  reason VARCHAR(1000) NOT NULL DEFAULT '',
  paused_by VARCHAR(255) NOT NULL DEFAULT '' COMMENT 'the login and client host that paused it'
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='tableq pause and resume: a row per paused queue'";

/// A pause in force (one whose `--for` ran out is none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paused {
    pub reason: String,
    /// Who paused it: the operator's login and host.
    pub by: String,
    pub since: SystemTime,
    /// When it runs out by itself; `None`: at `tableq resume`.
    pub until: Option<SystemTime>,
}

/// The queue's pause in force, if any. No table yet means no queue was ever paused
/// here. Under autocommit off this opens a transaction: the caller ends it.
pub async fn read(conn: &mut Conn, queue: &str) -> Result<Option<Paused>, mysql_async::Error> {
    let row: Option<(String, String, i64, Option<i64>)> = match conn
        .exec_first(
            "SELECT reason, paused_by, TIMESTAMPDIFF(MICROSECOND, paused_at, UTC_TIMESTAMP(6)), \
             TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), until_at) FROM tableq_paused \
             WHERE queue = ? AND (until_at IS NULL OR until_at > UTC_TIMESTAMP(6))",
            (queue,),
        )
        .await
    {
        Ok(row) => row,
        Err(mysql_async::Error::Server(e)) if e.code == ER_NO_SUCH_TABLE => None,
        Err(e) => return Err(e),
    };
    let now = SystemTime::now();
    Ok(row.map(|(reason, by, age, left)| Paused {
        reason,
        by,
        since: now - micros(age),
        until: left.map(|left| now + micros(left)),
    }))
}

/// Pauses `queue` (again: a new pause replaces the old), for `duration` or until
/// resumed, creating the table first if it is not there (so a user without CREATE
/// can pause once an administrator created it).
pub async fn pause(
    conn: &mut Conn,
    queue: &str,
    duration: Option<Duration>,
    reason: &str,
) -> Result<(), PauseError> {
    match write_pause(conn, queue, duration, reason).await {
        Err(mysql_async::Error::Server(e)) if e.code == ER_NO_SUCH_TABLE => {
            conn.query_drop(CREATE_TABLE)
                .await
                .map_err(|e| PauseError::new(e, Needs::Create))?;
            write_pause(conn, queue, duration, reason)
                .await
                .map_err(|e| PauseError::new(e, Needs::Write))
        }
        written => written.map_err(|e| PauseError::new(e, Needs::Write)),
    }
}

/// Connects to `database` (within `timeout`) and pauses `queue` there: what
/// `tableq pause` and the console do. The pause as written, read back (`None` if
/// that read failed: the pause is written all the same).
pub async fn pause_on(
    database: &Database,
    timeout: Duration,
    queue: &str,
    duration: Option<Duration>,
    reason: &str,
) -> Result<Option<Paused>, PauseError> {
    let mut conn = database
        .connect_within(timeout)
        .await
        .map_err(PauseError::Connect)?;
    let written = pause(&mut conn, queue, duration, reason).await;
    let written = naming_the_account(written, &mut conn).await;
    let paused = match written {
        Ok(()) => Ok(read(&mut conn, queue).await.ok().flatten()),
        Err(e) => Err(e),
    };
    let _ = conn.disconnect().await;
    paused
}

/// Connects to `database` (within `timeout`) and resumes `queue` there; false when
/// it was not paused. What `tableq resume` and the console do.
pub async fn resume_on(
    database: &Database,
    timeout: Duration,
    queue: &str,
) -> Result<bool, PauseError> {
    let mut conn = database
        .connect_within(timeout)
        .await
        .map_err(PauseError::Connect)?;
    let resumed = resume(&mut conn, queue).await;
    let resumed = naming_the_account(resumed, &mut conn).await;
    let _ = conn.disconnect().await;
    resumed
}

/// A refusal with the account to grant to, asked of the session it was refused to.
async fn naming_the_account<T>(
    result: Result<T, PauseError>,
    conn: &mut Conn,
) -> Result<T, PauseError> {
    match result {
        Err(PauseError::Denied { needs, error, .. }) => Err(PauseError::Denied {
            needs,
            error,
            account: super::account::current(conn).await.ok(),
        }),
        other => other,
    }
}

/// The longest pause kept as a time: past it, `--for` is a pause until resumed.
const LONGEST: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

async fn write_pause(
    conn: &mut Conn,
    queue: &str,
    duration: Option<Duration>,
    reason: &str,
) -> Result<(), mysql_async::Error> {
    let micros = duration
        .filter(|d| *d <= LONGEST)
        .map(|d| d.as_micros() as i64);
    conn.exec_drop(
        "INSERT INTO tableq_paused (queue, paused_at, until_at, reason, paused_by) \
         VALUES (?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, ?, USER()) \
         ON DUPLICATE KEY UPDATE paused_at = VALUES(paused_at), until_at = VALUES(until_at), \
         reason = VALUES(reason), paused_by = VALUES(paused_by)",
        (queue, micros, reason),
    )
    .await
}

/// Resumes `queue`; false when it was not paused (or its pause had run out).
pub async fn resume(conn: &mut Conn, queue: &str) -> Result<bool, PauseError> {
    let was_paused = read(conn, queue)
        .await
        .map_err(|e| PauseError::new(e, Needs::Write))?
        .is_some();
    match conn
        .exec_drop("DELETE FROM tableq_paused WHERE queue = ?", (queue,))
        .await
    {
        Ok(()) => Ok(was_paused),
        Err(mysql_async::Error::Server(e)) if e.code == ER_NO_SUCH_TABLE => Ok(false),
        Err(e) => Err(PauseError::new(e, Needs::Write)),
    }
}

/// The server's "table doesn't exist".
const ER_NO_SUCH_TABLE: u16 = 1146;
/// "No database selected": the URL names none.
const ER_NO_DB: u16 = 1046;

/// What a pause or resume needs of the user's grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// CREATE on the database, for the first pause there.
    Create,
    /// SELECT, INSERT, UPDATE and DELETE on the table.
    Write,
}

/// A pause or resume that could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PauseError {
    /// The user lacks a grant: which one, the server's words, and the account to
    /// grant it to (`'tableq'@'%'`, as the server names it), when it could be asked.
    #[error("{error}")]
    Denied {
        needs: Needs,
        error: DbError,
        account: Option<String>,
    },
    /// The database URL names no database to keep the table in.
    #[error("the database URL names no database: the pause is kept in a table of the queue's database, so the URL must name it ({0})")]
    NoDatabase(DbError),
    #[error("{0}")]
    Database(DbError),
    /// No session could be opened.
    #[error("cannot connect: {0}")]
    Connect(DbError),
}

impl PauseError {
    fn new(e: mysql_async::Error, needs: Needs) -> PauseError {
        PauseError::from_db(e.into(), needs)
    }

    fn from_db(error: DbError, needs: Needs) -> PauseError {
        match error.server_code() {
            Some(ER_NO_DB) => PauseError::NoDatabase(error),
            Some(code) if is_denied(code) => PauseError::Denied {
                needs,
                error,
                account: None,
            },
            _ => PauseError::Database(error),
        }
    }
}

/// Whether `code` is the server refusing a privilege (table, column or database).
pub fn is_denied(code: u16) -> bool {
    matches!(code, 1044 | 1142 | 1143)
}

fn micros(n: i64) -> Duration {
    Duration::from_micros(n.max(0) as u64)
}
