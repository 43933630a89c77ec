//! `tableq_attempts`: each failed attempt of an item, written after its outcome
//! committed, and the searches the console makes over them.

use std::collections::HashMap;

use mysql_async::prelude::Queryable;
use mysql_async::Value;

use super::minutes::unix_of;
use super::Attempt;
use super::HistoryConn;
use crate::db::failed::like_pattern;
use crate::db::DbError;

/// The longest error text kept (the column is a TEXT).
const ERROR_CHARS: usize = 4000;

/// One failed attempt, as written.
#[derive(Debug, Clone, PartialEq)]
pub struct NewAttempt<'a> {
    pub queue: &'a str,
    pub key: &'a str,
    /// Unix time, in microseconds.
    pub at_micros: u64,
    pub copy: &'a str,
    pub ms: u64,
    pub status: Option<i64>,
    pub kind: Option<&'a str>,
    pub error: &'a str,
    pub gave_up: bool,
}

/// Writes `attempt`, numbered after its key's attempts recorded before.
pub async fn write(conn: &mut HistoryConn, attempt: &NewAttempt<'_>) -> Result<(), DbError> {
    let error: String = attempt.error.chars().take(ERROR_CHARS).collect();
    let kind: Option<String> = attempt.kind.map(|k| k.chars().take(191).collect());
    let key: String = attempt.key.chars().take(191).collect();
    // A plain insert: numbering it here (MAX + 1) would take gap locks that
    // copies inserting at once wait on, even deadlock on; the number is the row's
    // place among its key's, counted as they are read.
    let sql = "INSERT INTO tableq_attempts (queue, item_key, at, copy, ms, status, kind, \
               error, gave_up) VALUES (?, ?, TIMESTAMPADD(MICROSECOND, ?, '1970-01-01 \
               00:00:00'), ?, ?, ?, ?, ?, ?)";
    let params: Vec<Value> = vec![
        attempt.queue.into(),
        key.as_str().into(),
        attempt.at_micros.into(),
        attempt.copy.into(),
        attempt.ms.min(u32::MAX as u64).into(),
        attempt.status.into(),
        kind.into(),
        error.into(),
        attempt.gave_up.into(),
    ];
    Ok(conn.0.exec_drop(sql, params).await?)
}

/// The attempts recorded for `key` of `queue`, in order.
pub async fn of_key(
    conn: &mut HistoryConn,
    queue: &str,
    key: &str,
) -> Result<Vec<Attempt>, DbError> {
    let sql = format!(
        "SELECT {} + MICROSECOND(at) / 1e6, copy, ms, status, error, gave_up \
         FROM tableq_attempts WHERE queue = ? AND item_key = ? ORDER BY id",
        unix_of("at")
    );
    type Row = (f64, String, u64, Option<i64>, String, bool);
    let rows: Vec<Row> = conn.0.exec(sql, (queue, key)).await?;
    Ok(rows
        .into_iter()
        .zip(1..)
        .map(
            |((at, copy, ms, status, error, gave_up), attempt)| Attempt {
                attempt,
                at,
                copy: shown_copy(&copy),
                ms,
                status,
                error,
                gave_up,
            },
        )
        .collect())
}

/// `host:pid` of a `host:pid:started` copy.
fn shown_copy(copy: &str) -> String {
    match copy.rsplit_once(':') {
        Some((host_pid, _)) => host_pid.to_string(),
        None => copy.to_string(),
    }
}

/// The keys of `queue` whose last recorded error holds `text`, newest first, at
/// most `limit`.
pub async fn keys_whose_error_holds(
    conn: &mut HistoryConn,
    queue: &str,
    text: &str,
    limit: usize,
) -> Result<Vec<String>, DbError> {
    let sql = format!(
        "SELECT a.item_key FROM tableq_attempts a WHERE a.queue = ? AND a.error LIKE ? \
         AND a.id = (SELECT MAX(b.id) FROM tableq_attempts b WHERE b.queue = a.queue \
         AND b.item_key = a.item_key) ORDER BY a.id DESC LIMIT {limit}"
    );
    Ok(conn.0.exec(sql, (queue, like_pattern(text))).await?)
}

/// The last recorded error of each of `keys` that has one.
pub async fn last_errors(
    conn: &mut HistoryConn,
    queue: &str,
    keys: &[String],
) -> Result<HashMap<String, String>, DbError> {
    if keys.is_empty() {
        return Ok(HashMap::new());
    }
    let marks = vec!["?"; keys.len()].join(", ");
    let sql = format!(
        "SELECT a.item_key, a.error FROM tableq_attempts a WHERE a.queue = ? AND \
         a.item_key IN ({marks}) AND a.id = (SELECT MAX(b.id) FROM tableq_attempts b \
         WHERE b.queue = a.queue AND b.item_key = a.item_key)"
    );
    let mut params: Vec<Value> = vec![queue.into()];
    params.extend(keys.iter().map(|k| Value::from(k.as_str())));
    let rows: Vec<(String, String)> = conn.0.exec(sql, params).await?;
    Ok(rows.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_is_shown_as_host_and_pid() {
        assert_eq!(shown_copy("web-1:42:1700000000"), "web-1:42");
    }
}
