//! With `waiting_since`, the background count reads the first waiting row — the
//! select with `LIMIT 1`, without a lock — for the queue's lag. It should be one
//! index read, the claim's own: check compares the two plans.

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use super::explain::Plan;
use crate::config::QueueConfig;
use crate::db::error::is_statement_error;
use crate::db::prepared::{claim_sql, PreparedQueue};
use crate::diagnostic::{Finding, Severity};

/// A warning when the read of the oldest waiting row is not planned on the claim's
/// index; nothing without `waiting_since`, or when either plan cannot be read.
pub async fn oldest_read(
    conn: &mut Conn,
    queue: &QueueConfig,
    prepared: &PreparedQueue,
) -> Result<Option<Finding>, mysql_async::Error> {
    if queue.monitoring.waiting_since.is_none() {
        return Ok(None);
    }
    let claim = claim_sql(&queue.select, queue.batch);
    let oldest = format!("{}\nLIMIT 1", queue.select.positional);
    let (Some(claim), Some(oldest)) = (
        explain(conn, prepared, queue, &claim).await?,
        explain(conn, prepared, queue, &oldest).await?,
    ) else {
        return Ok(None);
    };
    let index = |plan: &Plan| plan.driving().and_then(|t| t.key.clone());
    if index(&claim) == index(&oldest) && claim.filesort == oldest.filesort {
        return Ok(None);
    }
    let name = |plan: &Plan| index(plan).unwrap_or_else(|| "no index".to_string());
    Ok(Some(queue.finding(
        Severity::Warning,
        &["waiting_since"],
        format!(
            "`waiting_since`: the read of the oldest waiting row (the select with LIMIT 1, \
             every stats_interval) is planned on {}{} but the claim on {}{}; name the claim's \
             index in the select with FORCE INDEX so both read one row of it",
            name(&oldest),
            if oldest.filesort { " with a sort" } else { "" },
            name(&claim),
            if claim.filesort { " with a sort" } else { "" },
        ),
    )))
}

async fn explain(
    conn: &mut Conn,
    prepared: &PreparedQueue,
    queue: &QueueConfig,
    sql: &str,
) -> Result<Option<Plan>, mysql_async::Error> {
    let params = prepared.claim_params(&queue.name);
    match conn
        .exec_first::<String, _, _>(format!("EXPLAIN FORMAT=JSON {sql}"), params)
        .await
    {
        Ok(json) => Ok(json.and_then(|json| Plan::from_json(&json))),
        Err(e) if is_statement_error(&e) => Ok(None),
        Err(e) => Err(e),
    }
}
