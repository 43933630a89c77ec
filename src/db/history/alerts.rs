//! `[alerts]`' state, kept in the queue's database so that a breach is told once
//! across every copy: `tableq_alerts`, one row per queue and alert — whether it is
//! firing, since when, and whether its message went out. A copy's look is one
//! transaction under that row's lock (`SELECT … FOR UPDATE`): it reads the queue
//! afresh, and only the copy whose transaction changes the row's state sends; a
//! send that failed is taken up by whichever copy next finds the row changed but
//! unsent, once the sender's time (`send_after`) has passed.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use crate::config::QueueConfig;
use crate::db::backlog::{read_backlog_on, Backlog};
use crate::db::connect::Database;
use crate::db::deadline::within;
use crate::db::error::DbError;

/// The alerts' state, one row per queue and alert.
pub const ALERTS: &str = "CREATE TABLE IF NOT EXISTS tableq_alerts (
  queue VARCHAR(191) NOT NULL,
  alert VARCHAR(64) NOT NULL COMMENT 'oldest_waiting, failed_per_minute or gave_up',
  firing TINYINT(1) NOT NULL DEFAULT 0,
  since DATETIME(6) NOT NULL COMMENT 'UTC: when it began firing, or cleared',
  flips INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'how many times its state changed',
  value DOUBLE NULL COMMENT 'what the copy saw when the state changed',
  limit_value DOUBLE NULL COMMENT 'the limit then',
  seen_by VARCHAR(255) NOT NULL DEFAULT '' COMMENT 'the host of the copy that saw it change',
  sent TINYINT(1) NOT NULL DEFAULT 1 COMMENT 'the message of this state went out (or needs none)',
  send_after DATETIME(6) NULL COMMENT 'UTC: no other copy sends it before (one is sending, or waits to try again)',
  send_attempts INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'failed sends of this state',
  last_error TEXT NULL COMMENT 'why the last send failed',
  PRIMARY KEY (queue, alert)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='tableq: [alerts], a row per queue and alert'";

/// What a look waits for, as its deadline says.
const LOOKING: &str = "the alerts' state";

/// The server's "table doesn't exist".
const ER_NO_SUCH_TABLE: u16 = 1146;

/// One alert's row, as a look found it (locked).
#[derive(Debug, Clone, PartialEq)]
pub struct AlertState {
    pub alert: String,
    pub firing: bool,
    /// How many times its state changed: names this state's message.
    pub flips: u64,
    /// The message of this state went out, or needs none.
    pub sent: bool,
    /// No copy holds the send (`send_after` passed): one unsent may be taken up.
    pub send_free: bool,
    pub send_attempts: u32,
    /// What was seen, and the limit, when the state changed.
    pub value: Option<f64>,
    pub limit: Option<f64>,
    pub seen_by: String,
    /// When the state changed: unix time, in seconds.
    pub since: f64,
}

/// A state change to write.
#[derive(Debug, Clone, PartialEq)]
pub struct Flip<'a> {
    pub alert: &'a str,
    pub firing: bool,
    pub value: f64,
    pub limit: f64,
    pub seen_by: &'a str,
    /// Its message must go out (false: nothing to tell, it is marked sent).
    pub tell: bool,
    /// How long the copy that flips it has to send, before another may.
    pub hold: Duration,
}

/// The connection a queue's alerts are looked at on, kept between looks.
pub struct AlertsTable {
    database: Database,
    conn: Option<Conn>,
    /// Every call's deadline: the queue's `database_timeout`.
    limit: Duration,
}

/// One look, in a transaction holding the queue's alert rows' locks; rolled back
/// by the server if it is dropped uncommitted with its connection.
pub struct Look<'a> {
    conn: &'a mut Conn,
    queue: &'a str,
    limit: Duration,
    /// The queue's alerts, locked, in the order asked.
    pub states: Vec<AlertState>,
}

impl AlertsTable {
    pub fn new(database: Database, limit: Duration) -> AlertsTable {
        AlertsTable {
            database,
            conn: None,
            limit,
        }
    }

