//! Every table a queue's select reads, explained: how the select reaches it (FROM,
//! a JOIN, an `EXISTS` or `IN` subquery, a derived table), whether a commit to it
//! wakes the queue (a view: through the tables behind it, or not at all when they
//! cannot be told), whether the claim's plan scans it whole (`EXPLAIN`'s access
//! type `ALL`) and which of the columns the select compares it by no index leads
//! with, and that a JOIN in a claim locks the joined rows too. Said in the summary,
//! a line per table, for a select that reads more than one.

use mysql_async::Conn;

use super::explain::Plan;
use super::queries;
use super::wake::WakeReport;
use crate::config::QueueConfig;
use crate::db::prepared::PreparedQueue;
use crate::db::views::{behind, table_kind, TableKind};
use crate::sql::shape::{columns_qualified_by, tables_read_by, Reach, TableRead, TableRef};

/// A line per table `queue`'s select reads (none for a select of one table), given
/// where its wake-ups come from.
pub async fn tables_read(
    conn: &mut Conn,
    queue: &QueueConfig,
    prepared: &PreparedQueue,
    wake: Option<&WakeReport>,
) -> Result<Vec<String>, mysql_async::Error> {
    let Some(read) = tables_read_by(&queue.select.text) else {
        return Ok(Vec::new());
    };
    if read.len() < 2 {
        return Ok(Vec::new());
    }
    let plan = &super::index::claim_plan(conn, queue, prepared).await?;
    let on_binlog = wake.is_some_and(|w| w.source == "binlog");
    let mut lines = Vec::new();
    for table in &read {
        let mut said = vec![format!("read by the select ({})", table.reach)];
        said.push(wakes(conn, queue, &table.table.table, on_binlog).await?);
        said.extend(scanned(conn, queue, plan, table).await?);
        if table.reach == Reach::Join {
            said.push(join_locks(&table.table.table.name));
        }
        let name = &table.table.table.name;
        lines.push(format!(
            "queue {}: table {name}: {}",
            queue.name,
            said.join(", ")
        ));
    }
    Ok(lines)
}

/// Whether a commit to `table` wakes the queue: a view through the tables behind
/// it, if they can be told.
async fn wakes(
    conn: &mut Conn,
    queue: &QueueConfig,
    table: &TableRef,
    on_binlog: bool,
) -> Result<String, mysql_async::Error> {
    let (wakes, wake) = match on_binlog {
        true => ("wakes the queue", "wake the queue"),
        false => (
            "would wake the queue on the binary log (it polls)",
            "would wake the queue on the binary log (it polls)",
        ),
    };
    if table_kind(conn, table).await? != Some(TableKind::View) {
        return Ok(wakes.to_string());
    }
    Ok(match behind(conn, table).await? {
        Some(bases) => {
            let names: Vec<&str> = bases.iter().map(|(t, _)| t.name.as_str()).collect();
            format!(
                "a view: commits to the tables behind it ({}) {wake}",
                names.join(", ")
            )
        }
        None => format!(
            "a view whose tables cannot be told (its definition cannot be read or parsed): \
             changes through it do not wake the queue, which polls every poll_interval ({}) \
             for them",
            humantime::format_duration(queue.poll_interval)
        ),
    })
}

/// `scanned (…)` when the claim's plan reads all of `table`, naming the columns the
/// select compares it by that no index of it leads with.
async fn scanned(
    conn: &mut Conn,
    queue: &QueueConfig,
    plan: &Plan,
    table: &TableRead,
) -> Result<Option<String>, mysql_async::Error> {
    let called = table.table.called();
    let scans = plan
        .tables
        .iter()
        .any(|t| t.name.eq_ignore_ascii_case(called) && t.access.eq_ignore_ascii_case("ALL"));
    if !scans {
        return Ok(None);
    }
    let indexes = queries::indexes(conn, &table.table.table).await?;
    let leads = |column: &String| {
        indexes.iter().any(|(_, columns)| {
            columns
                .first()
                .is_some_and(|c| c.eq_ignore_ascii_case(column))
        })
    };
    let unindexed: Vec<String> = columns_qualified_by(&queue.select.text, called)
        .into_iter()
        .filter(|c| !leads(c))
        .collect();
    Ok(Some(match unindexed.as_slice() {
        [] => "scanned (EXPLAIN: access type ALL)".to_string(),
        columns => {
            let (columns, name) = (columns.join(", "), &table.table.table.name);
            format!("scanned (no index on {columns}): add INDEX ({columns}) to {name}")
        }
    }))
}

/// What a JOIN in a claim does to the joined table's rows.
fn join_locks(name: &str) -> String {
    format!(
        "locked with each claimed row (the claim's FOR UPDATE locks the rows it joins too, so \
         claims that join one row of {name} take turns and the application's writes to it \
         wait): test it in an `EXISTS (SELECT …)` subquery instead"
    )
}
