//! `tableq_schedules`: one row per schedule queue, its state — the due time it
//! waits for, the run holding it, what its runs came to. A schedule queue's select,
//! lease and outcome SQL are over this row ([`crate::config::queue::schedule`]);
//! here, what a session does before preparing them: the table created when
//! missing (else a refusal naming the DDL and the grant), the row put in, re-armed
//! when the expression changed, caught up after the daemon was down, and rows of
//! schedules gone for a day trimmed. And the rows read back, for `tableq
//! schedules`, `/metrics` and the status page.

use std::time::{Duration, SystemTime};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row, Value};

use crate::config::queue::schedule::{CatchUp, ScheduleConfig};
use crate::config::value::cron::{parse_utc_datetime, utc_datetime};
use crate::db::connect::QUICK_TIMEOUT;
use crate::db::deadline::within;
use crate::db::{Database, DbError};

/// The table's DDL, as `run` sends it and the reference shows it.
pub const DDL: &str = "CREATE TABLE IF NOT EXISTS tableq_schedules (
  name VARCHAR(191) NOT NULL PRIMARY KEY COMMENT 'the queue',
  schedule VARCHAR(255) NOT NULL COMMENT 'as the file writes it',
  due_at DATETIME(6) NOT NULL COMMENT 'UTC: the due time it waits for',
  lease_id VARCHAR(64) NULL,
  lease_until DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:01' COMMENT 'UTC: a run, or a retry''s wait, holds it until',
  attempts INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'failed tries of this due time',
  catch_up_until DATETIME(6) NULL COMMENT 'catch_up = all: due times up to this run one by one',
  runs BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'runs that succeeded',
  missed BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'due times that did not run',
  last_scheduled_at DATETIME(6) NULL,
  last_run_at DATETIME(6) NULL,
  last_finished_at DATETIME(6) NULL,
  last_outcome VARCHAR(16) NULL COMMENT 'done | failed',
  last_error TEXT NULL,
  last_success_at DATETIME(6) NULL,
  last_missed_at DATETIME(6) NULL,
  seen_at DATETIME(6) NOT NULL COMMENT 'UTC: a copy last ran or opened it'
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='tableq: schedules'";

/// A due time this far past when a session opens, with no run holding it, was
/// missed while no copy ran: `catch_up` decides what runs.
pub const BEHIND: Duration = Duration::from_secs(2);

/// MySQL's "table doesn't exist".
const NO_SUCH_TABLE: u16 = 1146;
/// MySQL's "command denied to user".
const DENIED: u16 = 1142;

/// Why a schedule queue cannot be readied.
#[derive(Debug, thiserror::Error)]
pub enum ReadyError {
    /// The table is missing and the account may not create it, or may not use it:
    /// the grant to give.
    #[error(
        "the table tableq_schedules is missing and this account may not create it, or may \
         not use it ({error}): \
         {grant} (without CREATE once an administrator created it with the DDL in docs, \
         reference/schedules: {DDL})"
    )]
    CannotCreate { error: DbError, grant: String },
    #[error(transparent)]
    Database(#[from] DbError),
}

/// Readies `name`'s row: the table created when missing, the row put in (due at
/// the first due time after now), re-armed when the expression changed, caught up
/// when behind with no run holding it; rows not seen for a day whose due time is a
/// day past are trimmed. Waits on no other schedule's run (its row locked by a
/// claim): the row is looked for with a plain read, locked with `SKIP LOCKED`.
/// Commits what it wrote (the session may run with autocommit off). An account
/// that may not create or use the table: [`ReadyError::CannotCreate`], with the
/// grant.
pub async fn ready(
    conn: &mut Conn,
    name: &str,
    schedule: &ScheduleConfig,
) -> Result<(), ReadyError> {
    match ready_in(conn, name, schedule).await {
        Err(ReadyError::Database(error)) if denied(&error) => {
            let account = crate::db::account::current(conn).await?;
            let database: Option<String> = conn
                .query_first("SELECT DATABASE()")
                .await
                .map_err(DbError::from)?;
            let grant = grant(&database.unwrap_or_default(), &account);
            Err(ReadyError::CannotCreate { error, grant })
        }
        readied => readied,
    }
}

