//! `[recurring]` checked on the database: the cron expressions (and time zones) of
//! a sample of waiting rows — the select's first [`SAMPLE`] rows, read without
//! locking — are read as `run` reads them, and each row that would fail is named by
//! its key, with why. And the proof's `:next_run`: a sampled row's own next due
//! time, as `run` would bind it.

use std::time::SystemTime;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};

use crate::config::QueueConfig;
use crate::db::error::is_statement_error;
use crate::db::item::Item;
use crate::db::prepared::PreparedQueue;
use crate::diagnostic::{Finding, Severity};

/// How many waiting rows have their expressions tried.
pub const SAMPLE: usize = 100;
/// How many bad rows a finding names.
const NAMED: usize = 5;

/// A warning naming the sampled rows whose cron expression or time zone cannot be
/// used (each would fail, its action not run); nothing without `[recurring]`, or
/// when the select cannot be read (other checks say why).
pub async fn bad_expressions(
    conn: &mut Conn,
    queue: &QueueConfig,
    prepared: &PreparedQueue,
) -> Result<Option<Finding>, mysql_async::Error> {
    let Some(recurring) = &queue.recurring else {
        return Ok(None);
    };
    let sql = format!("{}\nLIMIT {SAMPLE}", queue.select.positional);
    let rows: Vec<Row> = match conn.exec(sql, prepared.claim_params(&queue.name)).await {
        Ok(rows) => rows,
        Err(e) if is_statement_error(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    let read = rows.len();
    let key = prepared.columns.names.get(prepared.key_index).cloned();
    let bad: Vec<String> = rows
        .into_iter()
        .map(|row| prepared.item(row))
        .filter_map(|item| {
            let why = item.schedule(recurring).err()?;
            let key = key.as_deref().unwrap_or("key");
            Some(format!("{key} = {}: {why}", item.key_text()))
        })
        .collect();
    if bad.is_empty() {
        return Ok(None);
    }
    let more = match bad.len() > NAMED {
        true => format!("; and {} more", bad.len() - NAMED),
        false => String::new(),
    };
    let named: Vec<&str> = bad.iter().take(NAMED).map(String::as_str).collect();
    Ok(Some(queue.finding(
        Severity::Warning,
        &["recurring", "cron_column"],
        format!(
            "{} of the {read} waiting rows read have a schedule tableq cannot use: each fails \
             (its action not run, [on_failure] told why) until its expression is fixed — {}{more}",
            bad.len(),
            named.join("; "),
        ),
    )))
}

/// The `:next_run` the proof binds for `item`: its next due time after now, as
/// `run` binds it — or, for a row whose schedule cannot be read (which
/// [`bad_expressions`] names), a minute from now, so that the proof goes on; `None`
/// without `[recurring]`.
pub fn sample_next_run(queue: &QueueConfig, item: &Item) -> Option<SystemTime> {
    let now = SystemTime::now();
    let own = item.schedule(queue.recurring.as_ref()?).ok();
    let own = own.and_then(|schedule| schedule.next_run(now).ok());
    Some(own.unwrap_or(now + std::time::Duration::from_secs(60)))
}
