//! What the console does to a queue: pause and resume it (the table `tableq pause`
//! writes), retry and discard rows that gave up (the queue file's `[failed]` SQL,
//! as `tableq retry` and `discard` run it), and look a row up (`tableq inspect`).
//! The same database code as the commands; here, answers for a page or a script.

use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde_json::Value as Json;

use crate::config::queue::failed::Change;
use crate::db::failed::{self, Changed, Key, NoFailedSql};
use crate::db::pause::{self, Paused};
use crate::telemetry::stats::monitor::Setup;
use crate::telemetry::stats::QueueStats;

/// What to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Pause {
        reason: String,
        duration: Option<Duration>,
    },
    Resume,
    /// `[failed] retry` or `discard`, for some rows.
    Change {
        change: Change,
        rows: Rows,
    },
}

/// Which rows that gave up.
#[derive(Debug, Clone, PartialEq)]
pub enum Rows {
    Keys(Vec<String>),
    /// Every row `[failed] select` returns now.
    All,
    /// The keys of a failure kind (its masked text, as the page shows it).
    Group(String),
}

impl Action {
    /// `pause`, `resume`, `retry`, `discard`: what the log and the answer call it.
    pub fn name(&self) -> &'static str {
        match self {
            Action::Pause { .. } => "pause",
            Action::Resume => "resume",
            Action::Change { change, .. } => change.key(),
        }
    }
}

/// What an action did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Acted {
    pub action: &'static str,
    pub queue: String,
    /// Rows changed: by `retry` or `discard`; 1 for a pause or a resume that
    /// changed something, else 0.
    pub rows: u64,
    /// The keys asked for (`retry`, `discard`).
    pub keys: usize,
    /// Keys whose statements changed no row.
    pub unmatched: Vec<String>,
    /// The same in words.
    pub message: String,
}