async fn ready_in(
    conn: &mut Conn,
    name: &str,
    schedule: &ScheduleConfig,
) -> Result<(), ReadyError> {
    create_if_missing(conn).await?;
    begin(conn).await?;
    let readied = ready_row(conn, name, schedule).await;
    end(conn, readied).await?;
    begin(conn).await?;
    let trimmed = trim(conn).await;
    Ok(end(conn, trimmed).await?)
}

/// After a pause: the due times that passed while paused are missed (none runs),
/// unless a run holds the row. Commits what it wrote.
pub async fn skip_missed(
    conn: &mut Conn,
    name: &str,
    schedule: &ScheduleConfig,
) -> Result<(), DbError> {
    begin(conn).await?;
    let skipped = match database_now(conn).await {
        Ok(now) => adjust(conn, name, schedule, now, CatchUp::None).await,
        Err(e) => Err(e),
    };
    end(conn, skipped).await
}

/// Whether the server refused `error` for want of a grant.
fn denied(error: &DbError) -> bool {
    error.server_code() == Some(DENIED) || error.is_access_denied()
}

/// Starts a transaction of its own.
async fn begin(conn: &mut Conn) -> Result<(), DbError> {
    Ok(conn.query_drop("START TRANSACTION").await?)
}

/// Ends the transaction: committed if what ran in it (`done`) succeeded.
async fn end(conn: &mut Conn, done: Result<(), DbError>) -> Result<(), DbError> {
    let end = if done.is_ok() { "COMMIT" } else { "ROLLBACK" };
    conn.query_drop(end).await?;
    done
}

/// The row put in when missing (a plain read: a claim's lock on it is not waited
/// for), else adjusted.
async fn ready_row(conn: &mut Conn, name: &str, schedule: &ScheduleConfig) -> Result<(), DbError> {
    let now = database_now(conn).await?;
    let found: Option<u8> = conn
        .exec_first("SELECT 1 FROM tableq_schedules WHERE name = ?", (name,))
        .await?;
    match found {
        None => put_in(conn, name, schedule, now).await,
        Some(_) => adjust(conn, name, schedule, now, schedule.catch_up).await,
    }
}

/// The row, due at the first due time after `now` (another copy's insert first is
/// no error).
async fn put_in(
    conn: &mut Conn,
    name: &str,
    schedule: &ScheduleConfig,
    now: SystemTime,
) -> Result<(), DbError> {
    let first = schedule.when.next_after(now).unwrap_or(now);
    conn.exec_drop(
        "INSERT IGNORE INTO tableq_schedules (name, schedule, due_at, seen_at) \
         VALUES (?, ?, ?, UTC_TIMESTAMP(6))",
        (name, schedule.stored(), utc_datetime(first)),
    )
    .await?;
    Ok(())
}

/// Rows of schedules no copy has seen for a day, a day past their due time, that
/// no run holds: deleted, those locked by a claim left alone.
async fn trim(conn: &mut Conn) -> Result<(), DbError> {
    let gone: Vec<String> = conn
        .query(
            "SELECT name FROM tableq_schedules WHERE seen_at < UTC_TIMESTAMP(6) - INTERVAL 1 DAY \
             AND due_at < UTC_TIMESTAMP(6) - INTERVAL 1 DAY AND lease_until < UTC_TIMESTAMP(6) \
             FOR UPDATE SKIP LOCKED",
        )
        .await?;
    for name in gone {
        conn.exec_drop("DELETE FROM tableq_schedules WHERE name = ?", (name,))
            .await?;
    }
    Ok(())
}

