//! Raw queue file → [`QueueConfig`]: defaults applied, ranges checked, SQL parsed,
//! `${ENV}` replaced. Every problem becomes a [`Finding`] naming the key and what
//! would be right; all of them are collected, not just the first.

mod batch_scope;
pub mod lease_queue;
pub mod names;
pub mod schedule_queue;
pub(crate) mod validator;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::config::action::{ActionConfig, Kinds};
use crate::config::load::raw::{RawOutcome, RawQueue};
use crate::config::queue::recurring::validate as recurring_table;
use crate::config::validate::validator::Validator;
use crate::config::{
    interpolate_secret, QueueConfig, SecretFile, DEFAULT_DATABASE_TIMEOUT, DEFAULT_ERROR_BACKOFF,
    DEFAULT_LOOP_LIMIT, DEFAULT_LOOP_WINDOW, DEFAULT_POLL_INTERVAL, MAX_BATCH, MAX_ERROR_BACKOFF,
    MAX_WORKERS,
};
use crate::diagnostic::Finding;
use crate::sql::statement::ParsedStatement;

pub(crate) fn validate<A: Kinds>(
    mut raw: RawQueue<A>,
    file: &Path,
    source: Arc<str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<QueueConfig, Vec<Finding>> {
    let name = queue_name(&raw, file);
    let mut v = Validator::new(file, &source, &name, env);
    check_name(&mut v, &name, raw.name.is_some());
    // First: a schedule gives the queue its select, key and poll.
    let schedule = crate::config::queue::schedule::validate(&mut v, &mut raw);
    let workers = v.in_range("workers", raw.workers, 1, MAX_WORKERS);
    let batch = v.in_range("batch", raw.batch, 1, MAX_BATCH);
    let Timings {
        poll_interval,
        error_backoff,
        database_timeout,
    } = timings(&mut v, &raw);
    let wake = crate::config::queue::wake::validate(&mut v, &raw);
    let database_url = database_url(&mut v, raw.database_url.as_deref());
    let select = match raw.select.trim().is_empty() {
        true => None,
        false => v.select(&raw.select),
    };
    check_key(&mut v, raw.key.as_deref());
    let action = raw.action.validate(&mut v);
    let flow = flow(&mut v, &raw, &action);
    let mode = crate::config::queue::mode::validate(&mut v, &raw, &action);
    let (on_success, on_failure, on_release) = outcomes(&mut v, &raw);
    let failed = raw
        .failed
        .as_ref()
        .and_then(|f| crate::config::queue::failed::validate(&mut v, f, raw.key.as_deref()));
    let recurring = raw.recurring.as_ref().map(|r| recurring_table(&mut v, r));
    let alerts = alerts(&mut v, &raw);

    let mut findings = v.take_findings();
    let Some(select) = select else {
        return Err(findings);
    };
    let queue = QueueConfig {
        name,
        file: file.to_path_buf(),
        workers,
        batch,
        poll_interval,
        wake,
        error_backoff,
        database_timeout,
        loop_window: flow.loop_window,
        loop_limit: flow.loop_limit,
        rate_limit: flow.rate_limit,
        max_in_flight: flow.max_in_flight,
        limits_across: flow.limits_across,
        concurrency: flow.concurrency,
        circuit: flow.circuit,
        mode,
        secret_variables: secret_variables(&raw, &action),
        secret_files: secret_files(&raw, &action),
        database_url,
        select,
        key: raw.key,
        action,
        on_success,
        on_failure,
        on_release,
        failed,
        recurring,
        schedule,
        alerts,
        monitoring: flow.monitoring,
        source,
    };
    findings.extend(across_tables(&queue));
    if !findings.is_empty() {
        return Err(findings);
    }
    Ok(scheduled(queue))
}

/// A schedule queue with its own statements, which come after the file's were
/// checked: they are tableq's, guarded by the due time and the lease.
fn scheduled(mut queue: QueueConfig) -> QueueConfig {
    if let Some(schedule) = queue.schedule.clone() {
        queue.mode =
            schedule.mode_and_outcomes(&queue.action, &mut queue.on_success, &mut queue.on_failure);
    }
    queue
}

/// What the whole queue, its tables together, refuses.
fn across_tables(queue: &QueueConfig) -> Vec<Finding> {
    // With a literal column list, a name that is not a column is known now: the
    // same finding preparing the queue on its database would give.
    let mut findings = crate::config::validate::names::unknown_literal_names(queue);
    findings.extend(crate::config::validate::lease_queue::unguarded(queue));
    findings.extend(crate::config::validate::schedule_queue::refusals(queue));
    findings.extend(crate::config::validate::batch_scope::batch_scope_refusals(
        queue,
    ));
    findings
}

/// `[alerts]`, validated, with what its conditions need of the rest of the file.
fn alerts<A>(
    v: &mut Validator,
    raw: &RawQueue<A>,
) -> Option<crate::config::queue::alerts::AlertsConfig> {
    let needs = crate::config::queue::alerts::Needs {
        waiting_since: raw.waiting_since.is_some(),
        failed: raw.failed.is_some(),
    };
    crate::config::queue::alerts::validate(v, raw.alerts.as_ref()?, needs)
}

/// `[on_success]` (none: no statement), `[on_failure]` and `[on_release]`, validated.
fn outcomes<A>(v: &mut Validator, raw: &RawQueue<A>) -> (Vec<ParsedStatement>, Outcome, Outcome) {
    let mut table = |key: &str, outcome: &Option<RawOutcome>| {
        outcome
            .as_ref()
            .map(|o| v.statements(&[key, "sql"], &o.sql))
    };
    let on_success = table("on_success", &raw.on_success);
    let on_failure = table("on_failure", &raw.on_failure);
    let on_release = table("on_release", &raw.on_release);
    (on_success.unwrap_or_default(), on_failure, on_release)
}

/// An outcome table's statements, if the file has it.
type Outcome = Option<Vec<ParsedStatement>>;

/// `database_url` with its `${ENV}` and `${file:…}` replaced.
fn database_url(v: &mut Validator, url: Option<&str>) -> Option<String> {
    let interpolated = interpolate_secret(url?, v.env);
    interpolated
        .map_err(|e| v.error(&["database_url"], format!("`database_url`: {e}")))
        .ok()
}

/// The queue's durations, checked.
struct Timings {
    poll_interval: Duration,
    error_backoff: Duration,
    database_timeout: Duration,
}

fn timings<A>(v: &mut Validator, raw: &RawQueue<A>) -> Timings {
    let poll_interval = v.positive(&["poll_interval"], raw.poll_interval, DEFAULT_POLL_INTERVAL);
    let error_backoff = v.positive(&["error_backoff"], raw.error_backoff, DEFAULT_ERROR_BACKOFF);
    if error_backoff > MAX_ERROR_BACKOFF {
        let message = "`error_backoff` must be at most 1m: it doubles up to one minute";
        v.error(&["error_backoff"], message);
    }
    let database_timeout = v.positive(
        &["database_timeout"],
        raw.database_timeout,
        DEFAULT_DATABASE_TIMEOUT,
    );
    Timings {
        poll_interval,
        error_backoff,
        database_timeout,
    }
}

/// The queue's flow control, checked.
struct Flow {
    loop_window: Duration,
    loop_limit: u32,
    rate_limit: Option<crate::config::Rate>,
    max_in_flight: Option<usize>,
    limits_across: crate::config::queue::limits::Across,
    concurrency: Option<crate::config::queue::limits::Concurrency>,
    /// `stats_interval`, `waiting_cap`, `waiting_since`.
    monitoring: crate::config::Monitoring,
    circuit: Option<crate::config::CircuitConfig>,
}

fn flow<A>(v: &mut Validator, raw: &RawQueue<A>, action: &ActionConfig) -> Flow {
    let loop_limit = raw.loop_limit.or(Some(DEFAULT_LOOP_LIMIT));
    Flow {
        loop_window: loop_window(v, raw),
        loop_limit: v.in_range("loop_limit", loop_limit, 1, 1000) as u32,
        rate_limit: rate_limit(v, raw),
        max_in_flight: raw
            .max_in_flight
            .map(|n| v.in_range("max_in_flight", Some(n), 1, MAX_WORKERS)),
        limits_across: v.across(raw.limits.as_deref()),
        concurrency: v.concurrency(raw.concurrency.as_ref()),
        monitoring: crate::config::queue::monitoring::monitoring(v, raw),
        circuit: crate::config::queue::circuit::validate(v, raw.circuit.as_ref(), action),
    }
}

/// `loop_window`: zero turns the watch off; otherwise at most a day.
fn loop_window<A>(v: &mut Validator, raw: &RawQueue<A>) -> Duration {
    match raw.loop_window {
        Some(window) if window.is_zero() => window,
        window => v.positive(&["loop_window"], window, DEFAULT_LOOP_WINDOW),
    }
}

/// `rate_limit = "N/s"` (or `/m`, `/h`).
fn rate_limit<A>(v: &mut Validator, raw: &RawQueue<A>) -> Option<crate::config::Rate> {
    let text = raw.rate_limit.as_deref()?;
    let rate = crate::config::Rate::parse(text);
    if rate.is_none() {
        let message = format!(
            "`rate_limit` = {text:?} is not a rate: write items per second, minute or hour, e.g. \"50/s\", \"600/m\""
        );
        v.error(&["rate_limit"], message);
    }
    rate
}

/// The variables `database_url` and the action's secrets name.
fn secret_variables<A>(raw: &RawQueue<A>, action: &ActionConfig) -> Vec<String> {
    let mut names = raw
        .database_url
        .as_deref()
        .map(crate::config::variables)
        .unwrap_or_default();
    names.extend(action.common().secret_variables.iter().cloned());
    if let Some(alerts) = &raw.alerts {
        names.extend(crate::config::queue::alerts::secret_variables(alerts));
    }
    names
}

/// The files `database_url`, `signing_secret` and the headers read (`${file:…}`).
fn secret_files<A>(raw: &RawQueue<A>, action: &ActionConfig) -> Vec<SecretFile> {
    let mut found: Vec<SecretFile> = raw
        .database_url
        .as_deref()
        .map(crate::config::files)
        .unwrap_or_default()
        .into_iter()
        .map(|path| SecretFile {
            path,
            key: vec!["database_url".into()],
        })
        .collect();
    found.extend(action.common().secret_files.iter().cloned());
    if let Some(alerts) = &raw.alerts {
        found.extend(crate::config::queue::alerts::secret_files(alerts));
    }
    found
}

/// `name`, else the file's stem.
fn queue_name<A>(raw: &RawQueue<A>, file: &Path) -> String {
    let stem = file.file_stem().map(|s| s.to_string_lossy().into_owned());
    raw.name.clone().or(stem).unwrap_or_default()
}

/// `key`, if given, names something.
fn check_key(v: &mut Validator, key: Option<&str>) {
    if key.is_some_and(|k| k.trim().is_empty()) {
        v.error(
            &["key"],
            "`key` is empty: name the column that identifies a row, e.g. key = \"id\"",
        );
    }
}

fn check_name(v: &mut Validator, name: &str, named: bool) {
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if valid {
        return;
    }
    let why = if named {
        format!("`name` = {name:?} is not a valid queue name")
    } else {
        format!("the file name gives the queue name {name:?}, which is not valid; set `name`")
    };
    v.error(
        &["name"],
        format!("{why}: use letters, digits, `_` and `-`"),
    );
}
