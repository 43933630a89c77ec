//! Is the claim driven by an index? Two witnesses: `EXPLAIN FORMAT=JSON` of the
//! claim, and what the claim's select reads — the session's handler counters around
//! it ([`queries::rows_examined`]), read without the claim's lock (a worker claiming
//! meanwhile skips no row for it), in a transaction rolled back at once. The
//! optimizer's estimates can be off by orders of magnitude for `ORDER BY … LIMIT`;
//! the counters are not, though they are a lower bound where the server does not
//! count the rows index condition pushdown rules out (MySQL).

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};

use super::explain::{verdict, Plan};
use super::queries;
use crate::config::QueueConfig;
use crate::db::error::is_statement_error;
use crate::db::prepared::{claim_sql, unlocked_claim_sql, PreparedQueue};
use crate::db::Session;
use crate::diagnostic::{Finding, Severity};
use crate::sql::shape::{
    claim_index_columns, from_tables_aliased, tables_read_by, FromTable, TableRef,
};

/// `run`'s look at a queue's claim as the queue starts, on its first session (no
/// connection of its own): [`claim_cost`]'s warning if no index drives the claim.
/// The look's transaction is rolled back; a queue that cannot be looked at is left
/// to its workers to report.
pub async fn unindexed_claim(session: &mut Session, queue: &QueueConfig) -> Option<Finding> {
    let (conn, prepared) = session.parts();
    let finding = claim_cost(conn, queue, prepared).await;
    conn.query_drop("ROLLBACK").await.ok()?;
    finding.ok().flatten()
}

/// A warning when one claim of `batch` rows reads far more than it locks.
pub async fn claim_cost(
    conn: &mut Conn,
    queue: &QueueConfig,
    prepared: &PreparedQueue,
) -> Result<Option<Finding>, mysql_async::Error> {
    let plan = claim_plan(conn, queue, prepared).await?;
    let params = prepared.claim_params(&queue.name);
    let reads = measure_claim(conn, queue, params).await?;
    let table = main_table(&queue.select.text, &plan);
    let rows = match &table {
        Some(main) => queries::table_rows(conn, &main.table).await?,
        None => None,
    };
    let Some(why) = verdict(&plan, reads, rows, queue.batch) else {
        return Ok(None);
    };
    let name = table
        .as_ref()
        .map(|t| t.table.name.clone())
        .or_else(|| {
            plan.driving()
                .map(|t| table_called(&queue.select.text, &t.name))
        })
        .unwrap_or_else(|| "the queue's table".to_string());
    let used = plan.driving().and_then(|t| t.key.clone());
    let advice = advice(conn, queue, table.as_ref(), used.as_deref()).await?;
    Ok(Some(queue.finding(
        Severity::Warning,
        &["select"],
        format!(
            "the claim is not driven by an index on table {name}: {why}. A claim that reads \
             past rows it does not return gets slower as the table grows, and one that sorts \
             keeps every row it sorted locked, so one worker holds the whole backlog; {advice}"
        ),
    )))
}

/// The plan `EXPLAIN FORMAT=JSON` shows for the claim (empty when the server will
/// not explain it, or shows another shape).
pub async fn claim_plan(
    conn: &mut Conn,
    queue: &QueueConfig,
    prepared: &PreparedQueue,
) -> Result<Plan, mysql_async::Error> {
    let params = prepared.claim_params(&queue.name);
    let explain = format!(
        "EXPLAIN FORMAT=JSON {}",
        claim_sql(&queue.select, queue.batch)
    );
    let plan = match conn.exec_first::<String, _, _>(explain, params).await {
        Ok(json) => json.and_then(|json| Plan::from_json(&json)),
        Err(e) if is_statement_error(&e) => None,
        Err(e) => return Err(e),
    };
    Ok(plan.unwrap_or_default())
}

/// A note when no index of the claim's one table leads with the columns the claim
/// wants (the WHERE's equality columns, then the ORDER BY's), counting the primary
/// key InnoDB keeps at the end of every index: cheap while the table is small, the
/// claim reads more as it grows (a framework's own table, as its migration made it).
pub async fn missing_index(
    conn: &mut Conn,
    queue: &QueueConfig,
) -> Result<Option<Finding>, mysql_async::Error> {
    let [main] = &from_tables_aliased(&queue.select.text)[..] else {
        return Ok(None);
    };
    let Some(wanted) = claim_index_columns(&queue.select.text, main) else {
        return Ok(None);
    };
    let indexes = queries::indexes(conn, &main.table).await?;
    let primary: Vec<String> = indexes
        .iter()
        .find(|(name, _)| name == "PRIMARY")
        .map(|(_, columns)| columns.clone())
        .unwrap_or_default();
    let leads = |columns: &Vec<String>| {
        let with_key = columns.iter().chain(&primary);
        wanted.len() <= columns.len() + primary.len()
            && wanted
                .iter()
                .zip(with_key)
                .all(|(w, h)| w.eq_ignore_ascii_case(h))
    };
    if indexes.is_empty() || indexes.iter().any(|(_, columns)| leads(columns)) {
        return Ok(None);
    }
    // InnoDB appends the primary key to every index: the advice leaves it out.
    let own = wanted.len().saturating_sub(primary.len());
    let advised = match wanted[own..]
        .iter()
        .zip(&primary)
        .all(|(w, p)| w.eq_ignore_ascii_case(p))
    {
        true if own > 0 => &wanted[..own],
        _ => &wanted[..],
    };
    let (list, table) = (advised.join(", "), &main.table.name);
    Ok(Some(queue.finding(
        Severity::Note,
        &["select"],
        format!(
            "no index of {table} leads with ({list}), the claim's WHERE equality columns then \
             its ORDER BY: cheap while the table is small, but each claim reads more as it \
             grows; add INDEX ({list}) to {table}"
        ),
    )))
}

