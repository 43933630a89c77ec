//! `[failed]`: what "gave up" means for a queue, in the user's own SQL — the rows
//! that gave up (`select`), and how an operator puts one back into the queue
//! (`retry`) or takes it out of `[failed] select` for good (`discard`). tableq runs
//! them for `tableq failed`, `inspect`, `retry` and `discard`; `check` proves them.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::config::validate::validator::Validator;
use crate::config::value::statements::Statements;
use crate::sql::statement::{first_word, parse_statement, top_level_words, ParsedStatement};
use crate::sql::tables::from_tables;

/// `[failed]` as written.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawFailed {
    /// The rows that gave up, with the columns an operator wants to see (the key
    /// among them), newest first. No LIMIT: `tableq failed --limit N` adds it.
    pub select: String,
    /// Puts one row back into the queue's select: one statement or an array, with
    /// :queue and the key column (`WHERE id = :id AND …`).
    pub retry: Option<Statements>,
    /// Takes one row out of `[failed] select` for good, with the same parameters.
    pub discard: Option<Statements>,
}

/// `[failed]`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedConfig {
    pub select: ParsedStatement,
    pub retry: Vec<ParsedStatement>,
    pub discard: Vec<ParsedStatement>,
    /// The column `retry` and `discard` name the row by (`:id`): a column of
    /// `[failed] select`, and the queue's key.
    pub key: Option<String>,
}

/// Which of `[failed]`'s changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Retry,
    Discard,
}

impl Change {
    /// The key of `[failed]` that holds it.
    pub fn key(self) -> &'static str {
        match self {
            Change::Retry => "retry",
            Change::Discard => "discard",
        }
    }
}

impl FailedConfig {
    /// Whether the rows that gave up are the queue's own rows, named by the same key
    /// (false when `[failed] select` reads another table: a framework's
    /// `failed_jobs`, whose ids are not the jobs' — a failure's item key then names
    /// no row of it).
    pub fn rows_are_the_queues(&self, queue_select: &str) -> bool {
        let queue = from_tables(queue_select);
        from_tables(&self.select.text)
            .iter()
            .all(|failed| queue.iter().any(|q| q.same_as(failed)))
    }

    /// The statements of `change` (none when the file has no such key).
    pub fn statements(&self, change: Change) -> &[ParsedStatement] {
        match change {
            Change::Retry => &self.retry,
            Change::Discard => &self.discard,
        }
    }
}

/// Validates `[failed]`; `queue_key` is the queue's `key`, if the file sets one.
pub(crate) fn validate(
    v: &mut Validator,
    raw: &RawFailed,
    queue_key: Option<&str>,
) -> Option<FailedConfig> {
    let select = failed_select(v, &raw.select);
    let retry = raw
        .retry
        .as_ref()
        .map(|s| v.statements(&["failed", "retry"], s))
        .unwrap_or_default();
    let discard = raw
        .discard
        .as_ref()
        .map(|s| v.statements(&["failed", "discard"], s))
        .unwrap_or_default();
    let key = row_key(v, &retry, &discard, queue_key);
    Some(FailedConfig {
        select: select?,
        retry,
        discard,
        key,
    })
}

/// `[failed] select`: one SELECT with no LIMIT or locking clause, using only `:queue`.
fn failed_select(v: &mut Validator, text: &str) -> Option<ParsedStatement> {
    let at = ["failed", "select"];
    let parsed = match parse_statement(text) {
        Ok(parsed) => parsed,
        Err(e) => {
            v.error(&at, format!("`failed.select`: {e}"));
            return None;
        }
    };
    if !matches!(first_word(&parsed.text).as_deref(), Some("SELECT" | "WITH")) {
        v.error(
            &at,
            "`failed.select` must be a SELECT statement that returns the rows that gave up",
        );
    }
    let words = top_level_words(&parsed.text);
    if words.iter().any(|w| w == "LIMIT" || w == "INTO")
        || words.windows(2).any(|w| w == ["FOR", "UPDATE"])
    {
        v.error(
            &at,
            "`failed.select` must not end in LIMIT, INTO or FOR UPDATE: `tableq failed --limit N` \
             adds the LIMIT, and nothing is locked",
        );
    }
    if let Some(param) = parsed.params.iter().find(|p| *p != "queue") {
        v.error(
            &at,
            format!("`failed.select` uses `:{param}`: it can only use `:queue`"),
        );
    }
    Some(parsed)
}

/// The one column `retry` and `discard` name the row by: every parameter but
/// `:queue` must be it, and it must be the queue's `key` when the file sets one.
fn row_key(
    v: &mut Validator,
    retry: &[ParsedStatement],
    discard: &[ParsedStatement],
    queue_key: Option<&str>,
) -> Option<String> {
    let mut names: Vec<&str> = retry
        .iter()
        .chain(discard)
        .flat_map(|s| s.params.iter().map(String::as_str))
        .filter(|p| *p != "queue")
        .collect();
    names.sort_unstable();
    names.dedup();
    let at = match retry.is_empty() {
        true => ["failed", "discard"],
        false => ["failed", "retry"],
    };
    match (names.as_slice(), queue_key) {
        ([], _) if !retry.is_empty() || !discard.is_empty() => v.error(
            &at,
            "`[failed]` retry and discard must name the row by its key (`WHERE id = :id`)",
        ),
        ([name], Some(key)) if *name != key => v.error(
            &at,
            format!("`[failed]` names the row by `:{name}`, but the queue's key is `{key}`: use `:{key}`"),
        ),
        ([name], _) => return Some(name.to_string()),
        ([], _) => {}
        (several, _) => v.error(
            &at,
            format!(
                "`[failed]` retry and discard may use `:queue` and the key column only, not `:{}`",
                several.join("`, `:")
            ),
        ),
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(select: &str) -> FailedConfig {
        FailedConfig {
            select: parse_statement(select).unwrap(),
            retry: Vec::new(),
            discard: Vec::new(),
            key: None,
        }
    }

    #[test]
    fn rows_that_gave_up_in_another_table_are_not_the_queues() {
        let queue = "SELECT id, payload FROM jobs WHERE queue = 'default' ORDER BY id";
        let own = failed("SELECT id, error FROM jobs WHERE state = 'failed' ORDER BY id DESC");
        assert!(own.rows_are_the_queues(queue));
        let framework = failed("SELECT id, uuid, exception FROM failed_jobs ORDER BY id DESC");
        assert!(!framework.rows_are_the_queues(queue));
    }
}
