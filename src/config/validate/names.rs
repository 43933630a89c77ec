//! How a queue's statements and placeholders name the select's columns, and the
//! words for a name that is not there. The same words come from the loader (when the
//! select's column list is literal, before any database is asked) and from preparing
//! the queue on its database, so a user sees one message for one mistake.

use crate::config::{statement_path, QueueConfig, Scope};
use crate::diagnostic::{Finding, Severity};
use crate::sql::shape::literal_columns;
use crate::sql::statement::ParsedStatement;

/// A parameter every statement may use besides the select's columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuiltIn {
    /// `:queue`, the queue's name.
    Queue,
    /// `:error`, why the action failed.
    Error,
    /// `:status`, the HTTP status or exit code.
    Status,
    /// `:output`, the response body or standard output.
    Output,
    /// `:retry_after`, seconds from an HTTP `Retry-After` header.
    RetryAfter,
    /// `:release_after`, the seconds a released row waits (`[on_release]`).
    ReleaseAfter,
    /// `:next_run`, with `[recurring]`: the row's next due time after now, from its
    /// cron expression (UTC `DATETIME(6)` text).
    NextRun,
    /// `:skipped`, on a schedule: the due times the run passed over.
    Skipped,
    /// `:retry_at`, on a schedule: a failed run's retry within its period (NULL
    /// when none fits).
    RetryAt,
    /// `:lease_id`, the claim's own token (lease mode).
    LeaseId,
    /// `:new_lease_id`, the token a renewal gives the lease (lease mode).
    NewLeaseId,
    /// `:worker`, the process and worker holding the lease: `host:pid:index`.
    Worker,
    /// `:progress`, the last progress line the command reported (lease mode).
    Progress,
    /// `:batch`, in batch scope: the items as a JSON array; with `outcomes`, each
    /// object also has `error`, `status`, `output` and `retry_after`.
    Batch { outcomes: bool },
}

/// Which parameters a statement may use besides the select's columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamScope {
    /// It runs after the action: `:error`, `:status`, … exist.
    pub outcome: bool,
    /// It belongs to a lease-mode queue: `:lease_id`, `:worker`, `:progress` exist.
    pub lease: bool,
    /// The queue's `scope`: in batch scope only `:batch` and `:queue` exist.
    pub scope: Scope,
    /// The queue has `[recurring]` or a schedule: outcome statements have
    /// `:next_run` (and `:skipped`, `:retry_at`).
    pub recurring: bool,
}

impl BuiltIn {
    /// The built-in parameter called `name`, if there is one in `scope` (`:error` and
    /// friends after the action; `:lease_id` and friends in lease mode). It wins
    /// over a column of the same name (the article's table has a `status` column):
    /// alias the column to use it.
    pub fn named(name: &str, scope: ParamScope) -> Option<BuiltIn> {
        let outcome = scope.outcome;
        if scope.scope == Scope::Batch {
            return match name {
                "queue" => Some(BuiltIn::Queue),
                "batch" => Some(BuiltIn::Batch { outcomes: outcome }),
                _ => None,
            };
        }
        match name {
            "queue" => Some(BuiltIn::Queue),
            "lease_id" if scope.lease => Some(BuiltIn::LeaseId),
            "new_lease_id" if scope.lease => Some(BuiltIn::NewLeaseId),
            "worker" if scope.lease => Some(BuiltIn::Worker),
            "progress" if scope.lease => Some(BuiltIn::Progress),
            "error" if outcome => Some(BuiltIn::Error),
            "status" if outcome => Some(BuiltIn::Status),
            "output" if outcome => Some(BuiltIn::Output),
            "retry_after" if outcome => Some(BuiltIn::RetryAfter),
            "release_after" if outcome => Some(BuiltIn::ReleaseAfter),
            // In lease mode the claim's lease SQL has them too, as if the run were
            // done at the claim (a schedule with `overlap` re-arms there).
            "next_run" if (outcome || scope.lease) && scope.recurring => Some(BuiltIn::NextRun),
            "skipped" if (outcome || scope.lease) && scope.recurring => Some(BuiltIn::Skipped),
            "retry_at" if outcome && scope.recurring => Some(BuiltIn::RetryAt),
            _ => None,
        }
    }
}

