//! What `tableq check` finds in the queue files alone: the same lines with
//! `--offline` (no database) as online, `--strict`, every file reported at once, and
//! `run` refusing what check calls an error.

use std::time::Duration;

use crate::support;
use crate::support::check::{
    assert_report, check, check_offline, counting_jobs, job_db, jobs_file, GOOD,
};
use crate::support::daemon::{run_to_end, tableq};
use crate::support::{assert_has, QueueFiles};

/// A queue without [on_failure] is a warning: exit 0, or 1 with --strict.
#[tokio::test]
async fn missing_on_failure_and_strict() {
    let db = job_db().await;
    let good = GOOD.split("[on_failure]").next().unwrap();
    let (_files, path, shown) = jobs_file(good);
    let warning = format!(
        "{shown}:2: queue jobs: warning: no [on_failure]: a failing item returns to the queue at \
         once and is retried forever, at the front of the queue; record the failure on the row \
         (attempts, retry_at, status) so it leaves the query"
    );
    let done = check(&[], &[&path], Some(&db.url)).await;
    assert_report(
        &done,
        std::slice::from_ref(&warning),
        ": 0 errors, 1 warning",
        0,
    );
    let strict = check(&["--strict"], &[&path], Some(&db.url)).await;
    assert_report(&strict, &[warning], ": 0 errors, 1 warning", 1);
}

/// Outcome SQL that does not touch the row by its key is a warning (offline too).
#[tokio::test]
async fn outcome_sql_without_the_key() {
    let db = job_db().await;
    let (_files, path, shown) = jobs_file(&GOOD.replace(
        "SET state = 'done' WHERE id = :id",
        "SET state = 'done' WHERE state = 'waiting' AND attempts = :attempts",
    ));
    let warning = format!(
        "{shown}:6: queue jobs: warning: `on_success.sql` does not touch the item's row by its \
         key (no `:id` in its WHERE): a range of rows here locks rows other workers hold, and \
         deadlocks against them; write `WHERE id = :id`"
    );
    let done = check(&[], &[&path], Some(&db.url)).await;
    assert_report(
        &done,
        std::slice::from_ref(&warning),
        ": 0 errors, 1 warning",
        0,
    );
    let offline = check(&["--offline"], &[&path], None).await;
    assert_report(&offline, &[warning], "offline: 0 errors, 1 warning", 0);
}

/// Outcome SQL on another table (a counter) needs no `:key`: no warning.
#[tokio::test]
async fn outcome_sql_on_another_table() {
    let db = job_db().await;
    let (_files, path, _) = counting_jobs(&db).await;
    let done = check(&[], &[&path], Some(&db.url)).await;
    assert_report(&done, &[], ": 0 errors, 0 warnings", 0);
    let offline = check(&["--offline"], &[&path], None).await;
    assert_report(&offline, &[], "offline: 0 errors, 0 warnings", 0);
}

/// A `:param` that cannot be a column of a literal select list is an error offline.
#[tokio::test]
async fn unknown_parameter_offline() {
    let (done, shown) = check_offline(&GOOD.replace("DO :id", "DO :job_id")).await;
    assert_report(
        &done,
        &[format!(
            "{shown}:4: queue jobs: error: `action.sql` uses `:job_id`, which is not a column \
             the select returns (id, attempts) nor one of :queue"
        )],
        "offline: 1 error, 0 warnings",
        1,
    );
}

/// A `{placeholder}` that cannot be a column of a literal select list is an error.
#[tokio::test]
async fn unknown_placeholder_offline() {
    let (done, shown) = check_offline(&GOOD.replace(
        "type = \"sql\"\nsql = \"DO :id\"",
        "type = \"command\"\ncommand = [\"/bin/echo\", \"{job}\"]",
    ))
    .await;
    assert_report(
        &done,
        &[format!(
            "{shown}:4: queue jobs: error: `action.command.1` uses `{{job}}`, which is not a \
             column the select returns (id, attempts) nor `{{queue}}`"
        )],
        "offline: 1 error, 0 warnings",
        1,
    );
}

/// A `key` that is not among a literal select list's columns is an error offline.
#[tokio::test]
async fn key_not_a_column_offline() {
    let (done, shown) = check_offline(&format!("key = \"job_id\"\n{GOOD}")).await;
    assert_report(
        &done,
        &[format!(
            "{shown}:1: queue jobs: error: `key` = \"job_id\" is not a column the select returns \
             (id, attempts)"
        )],
        "offline: 1 error, 0 warnings",
        1,
    );
}

/// A command whose program does not exist is an error offline.
#[tokio::test]
async fn missing_program_offline() {
    let (files, path, shown) = jobs_file(&GOOD.replace(
        "type = \"sql\"\nsql = \"DO :id\"",
        "type = \"command\"\ncommand = [\"./send-it\", \"{id}\"]",
    ));
    let done = check(&["--offline"], &[&path], None).await;
    let program = files.path().canonicalize().unwrap().join("./send-it");
    assert_report(
        &done,
        &[format!(
            "{shown}:4: queue jobs: error: `action.command`: cannot run {}: No such file or \
             directory (os error 2)",
            program.display()
        )],
        "offline: 1 error, 0 warnings",
        1,
    );
}

