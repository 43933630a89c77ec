//! Asking the server when a queue's next row falls due by time alone: the statement
//! [`crate::sql::due`] reads from the select, run as a plain read (no row locked),
//! its answer turned into how long to wait.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Params, Row, Value};

use crate::sql::due::{DueCondition, NextDue};
use crate::sql::statement::parse_statement;

/// The question, ready to ask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueQuery {
    positional: String,
    /// How many `?`s it has: each is `:queue`, the only parameter a select may use.
    params: usize,
    conditions: Vec<DueCondition>,
}

impl DueQuery {
    pub fn new(next: &NextDue) -> Option<DueQuery> {
        let parsed = parse_statement(&next.sql).ok()?;
        Some(DueQuery {
            positional: parsed.positional,
            params: parsed.params.len(),
            conditions: next.conditions.clone(),
        })
    }

    /// The conditions it asks about, as written in the select.
    pub fn conditions(&self) -> impl Iterator<Item = &str> {
        self.conditions.iter().map(|c| c.text.as_str())
    }
}

/// How long until the first row the select matches falls due by time; `None` when
/// no row will (none waits for the clock). Under autocommit off this opens a
/// transaction: the caller ends it.
pub async fn next_due(
    conn: &mut Conn,
    query: &DueQuery,
    queue: &str,
) -> Result<Option<Duration>, mysql_async::Error> {
    let params = match query.params {
        0 => Params::Empty,
        n => Params::Positional(vec![Value::from(queue); n]),
    };
    let row: Option<Row> = conn.exec_first(query.positional.as_str(), params).await?;
    let values = row.map(Row::unwrap).unwrap_or_default();
    let Some(micros) = values.first().and_then(number) else {
        return Ok(None);
    };
    let waits = query
        .conditions
        .iter()
        .zip(values.iter().skip(1))
        .filter_map(|(condition, until)| {
            Some(condition.wait(micros as i64, number(until)? as i64))
        });
    Ok(waits.min())
}

/// A number the server sent, whatever its type (a DECIMAL comes as text).
fn number(value: &Value) -> Option<f64> {
    match value {
        Value::Int(i) => Some(*i as f64),
        Value::UInt(u) => Some(*u as f64),
        Value::Float(f) => Some(f64::from(*f)),
        Value::Double(d) => Some(*d),
        Value::Bytes(text) => std::str::from_utf8(text).ok()?.trim().parse().ok(),
        _ => None,
    }
    .filter(|n| n.is_finite())
}
