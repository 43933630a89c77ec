//! The tables a queue touches, and what information_schema says of them: each must
//! be InnoDB — the only engine with row locks for SKIP LOCKED and a transaction that
//! rolls back. Tables come from the claim's column metadata and, conservatively,
//! from the statements' text; a name that is not a table (a CTE, an alias) is simply
//! not found and left alone.

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use crate::config::{ActionConfig, QueueConfig};
use crate::database::is_statement_error;
use crate::diagnostic::{Finding, Severity};
use crate::names::statement_path;
use crate::queue_sql::PreparedQueue;
use crate::sql_shape::{from_tables, statement_target, TableRef};
use crate::sql_text::ParsedStatement;

/// An error for each table of the queue that is not InnoDB.
pub async fn not_innodb(
    conn: &mut Conn,
    queue: &QueueConfig,
    prepared: &PreparedQueue,
) -> Result<Vec<Finding>, mysql_async::Error> {
    let mut findings = Vec::new();
    let mut seen: Vec<TableRef> = Vec::new();
    for (path, table) in tables_of(queue, prepared) {
        let same = |t: &TableRef| {
            t.name.eq_ignore_ascii_case(&table.name)
                && (t.schema.is_none() || table.schema.is_none() || t.schema == table.schema)
        };
        if seen.iter().any(same) {
            continue;
        }
        seen.push(table.clone());
        let Some(engine) = engine(conn, &table).await? else {
            continue;
        };
        if !engine.eq_ignore_ascii_case("InnoDB") {
            let at: Vec<&str> = path.iter().map(String::as_str).collect();
            findings.push(queue.finding(
                Severity::Error,
                &at,
                format!(
                    "table {} uses the {engine} engine: tableq needs InnoDB, for the row locks \
                     SKIP LOCKED skips and a transaction that rolls back \
                     (ALTER TABLE {} ENGINE = InnoDB)",
                    table.name, table.name
                ),
            ));
        }
    }
    Ok(findings)
}

/// Each table with the key path of the statement that names it.
fn tables_of(queue: &QueueConfig, prepared: &PreparedQueue) -> Vec<(Vec<String>, TableRef)> {
    let select = vec!["select".to_string()];
    let mut tables = Vec::new();
    for column in prepared.claim.statement.columns().iter() {
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
    if let ActionConfig::Sql(sql) = &queue.action {
        targets(&["action", "sql"], &sql.statements);
    }
    targets(&["on_success", "sql"], &queue.on_success);
    if let Some(on_failure) = &queue.on_failure {
        targets(&["on_failure", "sql"], on_failure);
    }
    tables
}

/// The engine of a base table; `None` for a view or a name that is not a table.
async fn engine(conn: &mut Conn, table: &TableRef) -> Result<Option<String>, mysql_async::Error> {
    let found: Result<Option<Option<String>>, _> = conn
        .exec_first(
            "SELECT ENGINE FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? \
             AND TABLE_TYPE = 'BASE TABLE'",
            (table.schema.clone(), table.name.clone()),
        )
        .await;
    match found {
        Ok(engine) => Ok(engine.flatten()),
        Err(e) if is_statement_error(&e) => Ok(None),
        Err(e) => Err(e),
    }
}
