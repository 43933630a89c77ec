//! What `check` warns about from the queue file alone. (The errors the file alone
//! reveals are the loader's — `run` refuses them too; see [`crate::names`].) These
//! are warnings: `run` logs them and runs.

use crate::config::QueueConfig;
use crate::diagnostic::{Finding, Severity};
use crate::sql_shape::restricts_to_key;
use crate::sql_text::ParsedStatement;

/// The warnings the file alone gives, with `key` the key column's name if known.
pub fn warnings(queue: &QueueConfig, key: Option<&str>) -> Vec<Finding> {
    let mut findings: Vec<Finding> = missing_on_failure(queue).into_iter().collect();
    if let Some(key) = key {
        findings.extend(outcome_not_by_key(queue, key));
    }
    findings
}

/// Without `[on_failure]`, a failing item is back at once, at the front.
pub fn missing_on_failure(queue: &QueueConfig) -> Option<Finding> {
    queue.on_failure.is_none().then(|| {
        queue.finding(
            Severity::Warning,
            &["action"],
            "no [on_failure]: a failing item returns to the queue at once and is retried forever, \
             at the front of the queue; record the failure on the row (attempts, retry_at, status) \
             so it leaves the query",
        )
    })
}

/// An `UPDATE` or `DELETE` in outcome SQL whose WHERE does not use `:key`.
pub fn outcome_not_by_key(queue: &QueueConfig, key: &str) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut check = |path: &[&str], statements: &[ParsedStatement]| {
        for (index, statement) in statements.iter().enumerate() {
            if restricts_to_key(&statement.text, key) != Some(false) {
                continue;
            }
            let index_text = index.to_string();
            let mut at = path.to_vec();
            if statements.len() > 1 {
                at.push(&index_text);
            }
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
    check(&["on_success", "sql"], &queue.on_success);
    if let Some(on_failure) = &queue.on_failure {
        check(&["on_failure", "sql"], on_failure);
    }
    findings
}
