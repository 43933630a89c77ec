//! Raw queue file → [`QueueConfig`]: defaults applied, ranges checked, SQL parsed,
//! `${ENV}` replaced. Every problem becomes a [`Finding`] naming the key and what
//! would be right; all of them are collected, not just the first.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::action::{command_action, http_action};
use super::raw::{RawAction, RawQueue, Statements};
use super::{
    interpolate, line_of, ActionConfig, QueueConfig, SqlAction, DEFAULT_ERROR_BACKOFF,
    DEFAULT_POLL_INTERVAL, DEFAULT_SQL_TIMEOUT, MAX_BATCH, MAX_ERROR_BACKOFF, MAX_WORKERS,
};
use crate::config::names::statement_path;
use crate::db::connect::parse_database_url;
use crate::diagnostic::Finding;
use crate::sql::statement::{
    first_word, parse_statement, sets_only_user_variables, top_level_words, ParsedStatement,
};

/// Parameters every statement may use besides the select's columns.
pub const SELECT_PARAMS: &[&str] = &["queue"];

struct Validator<'a> {
    file: &'a Path,
    source: &'a str,
    queue: String,
    findings: Vec<Finding>,
}

impl Validator<'_> {
    fn error(&mut self, path: &[&str], message: impl Into<String>) {
        let finding = Finding::error(self.file, message)
            .at_line(line_of(self.source, path))
            .in_queue(&self.queue);
        self.findings.push(finding);
    }
}

