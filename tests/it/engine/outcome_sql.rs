//! Outcome SQL that cannot store what it is given: said once per row with the fix,
//! counted every time — and caught by `check` before it runs.

use std::time::Duration;

use crate::support::check::check;
use crate::support::endpoint::{get, start_with_metrics};
use crate::support::{eventually, QueueFile, QueueFiles, TestDb};

/// A job table whose `last_error` holds `room` characters: too few for some `:error`.
async fn jobs_with_error_column(db: &TestDb, room: usize) {
    db.exec(&format!(
        "CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting',
                           attempts INT NOT NULL DEFAULT 0, last_error VARCHAR({room}) NULL) DEFAULT CHARSET=utf8mb4;
         INSERT INTO job (id) VALUES (1)"
    ))
    .await;
}

/// A command that fails with a long stderr, and `[on_failure]` that stores `:error`
/// whole in a VARCHAR(20) under strict mode.
fn failing_queue(files: &QueueFiles) -> std::path::PathBuf {
    let script = files.script(
        "fail.sh",
        "echo 'the mail server said no, at great length' >&2; exit 3",
    );
    QueueFile::new("jobs")
        .poll_interval("100ms")
        .error_backoff("100ms")
        .select("SELECT id FROM job WHERE state = 'waiting' ORDER BY id")
        .action_command(&[script.to_str().unwrap()])
        .on_success("UPDATE job SET state = 'sent' WHERE id = :id")
        .on_failure("UPDATE job SET last_error = :error, attempts = attempts + 1 WHERE id = :id")
        .write(files)
}

/// `[on_failure]` that fails on every retry of a row: the full error, with the fix,
/// is logged once for that row, while each failure is counted in
/// `tableq_outcome_sql_failures_total`; the row stays waiting, untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_outcome_sql_is_said_once_per_row_and_counted_every_time() {
    let db = TestDb::new().await;
    jobs_with_error_column(&db, 20).await;
    let files = QueueFiles::new();
    failing_queue(&files);
    let (mut daemon, base) = start_with_metrics(&files, &db.url).await;
    let failures = |text: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(r#"tableq_outcome_sql_failures_total{queue="jobs"} "#))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    };
    eventually(
        "three failed [on_failure]s",
        Duration::from_secs(30),
        || async { failures(&get(&format!("{base}/metrics")).await.1) >= 3 },
    )
    .await;
    daemon.terminate().await;
    let log = daemon.stderr();
    let full = log
        .lines()
        .filter(|l| l.contains("[on_failure] SQL failed; the item is rolled back"))
        .count();
    assert_eq!(full, 1, "said once for the row:\n{log}");
    assert!(log.contains("Data too long"), "{log}");
    assert!(log.contains(":error holds up to 8 KiB"), "{log}");
    let row: Vec<(String, i32, Option<String>)> =
        db.rows("SELECT state, attempts, last_error FROM job").await;
    assert_eq!(
        row,
        [("waiting".to_string(), 0, None)],
        "the row is untouched"
    );
}

/// `check` binds an `:error` as long as a real one can be (8 KiB), so it reports a
/// VARCHAR(1000) too small for it before the queue runs (a few hundred characters
/// of sample error would have passed).
#[tokio::test]
async fn check_catches_a_column_too_small_for_error() {
    let db = TestDb::new().await;
    jobs_with_error_column(&db, 1000).await;
    let files = QueueFiles::new();
    let file = failing_queue(&files);
    let done = check(&[], &[&file], Some(&db.url)).await;
    assert_eq!(done.code(), Some(1), "{}", done.stdout);
    assert!(
        done.stdout.contains("on_failure") && done.stdout.contains("Data too long"),
        "{}",
        done.stdout
    );
}