/// For the background count of a running schedule queue: the row put back if it
/// is gone (deleted by hand, or trimmed), said once each time; else its `seen_at`
/// refreshed once an hour, so that a schedule paused or idle for a day is not
/// taken for one whose file is gone.
pub async fn keep(
    conn: &mut Conn,
    name: &str,
    schedule: &ScheduleConfig,
    found: bool,
) -> Result<(), DbError> {
    // In a transaction of its own, committed: the connection may be a session
    // with autocommit off, which must hold no lock on the row after.
    if found {
        // A plain read first: the update (which could wait for a run's lock on the
        // row) is sent once an hour, not at every count.
        let stale: Option<u8> = conn
            .exec_first(
                "SELECT 1 FROM tableq_schedules WHERE name = ? \
                 AND seen_at < UTC_TIMESTAMP(6) - INTERVAL 1 HOUR",
                (name,),
            )
            .await?;
        if stale.is_none() {
            return Ok(());
        }
        begin(conn).await?;
        let seen = conn
            .exec_drop(
                "UPDATE tableq_schedules SET seen_at = UTC_TIMESTAMP(6) WHERE name = ? \
                 AND seen_at < UTC_TIMESTAMP(6) - INTERVAL 1 HOUR",
                (name,),
            )
            .await
            .map_err(DbError::from);
        return end(conn, seen).await;
    }
    tracing::warn!(queue = %name, "the schedule's row in tableq_schedules is gone \
        (deleted, or trimmed): put back, due at the next due time");
    let now = database_now(conn).await?;
    begin(conn).await?;
    let put = put_in(conn, name, schedule, now).await;
    end(conn, put).await
}

async fn create_if_missing(conn: &mut Conn) -> Result<(), DbError> {
    let Err(missing) = conn
        .query_drop("SELECT 1 FROM tableq_schedules LIMIT 0")
        .await
    else {
        return Ok(());
    };
    let missing = DbError::from(missing);
    if missing.server_code() != Some(NO_SUCH_TABLE) {
        return Err(missing);
    }
    conn.query_drop(DDL).await.map_err(DbError::from)
}

/// The grant a schedule queue's account needs on the table.
pub fn grant(database: &str, account: &str) -> String {
    format!(
        "GRANT CREATE, SELECT, INSERT, UPDATE, DELETE ON `{database}`.tableq_schedules TO {account};"
    )
}

/// The server's clock, in UTC.
async fn database_now(conn: &mut Conn) -> Result<SystemTime, DbError> {
    let now: Option<String> = conn
        .query_first("SELECT CAST(UTC_TIMESTAMP(6) AS CHAR)")
        .await?;
    Ok(now
        .as_deref()
        .and_then(parse_utc_datetime)
        .unwrap_or_else(SystemTime::now))
}

/// In a transaction: an existing row re-armed or caught up (as `catch_up` says),
/// unless a run holds it.
async fn adjust(
    conn: &mut Conn,
    name: &str,
    schedule: &ScheduleConfig,
    now: SystemTime,
    catch_up: CatchUp,
) -> Result<(), DbError> {
    let row: Option<(String, String, String)> = conn
        .exec_first(
            "SELECT schedule, CAST(due_at AS CHAR), CAST(lease_until AS CHAR) \
             FROM tableq_schedules WHERE name = ? FOR UPDATE SKIP LOCKED",
            (name,),
        )
        .await?;
    let Some((text, due_at, lease_until)) = row else {
        return Ok(());
    };
    let time = |t: &str| parse_utc_datetime(t).unwrap_or(now);
    let (due_at, lease_until) = (time(&due_at), time(&lease_until));
    let first = schedule.when.next_after(now).unwrap_or(now);
    let held = lease_until > now;
    let set = if held {
        None
    } else if text != schedule.stored() {
        Some((first, 0, None))
    } else if due_at + BEHIND < now {
        Some(caught_up(schedule, catch_up, due_at, now, first))
    } else {
        None
    };
    let (due, missed, until) = match set {
        Some(set) => set,
        None => {
            conn.exec_drop(
                "UPDATE tableq_schedules SET seen_at = UTC_TIMESTAMP(6) WHERE name = ?",
                (name,),
            )
            .await?;
            return Ok(());
        }
    };
    conn.exec_drop(
        "UPDATE tableq_schedules SET schedule = ?, due_at = ?, attempts = 0, \
         catch_up_until = ?, missed = missed + ?, \
         last_missed_at = IF(? > 0, UTC_TIMESTAMP(6), last_missed_at), \
         seen_at = UTC_TIMESTAMP(6) WHERE name = ?",
        (
            schedule.stored(),
            utc_datetime(due),
            until.map(utc_datetime),
            missed,
            missed,
            name,
        ),
    )
    .await?;
    Ok(())
}

