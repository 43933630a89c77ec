//! A batch too large to send: the server refuses any statement larger than its
//! `max_allowed_packet`. In batch scope `:batch` carries every row of the batch, so
//! `check` scales the first waiting row's size by `batch` and compares it with the
//! server's limit (at run time such a batch is settled item by item instead, which
//! costs a round trip per row).

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};

use crate::config::{QueueConfig, Scope};
use crate::db::prepared::{claim_sql, PreparedQueue};
use crate::db::row_json::item_json;
use crate::diagnostic::{Finding, Severity};

/// A warning when `batch` rows the size of the first waiting one would not fit in
/// one statement; nothing in item scope, or with no row waiting.
pub async fn batch_fits(
    conn: &mut Conn,
    queue: &QueueConfig,
    prepared: &PreparedQueue,
) -> Result<Option<Finding>, mysql_async::Error> {
    if queue.scope() != Scope::Batch || queue.batch < 2 {
        return Ok(None);
    }
    let limit: Option<u64> = conn.query_first("SELECT @@max_allowed_packet").await?;
    let claim = claim_sql(&queue.select, 1);
    let sample: Option<Row> = conn
        .exec_first(claim, prepared.claim_params(&queue.name))
        .await?;
    conn.query_drop("ROLLBACK").await?;
    let (Some(limit), Some(row)) = (limit, sample) else {
        return Ok(None);
    };
    let row_size = item_json(&prepared.item(row)).to_string().len() as u64;
    let batch_size = row_size.saturating_mul(queue.batch as u64);
    if batch_size <= limit {
        return Ok(None);
    }
    let fits = (limit / row_size.max(1)).max(1);
    Ok(Some(queue.finding(
        Severity::Warning,
        &["batch"],
        format!(
            "a batch of {} rows like the first waiting one ({} each as JSON) makes a `:batch` of \
             about {}, over the server's max_allowed_packet ({}): such batches are settled item \
             by item, a round trip per row; set batch = {fits} or less, or raise \
             max_allowed_packet",
            queue.batch,
            bytes(row_size),
            bytes(batch_size),
            bytes(limit)
        ),
    )))
}

/// `512 B`, `48.8 KiB`, `1.5 MiB`.
fn bytes(n: u64) -> String {
    match n {
        0..1024 => format!("{n} B"),
        1024..1_048_576 => format!("{:.1} KiB", n as f64 / 1024.0),
        _ => format!("{:.1} MiB", n as f64 / 1_048_576.0),
    }
}
