//! `tableq_history`: each copy writes its queues' minutes, once a minute, and any
//! copy reads them back merged into the buckets a chart shows.

use mysql_async::prelude::Queryable;
use mysql_async::{Params, Value};

use super::Bucket;
use super::HistoryConn;
use crate::db::DbError;
use crate::sketch::merged_quantiles;

/// What one copy did in one minute for one queue.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MinuteRow {
    pub queue: String,
    /// Minutes since the epoch.
    pub minute: u64,
    pub done: u64,
    pub failed: u64,
    pub returned: u64,
    pub held_back: u64,
    /// The action times' sketch (`Recent::minute_json`).
    pub sketch: Option<String>,
    pub backlog: Option<u64>,
    pub lag_s: Option<f64>,
}

/// A UTC `DATETIME` from unix seconds, whatever the session's time zone.
pub(super) const FROM_UNIX: &str = "TIMESTAMPADD(SECOND, ?, '1970-01-01 00:00:00')";
/// Unix seconds from a UTC `DATETIME` column `c`, whatever the session's time zone.
pub(super) fn unix_of(column: &str) -> String {
    format!("TIMESTAMPDIFF(SECOND, '1970-01-01 00:00:00', {column})")
}

/// Writes `rows` as `copy`'s, replacing what it wrote of the same minutes before
/// (a minute is written again at shutdown, and after a failed write). `gave_up`
/// is left as [`add_gave_up`] counted it.
pub async fn write(conn: &mut HistoryConn, copy: &str, rows: &[MinuteRow]) -> Result<(), DbError> {
    if rows.is_empty() {
        return Ok(());
    }
    let one = format!("(?, {FROM_UNIX}, ?, ?, ?, ?, ?, ?, ?, ?)");
    let sql = format!(
        "INSERT INTO tableq_history (queue, minute_at, copy, done, failed, returned, \
         held_back, action_sketch, backlog, lag_s) VALUES {} ON DUPLICATE KEY UPDATE \
         done = VALUES(done), failed = VALUES(failed), returned = VALUES(returned), \
         held_back = VALUES(held_back), action_sketch = VALUES(action_sketch), \
         backlog = VALUES(backlog), lag_s = VALUES(lag_s)",
        vec![one; rows.len()].join(", ")
    );
    let mut params: Vec<Value> = Vec::with_capacity(rows.len() * 10);
    for row in rows {
        params.extend([
            Value::from(row.queue.as_str()),
            Value::from(row.minute * 60),
            Value::from(copy),
            Value::from(row.done),
            Value::from(row.failed),
            Value::from(row.returned),
            Value::from(row.held_back),
            Value::from(row.sketch.as_deref()),
            Value::from(row.backlog),
            Value::from(row.lag_s),
        ]);
    }
    Ok(conn.0.exec_drop(sql, Params::Positional(params)).await?)
}

/// Counts an item of `queue` that gave up in `copy`'s `minute`.
pub async fn add_gave_up(
    conn: &mut HistoryConn,
    copy: &str,
    queue: &str,
    minute: u64,
) -> Result<(), DbError> {
    let sql = format!(
        "INSERT INTO tableq_history (queue, minute_at, copy, gave_up) \
         VALUES (?, {FROM_UNIX}, ?, 1) ON DUPLICATE KEY UPDATE gave_up = gave_up + 1"
    );
    Ok(conn.0.exec_drop(sql, (queue, minute * 60, copy)).await?)
}

/// How far back a history reaches, and the width of its buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Since {
    /// The last hour, minute by minute.
    Hour,
    /// The last day, in 5 minutes.
    Day,
    /// The last week, hour by hour.
    Week,
}

impl Since {
    /// `1h`, `24h` or `7d`.
    pub fn parse(text: &str) -> Option<Since> {
        match text {
            "1h" => Some(Since::Hour),
            "24h" | "1d" => Some(Since::Day),
            "7d" => Some(Since::Week),
            _ => None,
        }
    }