/// A schedule behind since `due_at` (a due time not run): the due time to run
/// next, the due times given up as missed, and how far a catch-up runs.
fn caught_up(
    schedule: &ScheduleConfig,
    catch_up: CatchUp,
    due_at: SystemTime,
    now: SystemTime,
    first: SystemTime,
) -> (SystemTime, u64, Option<SystemTime>) {
    // The due times behind: `due_at` itself, and those after it up to now (a
    // count that stops at a hundred thousand); the latest found from now back.
    let (after, _) = schedule.when.between(due_at, now).unwrap_or((0, None));
    let behind = after + 1;
    let when = &schedule.when;
    let latest = when
        .latest_until(now)
        .filter(|l| *l > due_at)
        .unwrap_or(due_at);
    match catch_up {
        CatchUp::None => (first, behind, None),
        CatchUp::One => (latest, behind - 1, None),
        CatchUp::All => {
            let keep = u64::from(schedule.catch_up_max).min(behind);
            let mut start = latest;
            for _ in 1..keep {
                match when.latest_until(start - Duration::from_micros(1)) {
                    Some(earlier) if earlier >= due_at => start = earlier,
                    _ => break,
                }
            }
            (start, behind - keep, Some(now))
        }
    }
}

/// A schedule's row, as `tableq schedules`, `/metrics` and the status page show it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ScheduleRow {
    pub name: String,
    pub schedule: String,
    /// The due time it waits for (UTC).
    pub due_at: String,
    /// A run holds it now (a lease: an action outside the database).
    pub running: bool,
    /// Its due time has passed (on the database's clock) and no lease holds it:
    /// a copy is claiming it, an SQL action runs it in its transaction, or no copy
    /// runs the queue.
    pub due: bool,
    pub runs: u64,
    pub missed: u64,
    pub last_scheduled_at: Option<String>,
    pub last_run_at: Option<String>,
    pub last_finished_at: Option<String>,
    pub last_outcome: Option<String>,
    pub last_error: Option<String>,
    pub last_success_at: Option<String>,
    pub last_missed_at: Option<String>,
    /// Failed tries of the due time it waits for.
    pub attempts: u32,
}

impl ScheduleRow {
    /// The last success as unix seconds, for `/metrics`.
    pub fn last_success_unix(&self) -> Option<f64> {
        unix_seconds(self.last_success_at.as_deref()?)
    }

    /// The due time it waits for as unix seconds, for `/metrics`.
    pub fn due_unix(&self) -> Option<f64> {
        unix_seconds(&self.due_at)
    }
}

/// A UTC `DATETIME(6)` as the table holds it, in seconds since the epoch.
fn unix_seconds(text: &str) -> Option<f64> {
    let at = parse_utc_datetime(text)?;
    Some(at.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs_f64())
}

/// The rows of `names`, in name order; none when the table is missing.
pub async fn read(conn: &mut Conn, names: &[&str]) -> Result<Vec<ScheduleRow>, DbError> {
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let marks = vec!["?"; names.len()].join(", ");
    let text = |c: &str| format!("CAST({c} AS CHAR)");
    let sql = format!(
        "SELECT name, schedule, {}, \
         lease_id IS NOT NULL AND lease_until > UTC_TIMESTAMP(6), runs, missed, {}, {}, {}, \
         last_outcome, last_error, {}, {}, attempts, \
         due_at <= UTC_TIMESTAMP(6) AND lease_until <= UTC_TIMESTAMP(6) \
         FROM tableq_schedules \
         WHERE name IN ({marks}) ORDER BY name",
        text("due_at"),
        text("last_scheduled_at"),
        text("last_run_at"),
        text("last_finished_at"),
        text("last_success_at"),
        text("last_missed_at"),
    );
    let rows: Vec<Row> = match conn.exec(sql, names.to_vec()).await {
        Ok(rows) => rows,
        Err(e) => {
            let e = DbError::from(e);
            return match e.server_code() {
                Some(NO_SUCH_TABLE) => Ok(Vec::new()),
                _ => Err(e),
            };
        }
    };
    Ok(rows.into_iter().map(schedule_row).collect())
}