/// The names of the parameters outcome statements may use besides the columns.
pub const OUTCOME_PARAMS: &str = ":queue, :error, :status, :output, :retry_after, :release_after";
/// The names lease mode adds, in every statement of the queue.
pub const LEASE_PARAMS: &str = ":lease_id, :new_lease_id, :worker, :progress";

/// The index of the column called `name`: the exact name, else the only one that
/// matches ignoring case (MySQL compares column names that way).
pub fn find_column(columns: &[String], name: &str) -> Option<usize> {
    if let Some(exact) = columns.iter().position(|c| c == name) {
        return Some(exact);
    }
    let mut folded = columns
        .iter()
        .enumerate()
        .filter(|(_, c)| c.eq_ignore_ascii_case(name));
    match (folded.next(), folded.next()) {
        (Some((index, _)), None) => Some(index),
        _ => None,
    }
}

/// `` `on_success.sql` uses `:x`, which is not a column the select returns (id) … ``
fn unknown_param(key: &str, name: &str, columns: &[String], scope: ParamScope) -> String {
    if name == "next_run" && scope.outcome {
        return format!(
            "`{key}` uses `:next_run`, which exists only with `[recurring]`: add \
             `[recurring] cron_column = \"…\"` naming the select's column that holds each \
             row's cron expression (or return a column named next_run)"
        );
    }
    let mut specials = if scope.outcome {
        OUTCOME_PARAMS
    } else {
        ":queue"
    }
    .to_string();
    if scope.lease {
        specials = format!("{specials}, {LEASE_PARAMS}");
    }
    let batch = if name == "batch" {
        " (`:batch` exists with scope = \"batch\")"
    } else {
        ""
    };
    format!(
        "`{key}` uses `:{name}`, which is not a column the select returns ({}) nor one of {specials}{batch}",
        columns.join(", ")
    )
}

/// `` `action.url` uses `{x}`, which is not a column the select returns (id) … ``
fn unknown_placeholder(key: &str, name: &str, columns: &[String]) -> String {
    format!(
        "`{key}` uses `{{{name}}}`, which is not a column the select returns ({}) nor `{{queue}}`",
        columns.join(", ")
    )
}

/// `` `key` = "x" is not a column the select returns (id, …) ``
fn unknown_key(key: &str, columns: &[String]) -> String {
    format!(
        "`key` = {key:?} is not a column the select returns ({})",
        columns.join(", ")
    )
}

/// `` `waiting_since` = "x" is not a column the select returns (id, …) `` (or
/// `label`).
fn unknown_named_column(key: &str, name: &str, columns: &[String]) -> String {
    format!(
        "`{key}` = {name:?} is not a column the select returns ({}); add it to the select, or name one it returns",
        columns.join(", ")
    )
}

/// When the select's column list is literal: every `:param`, `{placeholder}` and
/// the `key` that cannot name one of its columns, as errors. Nothing when the list
/// is not literal (`*`, expressions without aliases): the database says then.
pub fn unknown_literal_names(queue: &QueueConfig) -> Vec<Finding> {
    match literal_columns(&queue.select.text) {
        Some(columns) => unknown_names(queue, &columns),
        None => Vec::new(),
    }
}

