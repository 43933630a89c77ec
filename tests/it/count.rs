//! `tableq count` and `tableq run --stop-when-empty`, through the real binary.

use std::time::Duration;

use mysql_async::prelude::Queryable;

use crate::support::daemon::{run_binary_until_empty, run_to_end, tableq, Finished};
use crate::support::{email_table, QueueFiles, TestDb};

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

/// Counts up to the cap, shows "N+" past it, and skips rows that are being worked on.
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

    // A row locked by someone else (a worker) is not waiting.
    let mut holder = db.conn().await;
    holder.query_drop("BEGIN").await.unwrap();
    holder
        .query_drop("SELECT id FROM email WHERE id = 1 FOR UPDATE")
        .await
        .unwrap();
    assert_eq!(
        count(&file, &db.url, &["--cap", "1000"]).await.stdout,
        "email\t249\n"
    );
    holder.query_drop("ROLLBACK").await.unwrap();

    let bad_cap = count(&file, &db.url, &["--cap", "0"]).await;
    assert_eq!(bad_cap.code(), Some(2), "{}", bad_cap.stderr);
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
    assert!(
        finished.stderr.contains("queue stopped"),
        "{}",
        finished.stderr
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM email WHERE status = 'sent'")
            .await,
        300
    );
    assert_eq!(count(&file, &db.url, &[]).await.stdout, "email\t0\n");
}
