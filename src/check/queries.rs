//! Every statement `check` runs of its own, named by intent: the session's lock wait
//! and handler counters, what information_schema says of a table (what it is, and
//! a view's tables, are [`crate::db::views`]'), counts of waiting rows read without
//! locking, and the XA transaction the proof runs in.
//! A question the server refuses (an unknown table, a missing privilege) is
//! answered `None`; only a lost connection is an error.

use std::sync::atomic::{AtomicU64, Ordering};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Params, Row, Statement, Value};

use crate::db::error::is_statement_error;
use crate::db::views::refused_is_none;
use crate::sql::lex::quote_identifier;
use crate::sql::shape::TableRef;
use crate::sql::statement::ParsedStatement;

/// How long check's statements wait for a row lock a running transaction holds
/// before giving up (the server's default is 50 s).
pub const LOCK_WAIT_SECONDS: u32 = 5;

/// Makes the session give up on a row lock after `seconds`.
pub async fn limit_lock_waits(conn: &mut Conn, seconds: u32) -> Result<(), mysql_async::Error> {
    conn.query_drop(format!("SET SESSION innodb_lock_wait_timeout = {seconds}"))
        .await
}

/// The DATETIME columns of `table` (none when it is not found, or the server
/// refuses to say).
pub async fn datetime_columns(
    conn: &mut Conn,
    table: &TableRef,
) -> Result<Vec<String>, mysql_async::Error> {
    let sql = "SELECT COLUMN_NAME FROM information_schema.COLUMNS \
               WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? \
               AND DATA_TYPE = 'datetime'";
    let params = (table.schema.clone(), table.name.clone());
    let found: Option<Vec<String>> = refused_is_none(conn.exec(sql, params).await)?;
    Ok(found.unwrap_or_default())
}

/// Rows the session's handlers have examined so far: the `Handler_read_%` counters,
/// plus the rows index condition pushdown looked at inside the engine and ruled out
/// (`Handler_icp_attempts` − `Handler_icp_match`, on MariaDB; MySQL has no such
/// counter, so there the figure is a lower bound).
pub async fn rows_examined(conn: &mut Conn) -> Result<u64, mysql_async::Error> {
    let rows: Vec<(String, String)> = conn
        .query(
            "SHOW SESSION STATUS WHERE Variable_name LIKE 'Handler_read%' \
             OR Variable_name IN ('Handler_icp_attempts', 'Handler_icp_match')",
        )
        .await?;
    let (mut read, mut icp_attempts, mut icp_match) = (0u64, 0u64, 0u64);
    for (name, value) in rows {
        let value = value.parse::<u64>().unwrap_or(0);
        match name.to_ascii_lowercase().as_str() {
            "handler_icp_attempts" => icp_attempts = value,
            "handler_icp_match" => icp_match = value,
            _ => read += value,
        }
    }
    Ok(read + icp_attempts.saturating_sub(icp_match))
}

/// Roughly how many rows `table` holds (the server's estimate).
pub async fn table_rows(
    conn: &mut Conn,
    table: &TableRef,
) -> Result<Option<u64>, mysql_async::Error> {
    let found: Option<Option<Option<u64>>> = refused_is_none(
        conn.exec_first(
            "SELECT TABLE_ROWS FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ?",
            (table.schema.clone(), table.name.clone()),
        )
        .await,
    )?;
    Ok(found.flatten().flatten())
}

/// Each index of `table` with its columns in order.
pub async fn indexes(
    conn: &mut Conn,
    table: &TableRef,
) -> Result<Vec<(String, Vec<String>)>, mysql_async::Error> {
    let rows: Vec<(String, String)> = refused_is_none(
        conn.exec(
            "SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS \
             WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? \
             ORDER BY INDEX_NAME, SEQ_IN_INDEX",
            (table.schema.clone(), table.name.clone()),
        )
        .await,
    )?
    .unwrap_or_default();
    let mut indexes: Vec<(String, Vec<String>)> = Vec::new();
    for (index, column) in rows {
        match indexes.last_mut() {
            Some((name, columns)) if *name == index => columns.push(column),
            _ => indexes.push((index, vec![column])),
        }
    }
    Ok(indexes)
}

/// After a rollback: did the server warn that some changes could not be undone
/// (ER_WARNING_NOT_COMPLETE_ROLLBACK: a table that is not transactional)?
pub async fn rollback_was_incomplete(conn: &mut Conn) -> Result<bool, mysql_async::Error> {
    const NOT_COMPLETE_ROLLBACK: u16 = 1196;
    if conn.get_warnings() == 0 {
        return Ok(false);
    }
    let warnings: Vec<Row> = conn.query("SHOW WARNINGS").await?;
    Ok(warnings.iter().any(|w| {
        w.get_opt::<u16, _>("Code")
            .and_then(Result::ok)
            .is_some_and(|code| code == NOT_COMPLETE_ROLLBACK)
    }))
}