    /// Forgets the connection after an error: the server rolls back what it held.
    pub fn forget(&mut self) {
        self.conn = None;
    }

    /// The connection: opened (READ COMMITTED, so each read sees what other copies
    /// committed) and the table created when it is not there.
    async fn conn(&mut self) -> Result<&mut Conn, DbError> {
        if self.conn.is_none() {
            let mut conn = self.database.connect().await?;
            let setup = "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED";
            within(LOOKING, self.limit, conn.query_drop(setup)).await?;
            // An account that may not create tables may still find it created.
            if let Err(refused) = within(LOOKING, self.limit, conn.query_drop(ALERTS)).await {
                let there = conn.query_drop("SELECT 1 FROM tableq_alerts LIMIT 0");
                within(LOOKING, self.limit, there)
                    .await
                    .map_err(|_| refused)?;
            }
            self.conn = Some(conn);
        }
        self.conn.as_mut().ok_or(DbError::Deadline {
            waiting_for: LOOKING,
            limit: self.limit,
        })
    }

    /// Begins a look at `queue`'s `alerts`: their rows made if missing, then locked.
    pub async fn look<'a>(
        &'a mut self,
        queue: &'a str,
        alerts: &[&str],
    ) -> Result<Look<'a>, DbError> {
        let limit = self.limit;
        let conn = self.conn().await?;
        within(LOOKING, limit, conn.query_drop("BEGIN")).await?;
        let mut found = lock_rows(conn, queue, limit).await?;
        let missing: Vec<&&str> = alerts
            .iter()
            .filter(|alert| !found.iter().any(|s| s.alert == **alert))
            .collect();
        if !missing.is_empty() {
            // A queue's first look: its rows made, then the look begun again.
            for alert in missing {
                let make = "INSERT IGNORE INTO tableq_alerts (queue, alert, since) \
                            VALUES (?, ?, UTC_TIMESTAMP(6))";
                within(LOOKING, limit, conn.exec_drop(make, (queue, alert))).await?;
            }
            within(LOOKING, limit, conn.query_drop("COMMIT")).await?;
            within(LOOKING, limit, conn.query_drop("BEGIN")).await?;
            found = lock_rows(conn, queue, limit).await?;
        }
        let states = alerts
            .iter()
            .filter_map(|alert| found.iter().find(|s| s.alert == *alert).cloned())
            .collect();
        Ok(Look {
            conn,
            queue,
            limit,
            states,
        })
    }

    /// The message of `alert`'s state number `flips` went out.
    pub async fn sent(&mut self, queue: &str, alert: &str, flips: u64) -> Result<(), DbError> {
        let limit = self.limit;
        let statement = "UPDATE tableq_alerts SET sent = 1, send_after = NULL, last_error = NULL \
                         WHERE queue = ? AND alert = ? AND flips = ?";
        let conn = self.conn().await?;
        within(
            LOOKING,
            limit,
            conn.exec_drop(statement, (queue, alert, flips)),
        )
        .await
    }

    /// The message of `alert`'s state number `flips` did not go out: any copy may
    /// try again after `wait`.
    pub async fn not_sent(
        &mut self,
        queue: &str,
        alert: &str,
        flips: u64,
        error: &str,
        wait: Duration,
    ) -> Result<(), DbError> {
        let limit = self.limit;
        let statement = "UPDATE tableq_alerts SET send_attempts = send_attempts + 1, \
                         last_error = ?, send_after = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND \
                         WHERE queue = ? AND alert = ? AND flips = ? AND sent = 0";
        let params = (error, micros(wait), queue, alert, flips);
        let conn = self.conn().await?;
        within(LOOKING, limit, conn.exec_drop(statement, params)).await
    }
}

