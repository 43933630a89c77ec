//! What `check` warns about from the queue file alone. (The errors the file alone
//! reveals are the loader's — `run` refuses them too; see [`crate::config::validate::names`].) These
//! are warnings: `run` logs them and runs.

use crate::config::statement_path;
use crate::config::value::secret_file::{others_can_read, readable_by_others};
use crate::config::QueueConfig;
use crate::diagnostic::{Finding, Severity};
use crate::sql::shape::{from_tables, restricts_to_key, statement_target, TableRef};
use crate::sql::statement::ParsedStatement;

/// The warnings the file alone gives, with `key` the key column's name if known.
pub fn warnings(queue: &QueueConfig, key: Option<&str>) -> Vec<Finding> {
    let mut findings: Vec<Finding> = missing_on_failure(queue).into_iter().collect();
    if let Some(key) = key {
        findings.extend(outcome_not_by_key(queue, key));
    }
    findings.extend(queue.action.kind().warnings(&queue.site()));
    findings.extend(crate::config::validate::lease_queue::session_clock_warnings(queue));
    findings.extend(secret_files_others_can_read(queue));
    findings
}

/// A `${file:…}` whose file every user of the machine can read.
pub fn secret_files_others_can_read(queue: &QueueConfig) -> Vec<Finding> {
    let mut findings = Vec::new();
    for secret in &queue.secret_files {
        let Some(mode) = readable_by_others(&secret.path) else {
            continue;
        };
        let key: Vec<&str> = secret.key.iter().map(String::as_str).collect();
        let what = format!(
            "`{}` reads its secret from {}",
            key.join("."),
            secret.path.display()
        );
        let message = others_can_read(&what, &secret.path, mode);
        findings.push(queue.finding(Severity::Warning, &key, message));
    }
    findings
}

/// Without `[on_failure]`, a failing item is back at once, at the front.
/// In lease mode it comes back when released, or when its lease expires.
pub fn missing_on_failure(queue: &QueueConfig) -> Option<Finding> {
    let back = if queue.is_lease() {
        "is released (release_sql) or waits for its lease to expire, and is then retried \
         forever"
    } else {
        "returns to the queue at once and is retried forever, at the front of the queue"
    };
    queue.on_failure.is_none().then(|| {
        queue.finding(
            Severity::Warning,
            &["action"],
            format!(
                "no [on_failure]: a failing item {back}; record the failure on the row (attempts, \
                 retry_at, status) so it leaves the query"
            ),
        )
    })
}

/// An `UPDATE` or `DELETE` in outcome SQL on one of the select's tables whose
/// WHERE does not use `:key`. (A statement on another table — a counter, a log —
/// touches no queued row.) In batch scope there is no `:key`: the proof shows
/// instead that the batch's outcome touches no row outside the batch.
pub fn outcome_not_by_key(queue: &QueueConfig, key: &str) -> Vec<Finding> {
    if queue.scope() == crate::config::Scope::Batch {
        return Vec::new();
    }
    let queued = from_tables(&queue.select.text);
    let mut findings = Vec::new();
    let mut check = |path: &[&str], statements: &[ParsedStatement]| {
        for (index, statement) in statements.iter().enumerate() {
            if restricts_to_key(&statement.text, key) != Some(false)
                || on_another_table(&statement.text, &queued)
            {
                continue;
            }
            let at = statement_path(path, index, statements.len());
            let at: Vec<&str> = at.iter().map(String::as_str).collect();
            findings.push(queue.finding(
                Severity::Warning,
                &at,
                format!(
                    "`{}` does not touch the item's row by its key (no `:{key}` in its WHERE): a \
                     range of rows here locks rows other workers hold, and deadlocks against \
                     them; write `WHERE {key} = :{key}`",
                    path.join(".")
                ),
            ));
        }
    };
    for (path, list) in queue.outcome_statements() {
        check(&path, list);
    }
    findings
}

/// Whether `sql` surely writes to none of `queued` (the select's tables): when
/// either side cannot be read, it may be one of them.
fn on_another_table(sql: &str, queued: &[TableRef]) -> bool {
    match statement_target(sql) {
        Some(target) if !queued.is_empty() => !queued.iter().any(|t| t.same_as(&target)),
        _ => false,
    }
}