/// A URL that does not parse, even with its placeholders filled in, is an error.
#[tokio::test]
async fn url_that_does_not_parse_offline() {
    let (done, shown) = check_offline(&GOOD.replace(
        "type = \"sql\"\nsql = \"DO :id\"",
        "type = \"http\"\nurl = \"https://hooks.example.com:99999/jobs/{id}\"",
    ))
    .await;
    assert_report(
        &done,
        &[format!(
            "{shown}:4: queue jobs: error: `action.url` is not a URL (with each placeholder \
             filled in): invalid port number"
        )],
        "offline: 1 error, 0 warnings",
        1,
    );
}

/// Every file's problems are reported at once, and the good files are still checked.
#[tokio::test]
async fn every_file_is_reported_at_once() {
    let db = job_db().await;
    let files = QueueFiles::new();
    let a = files.write(
        "a.toml",
        &format!(
            "workers = 0\nbatch = 5000\n{}",
            GOOD.replace("DO :id", "DO :job_id")
        ),
    );
    let b = files.write(
        "b.toml",
        &format!("database_url = \"${{TABLEQ_TEST_UNSET}}\"\n{GOOD}"),
    );
    files.write("c.toml", GOOD);
    let done = check(&[], &[&files.path()], Some(&db.url)).await;
    let (a, b) = (a.display(), b.display());
    assert_report(
        &done,
        &[
            format!("{a}:1: queue a: error: `workers` = 0 is out of range: use 1 to 1000"),
            format!("{a}:2: queue a: error: `batch` = 5000 is out of range: use 1 to 1000"),
            format!(
                "{a}:6: queue a: error: `action.sql` uses `:job_id`, which is not a column the \
                 select returns (id, attempts) nor one of :queue"
            ),
            format!(
                "{b}:1: queue b: error: `database_url`: environment variable `TABLEQ_TEST_UNSET` \
                 is not set (write `$$` for a literal `$`)"
            ),
        ],
        ": 4 errors, 0 warnings",
        1,
    );
    assert_has(&done.stdout, "checked 3 queues on ");
}

/// --offline needs no database, and says it checked offline.
#[tokio::test]
async fn offline_needs_no_database() {
    let (done, _) = check_offline(GOOD).await;
    assert_eq!(
        done.stdout,
        "checked 1 queue offline: 0 errors, 0 warnings\n"
    );
    assert_eq!(done.code(), Some(0));
}

/// `run` refuses a queue that `check` calls an error, with the same line, before it
/// even waits for its database.
#[tokio::test]
async fn run_refuses_what_check_calls_an_error() {
    let (_files, path, shown) = jobs_file(&GOOD.replace("DO :id", "DO :job_id"));
    let line = format!(
        "{shown}:4: queue jobs: error: `action.sql` uses `:job_id`, which is not a column the \
         select returns (id, attempts) nor one of :queue"
    );
    let checked = check(&["--offline"], &[&path], None).await;
    assert_eq!(checked.stdout.lines().next(), Some(line.as_str()));
    let mut cmd = tableq(&["run"]);
    cmd.arg(&path)
        .env("TABLEQ_DATABASE_URL", "mysql://root@127.0.0.1:1/nowhere");
    let ran = run_to_end(cmd, Duration::from_secs(30)).await;
    assert_eq!(ran.code(), Some(2), "{}", ran.stderr);
    assert!(ran.stderr.lines().any(|l| l == line), "{}", ran.stderr);
}

/// `run` logs check's warnings at start, and runs anyway.
#[tokio::test]
async fn run_logs_warnings_and_runs() {
    let db = job_db().await;
    let (_files, path, _) = jobs_file(GOOD.split("[on_failure]").next().unwrap());
    let done = support::daemon::run_binary_until_empty(&path, &db.url).await;
    assert_has(&done.stderr, "no [on_failure]");
    db.assert_count("SELECT COUNT(*) FROM job WHERE state = 'done'", 3)
        .await;
}

/// A file with four mistakes gets four findings in one run, each at its line, for
/// `check` as for `run` (which refuses it with exit 2).
#[tokio::test]
async fn every_mistake_of_a_file_at_once() {
    let contents = "wrokers = 4\nbatch = \"ten\"\nselect = \"SELECT id FROM job\"\n\n[action]\ntype = \"command\"\ncommand = [\"true\"]\ntimeout = \"soon\"\nretries = 3\n";
    let (done, shown) = check_offline(contents).await;
    let lines: Vec<&str> = done.stdout.lines().collect();
    let expected = [
        format!("{shown}:1: queue jobs: error: unknown field `wrokers`"),
        format!("{shown}:2: queue jobs: error: `batch`: invalid type"),
        format!("{shown}:8: queue jobs: error: `action.timeout`: invalid value"),
        format!("{shown}:9: queue jobs: error: `action`: unknown field `retries`"),
    ];
    assert_eq!(lines.len(), 5, "{}", done.stdout);
    for (line, expected) in lines.iter().zip(&expected) {
        assert!(line.starts_with(expected.as_str()), "{line}");
    }
    assert!(
        lines[4].ends_with(": 4 errors, 0 warnings"),
        "{}",
        done.stdout
    );
    let (_files, path, _) = support::check::jobs_file(contents);
    let mut run = tableq(&["run"]);
    run.arg(&path)
        .env("TABLEQ_DATABASE_URL", "mysql://root@127.0.0.1:1/none");
    let refused = run_to_end(run, Duration::from_secs(30)).await;
    assert_eq!(refused.code(), Some(2));
    assert_eq!(
        refused.stderr.matches(": error: ").count(),
        4,
        "{}",
        refused.stderr
    );
}