impl Look<'_> {
    /// The queue's backlog, read now (after the lock: what the copy before this one
    /// saw is never newer than what this one sees).
    pub async fn backlog(&mut self, queue: &QueueConfig) -> Result<Backlog, DbError> {
        read_backlog_on(self.conn, queue).await
    }

    /// The items that failed in the queue's last complete minute, summed over every
    /// copy: the larger of the last two minutes, since a copy writes a minute's
    /// counts during the next one. `None` while there are no history tables.
    pub async fn failed_last_minute(&mut self) -> Result<Option<u64>, DbError> {
        let statement = "SELECT CAST(COALESCE(MAX(failed), 0) AS UNSIGNED) FROM ( \
             SELECT minute_at, SUM(failed) AS failed FROM tableq_history \
             WHERE queue = ? AND minute_at >= DATE_FORMAT(UTC_TIMESTAMP() - INTERVAL 2 MINUTE, \
             '%Y-%m-%d %H:%i:00') AND minute_at < DATE_FORMAT(UTC_TIMESTAMP(), '%Y-%m-%d %H:%i:00') \
             GROUP BY minute_at) AS minutes";
        let read = within(LOOKING, self.limit, async {
            self.conn
                .exec_first::<u64, _, _>(statement, (self.queue,))
                .await
        });
        match read.await {
            Ok(sum) => Ok(Some(sum.unwrap_or(0))),
            Err(e) if e.server_code() == Some(ER_NO_SUCH_TABLE) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Writes a state change; the new state, as the row now holds it.
    pub async fn flip(&mut self, flip: &Flip<'_>) -> Result<AlertState, DbError> {
        let statement = "UPDATE tableq_alerts SET firing = ?, since = UTC_TIMESTAMP(6), \
             flips = flips + 1, value = ?, limit_value = ?, seen_by = ?, sent = ?, \
             send_after = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, send_attempts = 0, \
             last_error = NULL WHERE queue = ? AND alert = ?";
        let params = (
            flip.firing,
            flip.value,
            flip.limit,
            flip.seen_by,
            !flip.tell,
            micros(flip.hold),
            self.queue,
            flip.alert,
        );
        within(LOOKING, self.limit, self.conn.exec_drop(statement, params)).await?;
        let now = lock_rows(self.conn, self.queue, self.limit).await?;
        now.into_iter()
            .find(|s| s.alert == flip.alert)
            .ok_or(DbError::Deadline {
                waiting_for: LOOKING,
                limit: self.limit,
            })
    }

    /// Takes up the unsent message of `alert`: no other copy sends it for `hold`.
    pub async fn take_up(&mut self, alert: &str, hold: Duration) -> Result<(), DbError> {
        let statement = "UPDATE tableq_alerts SET send_after = UTC_TIMESTAMP(6) + INTERVAL ? \
                         MICROSECOND WHERE queue = ? AND alert = ?";
        let params = (micros(hold), self.queue, alert);
        within(LOOKING, self.limit, self.conn.exec_drop(statement, params)).await
    }

    /// Ends the look: its changes committed, the locks let go.
    pub async fn commit(self) -> Result<(), DbError> {
        within(LOOKING, self.limit, self.conn.query_drop("COMMIT")).await
    }
}

/// Reads (and locks) `queue`'s alert rows.
async fn lock_rows(
    conn: &mut Conn,
    queue: &str,
    limit: Duration,
) -> Result<Vec<AlertState>, DbError> {
    type Row = (
        String,
        bool,
        u64,
        bool,
        bool,
        u32,
        Option<f64>,
        Option<f64>,
        String,
        i64,
    );
    let statement = "SELECT alert, firing, flips, sent, \
         send_after IS NULL OR send_after <= UTC_TIMESTAMP(6), send_attempts, value, \
         limit_value, seen_by, TIMESTAMPDIFF(MICROSECOND, '1970-01-01', since) \
         FROM tableq_alerts WHERE queue = ? ORDER BY alert FOR UPDATE";
    let rows: Vec<Row> = within(LOOKING, limit, conn.exec(statement, (queue,))).await?;
    let states = rows.into_iter().map(|row| AlertState {
        alert: row.0,
        firing: row.1,
        flips: row.2,
        sent: row.3,
        send_free: row.4,
        send_attempts: row.5,
        value: row.6,
        limit: row.7,
        seen_by: row.8,
        since: row.9 as f64 / 1e6,
    });
    Ok(states.collect())
}

fn micros(duration: Duration) -> u64 {
    duration.as_micros().min(u128::from(u64::MAX)) as u64
}
