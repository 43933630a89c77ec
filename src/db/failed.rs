//! `[failed]` on the database: the rows that gave up, one row as its action would
//! see it, and `retry` or `discard` run for given keys in transactions of bounded
//! size. Nothing here locks a row beyond the statements the user wrote.

use std::sync::Arc;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Params, Row, Value};
use serde_json::Value as Json;

use super::error::DbError;
use super::item::{Columns, Item};
use super::row_json::item_json;
use super::value::{key_from_text, value_text};
use super::Database;
use crate::config::failed::{Change, FailedConfig};
use crate::config::QueueConfig;
use crate::sql::lex::quote_identifier;
use crate::sql::statement::ParsedStatement;

/// How many rows one transaction of `retry` or `discard` changes at most.
pub const CHANGES_PER_TRANSACTION: usize = 100;

/// A row's key, as its column holds it: bound as it is to `retry` and `discard`.
#[derive(Debug, Clone, PartialEq)]
pub struct Key(Value);

impl Key {
    /// A key as an operator writes it, as tableq prints it (`hex:…` for bytes).
    pub fn from_text(text: &str) -> Key {
        Key(key_from_text(text))
    }
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&value_text(&self.0))
    }
}

/// Rows as JSON objects (typed as an HTTP body is), with the column that is the key.
#[derive(Debug, Clone, Default)]
pub struct Rows {
    pub rows: Vec<Json>,
    /// Each row's key, as bound to `retry` and `discard`.
    pub keys: Vec<Key>,
}

/// The rows of `[failed] select`, at most `limit`.
pub async fn failed_rows(
    database: &Database,
    queue: &QueueConfig,
    failed: &FailedConfig,
    limit: usize,
) -> Result<Rows, DbError> {
    let mut conn = database.connect_within(queue.database_timeout).await?;
    let sql = format!("{}\nLIMIT {limit}", failed.select.positional);
    let key = failed.key.as_deref().or(queue.key.as_deref());
    let rows = select_rows(&mut conn, &sql, &failed.select, &queue.name, &[], key).await;
    let _ = conn.disconnect().await;
    rows
}

/// Runs `sql` (which is `select` with tableq's additions; `extra` binds them) and
/// reads every row it returns, with the key from column `key` (else the first).
async fn select_rows(
    conn: &mut Conn,
    sql: &str,
    select: &ParsedStatement,
    queue: &str,
    extra: &[Value],
    key: Option<&str>,
) -> Result<Rows, DbError> {
    let statement = conn.prep(sql).await?;
    let columns = Arc::new(Columns {
        names: statement
            .columns()
            .iter()
            .map(|c| c.name_str().into_owned())
            .collect(),
        types: statement
            .columns()
            .iter()
            .map(|c| c.column_type())
            .collect(),
    });
    let key_index = match key {
        None => 0,
        Some(name) => columns.find(name).ok_or_else(|| {
            DbError::Driver(mysql_async::Error::Other(
                format!(
                    "`{name}` is not among the columns it returns ({}): it must return the key \
                     that retry and discard name the row by",
                    columns.names.join(", ")
                )
                .into(),
            ))
        })?,
    };
    let mut params = queue_params(select, queue);
    params.extend_from_slice(extra);
    let found: Vec<Row> = conn.exec(&statement, positional(params)).await?;
    let mut rows = Rows::default();
    for row in found {
        let item = Item::new(columns.clone(), row.unwrap(), key_index);
        rows.keys.push(Key(item.key().clone()));
        rows.rows.push(item_json(&item));
    }
    Ok(rows)
}

/// One row, by its key: as the queue's select returns it now (the item its action
/// would get), and as `[failed] select` does.
#[derive(Debug, Clone)]
pub struct Inspected {
    pub in_select: Option<Json>,
    pub in_failed: Option<Json>,
}

/// Looks for the row whose key is `key` in the queue's select and in `[failed]
/// select`, locking nothing.
pub async fn inspect(
    database: &Database,
    queue: &QueueConfig,
    key: &Key,
) -> Result<Inspected, DbError> {
    let mut conn = database.connect_within(queue.database_timeout).await?;
    let found = inspect_on(&mut conn, queue, &key.0).await;
    let _ = conn.disconnect().await;
    found
}