/// Counts the rows the select returns right now that have given values in some of
/// its columns — without locking, so rows that running workers hold count too.
pub struct WaitingRows {
    statement: Statement,
    select_params: Vec<Value>,
}

impl WaitingRows {
    /// Prepares `SELECT COUNT(*) FROM (<select>) WHERE <column> <=> ? AND …` for
    /// `columns` (none: every waiting row). `select_params` are the select's own.
    pub async fn prepare(
        conn: &mut Conn,
        select: &ParsedStatement,
        select_params: &Params,
        columns: &[&str],
    ) -> Result<WaitingRows, mysql_async::Error> {
        let conditions: Vec<String> = columns
            .iter()
            .map(|c| format!("tableq_check.{} <=> ?", quote_identifier(c)))
            .collect();
        let filter = if conditions.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", conditions.join(" AND "))
        };
        let sql = format!(
            "SELECT COUNT(*) FROM ({}) AS tableq_check{filter}",
            select.positional
        );
        Ok(WaitingRows {
            statement: conn.prep(sql).await?,
            select_params: match select_params {
                Params::Positional(values) => values.clone(),
                _ => Vec::new(),
            },
        })
    }

    /// How many waiting rows have `values` in the prepared columns.
    pub async fn count(
        &self,
        conn: &mut Conn,
        values: &[Value],
    ) -> Result<u64, mysql_async::Error> {
        let mut params = self.select_params.clone();
        params.extend_from_slice(values);
        let params = if params.is_empty() {
            Params::Empty
        } else {
            Params::Positional(params)
        };
        Ok(conn
            .exec_first::<u64, _, _>(&self.statement, params)
            .await?
            .unwrap_or(0))
    }
}

/// XAER_RMFAIL: inside an XA transaction, the server refuses a COMMIT (or a
/// statement that would commit implicitly) instead of running it.
pub const XA_REFUSED: u16 = 1399;
/// XAER_NOTA: no XA transaction has that id (it ended already).
const XA_UNKNOWN: u16 = 1397;

/// The XA transaction one path of the proof runs in. Inside it the server refuses
/// to COMMIT — even in a procedure the queue's SQL calls — so nothing can be
/// committed; savepoints and every other statement work as usual. Should check
/// lose its connection or stop before [`Xa::roll_back`], the server rolls the
/// transaction back when the session ends: it is never prepared, so never kept.
/// Where the server has no XA (a Galera node refuses XA START), a plain
/// transaction, for statements vetted never to commit ([`Xa::start_or_plain`]).
pub struct Xa {
    /// `None`: a plain transaction.
    xid: Option<String>,
}

/// How an XA transaction ended.
#[derive(Debug)]
pub enum XaEnded {
    RolledBack,
    /// It was gone before check rolled it back: a statement ended it.
    Gone(mysql_async::Error),
}

impl Xa {
    /// Ends whatever transaction the session had open (autocommit is off, so any
    /// statement opens one) and starts an XA transaction with a new id.
    pub async fn start(conn: &mut Conn) -> Result<Xa, mysql_async::Error> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let xid = format!(
            "tableq-check-{}-{}-{}",
            std::process::id(),
            conn.id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        conn.query_drop("ROLLBACK").await?;
        conn.query_drop(format!("XA START '{xid}'")).await?;
        Ok(Xa { xid: Some(xid) })
    }

    /// As [`Xa::start`]; where the server refuses XA START and `plain` says that
    /// nothing the path runs can commit (see
    /// [`never_commits`](crate::sql::statement::never_commits)), a plain transaction
    /// instead (autocommit is off: the next statement opens it), rolled back alike.
    pub async fn start_or_plain(conn: &mut Conn, plain: bool) -> Result<Xa, mysql_async::Error> {
        match Xa::start(conn).await {
            Err(e) if plain && is_statement_error(&e) => {
                conn.query_drop("ROLLBACK").await?;
                Ok(Xa { xid: None })
            }
            started => started,
        }
    }

    /// `XA END` then `XA ROLLBACK`. XA END fails on a transaction the server marked
    /// rollback-only (after a deadlock); XA ROLLBACK ends it all the same.
    pub async fn roll_back(self, conn: &mut Conn) -> Result<XaEnded, mysql_async::Error> {
        let Some(xid) = self.xid else {
            conn.query_drop("ROLLBACK").await?;
            return Ok(XaEnded::RolledBack);
        };
        match conn.query_drop(format!("XA END '{xid}'")).await {
            Ok(()) | Err(mysql_async::Error::Server(_)) => {}
            Err(e) => return Err(e),
        }
        match conn.query_drop(format!("XA ROLLBACK '{xid}'")).await {
            Ok(()) => Ok(XaEnded::RolledBack),
            Err(mysql_async::Error::Server(e)) if e.code == XA_UNKNOWN => {
                Ok(XaEnded::Gone(mysql_async::Error::Server(e)))
            }
            Err(e) => Err(e),
        }
    }
}