/// Rows one claim reads: the handler counters before and after its select, read
/// without the lock (less what reading the counters costs), rolled back at once.
async fn measure_claim(
    conn: &mut Conn,
    queue: &QueueConfig,
    params: mysql_async::Params,
) -> Result<Option<u64>, mysql_async::Error> {
    let read = unlocked_claim_sql(&queue.select, queue.batch);
    let first = queries::rows_examined(conn).await?;
    let second = queries::rows_examined(conn).await?;
    let overhead = second.saturating_sub(first);
    let before = queries::rows_examined(conn).await?;
    let claimed: Result<Vec<Row>, _> = conn.exec(read, params).await;
    let after = queries::rows_examined(conn).await;
    conn.query_drop("ROLLBACK").await?;
    match claimed {
        Ok(_) => Ok(Some(after?.saturating_sub(before).saturating_sub(overhead))),
        Err(e) if is_statement_error(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The table the claim reads: the select's only table, or the one the plan drives
/// with (EXPLAIN names it by its alias) when the select names several.
/// The table a select calls `called` (EXPLAIN names tables by their aliases), at
/// any depth; `called` itself when none is.
fn table_called(select: &str, called: &str) -> String {
    let read = tables_read_by(select).unwrap_or_default();
    let table = read.into_iter().find(|r| r.table.is_called(called));
    table.map_or_else(|| called.to_string(), |r| r.table.table.name)
}

fn main_table(select: &str, plan: &Plan) -> Option<FromTable> {
    let tables = from_tables_aliased(select);
    if let [only] = &tables[..] {
        return Some(only.clone());
    }
    let driving = plan.driving()?;
    let mut called = tables.into_iter().filter(|t| t.is_called(&driving.name));
    match (called.next(), called.next()) {
        (Some(main), None) => Some(main),
        _ => None,
    }
}

/// Which index to add — or, when it exists and the optimizer walks another, how to
/// name it in the select.
async fn advice(
    conn: &mut Conn,
    queue: &QueueConfig,
    main: Option<&FromTable>,
    used: Option<&str>,
) -> Result<String, mysql_async::Error> {
    let columns = main.and_then(|main| claim_index_columns(&queue.select.text, main));
    let (Some(columns), Some(main)) = (columns, main) else {
        return Ok(
            "add an index on the WHERE's equality columns followed by the ORDER BY \
                   columns, so the claim reads only the rows it locks"
                .to_string(),
        );
    };
    let table = &main.table;
    let list = columns.join(", ");
    match index_with_columns(conn, table, &columns).await? {
        Some(existing) if used.is_some_and(|u| u.eq_ignore_ascii_case(&existing)) => Ok(format!(
            "the index {existing} on ({list}) is in use, but most rows it finds fail the rest of \
             the WHERE: make the condition that rules them out an equality, or index it too"
        )),
        Some(existing) => Ok(format!(
            "the index {existing} on ({list}) exists but the optimizer {}: name it in the \
             select, `FROM {} FORCE INDEX ({existing})`",
            match used {
                Some(used) => format!("walks {used} instead"),
                None => "does not use it".to_string(),
            },
            table.name
        )),
        None => Ok(format!(
            "add INDEX ({list}) to {} — the WHERE's equality columns, then the ORDER BY columns",
            table.name
        )),
    }
}

/// An index of `table` that starts with `columns`, in order.
async fn index_with_columns(
    conn: &mut Conn,
    table: &TableRef,
    columns: &[String],
) -> Result<Option<String>, mysql_async::Error> {
    Ok(queries::indexes(conn, table)
        .await?
        .into_iter()
        .find(|(_, cols)| {
            cols.len() >= columns.len()
                && columns
                    .iter()
                    .zip(cols)
                    .all(|(want, have)| want.eq_ignore_ascii_case(have))
        })
        .map(|(name, _)| name))
}