async fn inspect_on(
    conn: &mut Conn,
    queue: &QueueConfig,
    key: &Value,
) -> Result<Inspected, DbError> {
    let key_name = key_column(conn, queue).await?;
    let in_select = one_row(conn, &queue.select, &queue.name, &key_name, key).await?;
    let in_failed = match &queue.failed {
        Some(failed) => {
            let name = failed.key.clone().unwrap_or_else(|| key_name.clone());
            one_row(conn, &failed.select, &queue.name, &name, key).await?
        }
        None => None,
    };
    Ok(Inspected {
        in_select,
        in_failed,
    })
}

/// The queue's key column: `key`, else the select's first column.
async fn key_column(conn: &mut Conn, queue: &QueueConfig) -> Result<String, DbError> {
    if let Some(key) = &queue.key {
        return Ok(key.clone());
    }
    let statement = conn.prep(&queue.select.positional).await?;
    let first = statement
        .columns()
        .first()
        .map(|c| c.name_str().into_owned());
    Ok(first.unwrap_or_default())
}

/// The row of `select` whose column `key_name` is `key`, if it returns one.
async fn one_row(
    conn: &mut Conn,
    select: &ParsedStatement,
    queue: &str,
    key_name: &str,
    key: &Value,
) -> Result<Option<Json>, DbError> {
    let sql = format!(
        "SELECT * FROM ({}) AS tableq_row WHERE tableq_row.{} <=> ? LIMIT 1",
        select.positional,
        quote_identifier(key_name)
    );
    let rows = select_rows(
        conn,
        &sql,
        select,
        queue,
        std::slice::from_ref(key),
        Some(key_name),
    )
    .await?;
    Ok(rows.rows.into_iter().next())
}

/// What `retry` or `discard` did to one key: how many rows its statements changed
/// (0: the key matched nothing).
pub type Changed = (Key, u64);

/// Runs `change`'s statements for each of `keys`, `CHANGES_PER_TRANSACTION` keys to
/// a transaction, committed — or rolled back with `dry_run`, to say what would
/// change. An error stops it: what earlier transactions committed stays.
pub async fn change(
    database: &Database,
    queue: &QueueConfig,
    failed: &FailedConfig,
    change: Change,
    keys: &[Key],
    dry_run: bool,
) -> Result<Vec<Changed>, (Vec<Changed>, DbError)> {
    let mut conn = match database.connect_within(queue.database_timeout).await {
        Ok(conn) => conn,
        Err(e) => return Err((Vec::new(), e)),
    };
    let statements = failed.statements(change);
    let mut done = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(CHANGES_PER_TRANSACTION) {
        match change_chunk(&mut conn, &queue.name, statements, chunk, dry_run).await {
            Ok(changed) => done.extend(changed),
            Err(e) => {
                // The session ends with the chunk's transaction rolled back.
                let _ = conn.disconnect().await;
                return Err((done, e));
            }
        }
    }
    let _ = conn.disconnect().await;
    Ok(done)
}

async fn change_chunk(
    conn: &mut Conn,
    queue: &str,
    statements: &[ParsedStatement],
    keys: &[Key],
    dry_run: bool,
) -> Result<Vec<Changed>, DbError> {
    conn.query_drop("START TRANSACTION").await?;
    let mut changed = Vec::with_capacity(keys.len());
    for key in keys {
        let mut rows = 0;
        for statement in statements {
            conn.exec_drop(&statement.positional, row_params(statement, queue, &key.0))
                .await?;
            rows += conn.affected_rows();
        }
        changed.push((key.clone(), rows));
    }
    let end = if dry_run { "ROLLBACK" } else { "COMMIT" };
    conn.query_drop(end).await?;
    Ok(changed)
}

/// A `retry` or `discard` statement's parameters: `:queue`, else the row's key (the
/// only other name the loader lets them use).
pub fn row_params(statement: &ParsedStatement, queue: &str, key: &Value) -> Params {
    let values = statement
        .params
        .iter()
        .map(|p| match p.as_str() {
            "queue" => Value::from(queue),
            _ => key.clone(),
        })
        .collect();
    positional(values)
}

/// `:queue` for each of `select`'s parameters (it may use no other).
pub fn queue_params(select: &ParsedStatement, queue: &str) -> Vec<Value> {
    vec![Value::from(queue); select.params.len()]
}

/// The values as positional parameters (none: `Params::Empty`).
pub fn positional(values: Vec<Value>) -> Params {
    match values.is_empty() {
        true => Params::Empty,
        false => Params::Positional(values),
    }
}
