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
use crate::db::connect::{Kill, QUICK_TIMEOUT};
use crate::db::error::is_statement_error;
use crate::db::prepared::{claim_sql, prepare_queue, unlocked_claim_sql, PreparedQueue};
use crate::db::session::max_packet;
use crate::db::session::setup::{set_up, SessionSettings};
use crate::db::Database;
use crate::diagnostic::{Finding, Severity};
use crate::sql::shape::{claim_index_columns, from_tables_aliased, FromTable, TableRef};

/// `run`'s look at its claims when it starts: [`claim_cost`]'s warning for each queue
/// whose claim no index drives, from one connection per database (each queue's
/// statements closed after its look), so a process of many queues opens few. A
/// queue that cannot be looked at is left to its workers to report.
pub async fn unindexed_claims(queues: &[(QueueConfig, Database)]) -> Vec<Finding> {
    let mut found = Vec::new();
    let mut databases: Vec<&Database> = Vec::new();
    for (_, database) in queues {
        if !databases.contains(&database) {
            databases.push(database);
        }
    }
    for database in databases {
        let on_it: Vec<&QueueConfig> = queues
            .iter()
            .filter(|(_, d)| d == database)
            .map(|(q, _)| q)
            .collect();
        found.extend(unindexed_on(database, &on_it).await);
    }
    found
}

/// The looks at `queues`' claims on one connection to `database`, a place in the
/// process's connection budget like any session's. Each look has its queue's
/// `database_timeout`: a select slower than that is stopped on the server (its
/// connection killed), and the queues after it are left to their workers.
async fn unindexed_on(database: &Database, queues: &[&QueueConfig]) -> Vec<Finding> {
    let settings = SessionSettings::for_queue(queues[0]);
    let seat = database.seat().await;
    let Ok((conn, place)) = database
        .connect_seated(seat, settings.database_timeout)
        .await
    else {
        return Vec::new();
    };
    let Ok(mut conn) = set_up(conn, &settings).await else {
        return Vec::new();
    };
    let packet = tokio::time::timeout(settings.database_timeout, max_packet(&mut conn));
    let Ok(Ok(max_packet)) = packet.await else {
        let _ = tokio::time::timeout(QUICK_TIMEOUT, conn.disconnect()).await;
        return Vec::new();
    };
    let mut found = Vec::new();
    for queue in queues {
        let look = unindexed(&mut conn, queue, max_packet);
        let look = tokio::time::timeout(queue.database_timeout, look);
        match look.await {
            Ok(Ok(finding)) => found.extend(finding),
            Ok(Err(_)) => {}
            Err(_) => {
                let host = database.host_of(&conn);
                let _ = host.kill(conn.id(), Kill::Connection).await;
                return found;
            }
        }
    }
    database.give_up(conn, place).await;
    found
}

/// One queue's look on `conn`: its statements prepared, [`claim_cost`], and the
/// statements closed.
async fn unindexed(
    conn: &mut Conn,
    queue: &QueueConfig,
    max_packet: usize,
) -> Result<Option<Finding>, mysql_async::Error> {
    let prepared = match prepare_queue(conn, queue, queue.batch, max_packet).await {
        Ok(prepared) => prepared,
        Err(_) => return Ok(None),
    };
    let finding = claim_cost(conn, queue, &prepared).await;
    for statement in prepared.all_statements() {
        conn.close(statement.clone()).await?;
    }
    finding
}

/// A warning when one claim of `batch` rows reads far more than it locks.
pub async fn claim_cost(
    conn: &mut Conn,
    queue: &QueueConfig,
    prepared: &PreparedQueue,
) -> Result<Option<Finding>, mysql_async::Error> {
    let params = prepared.claim_params(&queue.name);
    let explain = format!(
        "EXPLAIN FORMAT=JSON {}",
        claim_sql(&queue.select, queue.batch)
    );
    let plan = match conn
        .exec_first::<String, _, _>(explain, params.clone())
        .await
    {
        Ok(json) => json.and_then(|json| Plan::from_json(&json)),
        Err(e) if is_statement_error(&e) => None,
        Err(e) => return Err(e),
    }
    .unwrap_or_default();
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
        .or_else(|| plan.driving().map(|t| t.name.clone()))
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
