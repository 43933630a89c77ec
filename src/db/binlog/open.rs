//! Opening a binary log stream: the checks a replica's connection passes (the log
//! on, in row or mixed format, the grants to read it), the current end of the log,
//! then the dump request — as a replica that never harms its primary: a random
//! server id in a high range, no semi-sync acknowledgement, heartbeats so that a
//! silent stream is noticed.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::BinlogStreamRequest;
use mysql_async::{Conn, Row};

use super::reader::BinlogReader;
use crate::db::{Database, DbError};

/// Replica server ids are drawn from here: far above the ids people give their
/// servers, so one never collides with a real replica.
const SERVER_IDS: std::ops::Range<u32> = 0x8000_0000..0xFFFF_FFF0;

/// Why the server will not stream its binary log to this user: lasting until someone
/// changes the server or the grants.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BinlogUnavailable {
    #[error("the server writes no binary log (log_bin is off): start it with --log-bin (and binlog_format=ROW)")]
    LogOff,
    #[error(
        "the binary log is statement-based (binlog_format={0}): set binlog_format=ROW (or MIXED)"
    )]
    StatementFormat(String),
    #[error(
        "user {account} may not read the binary log ({reason}): GRANT {grants} ON *.* TO {account}"
    )]
    NotGranted {
        /// As the server names it, quoted for a GRANT: `'tableq'@'%'`.
        account: String,
        grants: &'static str,
        reason: String,
    },
}

/// Why no stream opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenFailure {
    #[error(transparent)]
    Unavailable(#[from] BinlogUnavailable),
    /// The server could not be reached, or answered with another error: try again.
    #[error(transparent)]
    Failed(#[from] DbError),
    /// The dump was asked for, and the stream ended before its first event.
    #[error(transparent)]
    Ended(#[from] super::StreamLost),
}

/// Where the log ends now, and what the server is.
struct LogEnd {
    file: Vec<u8>,
    position: u64,
}

/// Opens a stream of `database`'s binary log from its current end, with the server
/// sending a heartbeat after `heartbeat` of silence.
pub async fn open(database: &Database, heartbeat: Duration) -> Result<BinlogReader, OpenFailure> {
    let mut conn = database.connect().await?;
    let mariadb = is_mariadb(&mut conn).await?;
    let grants = if mariadb {
        "REPLICATION SLAVE, BINLOG MONITOR"
    } else {
        "REPLICATION SLAVE, REPLICATION CLIENT"
    };
    // Asked before it is needed: a refused dump request ends the connection.
    let account = crate::db::account::current(&mut conn).await?;
    let refused = |e: DbError| match e.is_access_denied() || is_missing_privilege(&e) {
        true => OpenFailure::Unavailable(BinlogUnavailable::NotGranted {
            account: account.clone(),
            grants,
            reason: e.to_string(),
        }),
        false => OpenFailure::Failed(e),
    };
    check_format(&mut conn).await?;
    let end = log_end(&mut conn).await.map_err(refused)?;
    let Some(end) = end else {
        return Err(BinlogUnavailable::LogOff.into());
    };
    let period = heartbeat.as_nanos().min(u64::MAX as u128) as u64;
    // MySQL 8.4 reads the second name, older servers the first.
    let every =
        format!("SET @master_heartbeat_period = {period}, @source_heartbeat_period = {period}");
    query(&mut conn, &every).await?;
    let server_id = fastrand::u32(SERVER_IDS);
    let request = BinlogStreamRequest::new(server_id)
        .with_filename(&end.file)
        .with_pos(end.position);
    let stream = conn
        .get_binlog_stream(request)
        .await
        .map_err(|e| refused(DbError::from(e)))?;
    let mut reader = BinlogReader::new(stream, heartbeat);
    reader.started().await?;
    Ok(reader)
}

async fn query(conn: &mut Conn, sql: &str) -> Result<(), DbError> {
    Ok(conn.query_drop(sql).await?)
}

async fn is_mariadb(conn: &mut Conn) -> Result<bool, DbError> {
    let version: Option<String> = conn.query_first("SELECT VERSION()").await?;
    Ok(version
        .unwrap_or_default()
        .to_ascii_lowercase()
        .contains("mariadb"))
}

/// The log must be on and carry row images (ROW, or MIXED for most statements).
async fn check_format(conn: &mut Conn) -> Result<(), OpenFailure> {
    let row: Option<(i64, String)> = conn
        .query_first("SELECT @@log_bin, @@binlog_format")
        .await
        .map_err(DbError::from)?;
    let Some((log_bin, format)) = row else {
        return Err(BinlogUnavailable::LogOff.into());
    };
    if log_bin == 0 {
        return Err(BinlogUnavailable::LogOff.into());
    }
    if format.eq_ignore_ascii_case("STATEMENT") {
        return Err(BinlogUnavailable::StatementFormat(format).into());
    }
    Ok(())
}

/// `SHOW MASTER STATUS`, or `SHOW BINARY LOG STATUS` where the old statement is gone
/// (MySQL 8.4). `None` when the server writes no log.
async fn log_end(conn: &mut Conn) -> Result<Option<LogEnd>, DbError> {
    let rows: Vec<Row> = match conn.query("SHOW MASTER STATUS").await {
        Ok(rows) => rows,
        Err(e) if crate::db::error::is_statement_error(&e) && !is_denied(&e) => {
            conn.query("SHOW BINARY LOG STATUS").await?
        }
        Err(e) => return Err(e.into()),
    };
    let Some(row) = rows.into_iter().next() else {
        return Ok(None);
    };
    let file: Option<Vec<u8>> = row.get(0);
    let position: Option<u64> = row.get(1);
    Ok(file
        .zip(position)
        .map(|(file, position)| LogEnd { file, position }))
}

/// ER_SPECIFIC_ACCESS_DENIED_ERROR (1227) and ER_ACCESS_DENIED_ERROR (1045).
fn is_denied(e: &mysql_async::Error) -> bool {
    matches!(e, mysql_async::Error::Server(s) if s.code == 1227 || s.code == 1045)
}

fn is_missing_privilege(e: &DbError) -> bool {
    matches!(e.server_code(), Some(1227 | 1045 | 1142))
}

/// Why `database` will not stream its binary log to its user (`Ok(None)`: it will).
/// Opens a stream for a moment to know: the replication grant shows only then.
pub async fn refusal(database: &Database) -> Result<Option<BinlogUnavailable>, DbError> {
    match open(database, Duration::from_secs(5)).await {
        Ok(reader) => {
            reader.close().await;
            Ok(None)
        }
        Err(OpenFailure::Unavailable(why)) => Ok(Some(why)),
        Err(OpenFailure::Failed(e)) => Err(e),
        Err(OpenFailure::Ended(lost)) => Err(DbError::Driver(mysql_async::Error::Other(
            lost.to_string().into(),
        ))),
    }
}

/// Each database's answer to [`refusal`], asked once: `Ok(None)` it streams; `Err`
/// it could not be asked (unreachable).
#[derive(Default)]
pub struct Verdicts(std::collections::BTreeMap<String, Result<Option<BinlogUnavailable>, String>>);

impl Verdicts {
    pub async fn of(&mut self, database: &Database) -> Result<Option<BinlogUnavailable>, String> {
        let key = database.to_string();
        if let Some(known) = self.0.get(&key) {
            return known.clone();
        }
        let verdict = refusal(database).await.map_err(|e| e.to_string());
        self.0.insert(key, verdict.clone());
        verdict
    }
}
