//! The tables a queue touches, and what information_schema says of them: each must
//! be InnoDB — the only engine with row locks for SKIP LOCKED and a transaction that
//! rolls back. Tables come from the claim's column metadata and, conservatively,
//! from the statements' text; a name that is not a table (a CTE, an alias) is simply
//! not found and left alone. A view is followed to the tables behind it; one that
//! check cannot see through is reported, so that nothing is run through it.

use mysql_async::Conn;

use super::queries;
use crate::config::statement_path;
use crate::config::QueueConfig;
use crate::db::prepared::PreparedQueue;
use crate::db::views::{behind, table_kind, TableKind};
use crate::diagnostic::{Finding, Severity};
use crate::sql::shape::{from_tables, statement_target, TableRef};
use crate::sql::statement::ParsedStatement;

/// What the engines of a queue's tables allow.
#[derive(Debug, Default)]
pub struct Engines {
    /// An error for each table that is not InnoDB.
    pub not_innodb: Vec<Finding>,
    /// The views whose tables check cannot tell, with the key path naming each.
    pub unsure_views: Vec<(Vec<String>, String)>,
}

/// The engine of every table the queue names, and of the tables behind its views.
pub async fn engines(
    conn: &mut Conn,
    queue: &QueueConfig,
    prepared: &PreparedQueue,
) -> Result<Engines, mysql_async::Error> {
    let mut engines = Engines::default();
    let mut seen: Vec<TableRef> = Vec::new();
    for (path, table) in tables_of(queue, prepared) {
        if seen.iter().any(|t| t.same_as(&table)) {
            continue;
        }
        seen.push(table.clone());
        let at: Vec<&str> = path.iter().map(String::as_str).collect();
        match table_kind(conn, &table).await? {
            Some(TableKind::Base(engine)) if !is_innodb(&engine) => engines
                .not_innodb
                .push(not_innodb(queue, &at, &table, None, &engine)),
            Some(TableKind::View) => match behind(conn, &table).await? {
                Some(bases) => {
                    for (base, engine) in bases.iter().filter(|(_, e)| !is_innodb(e)) {
                        let finding = not_innodb(queue, &at, base, Some(&table), engine);
                        engines.not_innodb.push(finding);
                    }
                }
                None => engines.unsure_views.push((path, table.name.clone())),
            },
            _ => {}
        }
    }
    Ok(engines)
}

/// The lease-mode statements that compare a DATETIME column of the select's tables
/// with the session's clock (`NOW()`, …): warnings that name the column. A
/// TIMESTAMP column or unix time is not warned about (see
/// [`crate::config::validate::lease_queue::session_clock`]).
pub async fn session_clock(
    conn: &mut Conn,
    queue: &QueueConfig,
) -> Result<Vec<Finding>, mysql_async::Error> {
    let clocks = crate::config::validate::lease_queue::session_clock(queue);
    if clocks.is_empty() {
        return Ok(Vec::new());
    }
    let mut datetime = Vec::new();
    for table in from_tables(&queue.select.text) {
        datetime.extend(queries::datetime_columns(conn, &table).await?);
    }
    Ok(clocks
        .iter()
        .filter_map(|clock| {
            let column = datetime
                .iter()
                .find(|c| clock.names.iter().any(|n| n.eq_ignore_ascii_case(c)))?;
            Some(clock.warning(queue, Some(column)))
        })
        .collect())
}

fn is_innodb(engine: &str) -> bool {
    engine.eq_ignore_ascii_case("InnoDB")
}

fn not_innodb(
    queue: &QueueConfig,
    at: &[&str],
    table: &TableRef,
    view: Option<&TableRef>,
    engine: &str,
) -> Finding {
    let behind = view.map_or(String::new(), |v| format!(" (behind view {})", v.name));
    queue.finding(
        Severity::Error,
        at,
        format!(
            "table {}{behind} uses the {engine} engine: tableq needs InnoDB, for the row locks \
             SKIP LOCKED skips and a transaction that rolls back (ALTER TABLE {} ENGINE = InnoDB)",
            table.name, table.name
        ),
    )
}

/// Each table with the key path of the statement that names it.
fn tables_of(queue: &QueueConfig, prepared: &PreparedQueue) -> Vec<(Vec<String>, TableRef)> {
    let select = vec!["select".to_string()];
    let mut tables = Vec::new();
    for column in prepared.claim.columns().iter() {
        let name = column.org_table_str();
        if !name.is_empty() {
            let schema = column.schema_str();
            let table = TableRef {
                schema: (!schema.is_empty()).then(|| schema.into_owned()),
                name: name.into_owned(),
            };
            tables.push((select.clone(), table));
        }
    }
    for table in from_tables(&queue.select.text) {
        tables.push((select.clone(), table));
    }
    let mut targets = |path: &[&str], statements: &[ParsedStatement]| {
        for (index, statement) in statements.iter().enumerate() {
            if let Some(table) = statement_target(&statement.text) {
                tables.push((statement_path(path, index, statements.len()), table));
            }
        }
    };
    if let Some(action) = queue.action.kind().statements() {
        targets(&["action", action.key], action.list);
    }
    for (path, list) in queue.outcome_statements() {
        targets(&path, list);
    }
    // `[failed]` retry and discard are proven on a real row, rolled back: their
    // tables must be transactional too.
    if let Some(failed) = &queue.failed {
        targets(&["failed", "retry"], &failed.retry);
        targets(&["failed", "discard"], &failed.discard);
    }
    tables
}
