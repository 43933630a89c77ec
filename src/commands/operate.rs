//! Operating the queues' failed rows: `tableq failed` lists what `[failed] select`
//! returns, `inspect` shows one row, `retry` and `discard` run `[failed] retry` or
//! `discard` for given keys or all of them, and say what each changed.

use super::cli::{ChangeArgs, FailedArgs, InspectArgs, RowsFormat};
use super::failure::Failure;
use super::load::load;
use super::stdout;
use crate::config::queue::failed::{Change, FailedConfig};
use crate::config::{QueueConfig, QueueSource};
use crate::db::failed::{self, Changed, Key, Rows};
use crate::db::{Database, DbError};
use crate::engine::queue::supervisor::resolve_databases;

/// `tableq failed`: each queue's failed rows, as text or one JSON array.
pub async fn failed_command(args: FailedArgs, url: Option<&str>) -> Result<(), Failure> {
    let names: Vec<String> = args.queue.iter().cloned().collect();
    let queues = queues(args.paths, names, url)?;
    let with_failed: Vec<_> = queues.iter().filter(|(q, _)| q.failed.is_some()).collect();
    if with_failed.is_empty() {
        return Err(Failure::Usage(
            "no queue here has a [failed] table: add one naming the rows that gave up (see the \
             book's \"Failed rows\")"
                .into(),
        ));
    }
    if args.format == RowsFormat::Json && with_failed.len() > 1 {
        return Err(Failure::Usage(format!(
            "--format json prints one queue's rows: choose it with --queue NAME (of {})",
            names_of(&with_failed)
        )));
    }
    for (queue, database) in with_failed {
        let Some(failed) = &queue.failed else {
            continue;
        };
        let rows = failed::failed_rows(database, queue, failed, args.limit as usize)
            .await
            .map_err(|e| runtime(queue, database, "[failed] select", &e))?;
        match args.format {
            RowsFormat::Json => stdout::line(serde_json::Value::Array(rows.rows))?,
            RowsFormat::Text => print_text(queue, &rows)?,
        }
    }
    Ok(())
}

/// `queue NAME: N rows`, then the column names and a line a row, tab-separated.
fn print_text(queue: &QueueConfig, rows: &Rows) -> Result<(), Failure> {
    let count = rows.rows.len();
    stdout::line(format_args!(
        "queue {}: {count} row{}",
        queue.name,
        if count == 1 { "" } else { "s" }
    ))?;
    let Some(serde_json::Value::Object(first)) = rows.rows.first() else {
        return Ok(());
    };
    let names: Vec<&str> = first.keys().map(String::as_str).collect();
    stdout::line(names.join("\t"))?;
    for row in &rows.rows {
        let cells: Vec<String> = names
            .iter()
            .map(|name| match &row[*name] {
                serde_json::Value::String(text) => text.replace(['\t', '\n', '\r'], " "),
                other => other.to_string(),
            })
            .collect();
        stdout::line(cells.join("\t"))?;
    }
    Ok(())
}

/// `tableq inspect`: one row, as JSON, with where it is now; a key no row has
/// fails (exit 1).
pub async fn inspect_command(args: InspectArgs, url: Option<&str>) -> Result<(), Failure> {
    let (queue, database) = &one_queue(args.paths, args.queue, url)?;
    let key = Key::from_text(&args.key);
    let found = failed::inspect(database, queue, &key)
        .await
        .map_err(|e| runtime(queue, database, "select", &e))?;
    let shown = found.shown(queue, &args.key);
    stdout::line(serde_json::to_string_pretty(&shown).unwrap_or_default())?;
    match found.exists() {
        Some(false) => Err(Failure::Runtime(format!(
            "{}: queue {}: key {}: no such row (the queue's select, without its WHERE, returns \
             none)",
            queue.file.display(),
            queue.name,
            args.key
        ))),
        _ => Ok(()),
    }
}