/// Every `:param`, `{placeholder}` and the `key` of `queue` that names none of
/// `columns` (nor a built-in parameter), as errors. The loader asks with the select's
/// literal columns, `run` with the columns its database reports: one rule, one
/// message for one mistake. (In batch scope, statements and placeholders name no
/// columns: [`crate::config::validate::batch_scope::batch_scope_refusals`] says so.)
pub fn unknown_names(queue: &QueueConfig, columns: &[String]) -> Vec<Finding> {
    let mut found: Vec<(Vec<String>, String)> = Vec::new();
    let batch = queue.scope() == Scope::Batch;
    let lease = queue.is_lease();
    let mut statements = |path: &[&str], list: &[ParsedStatement], outcome: bool| {
        if batch {
            return;
        }
        let scope = ParamScope {
            outcome,
            lease,
            scope: Scope::Item,
            recurring: queue.rearms_rows(),
        };
        for (index, statement) in list.iter().enumerate() {
            for name in &statement.params {
                let known =
                    BuiltIn::named(name, scope).is_some() || find_column(columns, name).is_some();
                if !known {
                    let message = unknown_param(&path.join("."), name, columns, scope);
                    found.push((statement_path(path, index, list.len()), message));
                }
            }
        }
    };
    if let Some(action) = queue.action.kind().statements() {
        statements(&["action", action.key], action.list, false);
    }
    for (path, list) in queue.outcome_statements() {
        statements(&path, list, true);
    }
    if let Some(lease) = queue.lease() {
        statements(&["lease", "sql"], &lease.sql, false);
        for (path, list) in [
            ("renew_sql", &lease.renew_sql),
            ("release_sql", &lease.release_sql),
        ] {
            if let Some(list) = list {
                statements(&["lease", path], list, false);
            }
        }
    }
    for (key, name) in queue.action.placeholders() {
        if !batch && name != "queue" && find_column(columns, name).is_none() {
            let message = unknown_placeholder(key, name, columns);
            found.push((key.split('.').map(str::to_string).collect(), message));
        }
    }
    if let Some(key) = &queue.key {
        if find_column(columns, key).is_none() {
            found.push((vec!["key".to_string()], unknown_key(key, columns)));
        }
    }
    let recurring = queue.recurring.as_ref();
    let named = [
        ("waiting_since", queue.monitoring.waiting_since.as_ref()),
        ("label", queue.monitoring.label.as_ref()),
        ("recurring.cron_column", recurring.map(|r| &r.cron_column)),
        (
            "recurring.timezone_column",
            recurring.and_then(|r| r.timezone_column.as_ref()),
        ),
    ];
    for (key, name) in named {
        let Some(name) = name else { continue };
        if !name.trim().is_empty() && find_column(columns, name).is_none() {
            let message = unknown_named_column(key, name, columns);
            found.push((key.split('.').map(str::to_string).collect(), message));
        }
    }
    found
        .into_iter()
        .map(|(path, message)| {
            let path: Vec<&str> = path.iter().map(String::as_str).collect();
            queue.finding(Severity::Error, &path, message)
        })
        .collect()
}

/// The key column's name, as far as the text tells: `key`, else the first column of
/// a literal list.
pub fn key_name(queue: &QueueConfig) -> Option<String> {
    queue.key.clone().or_else(|| {
        literal_columns(&queue.select.text).and_then(|columns| columns.into_iter().next())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_columns_exactly_then_ignoring_case_when_unambiguous() {
        let columns: Vec<String> = ["id", "Name", "NAME2", "a", "A"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(find_column(&columns, "name"), Some(1));
        assert_eq!(find_column(&columns, "A"), Some(4));
        assert_eq!(find_column(&columns, "nope"), None);
        let folded: Vec<String> = vec!["Ab".into(), "aB".into()];
        assert_eq!(find_column(&folded, "ab"), None);
    }

    #[test]
    fn outcome_parameters_exist_only_after_the_action() {
        let before = ParamScope {
            outcome: false,
            lease: false,
            scope: Scope::Item,
            recurring: false,
        };
        let after = ParamScope {
            outcome: true,
            ..before
        };
        assert_eq!(BuiltIn::named("error", after), Some(BuiltIn::Error));
        assert_eq!(BuiltIn::named("error", before), None);
        assert_eq!(BuiltIn::named("queue", before), Some(BuiltIn::Queue));
        assert_eq!(BuiltIn::named("batch", after), None);
        assert_eq!(BuiltIn::named("lease_id", after), None);
        assert_eq!(BuiltIn::named("next_run", after), None);
        let recurring = ParamScope {
            recurring: true,
            ..after
        };
        assert_eq!(
            BuiltIn::named("next_run", recurring),
            Some(BuiltIn::NextRun)
        );
        let recurring_before = ParamScope {
            recurring: true,
            ..before
        };
        assert_eq!(BuiltIn::named("next_run", recurring_before), None);
        let leased = ParamScope {
            lease: true,
            ..before
        };
        assert_eq!(BuiltIn::named("lease_id", leased), Some(BuiltIn::LeaseId));
    }

    #[test]
    fn batch_scope_has_only_batch_and_queue() {
        let before = ParamScope {
            outcome: false,
            lease: false,
            scope: Scope::Batch,
            recurring: false,
        };
        let after = ParamScope {
            outcome: true,
            ..before
        };
        let outcomes = BuiltIn::Batch { outcomes: true };
        assert_eq!(BuiltIn::named("batch", after), Some(outcomes));
        assert_eq!(BuiltIn::named("queue", before), Some(BuiltIn::Queue));
        assert_eq!(BuiltIn::named("error", after), None);
    }
}
