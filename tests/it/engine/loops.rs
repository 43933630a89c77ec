//! A queue whose `[on_success]` forgets to take the row out of the select loops; tableq
//! notices, says which row and how to fix it, and stops claiming that queue.

use std::time::Duration;

use crate::support::daemon::{run_to_end, tableq, Daemon};
use crate::support::{assert_has, QueueFile, QueueFiles, TestDb};

/// Two rows, and a queue that counts runs but never changes what the select reads.
async fn runs_table(db: &TestDb) {
    db.exec(
        "CREATE TABLE job (id INT PRIMARY KEY, runs INT NOT NULL DEFAULT 0) DEFAULT CHARSET=utf8mb4;
         INSERT INTO job (id) VALUES (1), (2)",
    )
    .await;
}

fn rerunning_queue(name: &str) -> QueueFile {
    QueueFile::new(name)
        .batch(2)
        .poll_interval("100ms")
        .select("SELECT id FROM job ORDER BY id")
        .action_sql("UPDATE job SET runs = runs + 1 WHERE id = :id")
}

/// The looping queue stops after a row came back `loop_limit` (3) times: the log
/// names the key and the fix, `--stop-when-empty` exits 1, and no row ran more than
/// four times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_looping_queue_is_stopped_and_named() {
    let db = TestDb::new().await;
    runs_table(&db).await;
    let files = QueueFiles::new();
    let file = rerunning_queue("looping").write(&files);
    let mut cmd = tableq(&["run", "--stop-when-empty"]);
    cmd.arg(&file)
        .env("TABLEQ_DATABASE_URL", &db.url)
        .env("TABLEQ_LOG_FORMAT", "json");
    let done = run_to_end(cmd, Duration::from_secs(60)).await;
    assert_eq!(done.code(), Some(1), "{}", done.stderr);
    let again = done
        .stderr
        .lines()
        .find(|l| l.contains("an item completed again"))
        .unwrap_or_else(|| panic!("no loop reported:\n{}", done.stderr));
    let again: serde_json::Value = serde_json::from_str(again).expect("a JSON log line");
    assert_eq!(again["key"], "1", "{again}");
    assert_eq!(again["queue"], "looping", "{again}");
    assert!(
        again["message"]
            .as_str()
            .unwrap()
            .contains("loop_window = \"0s\""),
        "{again}"
    );
    assert_has(&done.stderr, "the queue loops");
    assert_has(&done.stderr, "queue looping kept completing rows");
    let most: i64 = db.scalar("SELECT MAX(runs) FROM job").await;
    assert!(most <= 4, "a row ran {most} times");
}

/// With `loop_window = "0s"` a queue whose rows come back on purpose (a recurring
/// job) runs on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recurring_queue_with_no_loop_window_runs_on() {
    let db = TestDb::new().await;
    runs_table(&db).await;
    let files = QueueFiles::new();
    let file = rerunning_queue("recurring")
        .set("loop_window", "0s")
        .write(&files);
    let mut cmd = tableq(&["run"]);
    cmd.arg(&file).env("TABLEQ_DATABASE_URL", &db.url);
    let mut daemon = Daemon::spawn(cmd);
    // Each row ran ten times.
    db.until_count("SELECT COUNT(*) FROM job WHERE runs >= 10", 2, 60)
        .await;
    daemon.terminate().await;
    assert!(
        !daemon.stderr().contains("completed again"),
        "{}",
        daemon.stderr()
    );
}
