//! The console's memory, kept in the queue's database so that every copy reads the
//! same history and a restart loses none: tables of tableq's own, `tableq_*`,
//! created by `run` when its account may (see [`tables`]).
//!
//! - [`tables`]: their DDL, created at start, and the grant a refusal asks for.
//! - [`minutes`]: per queue, per minute, per copy — counts, the action times' sketch,
//!   backlog and lag — written once a minute; read back merged over every copy.
//! - [`attempts`]: each failed attempt of an item, and the searches over them.
//! - [`copies`]: each copy's heartbeat, and the fleet as every copy sees it.
//! - [`trim`]: the retention, kept by one copy at a time under a row lock.

pub mod attempts;
pub mod copies;
pub mod minutes;
pub mod tables;
pub mod trim;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mysql_async::Conn;
use serde::Serialize;

use super::{Database, DbError};

/// A session on a database's history tables.
pub struct HistoryConn(Conn);

impl HistoryConn {
    /// Connects to `database` within `within`.
    pub async fn open(database: &Database, within: Duration) -> Result<HistoryConn, DbError> {
        Ok(HistoryConn(database.connect_within(within).await?))
    }

    /// The driver's session, for `db`'s other readers (`db::failed`).
    pub fn conn(&mut self) -> &mut Conn {
        &mut self.0
    }

    pub async fn close(self) {
        let _ = self.0.disconnect().await;
    }
}

/// The server's "no such table" (a history not kept here yet).
pub const NO_SUCH_TABLE: u16 = 1146;

/// This process, as the history tables name it: host, process id, and when it
/// started (a pid is reused after a restart; the start time tells the copies apart).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copy {
    pub host: String,
    pub pid: u32,
    /// Unix time, in seconds.
    pub started: u64,
}

impl Copy {
    /// This process, started now.
    pub fn this_process(host: String) -> Copy {
        Copy {
            host,
            pid: std::process::id(),
            started: unix_seconds(SystemTime::now()),
        }
    }

    /// `host:pid:started`, the tables' `copy` column.
    pub fn id(&self) -> String {
        format!("{}:{}:{}", self.host, self.pid, self.started)
    }
}

/// One bucket of a queue's history over every copy, as `/api/queues/{q}/history`
/// answers: counts summed, backlog and lag the largest any copy saw, the action
/// time's percentiles merged from the copies' sketches.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Bucket {
    /// When the bucket begins: unix time, in seconds.
    pub at: u64,
    pub done: u64,
    pub failed: u64,
    pub gave_up: u64,
    pub returned: u64,
    pub held_back: u64,
    /// `null` when no action finished within it.
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    /// Waiting rows at the end of a minute, the largest any copy counted.
    pub backlog: Option<u64>,
    /// The oldest waiting row's age at the end of a minute, the largest seen.
    pub lag_s: Option<f64>,
}

/// One failed attempt of an item, as `/api/queues/{q}/attempts` answers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Attempt {
    /// Its place among the recorded attempts of its key: 1, 2, …
    pub attempt: u64,
    /// Unix time, in seconds (with microseconds).
    pub at: f64,
    /// The copy that ran it: `host:pid`.
    pub copy: String,
    /// How long the action ran.
    pub ms: u64,
    pub status: Option<i64>,
    pub error: String,
    /// Its failure outcome left the row in `[failed] select`.
    pub gave_up: bool,
}

/// One copy of tableq, as `/api/copies` answers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CopyStatus {
    pub host: String,
    pub pid: u32,
    pub version: String,
    /// Unix time, in seconds.
    pub started: u64,
    pub last_seen: u64,
    pub queues: Vec<String>,
    pub in_flight: u64,
    /// Its console's address, if it serves one.
    pub console: Option<String>,
    /// Silent for three heartbeats.
    pub gone: bool,
}

pub(crate) fn unix_seconds(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs()
}