    /// The first minute of its first bucket, when minute `now` is in its last.
    pub fn first(self, now: u64) -> u64 {
        let (span, step) = self.minutes();
        (now / step * step + step).saturating_sub(span)
    }

    /// The minutes it covers, and each bucket's.
    pub fn minutes(self) -> (u64, u64) {
        match self {
            Since::Hour => (60, 1),
            Since::Day => (24 * 60, 5),
            Since::Week => (7 * 24 * 60, 60),
        }
    }
}

type Read = (
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    Option<String>,
    Option<u64>,
    Option<f64>,
);

/// `queue`'s history over every copy, up to minute `now` (minutes since the
/// epoch), one bucket per step, the empty ones included.
pub async fn read(
    conn: &mut HistoryConn,
    queue: &str,
    since: Since,
    now: u64,
) -> Result<Vec<Bucket>, DbError> {
    let first = since.first(now);
    let step = since.minutes().1;
    let sql = format!(
        "SELECT {} DIV 60, done, failed, gave_up, returned, held_back, action_sketch, \
         backlog, lag_s FROM tableq_history WHERE queue = ? AND minute_at >= {FROM_UNIX} \
         ORDER BY minute_at",
        unix_of("minute_at")
    );
    let rows: Vec<Read> = conn.0.exec(sql, (queue, first * 60)).await?;
    Ok(buckets(&rows, first, now, step))
}

/// The buckets of `since` up to minute `now`, all empty: no copy kept a history.
pub fn empty(since: Since, now: u64) -> Vec<Bucket> {
    buckets(&[], since.first(now), now, since.minutes().1)
}

/// The rows, each in its bucket: counts summed, backlog and lag the largest, the
/// sketches merged.
fn buckets(rows: &[Read], first: u64, now: u64, step: u64) -> Vec<Bucket> {
    let count = (now - first) / step + 1;
    let mut sketches: Vec<Vec<&str>> = vec![Vec::new(); count as usize];
    let mut out: Vec<Bucket> = (0..count)
        .map(|n| Bucket {
            at: (first + n * step) * 60,
            ..Bucket::default()
        })
        .collect();
    for (minute, done, failed, gave_up, returned, held_back, sketch, backlog, lag) in rows {
        let Some(index) = minute.checked_sub(first).map(|m| (m / step) as usize) else {
            continue;
        };
        let Some(bucket) = out.get_mut(index) else {
            continue;
        };
        bucket.done += done;
        bucket.failed += failed;
        bucket.gave_up += gave_up;
        bucket.returned += returned;
        bucket.held_back += held_back;
        bucket.backlog = bucket.backlog.max(*backlog);
        bucket.lag_s = max_f64(bucket.lag_s, *lag);
        sketches[index].extend(sketch.as_deref());
    }
    for (bucket, sketches) in out.iter_mut().zip(sketches) {
        let (_, qs) = merged_quantiles(sketches, &[0.5, 0.95]);
        bucket.p50_ms = qs[0].map(|s| s * 1000.0);
        bucket.p95_ms = qs[1].map(|s| s * 1000.0);
    }
    out
}

fn max_f64(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_are_summed_and_minutes_bucketed() {
        let row = |minute, done, backlog| -> Read {
            (
                minute,
                done,
                1,
                0,
                0,
                0,
                None,
                Some(backlog),
                Some(backlog as f64),
            )
        };
        // Two copies in minute 100, one in 101 and 104; buckets of 5 from 100.
        let rows = [
            row(100, 3, 7),
            row(100, 4, 9),
            row(101, 1, 2),
            row(104, 2, 1),
        ];
        let out = buckets(&rows, 100, 109, 5);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].at, 6000);
        assert_eq!((out[0].done, out[0].failed), (10, 4));
        assert_eq!((out[0].backlog, out[0].lag_s), (Some(9), Some(9.0)));
        assert_eq!(out[0].p50_ms, None);
        assert_eq!((out[1].done, out[1].backlog), (0, None));
    }
}
