//! What `scope = "batch"` refuses of a queue as a whole: a statement that names
//! one item's column (there is no one item: it joins `:batch` by key instead, and
//! the refusal shows that form, built from the queue's own key), and a kind's
//! `{column}` placeholder when one action serves the whole batch, `[on_release]`,
//! and `[recurring]`.

use crate::config::queue::scope::{is_batch_param, Scope, BATCH_PARAMS};
use crate::config::validate::names::key_name;
use crate::config::{statement_path, QueueConfig};
use crate::diagnostic::{Finding, Severity};
use crate::sql::statement::ParsedStatement;
use crate::sql::tables::from_tables;

/// In batch scope: every statement parameter other than `:batch` and `:queue`, and
/// every `{column}` placeholder of a kind that sends the batch as one, as errors
/// showing what to write instead. Nothing in item scope, nor in lease mode (which
/// refuses batch scope as a whole).
pub fn batch_scope_refusals(queue: &QueueConfig) -> Vec<Finding> {
    if queue.scope() != Scope::Batch {
        return Vec::new();
    }
    let mut found = Vec::new();
    if queue.on_release.is_some() {
        found.push(queue.finding(
            Severity::Error,
            &["on_release"],
            "`[on_release]` does not apply in scope = \"batch\": a batch is recorded as one, \
             and a release or a handler's death there is recorded by [on_failure]; remove \
             [on_release], or use scope = \"item\"",
        ));
    }
    if queue.recurring.is_some() {
        found.push(queue.finding(
            Severity::Error,
            &["recurring"],
            "`[recurring]` does not apply in scope = \"batch\": `:next_run` is one row's, and a \
             batch's statements run once for all its rows; use scope = \"item\" (the default)",
        ));
    }
    let mut statements = |path: &[&str], list: &[ParsedStatement]| {
        for (index, statement) in list.iter().enumerate() {
            let at = statement_path(path, index, list.len());
            let at: Vec<&str> = at.iter().map(String::as_str).collect();
            for name in statement.params.iter().filter(|n| !is_batch_param(n)) {
                let message = column_in_batch_scope(queue, &path.join("."), name);
                found.push(queue.finding(Severity::Error, &at, message));
            }
        }
    };
    if let Some(action) = queue.action.kind().statements() {
        statements(&["action", action.key], action.list);
    }
    for (path, list) in queue.outcome_statements() {
        statements(&path, list);
    }
    found.extend(queue.action.kind().batch_scope_refusals(&queue.site()));
    if queue.action.kind().sends_each_item() {
        return found;
    }
    for (key, name) in queue.action.placeholders() {
        if name != "queue" {
            let message = format!(
                "`{key}` uses `{{{name}}}`: with scope = \"batch\" one action serves the whole batch, \
                 so only `{{queue}}` can be filled in; the items arrive in the body (or on stdin) as a \
                 JSON array"
            );
            let path: Vec<&str> = key.split('.').collect();
            found.push(queue.finding(Severity::Error, &path, message));
        }
    }
    found
}

/// `` `on_success.sql` uses `:id`: … `UPDATE email JOIN JSON_TABLE(…) …` ``
fn column_in_batch_scope(queue: &QueueConfig, key: &str, name: &str) -> String {
    let column = key_name(queue).unwrap_or_else(|| "id".to_string());
    let table = from_tables(&queue.select.text)
        .into_iter()
        .next()
        .map_or_else(|| "your_table".to_string(), |t| t.name);
    format!(
        "`{key}` uses `:{name}`, but with scope = \"batch\" a statement runs once per batch and has only \
         {BATCH_PARAMS}: `:batch` is the items as a JSON array of objects keyed by the select's columns \
         (plus error, status, output and retry_after in [on_success] and [on_failure]); join it by the \
         key, e.g. `UPDATE {table} JOIN JSON_TABLE(:batch, '$[*]' COLUMNS ({column} BIGINT PATH \
         '$.{column}')) AS b USING ({column}) SET …`"
    )
}
