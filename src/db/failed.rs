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
use crate::config::queue::failed::{Change, FailedConfig};
use crate::config::QueueConfig;
use crate::sql::lex::quote_identifier;
use crate::sql::shape::rows_whatever_where;
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

    /// The key as its column holds it.
    pub fn value(&self) -> &Value {
        &self.0
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

/// What the console asks of the rows that gave up: those whose columns hold
/// `text`, or whose key is among `keys` (their last error held it); newest first
/// (by key), after key `after`; at most `limit`.
#[derive(Debug, Clone, Default)]
pub struct Search<'a> {
    pub text: Option<&'a str>,
    pub keys: &'a [String],
    pub after: Option<&'a Key>,
    pub limit: usize,
}

/// The rows of `[failed] select` that `search` finds, on `conn`.
pub async fn search(
    conn: &mut Conn,
    queue: &QueueConfig,
    failed: &FailedConfig,
    search: &Search<'_>,
) -> Result<Rows, DbError> {
    let key = match failed.key.clone().or(queue.key.clone()) {
        Some(key) => key,
        None => first_column(conn, &failed.select.positional).await?,
    };
    let column = format!("tableq_failed.{}", quote_identifier(&key));
    let mut conditions = Vec::new();
    let mut extra: Vec<Value> = Vec::new();
    if let Some(text) = search.text {
        let statement = conn.prep(&failed.select.positional).await?;
        let columns: Vec<String> = columns_of(&statement)
            .names
            .iter()
            .map(|name| {
                format!(
                    "CONVERT(tableq_failed.{} USING utf8mb4)",
                    quote_identifier(name)
                )
            })
            .collect();
        // Each column as utf8mb4 text, compared without case: columns of other
        // collations, JSON and bytes alike.
        let mut either = format!(
            "CONCAT_WS(' ', {}) COLLATE utf8mb4_general_ci LIKE ?",
            columns.join(", ")
        );
        extra.push(like_pattern(text).into());
        if !search.keys.is_empty() {
            either.push_str(&format!(
                " OR {column} IN ({})",
                vec!["?"; search.keys.len()].join(", ")
            ));
            extra.extend(search.keys.iter().map(|k| Key::from_text(k).0));
        }
        conditions.push(format!("({either})"));
    }
    if let Some(after) = search.after {
        conditions.push(format!("{column} < ?"));
        extra.push(after.0.clone());
    }
    let filter = match conditions.is_empty() {
        true => String::new(),
        false => format!(" WHERE {}", conditions.join(" AND ")),
    };
    let sql = format!(
        "SELECT * FROM ({}) AS tableq_failed{filter} ORDER BY {column} DESC LIMIT {}",
        failed.select.positional, search.limit
    );
    select_rows(conn, &sql, &failed.select, &queue.name, &extra, Some(&key)).await
}

/// `%text%`, its own `%`, `_` and `\` matched as themselves.
pub fn like_pattern(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len() + 2);
    pattern.push('%');
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

/// The name of the first column `select` returns.
async fn first_column(conn: &mut Conn, select: &str) -> Result<String, DbError> {
    let statement = conn.prep(select).await?;
    let first = statement
        .columns()
        .first()
        .map(|c| c.name_str().into_owned());
    Ok(first.unwrap_or_default())
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
    let columns = Arc::new(columns_of(&statement));
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

/// The names and types of the columns `statement` returns.
fn columns_of(statement: &mysql_async::Statement) -> Columns {
    Columns {
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
    }
}

/// One row, by its key: as the queue's select returns it now (the item its action
/// would get), as `[failed] select` does, and — when it is in neither — whether
/// the row is there at all.
#[derive(Debug, Clone)]
pub struct Inspected {
    pub in_select: Option<Json>,
    pub in_failed: Option<Json>,
    /// Looked for only when the row is in neither.
    pub in_table: InTable,
}

/// A row that is neither waiting nor failed, looked for in the select's tables.
#[derive(Debug, Clone, PartialEq)]
pub enum InTable {
    /// Not looked for: the row waits or gave up.
    NotLooked,
    /// The select without its WHERE returns it: done, or left in some other way.
    Found(Json),
    /// No row has this key.
    Missing,
    /// The select cannot be read without its WHERE (a `GROUP BY`, `UNION`, `WITH`).
    CannotTell,
}

impl Inspected {
    /// The row as one of the selects returns it.
    pub fn row(&self) -> Option<&Json> {
        let in_table = match &self.in_table {
            InTable::Found(row) => Some(row),
            _ => None,
        };
        self.in_select
            .as_ref()
            .or(self.in_failed.as_ref())
            .or(in_table)
    }

    /// Whether a row has the key; `None`: cannot tell.
    pub fn exists(&self) -> Option<bool> {
        match self.in_table {
            InTable::NotLooked | InTable::Found(_) => Some(true),
            InTable::Missing => Some(false),
            InTable::CannotTell => None,
        }
    }

    /// What `tableq inspect` prints and the console answers: the row, and where it is.
    pub fn shown(&self, queue: &QueueConfig, key: &str) -> Json {
        serde_json::json!({
            "queue": queue.name,
            "key": key,
            "in_select": self.in_select.is_some(),
            "in_failed": queue.failed.as_ref().map(|_| self.in_failed.is_some()),
            "exists": self.exists(),
            "where": self.whereabouts(queue.failed.is_some()),
            "row": self.row(),
        })
    }

    /// Where the row is, in words: `waiting (in the select)`, `gave up (in
    /// [failed])`, `exists; not in the select, not in [failed]`, `no such row`.
    pub fn whereabouts(&self, has_failed: bool) -> String {
        let neither = match has_failed {
            true => "not in the select, not in [failed]",
            false => "not in the select (the queue has no [failed])",
        };
        match (&self.in_select, &self.in_failed, &self.in_table) {
            (Some(_), _, _) => "waiting (in the select)".to_string(),
            (None, Some(_), _) => "gave up (in [failed])".to_string(),
            (None, None, InTable::Missing) => "no such row".to_string(),
            (None, None, InTable::CannotTell) => format!(
                "{neither}; whether such a row exists cannot be told (the select has a GROUP BY, \
                 HAVING, UNION or WITH)"
            ),
            (None, None, _) => format!("exists; {neither}"),
        }
    }
}

/// Looks for the row whose key is `key` in the queue's select and in `[failed]
/// select`, then in the select's tables, locking nothing.
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
    let in_table = match (&in_select, &in_failed) {
        (None, None) => in_table(conn, queue, &key_name, key).await?,
        _ => InTable::NotLooked,
    };
    Ok(Inspected {
        in_select,
        in_failed,
        in_table,
    })
}