/// What `read_from` waits for, as its deadline says.
const READING: &str = "the schedules' rows";

/// The rows of `names` on `database`, read on a connection of its own (each step
/// within `limit`): for `tableq schedules`.
pub async fn read_from(
    database: &Database,
    names: &[&str],
    limit: Duration,
) -> Result<Vec<ScheduleRow>, DbError> {
    let mut conn = database.connect_within(limit).await?;
    let rows = within(READING, limit, read(&mut conn, names)).await;
    let _ = tokio::time::timeout(QUICK_TIMEOUT, conn.disconnect()).await;
    rows
}

fn schedule_row(mut row: Row) -> ScheduleRow {
    let mut take = |i: usize| row.take::<Value, _>(i).unwrap_or(Value::NULL);
    let running = number(take(3)) == 1;
    ScheduleRow {
        name: text(take(0)).unwrap_or_default(),
        schedule: text(take(1)).unwrap_or_default(),
        due_at: text(take(2)).unwrap_or_default(),
        running,
        runs: number(take(4)),
        missed: number(take(5)),
        last_scheduled_at: text(take(6)),
        last_run_at: text(take(7)),
        last_finished_at: text(take(8)),
        last_outcome: text(take(9)),
        last_error: text(take(10)),
        last_success_at: text(take(11)),
        last_missed_at: text(take(12)),
        attempts: u32::try_from(number(take(13))).unwrap_or(u32::MAX),
        due: number(take(14)) == 1 && !running,
    }
}

/// A text column's value (`NULL`: none).
fn text(value: Value) -> Option<String> {
    match value {
        Value::NULL => None,
        value => mysql_async::from_value_opt::<String>(value).ok(),
    }
}

/// A number column's value, as the binary protocol sends it (an integer, not text);
/// 0 for `NULL`.
fn number(value: Value) -> u64 {
    match value {
        Value::Int(n) => u64::try_from(n).unwrap_or(0),
        Value::UInt(n) => n,
        Value::Bytes(bytes) => String::from_utf8_lossy(&bytes).parse().unwrap_or(0),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::queue::schedule::When;
    use std::time::UNIX_EPOCH;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn every(period: u64, catch_up: CatchUp) -> ScheduleConfig {
        ScheduleConfig {
            text: format!("every {period}s"),
            when: When::Every(period),
            catch_up,
            catch_up_max: 3,
            overlap: false,
        }
    }

    #[test]
    fn catching_up_after_a_stop_runs_none_the_latest_or_the_last_few() {
        // Due at 100; down until 165: 100, 110, …, 160 were missed (7 due times).
        let (due, now, first) = (at(100), at(165), at(170));
        let none = caught_up(&every(10, CatchUp::None), CatchUp::None, due, now, first);
        assert_eq!(none, (at(170), 7, None));
        let one = caught_up(&every(10, CatchUp::One), CatchUp::One, due, now, first);
        assert_eq!(one, (at(160), 6, None), "the latest runs, once");
        let all = caught_up(&every(10, CatchUp::All), CatchUp::All, due, now, first);
        assert_eq!(
            all,
            (at(140), 4, Some(now)),
            "140, 150 and 160 run, in turn"
        );
    }

    #[test]
    fn the_reference_shows_the_ddl() {
        let reference = include_str!("../../docs/src/reference/schedules.md");
        assert!(
            reference.contains(DDL),
            "the reference's DDL differs from schedules.rs"
        );
    }
}
