//! `tableq count` and `tableq run --stop-when-empty`, through the real binary.

use std::time::Duration;

use mysql_async::prelude::Queryable;

use crate::support::daemon::{run_binary_until_empty, run_to_end, tableq, Finished};
use crate::support::{assert_has, email_table, eventually, QueueFiles, TestDb};

const EMAIL_QUEUE: &str = r#"
select = "SELECT id FROM email WHERE status = 'waiting' ORDER BY id"
poll_interval = "100ms"
[action]
type = "sql"
sql = "UPDATE email SET status = 'sent' WHERE id = :id"
[on_failure]
sql = "UPDATE email SET status = 'failed' WHERE id = :id"
"#;

async fn count(file: &std::path::Path, url: &str, extra: &[&str]) -> Finished {
    let mut cmd = tableq(&["count"]);
    cmd.args(extra).arg(file).env("TABLEQ_DATABASE_URL", url);
    run_to_end(cmd, Duration::from_secs(60)).await
}

/// Counts up to the cap, shows "N+" past it, and counts a row being worked on (a
/// plain read, like the background count: it neither waits for nor skips a lock).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_with_and_without_a_cap() {
    let db = TestDb::new().await;
    email_table(&db, 250).await;
    let files = QueueFiles::new();
    let file = files.write("email.toml", EMAIL_QUEUE);

    let default_cap = count(&file, &db.url, &[]).await;
    assert_eq!(default_cap.code(), Some(0), "{}", default_cap.stderr);
    assert_eq!(default_cap.stdout, "email\t100+\n");
    assert_eq!(
        count(&file, &db.url, &["--cap", "1000"]).await.stdout,
        "email\t250\n"
    );
    assert_eq!(
        count(&file, &db.url, &["--cap", "250"]).await.stdout,
        "email\t250\n",
        "exactly the cap is not N+"
    );
    assert_eq!(
        count(&file, &db.url, &["--cap", "249"]).await.stdout,
        "email\t249+\n"
    );

    // A row locked by someone else (a worker) still counts, as in tableq_waiting.
    let mut holder = db.conn().await;
    holder.query_drop("BEGIN").await.unwrap();
    holder
        .query_drop("SELECT id FROM email WHERE id = 1 FOR UPDATE")
        .await
        .unwrap();
    assert_eq!(
        count(&file, &db.url, &["--cap", "1000"]).await.stdout,
        "email\t250\n"
    );
    holder.query_drop("ROLLBACK").await.unwrap();

    let bad_cap = count(&file, &db.url, &["--cap", "0"]).await;
    assert_eq!(bad_cap.code(), Some(2), "{}", bad_cap.stderr);
}

/// While `tableq count --cap 1000000` reads the queue, the rows it has read are not
/// locked: a worker can lock the first of them (NOWAIT) meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_locks_no_row_while_it_counts() {
    let db = TestDb::new().await;
    email_table(&db, 200).await;
    let files = QueueFiles::new();
    // SLEEP per row: the count takes about 2 s, long enough to look while it runs.
    let slow = EMAIL_QUEUE.replace(
        "WHERE status = 'waiting'",
        "WHERE status = 'waiting' AND SLEEP(0.01) = 0",
    );
    let file = files.write("email.toml", &slow);
    let mut cmd = tableq(&["count", "--cap", "1000000"]);
    cmd.arg(&file).env("TABLEQ_DATABASE_URL", &db.url);
    let counting = tokio::spawn(run_to_end(cmd, Duration::from_secs(60)));
    let running = format!(
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = '{}' \
         AND INFO LIKE '%SLEEP(0.01)%' AND TIME >= 1",
        db.name
    );
    eventually(
        "the count has run for a second",
        Duration::from_secs(30),
        || async { db.count(&running).await > 0 },
    )
    .await;
    let mut worker = db.conn().await;
    worker.query_drop("BEGIN").await.unwrap();
    let locked = worker
        .query_drop("SELECT id FROM email WHERE id = 1 FOR UPDATE NOWAIT")
        .await;
    assert!(locked.is_ok(), "the count holds row 1: {locked:?}");
    worker.query_drop("ROLLBACK").await.unwrap();
    let counted = counting.await.unwrap();
    assert_eq!(counted.stdout, "email\t200\n", "{}", counted.stderr);
}

/// `run --stop-when-empty` works the queue down and exits 0; then count says 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_when_empty_exits_zero_once_drained() {
    let db = TestDb::new().await;
    email_table(&db, 300).await;
    let files = QueueFiles::new();
    let file = files.write(
        "email.toml",
        &format!("workers = 4\nbatch = 10\n{EMAIL_QUEUE}"),
    );
    let finished = run_binary_until_empty(&file, &db.url).await;
    assert_has(&finished.stderr, "queue stopped");
    db.assert_count("SELECT COUNT(*) FROM email WHERE status = 'sent'", 300)
        .await;
    assert_eq!(count(&file, &db.url, &[]).await.stdout, "email\t0\n");
}