/// Whether the row whose key is `key` is among the rows of `[failed] select` now:
/// its item gave up (false without `[failed]`).
pub async fn gave_up(conn: &mut Conn, queue: &QueueConfig, key: &Value) -> Result<bool, DbError> {
    let Some(failed) = &queue.failed else {
        return Ok(false);
    };
    let name = match &failed.key {
        Some(name) => name.clone(),
        None => key_column(conn, queue).await?,
    };
    let row = one_row(conn, &failed.select, &queue.name, &name, key).await?;
    Ok(row.is_some())
}

/// The row whose key is `key` among the rows of the select's tables, waiting or not.
async fn in_table(
    conn: &mut Conn,
    queue: &QueueConfig,
    key_name: &str,
    key: &Value,
) -> Result<InTable, DbError> {
    let Some((rows, marks)) = rows_whatever_where(&queue.select.positional) else {
        return Ok(InTable::CannotTell);
    };
    let sql = format!(
        "SELECT * FROM ({rows}) AS tableq_row WHERE tableq_row.{} <=> ? LIMIT 1",
        quote_identifier(key_name)
    );
    let mut params = vec![Value::from(queue.name.as_str()); marks];
    params.push(key.clone());
    let statement = conn.prep(&sql).await?;
    let columns = Arc::new(columns_of(&statement));
    let found: Option<Row> = conn.exec_first(&statement, positional(params)).await?;
    let key_index = columns.find(key_name).unwrap_or(0);
    Ok(match found {
        Some(row) => InTable::Found(item_json(&Item::new(columns, row.unwrap(), key_index))),
        None => InTable::Missing,
    })
}

/// The queue's key column: `key`, else the select's first column.
async fn key_column(conn: &mut Conn, queue: &QueueConfig) -> Result<String, DbError> {
    match &queue.key {
        Some(key) => Ok(key.clone()),
        None => first_column(conn, &queue.select.positional).await,
    }
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

/// A queue whose `[failed]` lacks the statements of a change: `retry` and
/// `discard` act only through the SQL the queue file gives them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{file}: queue {queue} has no `[failed] {key}`: add the SQL that {does} one row by its key \
     (see the book's \"Failed rows\")"
)]
pub struct NoFailedSql {
    pub file: String,
    pub queue: String,
    pub key: &'static str,
    pub does: &'static str,
}

/// The queue's `[failed]` table, when it has the statements of `change`.
pub fn failed_for(queue: &QueueConfig, change: Change) -> Result<&FailedConfig, NoFailedSql> {
    match &queue.failed {
        Some(failed) if !failed.statements(change).is_empty() => Ok(failed),
        _ => Err(NoFailedSql {
            file: queue.file.display().to_string(),
            queue: queue.name.clone(),
            key: change.key(),
            does: match change {
                Change::Retry => "puts back into the queue's select",
                Change::Discard => "takes out of `[failed] select` for good",
            },
        }),
    }
}

/// Every key `[failed] select` returns now: the keys of `--all`.
pub async fn all_failed_keys(
    database: &Database,
    queue: &QueueConfig,
    failed: &FailedConfig,
) -> Result<Vec<Key>, DbError> {
    Ok(failed_rows(database, queue, failed, u32::MAX as usize)
        .await?
        .keys)
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