/// `tableq retry` and `tableq discard`.
pub async fn change_command(
    args: ChangeArgs,
    change: Change,
    url: Option<&str>,
) -> Result<(), Failure> {
    let (queue, database) = &one_queue(args.paths, args.queue, url)?;
    let failed = statements_of(queue, change)?;
    let keys: Vec<Key> = match args.all {
        true => all_keys(database, queue, failed).await?,
        false => args.keys.iter().map(|k| Key::from_text(k)).collect(),
    };
    let result = failed::change(database, queue, failed, change, &keys, args.dry_run).await;
    let (done, error) = match result {
        Ok(done) => (done, None),
        Err((done, e)) => (done, Some(e)),
    };
    let unmatched = report(queue, change, args.dry_run, &done)?;
    if let Some(e) = error {
        let key = keys.get(done.len()).map(Key::to_string).unwrap_or_default();
        let what = format!("[failed] {} (for key {key})", change.key());
        return Err(runtime(queue, database, &what, &e));
    }
    match unmatched {
        0 => Ok(()),
        n => Err(Failure::Runtime(format!(
            "{n} key{} matched no row: not a row of queue {}, or no longer one that `[failed] {}` changes",
            if n == 1 { "" } else { "s" },
            queue.name,
            change.key()
        ))),
    }
}

/// Every key `[failed] select` returns now.
async fn all_keys(
    database: &Database,
    queue: &QueueConfig,
    failed: &FailedConfig,
) -> Result<Vec<Key>, Failure> {
    failed::all_failed_keys(database, queue, failed)
        .await
        .map_err(|e| runtime(queue, database, "[failed] select", &e))
}

/// Prints a line a key and a total; returns how many keys matched nothing.
fn report(
    queue: &QueueConfig,
    change: Change,
    dry_run: bool,
    done: &[Changed],
) -> Result<usize, Failure> {
    let verb = match (change, dry_run) {
        (Change::Retry, false) => "retried",
        (Change::Retry, true) => "would retry",
        (Change::Discard, false) => "discarded",
        (Change::Discard, true) => "would discard",
    };
    let mut unmatched = 0;
    for (key, rows) in done {
        match rows {
            0 => {
                unmatched += 1;
                stdout::line(format_args!("{}: key {key}: matched no row", queue.name))?;
            }
            n => stdout::line(format_args!(
                "{}: key {key}: {verb} ({n} row{} changed)",
                queue.name,
                plural(*n)
            ))?,
        }
    }
    let changed = done.iter().filter(|(_, rows)| *rows > 0).count();
    stdout::line(format_args!(
        "{}: {verb} {changed} of {} key{}{}",
        queue.name,
        done.len(),
        plural(done.len() as u64),
        if dry_run {
            " (dry run: nothing changed)"
        } else {
            ""
        }
    ))?;
    Ok(unmatched)
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The queue's `[failed]` table, when it has the statements of `change`.
fn statements_of(queue: &QueueConfig, change: Change) -> Result<&FailedConfig, Failure> {
    failed::failed_for(queue, change).map_err(|e| Failure::Usage(e.to_string()))
}

/// The queues named (all, when none is), each with its database.
pub(super) fn queues(
    paths: Vec<std::path::PathBuf>,
    names: Vec<String>,
    url: Option<&str>,
) -> Result<Vec<(QueueConfig, Database)>, Failure> {
    let queues = load(&QueueSource { paths, names })?;
    resolve_databases(queues, url).map_err(Failure::Config)
}

/// The queue a command for one queue acts on: the one `--queue` names, or the only
/// queue the files hold.
pub(super) fn one_queue(
    paths: Vec<std::path::PathBuf>,
    name: Option<String>,
    url: Option<&str>,
) -> Result<(QueueConfig, Database), Failure> {
    let mut found = queues(paths, name.into_iter().collect(), url)?;
    match found.len() {
        1 => Ok(found.remove(0)),
        n => {
            let all: Vec<&(QueueConfig, Database)> = found.iter().collect();
            Err(Failure::Usage(format!(
                "these files hold {n} queues ({}): choose one with --queue NAME",
                names_of(&all)
            )))
        }
    }
}

/// What went wrong running `what` on `database`, in words naming file and queue (a
/// refused login as `run` says it).
pub(super) fn runtime(
    queue: &QueueConfig,
    database: &Database,
    what: &str,
    e: &DbError,
) -> Failure {
    let why = match e.is_access_denied() {
        true => database.refused_login(e),
        false => format!("{what} failed: {e}"),
    };
    Failure::Runtime(format!(
        "{}: queue {}: {why}",
        queue.file.display(),
        queue.name
    ))
}

fn names_of(queues: &[&(QueueConfig, Database)]) -> String {
    let names: Vec<&str> = queues.iter().map(|(q, _)| q.name.as_str()).collect();
    names.join(", ")
}
