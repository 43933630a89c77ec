//! What information_schema says a table is, and the base tables behind a view
//! (through the views it reads): the server's list where it keeps one (MySQL's
//! VIEW_TABLE_USAGE), else the view's definition as the server stored it, read
//! with [`crate::sql::tables::tables_read`]. The binary log names base tables, never
//! views, and `check` judges their engines: both ask here. A question the server
//! refuses (an unknown table, a missing privilege) is answered `None`; only a lost
//! connection is an error.

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use super::error::is_statement_error;
use crate::sql::tables::{tables_read, TableRef};

/// How many views deep a view is followed before giving up on it.
const MAX_VIEWS: usize = 32;

/// What information_schema calls a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableKind {
    /// A base table and its engine.
    Base(String),
    View,
    /// A sequence, a system view, …
    Other,
}

/// `Ok(None)` for a question the server refuses; a lost connection stays an error.
pub fn refused_is_none<T>(
    answer: Result<T, mysql_async::Error>,
) -> Result<Option<T>, mysql_async::Error> {
    match answer {
        Ok(answer) => Ok(Some(answer)),
        Err(e) if is_statement_error(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Two columns of `select_from` (an information_schema table with TABLE_SCHEMA and
/// TABLE_NAME) for `table`; `None` when there is no such row or the server refuses.
async fn information_schema_pair(
    conn: &mut Conn,
    select_from: &str,
    table: &TableRef,
) -> Result<Option<(String, Option<String>)>, mysql_async::Error> {
    let sql =
        format!("{select_from} WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ?");
    let params = (table.schema.clone(), table.name.clone());
    let found: Option<Option<(String, Option<String>)>> =
        refused_is_none(conn.exec_first(sql, params).await)?;
    Ok(found.flatten())
}

/// What `table` is; `None` when there is no such table (a CTE's name, an alias).
pub async fn table_kind(
    conn: &mut Conn,
    table: &TableRef,
) -> Result<Option<TableKind>, mysql_async::Error> {
    let found = information_schema_pair(
        conn,
        "SELECT TABLE_TYPE, ENGINE FROM information_schema.TABLES",
        table,
    )
    .await?;
    Ok(found.map(|(kind, engine)| match kind.as_str() {
        "BASE TABLE" => TableKind::Base(engine.unwrap_or_default()),
        "VIEW" => TableKind::View,
        _ => TableKind::Other,
    }))
}

/// The tables and views `view` reads, from information_schema.VIEW_TABLE_USAGE
/// (MySQL ≥ 8.0.13); `None` where the server has no such table, or lists nothing.
async fn tables_a_view_uses(
    conn: &mut Conn,
    view: &TableRef,
) -> Result<Option<Vec<TableRef>>, mysql_async::Error> {
    let rows: Option<Vec<(String, String)>> = refused_is_none(
        conn.exec(
            "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.VIEW_TABLE_USAGE \
             WHERE VIEW_SCHEMA = COALESCE(?, DATABASE()) AND VIEW_NAME = ?",
            (view.schema.clone(), view.name.clone()),
        )
        .await,
    )?;
    Ok(rows.filter(|rows| !rows.is_empty()).map(|rows| {
        rows.into_iter()
            .map(|(schema, name)| TableRef {
                schema: Some(schema),
                name,
            })
            .collect()
    }))
}

/// A view's schema and its definition as the server keeps it (names qualified with
/// their schema); `None` when it cannot be read (no SHOW VIEW privilege).
async fn view_definition(
    conn: &mut Conn,
    view: &TableRef,
) -> Result<Option<(String, String)>, mysql_async::Error> {
    let found = information_schema_pair(
        conn,
        "SELECT TABLE_SCHEMA, VIEW_DEFINITION FROM information_schema.VIEWS",
        view,
    )
    .await?;
    Ok(found
        .and_then(|(schema, definition)| Some((schema, definition?)))
        .filter(|(_, definition)| !definition.trim().is_empty()))
}

/// The base tables behind `view` and their engines, through the views it reads;
/// `None` when they cannot all be told (a definition the user may not read, one
/// that names no table or one that cannot be parsed, views nested too deep).
pub async fn behind(
    conn: &mut Conn,
    view: &TableRef,
) -> Result<Option<Vec<(TableRef, String)>>, mysql_async::Error> {
    let mut pending = vec![view.clone()];
    let mut bases = Vec::new();
    let mut followed = 0;
    while let Some(view) = pending.pop() {
        followed += 1;
        if followed > MAX_VIEWS {
            return Ok(None);
        }
        let Some(used) = tables_in_view(conn, &view).await? else {
            return Ok(None);
        };
        for table in used {
            match table_kind(conn, &table).await? {
                Some(TableKind::Base(engine)) => bases.push((table, engine)),
                Some(TableKind::View) => pending.push(table),
                Some(TableKind::Other) => {}
                None => return Ok(None),
            }
        }
    }
    Ok(Some(bases))
}

/// The tables and views a view reads: as the server lists them where it does
/// (MySQL), else as its definition names them.
async fn tables_in_view(
    conn: &mut Conn,
    view: &TableRef,
) -> Result<Option<Vec<TableRef>>, mysql_async::Error> {
    if let Some(used) = tables_a_view_uses(conn, view).await? {
        return Ok(Some(used));
    }
    let Some((schema, definition)) = view_definition(conn, view).await? else {
        return Ok(None);
    };
    Ok(tables_read(&definition).map(|tables| {
        tables
            .into_iter()
            .map(|t| TableRef {
                // An unqualified name in a definition is of the view's own schema.
                schema: t.schema.or_else(|| Some(schema.clone())),
                name: t.name,
            })
            .collect()
    }))
}

/// Tables as the binary log names them: a select's, with each view among them
/// replaced by the base tables behind it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeenThrough {
    pub tables: Vec<TableRef>,
    /// The views that were replaced, each with the base tables behind it.
    pub views: Vec<(TableRef, Vec<TableRef>)>,
    /// The views whose tables cannot be told: the log shows no change to them.
    pub unseen: Vec<TableRef>,
}

/// `tables`, each view among them replaced by the base tables behind it.
pub async fn seen_through(
    conn: &mut Conn,
    tables: &[TableRef],
) -> Result<SeenThrough, mysql_async::Error> {
    let mut seen = SeenThrough::default();
    for table in tables {
        if table_kind(conn, table).await? != Some(TableKind::View) {
            seen.tables.push(table.clone());
            continue;
        }
        match behind(conn, table).await? {
            Some(bases) => {
                let bases: Vec<TableRef> = bases.into_iter().map(|(base, _)| base).collect();
                seen.tables.extend(bases.iter().cloned());
                seen.views.push((table.clone(), bases));
            }
            None => seen.unseen.push(table.clone()),
        }
    }
    Ok(seen)
}
