//! `tableq_copies`: each copy's heartbeat, and the fleet as any copy sees it. Times
//! are the database's, so the hosts' clocks do not matter.

use mysql_async::prelude::Queryable;

use super::minutes::{unix_of, FROM_UNIX};
use super::HistoryConn;
use super::{Copy, CopyStatus};
use crate::db::DbError;

/// How often a copy says it is alive.
pub const HEARTBEAT_SECONDS: u64 = 10;
/// A copy silent for three heartbeats is gone.
pub const GONE_AFTER_SECONDS: u64 = 3 * HEARTBEAT_SECONDS;
/// A gone copy is listed for an hour, then trimmed.
pub const TRIMMED_AFTER_SECONDS: u64 = 3600;

/// What a copy says of itself at each heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heartbeat<'a> {
    pub copy: &'a Copy,
    pub version: &'a str,
    /// The queues it runs on this database.
    pub queues: &'a [String],
    pub in_flight: u64,
    /// Its console's address, if it serves one.
    pub console: Option<&'a str>,
}

/// Writes `beat`, now by the database's clock.
pub async fn beat(conn: &mut HistoryConn, beat: &Heartbeat<'_>) -> Result<(), DbError> {
    let queues = serde_json::to_string(beat.queues).unwrap_or_else(|_| "[]".into());
    let sql = format!(
        "INSERT INTO tableq_copies (copy, host, pid, version, started, last_seen, queues, \
         in_flight, console) VALUES (?, ?, ?, ?, {FROM_UNIX}, UTC_TIMESTAMP(6), ?, ?, ?) \
         ON DUPLICATE KEY UPDATE last_seen = UTC_TIMESTAMP(6), queues = VALUES(queues), \
         in_flight = VALUES(in_flight), console = VALUES(console), version = VALUES(version)"
    );
    let copy = beat.copy;
    let params: Vec<mysql_async::Value> = vec![
        copy.id().into(),
        copy.host.as_str().into(),
        copy.pid.into(),
        beat.version.into(),
        copy.started.into(),
        queues.into(),
        beat.in_flight.into(),
        beat.console.into(),
    ];
    Ok(conn.0.exec_drop(sql, params).await?)
}

/// The copy stopped: it is no longer listed.
pub async fn leave(conn: &mut HistoryConn, copy: &Copy) -> Result<(), DbError> {
    Ok(conn
        .0
        .exec_drop("DELETE FROM tableq_copies WHERE copy = ?", (copy.id(),))
        .await?)
}

/// Every copy that heartbeats here, the live ones first, then the gone.
pub async fn list(conn: &mut HistoryConn) -> Result<Vec<CopyStatus>, DbError> {
    let sql = format!(
        "SELECT host, pid, version, {}, {}, queues, in_flight, console, \
         last_seen < UTC_TIMESTAMP(6) - INTERVAL {GONE_AFTER_SECONDS} SECOND AS gone \
         FROM tableq_copies ORDER BY gone, host, pid",
        unix_of("started"),
        unix_of("last_seen")
    );
    type Row = (
        String,
        u32,
        String,
        u64,
        u64,
        String,
        u64,
        Option<String>,
        bool,
    );
    let rows: Vec<Row> = conn.0.query(sql).await?;
    Ok(rows
        .into_iter()
        .map(
            |(host, pid, version, started, last_seen, queues, in_flight, console, gone)| {
                CopyStatus {
                    host,
                    pid,
                    version,
                    started,
                    last_seen,
                    queues: serde_json::from_str(&queues).unwrap_or_default(),
                    in_flight,
                    console,
                    gone,
                }
            },
        )
        .collect())
}
