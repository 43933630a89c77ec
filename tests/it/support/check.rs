//! `tableq check` through the real binary, for the check_* tests: the job table, a
//! queue file that keeps every rule (each test breaks it one way), running check,
//! and comparing its report line by line.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::daemon::{run_to_end, tableq, Finished};
use super::{QueueFiles, TestDb};

pub const JOBS: &str = "CREATE TABLE job (
    id       INT PRIMARY KEY,
    state    VARCHAR(10) NOT NULL DEFAULT 'waiting',
    attempts INT NOT NULL DEFAULT 0,
    retry_at BIGINT NULL,
    INDEX state_id (state, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
INSERT INTO job (id) VALUES (1), (2), (3)";

/// A queue that keeps every rule; the check tests break it one way at a time.
pub const GOOD: &str = r#"select = "SELECT id, attempts FROM job WHERE state = 'waiting' AND (retry_at IS NULL OR retry_at <= UNIX_TIMESTAMP()) ORDER BY id"
[action]
type = "sql"
sql = "DO :id"
[on_success]
sql = "UPDATE job SET state = 'done' WHERE id = :id"
[on_failure]
sql = "UPDATE job SET attempts = attempts + 1, retry_at = UNIX_TIMESTAMP() + 60 WHERE id = :id"
"#;

/// A database of its own with the job table, three rows waiting.
pub async fn job_db() -> TestDb {
    let db = TestDb::new().await;
    db.exec(JOBS).await;
    db
}

/// `tableq check ARGS PATHS`, against `url` when given.
pub async fn check(args: &[&str], paths: &[&Path], url: Option<&str>) -> Finished {
    let mut cmd = tableq(&["check"]);
    cmd.args(args).args(paths);
    if let Some(url) = url {
        cmd.env("TABLEQ_DATABASE_URL", url);
    }
    run_to_end(cmd, Duration::from_secs(120)).await
}

/// The findings and the verdict (`checked …`, last) of check's text report: its
/// lines less the summary's `reads:`, `wake-ups:` and `due by time:` lines.
pub fn report_lines(stdout: &str) -> Vec<&str> {
    let summary = ["reads: ", "wake-ups: ", "due by time: "];
    stdout
        .lines()
        .filter(|line| !summary.iter().any(|s| line.starts_with(s)))
        .collect()
}

/// Asserts the findings (every line but the summary), the summary's counts and the
/// exit status.
pub fn assert_report(done: &Finished, findings: &[String], counts: &str, code: i32) {
    let lines = report_lines(&done.stdout);
    let (summary, found) = lines.split_last().expect("a summary line");
    assert_eq!(
        found, findings,
        "stdout:\n{}\nstderr:\n{}",
        done.stdout, done.stderr
    );
    assert!(
        summary.starts_with("checked ") && summary.ends_with(counts),
        "summary {summary:?} should end with {counts:?}"
    );
    assert_eq!(done.code(), Some(code), "stdout:\n{}", done.stdout);
}

/// Writes `jobs.toml` with `contents` and checks it against `db`; returns the report
/// and the file's path as check prints it.
pub async fn check_online(db: &TestDb, contents: &str) -> (Finished, String) {
    let (_files, path, shown) = jobs_file(contents);
    (check(&[], &[&path], Some(&db.url)).await, shown)
}

/// Checks `contents` against `db` and asserts the report is one error, `finding`:
/// its line as check prints it, after the file's path (`5: queue jobs: error: …`).
pub async fn assert_one_error_online(db: &TestDb, contents: &str, finding: &str) {
    let (done, shown) = check_online(db, contents).await;
    let finding = format!("{shown}:{finding}");
    assert_report(&done, &[finding], ": 1 error, 0 warnings", 1);
}

/// Writes `jobs.toml` with `contents` and checks it with `--offline`, no database;
/// returns the report and the file's path as check prints it.
pub async fn check_offline(contents: &str) -> (Finished, String) {
    let (_files, path, shown) = jobs_file(contents);
    (check(&["--offline"], &[&path], None).await, shown)
}

/// The self-test's error when session B claimed the row session A held: the claim
/// locks nothing.
pub fn self_test_failed(shown: &str) -> String {
    format!(
        "{shown}:1: queue jobs: error: the two-session SKIP LOCKED self-test failed: session B \
         claimed the row session A held (id = 1), so every worker would get the same row: the \
         claim locks nothing (a select from a derived table or a view that is not merged?) or \
         the server ignores SKIP LOCKED"
    )
}

/// A `stats` counter table, and a good queue whose `[on_success]` also counts the
/// item there: outcome SQL on a table other than the select's.
pub async fn counting_jobs(db: &TestDb) -> (QueueFiles, PathBuf, String) {
    db.exec(
        "CREATE TABLE stats (name VARCHAR(10) PRIMARY KEY, n INT NOT NULL) ENGINE=InnoDB;
         INSERT INTO stats VALUES ('done', 0)",
    )
    .await;
    jobs_file(&GOOD.replace(
        "sql = \"UPDATE job SET state = 'done' WHERE id = :id\"",
        "sql = [\"UPDATE job SET state = 'done' WHERE id = :id\", \"UPDATE stats SET n = n + 1 WHERE name = 'done'\"]",
    ))
}

/// Writes `jobs.toml` with `contents`; returns the files and the path as printed.
pub fn jobs_file(contents: &str) -> (QueueFiles, PathBuf, String) {
    let files = QueueFiles::new();
    let path = files.write("jobs.toml", contents);
    let shown = path.display().to_string();
    (files, path, shown)
}

/// Every row of the job table, to compare before and after check.
pub type JobRow = (i32, String, i32, Option<i64>);

pub const ALL_JOBS: &str = "SELECT id, state, attempts, retry_at FROM job ORDER BY id";
