//! The proof of `[failed]`: on the first row `[failed] select` returns, `retry`
//! must put the row back into the queue's select and out of `[failed] select`, and
//! `discard` must take it out of both — each in an XA transaction rolled back, so
//! nothing changes.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row, Value};

use super::queries::{WaitingRows, Xa};
use crate::config::queue::failed::{Change, FailedConfig};
use crate::config::QueueConfig;
use crate::db::error::{describe_error, is_statement_error};
use crate::db::failed::{positional, queue_params, row_params};
use crate::db::prepared::PreparedQueue;
use crate::db::value::value_text;
use crate::diagnostic::{Finding, Severity};
use crate::sql::statement::{first_word, never_commits};

/// Where the sample row is after a change: in the queue's select, in `[failed]
/// select`.
struct After {
    in_select: bool,
    in_failed: bool,
}

/// `[failed]`'s findings: the proof of `retry` and `discard`, or why it could not run.
pub async fn prove(
    conn: &mut Conn,
    queue: &QueueConfig,
    prepared: &PreparedQueue,
) -> Result<Vec<Finding>, mysql_async::Error> {
    let Some(failed) = &queue.failed else {
        return Ok(Vec::new());
    };
    let key_name = failed
        .key
        .clone()
        .or_else(|| prepared.columns.names.get(prepared.key_index).cloned())
        .unwrap_or_default();
    let first = format!("{}\nLIMIT 1", failed.select.positional);
    let sample: Option<Row> = match conn
        .exec_first(first, positional(queue_params(&failed.select, &queue.name)))
        .await
    {
        Ok(row) => row,
        Err(e) if is_statement_error(&e) => {
            return Ok(vec![failed_finding(
                queue,
                "select",
                Severity::Error,
                format!("the server rejects it: {}", describe_error(&e)),
            )])
        }
        Err(e) => return Err(e),
    };
    let Some(row) = sample else {
        return Ok(vec![failed_finding(
            queue,
            "select",
            Severity::Note,
            "not proven: no row has given up: retry and discard are proven on one when there is"
                .to_string(),
        )]);
    };
    let Some(key) = row.get::<Value, _>(key_name.as_str()) else {
        let message = format!(
            "`failed.select` does not return `{key_name}`: retry and discard name the row by it, \
             so `tableq retry --all` could not find the rows; add it to the columns"
        );
        return Ok(vec![failed_finding(
            queue,
            "select",
            Severity::Error,
            message,
        )]);
    };
    let mut findings = Vec::new();
    for change in [Change::Retry, Change::Discard] {
        if !failed.statements(change).is_empty() {
            findings.extend(prove_change(conn, queue, failed, change, &key_name, &key).await?);
        }
    }
    Ok(findings)
}

/// Runs `change` on the row `key` in an XA transaction (or a plain one, where the
/// server has no XA and the statements cannot commit), looks where the row is, and
/// rolls back.
async fn prove_change(
    conn: &mut Conn,
    queue: &QueueConfig,
    failed: &FailedConfig,
    change: Change,
    key_name: &str,
    key: &Value,
) -> Result<Option<Finding>, mysql_async::Error> {
    // Without XA (a Galera node), only statements that cannot commit are run.
    let plain = failed
        .statements(change)
        .iter()
        .all(|s| never_commits(&s.text));
    let xa = Xa::start_or_plain(conn, plain).await?;
    let after = change_and_look(conn, queue, failed, change, key_name, key).await;
    xa.roll_back(conn).await?;
    let shown = value_text(key);
    // A retry that INSERTs puts the job back as a new row, under a new key (a
    // framework's failed_jobs): it cannot be looked for by this one.
    let copies = failed
        .statements(change)
        .iter()
        .any(|s| first_word(&s.text).as_deref() == Some("INSERT"));
    let problem = match (change, after?) {
        (_, Err(why)) => why,
        (
            Change::Retry,
            Ok(After {
                in_select: false, ..
            }),
        ) if !copies => {
            "leaves the row out of the queue's select: after retry it must be waiting again".into()
        }
        (
            Change::Retry,
            Ok(After {
                in_failed: true, ..
            }),
        ) => "leaves the row in `[failed] select`: after retry it has not given up".into(),
        (
            Change::Discard,
            Ok(After {
                in_failed: true, ..
            }),
        ) => "leaves the row in `[failed] select`: discard must take it out for good".into(),
        (
            Change::Discard,
            Ok(After {
                in_select: true, ..
            }),
        ) => "puts the row into the queue's select: discard must not run it again".into(),
        _ => return Ok(None),
    };
    let message = format!(
        "`failed.{}` on row {key_name} = {shown}: {problem}",
        change.key()
    );
    Ok(Some(failed_finding(
        queue,
        change.key(),
        Severity::Error,
        message,
    )))
}

/// Runs `change`'s statements for `key`, then counts the row in both selects; a
/// statement the server refuses is the finding's text.
async fn change_and_look(
    conn: &mut Conn,
    queue: &QueueConfig,
    failed: &FailedConfig,
    change: Change,
    key_name: &str,
    key: &Value,
) -> Result<Result<After, String>, mysql_async::Error> {
    for statement in failed.statements(change) {
        let params = row_params(statement, &queue.name, key);
        match conn.exec_drop(&statement.positional, params).await {
            Ok(()) => {}
            Err(e) if is_statement_error(&e) => {
                return Ok(Err(format!("fails: {}", describe_error(&e))))
            }
            Err(e) => return Err(e),
        }
    }
    let select_params = positional(queue_params(&queue.select, &queue.name));
    let failed_params = positional(queue_params(&failed.select, &queue.name));
    let waiting = WaitingRows::prepare(conn, &queue.select, &select_params, &[key_name]).await?;
    let gave_up = WaitingRows::prepare(conn, &failed.select, &failed_params, &[key_name]).await?;
    let key = std::slice::from_ref(key);
    Ok(Ok(After {
        in_select: waiting.count(conn, key).await? > 0,
        in_failed: gave_up.count(conn, key).await? > 0,
    }))
}

fn failed_finding(queue: &QueueConfig, key: &str, severity: Severity, message: String) -> Finding {
    queue.finding(severity, &["failed", key], message)
}