pub fn validate(
    raw: RawQueue,
    file: &Path,
    source: Arc<str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<QueueConfig, Vec<Finding>> {
    let stem = file.file_stem().map(|s| s.to_string_lossy().into_owned());
    let dir = match file.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
    let dir = dir.as_path();
    let name = raw.name.clone().or(stem).unwrap_or_default();
    let mut v = Validator {
        file,
        source: &source,
        queue: name.clone(),
        findings: Vec::new(),
    };
    if !is_valid_name(&name) {
        let why = if raw.name.is_some() {
            format!("`name` = {name:?} is not a valid queue name")
        } else {
            format!("the file name gives the queue name {name:?}, which is not valid; set `name`")
        };
        v.error(
            &["name"],
            format!("{why}: use letters, digits, `_` and `-`"),
        );
    }

    let workers = in_range(&mut v, "workers", raw.workers, 1, MAX_WORKERS);
    let batch = in_range(&mut v, "batch", raw.batch, 1, MAX_BATCH);
    let poll_interval = positive(
        &mut v,
        &["poll_interval"],
        raw.poll_interval,
        DEFAULT_POLL_INTERVAL,
    );
    let error_backoff = positive(
        &mut v,
        &["error_backoff"],
        raw.error_backoff,
        DEFAULT_ERROR_BACKOFF,
    );
    if error_backoff > MAX_ERROR_BACKOFF {
        v.error(
            &["error_backoff"],
            "`error_backoff` must be at most 1m: it doubles up to one minute",
        );
    }

    let database_url = raw.database_url.as_ref().and_then(|url| {
        let url = match interpolate(url, env) {
            Ok(url) => url,
            Err(e) => {
                v.error(&["database_url"], format!("`database_url`: {e}"));
                return None;
            }
        };
        if let Err(e) = parse_database_url(&url) {
            v.error(&["database_url"], format!("`database_url`: {e}"));
        }
        Some(url)
    });

    let select = select_statement(&mut v, &raw.select);
    if raw.key.as_deref().is_some_and(|k| k.trim().is_empty()) {
        v.error(
            &["key"],
            "`key` is empty: name the column that identifies a row, e.g. key = \"id\"",
        );
    }

    let action = match &raw.action {
        RawAction::Sql(sql) => {
            let statements = statements(&mut v, &["action", "sql"], &sql.sql);
            let timeout = positive(
                &mut v,
                &["action", "timeout"],
                sql.timeout,
                DEFAULT_SQL_TIMEOUT,
            );
            ActionConfig::Sql(SqlAction {
                statements,
                timeout,
            })
        }
        RawAction::Http(http) => ActionConfig::Http(outside_action(
            &mut v,
            |problems| http_action(http, dir, env, problems),
            |action| &mut action.timeout,
        )),
        RawAction::Command(command) => ActionConfig::Command(outside_action(
            &mut v,
            |problems| command_action(command, dir, env, problems),
            |action| &mut action.timeout,
        )),
    };
    let on_success = raw
        .on_success
        .as_ref()
        .map(|o| statements(&mut v, &["on_success", "sql"], &o.sql))
        .unwrap_or_default();
    let on_failure = raw
        .on_failure
        .as_ref()
        .map(|o| statements(&mut v, &["on_failure", "sql"], &o.sql));

    let mut findings = std::mem::take(&mut v.findings);
    let Some(select) = select else {
        return Err(findings);
    };
    let queue = QueueConfig {
        name,
        file: file.to_path_buf(),
        workers,
        batch,
        poll_interval,
        error_backoff,
        database_url,
        select,
        key: raw.key,
        action,
        on_success,
        on_failure,
        source,
    };
    // With a literal column list, a name that is not a column is known now: the
    // same finding preparing the queue on its database would give.
    findings.extend(crate::config::names::unknown_names(&queue));
    if !findings.is_empty() {
        return Err(findings);
    }
    Ok(queue)
}

/// Builds an HTTP or command action, reporting its problems and checking its timeout.
fn outside_action<A>(
    v: &mut Validator,
    build: impl FnOnce(&mut Vec<super::action::ActionProblem>) -> A,
    timeout: impl FnOnce(&mut A) -> &mut Duration,
) -> A {
    let mut problems = Vec::new();
    let mut action = build(&mut problems);
    report(v, problems);
    let limit = timeout(&mut action);
    *limit = positive(v, &["action", "timeout"], Some(*limit), *limit);
    action
}

fn report(v: &mut Validator, problems: Vec<super::action::ActionProblem>) {
    for (path, message) in problems {
        let path: Vec<&str> = path.iter().map(String::as_str).collect();
        v.error(&path, message);
    }
}

fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn in_range(v: &mut Validator, key: &str, value: Option<u32>, min: usize, max: usize) -> usize {
    let Some(value) = value else { return min };
    let value = value as usize;
    if value < min || value > max {
        v.error(
            &[key],
            format!("`{key}` = {value} is out of range: use {min} to {max}"),
        );
    }
    value
}

/// The longest duration a queue file may give: a day.
const MAX_DURATION: Duration = Duration::from_secs(24 * 60 * 60);

fn positive(
    v: &mut Validator,
    path: &[&str],
    value: Option<Duration>,
    default: Duration,
) -> Duration {
    let value = value.unwrap_or(default);
    let key = path.join(".");
    if value.is_zero() {
        v.error(
            path,
            format!(
                "`{key}` must be longer than zero, e.g. \"{}\"",
                humantime::format_duration(default)
            ),
        );
    } else if value > MAX_DURATION {
        v.error(
            path,
            format!(
                "`{key}` = {} is too long: at most 24h",
                humantime::format_duration(value)
            ),
        );
        return default;
    }
    value
}

/// The queue's select: one SELECT that tableq can append its claim clause to.
fn select_statement(v: &mut Validator, text: &str) -> Option<ParsedStatement> {
    let parsed = match parse_statement(text) {
        Ok(parsed) => parsed,
        Err(e) => {
            v.error(&["select"], format!("`select`: {e}"));
            return None;
        }
    };
    if !matches!(first_word(&parsed.text).as_deref(), Some("SELECT" | "WITH")) {
        v.error(
            &["select"],
            "`select` must be a SELECT statement that returns the rows waiting for work",
        );
    }
    let words = top_level_words(&parsed.text);
    let has = |seq: &[&str]| {
        words
            .windows(seq.len())
            .any(|w| w.iter().zip(seq).all(|(a, b)| a == b))
    };
    let appended = "tableq appends `LIMIT <batch> FOR UPDATE SKIP LOCKED` itself";
    if has(&["LIMIT"]) {
        v.error(
            &["select"],
            format!("`select` ends in LIMIT: {appended}; remove it and set `batch` instead"),
        );
    }
    for clause in [
        &["FOR", "UPDATE"][..],
        &["FOR", "SHARE"],
        &["LOCK", "IN", "SHARE", "MODE"],
        &["SKIP", "LOCKED"],
        &["NOWAIT"],
    ] {
        if has(clause) {
            v.error(
                &["select"],
                format!("`select` has `{}`: {appended}; remove it", clause.join(" ")),
            );
        }
    }
    if has(&["INTO"]) {
        v.error(
            &["select"],
            "`select` has INTO: it must return the rows to the worker, not store them",
        );
    }
    for set_op in ["UNION", "INTERSECT", "EXCEPT"] {
        if has(&[set_op]) {
            v.error(
                &["select"],
                format!(
                    "`select` uses {set_op}: rows of a {set_op} cannot be locked; select from the \
                     queue's table (a join locks the rows it joins too: test other tables in an \
                     `EXISTS (SELECT …)` subquery)"
                ),
            );
        }
    }
    if let Some(param) = parsed
        .params
        .iter()
        .find(|p| !SELECT_PARAMS.contains(&p.as_str()))
    {
        v.error(
            &["select"],
            format!("`select` uses `:{param}`: the select can only use `:queue`; write the condition into the SQL"),
        );
    }
    Some(parsed)
}

/// Statements that commit or end the transaction the item's lock lives in.
const TRANSACTION_BREAKERS: &[&str] = &[
    "BEGIN",
    "START",
    "COMMIT",
    "ROLLBACK",
    "SAVEPOINT",
    "RELEASE",
    "LOCK",
    "UNLOCK",
    "CREATE",
    "ALTER",
    "DROP",
    "TRUNCATE",
    "RENAME",
    "GRANT",
    "REVOKE",
    "FLUSH",
    "XA",
    "ANALYZE",
    "OPTIMIZE",
    "REPAIR",
    "INSTALL",
    "RESET",
    "UNINSTALL",
];

/// Action or outcome statements: each parsed, none allowed to end the transaction.
fn statements(v: &mut Validator, path: &[&str], statements: &Statements) -> Vec<ParsedStatement> {
    let key = path.join(".");
    let mut parsed = Vec::new();
    for (index, text) in statements.0.iter().enumerate() {
        let at = statement_path(path, index, statements.0.len());
        let at: Vec<&str> = at.iter().map(String::as_str).collect();
        let statement = match parse_statement(text) {
            Ok(statement) => statement,
            Err(e) => {
                v.error(&at, format!("`{key}`: {e}"));
                continue;
            }
        };
        let first = first_word(&statement.text).unwrap_or_default();
        let words = top_level_words(&statement.text);
        let second = words.get(1).map(String::as_str).unwrap_or_default();
        let commits = TRANSACTION_BREAKERS.contains(&first.as_str())
            || matches!(
                (first.as_str(), second),
                ("CHECK", "TABLE") | ("LOAD", "INDEX") | ("CACHE", "INDEX")
            );
        if commits {
            v.error(
                &at,
                format!(
                    "`{key}`: `{first}` would end or commit the transaction that holds the item's lock; \
                     tableq begins and commits it around your statements"
                ),
            );
            continue;
        }
        if (first == "SET" && !sets_only_user_variables(&statement.text)) || first == "USE" {
            v.error(
                &at,
                format!(
                    "`{key}`: `{first}` would change the session tableq relies on (isolation level, \
                     autocommit, database); only user variables (`SET @x = …`) may be set"
                ),
            );
            continue;
        }
        parsed.push(statement);
    }
    parsed
}