/// Why an action did nothing.
#[derive(Debug, thiserror::Error)]
pub enum ActError {
    /// The request is not one the endpoint takes.
    #[error("{0}")]
    Bad(String),
    /// The queue has no `[failed]` statement for it.
    #[error("{0}")]
    NoFailedSql(#[from] NoFailedSql),
    /// No failure kind with that text is kept.
    #[error("queue {queue}: no failure kind `{kind}` is kept (the page lists the kinds)")]
    NoSuchGroup { queue: String, kind: String },
    /// The database refused or could not be reached.
    #[error("queue {queue}: {what} failed: {why}")]
    Database {
        queue: String,
        what: String,
        why: String,
    },
}

/// Runs `action` on the queue `setup` describes (its failure kinds from `stats`).
pub async fn act(setup: &Setup, stats: &QueueStats, action: &Action) -> Result<Acted, ActError> {
    let queue = &setup.config;
    match action {
        Action::Pause { reason, duration } => pause_queue(setup, reason, *duration).await,
        Action::Resume => resume_queue(setup).await,
        Action::Change { change, rows } => {
            let failed = failed::failed_for(queue, *change)?;
            let keys = keys_of(setup, stats, failed, rows).await?;
            let done = failed::change(&setup.database, queue, failed, *change, &keys, false).await;
            match done {
                Ok(done) => Ok(changed(&queue.name, *change, &done)),
                Err((_, e)) => Err(database(setup, &format!("[failed] {}", change.key()), e)),
            }
        }
    }
}

/// How many rows `rows` names now, for `change` (a confirmation says it before a
/// bulk discard).
pub async fn rows_count(
    setup: &Setup,
    stats: &QueueStats,
    change: Change,
    rows: &Rows,
) -> Result<usize, ActError> {
    let failed = failed::failed_for(&setup.config, change)?;
    Ok(keys_of(setup, stats, failed, rows).await?.len())
}

/// The keys `rows` means.
async fn keys_of(
    setup: &Setup,
    stats: &QueueStats,
    failed: &crate::config::queue::failed::FailedConfig,
    rows: &Rows,
) -> Result<Vec<Key>, ActError> {
    match rows {
        Rows::Keys(keys) if keys.is_empty() => Err(ActError::Bad(
            "name the rows: {\"keys\": [\"…\"]}, {\"group\": \"…\"} or {\"all\": true}".into(),
        )),
        Rows::Keys(keys) => Ok(keys.iter().map(|k| Key::from_text(k)).collect()),
        Rows::All => failed::all_failed_keys(&setup.database, &setup.config, failed)
            .await
            .map_err(|e| database(setup, "[failed] select", e)),
        Rows::Group(_) if !failed.rows_are_the_queues(&setup.config.select.text) => {
            Err(ActError::Bad(
                "a failure group names the queue's rows by their keys, but [failed] select reads \
                 another table, whose rows have keys of their own: retry or discard them by \
                 those (`tableq failed` lists them), or every row"
                    .into(),
            ))
        }
        Rows::Group(kind) => {
            let kinds = stats.observed.failure_kinds();
            let keys: Vec<Key> = kinds
                .iter()
                .filter(|k| &k.kind == kind)
                .flat_map(|k| k.keys.iter().map(|key| Key::from_text(key)))
                .collect();
            match keys.is_empty() {
                true => Err(ActError::NoSuchGroup {
                    queue: setup.config.name.clone(),
                    kind: kind.clone(),
                }),
                false => Ok(keys),
            }
        }
    }
}

/// The answer to a retry or discard.
fn changed(queue: &str, change: Change, done: &[Changed]) -> Acted {
    let rows: u64 = done.iter().map(|(_, rows)| rows).sum();
    let unmatched: Vec<String> = done
        .iter()
        .filter(|(_, rows)| *rows == 0)
        .map(|(key, _)| key.to_string())
        .collect();
    let verb = match change {
        Change::Retry => "retried",
        Change::Discard => "discarded",
    };
    let mut message = format!(
        "queue {queue}: {verb} {} of {} key{} ({rows} row{} changed)",
        done.len() - unmatched.len(),
        done.len(),
        plural(done.len() as u64),
        plural(rows)
    );
    if !unmatched.is_empty() {
        message.push_str(&format!(
            "; matched no row: {} (not a row that gave up, or no longer one)",
            unmatched.join(", ")
        ));
    }
    Acted {
        action: change.key(),
        queue: queue.to_string(),
        rows,
        keys: done.len(),
        unmatched,
        message,
    }
}

async fn pause_queue(
    setup: &Setup,
    reason: &str,
    duration: Option<Duration>,
) -> Result<Acted, ActError> {
    let queue = &setup.config;
    let timeout = queue.database_timeout;
    let written = pause::pause_on(&setup.database, timeout, &queue.name, duration, reason)
        .await
        .map_err(|e| database(setup, "pause", e))?;
    // Held in this copy before the answer: no claim of it starts after.
    setup
        .here
        .set(Some(written.unwrap_or_else(|| as_asked(reason, duration))));
    let until = match duration {
        Some(d) => format!("for {}", humantime::format_duration(d)),
        None => "until resumed".to_string(),
    };
    Ok(Acted {
        action: "pause",
        queue: queue.name.clone(),
        rows: 1,
        keys: 0,
        unmatched: Vec::new(),
        message: format!(
            "queue {} paused {until}: this copy claims nothing more from now, every other \
             running copy stops claiming it within {}",
            queue.name,
            humantime::format_duration(queue.poll_interval + Duration::from_secs(1))
        ),
    })
}

/// The pause as the console asked for it, when it could not be read back.
fn as_asked(reason: &str, duration: Option<Duration>) -> Paused {
    let since = SystemTime::now();
    Paused {
        reason: reason.to_string(),
        by: "the console".to_string(),
        since,
        until: duration.map(|d| since + d),
    }
}

async fn resume_queue(setup: &Setup) -> Result<Acted, ActError> {
    let queue = &setup.config;
    let resumed = pause::resume_on(&setup.database, queue.database_timeout, &queue.name)
        .await
        .map_err(|e| database(setup, "resume", e))?;
    // This copy claims again at once.
    setup.here.set(None);
    let message = match resumed {
        true => format!(
            "queue {} resumed: this copy claims it again now, every other running copy \
             within {}",
            queue.name,
            humantime::format_duration(queue.poll_interval + Duration::from_secs(1))
        ),
        false => format!("queue {} was not paused", queue.name),
    };
    Ok(Acted {
        action: "resume",
        queue: queue.name.clone(),
        rows: u64::from(resumed),
        keys: 0,
        unmatched: Vec::new(),
        message,
    })
}

/// `tableq inspect` for the console: the row and where it is.
pub async fn inspect(setup: &Setup, key: &str) -> Result<Json, ActError> {
    let queue = &setup.config;
    let found = failed::inspect(&setup.database, queue, &Key::from_text(key))
        .await
        .map_err(|e| database(setup, "select", e))?;
    Ok(found.shown(queue, key))
}

fn database(setup: &Setup, what: &str, why: impl std::fmt::Display) -> ActError {
    ActError::Database {
        queue: setup.config.name.clone(),
        what: what.to_string(),
        why: why.to_string(),
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
