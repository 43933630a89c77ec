//! The retention: history and attempts older than it are deleted, and copies gone
//! for an hour, by one copy at a time. The copy that takes the chore's row lock
//! (`SKIP LOCKED`: the others pass) and finds it not done within
//! [`TRIM_EVERY_SECONDS`] does it; the deletes go in slices, so no lock is held long.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::TxOpts;

use super::copies::TRIMMED_AFTER_SECONDS;
use super::HistoryConn;
use crate::db::DbError;

/// How often the trim runs, across every copy.
pub const TRIM_EVERY_SECONDS: u64 = 600;
/// Rows one delete takes at most.
const SLICE: u64 = 5000;
const CHORE: &str = "trim";

/// Trims what is older than `retention`, if this copy's turn came: whether it did.
pub async fn trim(conn: &mut HistoryConn, retention: Duration) -> Result<bool, DbError> {
    match take_turn(conn).await.map_err(DbError::at_commit) {
        Ok(true) => {}
        // Another copy holds the chore, or (on a multi-primary cluster, where row
        // locks are not shared) committed it first: its turn.
        Ok(false) => return Ok(false),
        Err(e) if e.is_contention() => return Ok(false),
        Err(e) => return Err(e),
    }
    let seconds = retention.as_secs();
    let deletes = [
        format!("DELETE FROM tableq_history WHERE minute_at < UTC_TIMESTAMP() - INTERVAL {seconds} SECOND LIMIT {SLICE}"),
        format!("DELETE FROM tableq_attempts WHERE at < UTC_TIMESTAMP(6) - INTERVAL {seconds} SECOND LIMIT {SLICE}"),
        format!("DELETE FROM tableq_copies WHERE last_seen < UTC_TIMESTAMP(6) - INTERVAL {TRIMMED_AFTER_SECONDS} SECOND LIMIT {SLICE}"),
    ];
    for delete in deletes {
        loop {
            conn.0.query_drop(delete.as_str()).await?;
            if conn.0.affected_rows() < SLICE {
                break;
            }
        }
    }
    Ok(true)
}

/// Whether the chore is due and this copy took it: the chore's row locked (the
/// other copies pass it by), marked done now, committed.
async fn take_turn(conn: &mut HistoryConn) -> Result<bool, DbError> {
    conn.0
        .exec_drop(
            "INSERT IGNORE INTO tableq_chores (chore, done_at) VALUES (?, '1970-01-01')",
            (CHORE,),
        )
        .await?;
    let mut tx = conn.0.start_transaction(TxOpts::default()).await?;
    let due: Option<u8> = tx
        .exec_first(
            format!(
                "SELECT 1 FROM tableq_chores WHERE chore = ? AND done_at < \
                 UTC_TIMESTAMP(6) - INTERVAL {TRIM_EVERY_SECONDS} SECOND FOR UPDATE SKIP LOCKED"
            ),
            (CHORE,),
        )
        .await?;
    if due.is_none() {
        tx.rollback().await?;
        return Ok(false);
    }
    tx.exec_drop(
        "UPDATE tableq_chores SET done_at = UTC_TIMESTAMP(6) WHERE chore = ?",
        (CHORE,),
    )
    .await?;
    tx.commit().await?;
    Ok(true)
}
