//! Several queues in one daemon: each starts on its own, `--queue` picks some, and
//! the log says what each did — in text or JSON.

use std::time::Duration;

use crate::support;
use crate::support::daemon::{run_to_end, tableq};
use crate::support::web::closed_port;
use crate::support::{assert_has, eventually, load, Engine, QueueFile, QueueFiles, TestDb};

/// A queue named after `table` whose action marks the row done, or failed.
fn queue(table: &str) -> QueueFile {
    QueueFile::new(table)
        .select(&format!(
            "SELECT id FROM {table} WHERE state = 'waiting' ORDER BY id"
        ))
        .poll_interval("100ms")
        .action_sql(format!("UPDATE {table} SET state = 'done' WHERE id = :id"))
        .on_failure(format!(
            "UPDATE {table} SET state = 'failed' WHERE id = :id"
        ))
}

async fn two_tables(db: &TestDb) {
    db.exec(
        "CREATE TABLE a (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting') DEFAULT CHARSET=utf8mb4;
         CREATE TABLE b (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting') DEFAULT CHARSET=utf8mb4;
         INSERT INTO a (id) VALUES (1), (2), (3); INSERT INTO b (id) VALUES (1), (2)",
    )
    .await;
}

/// A queue whose database is down does not hold up the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_queue_does_not_hold_up_the_others() {
    let db = TestDb::new().await;
    two_tables(&db).await;
    let files = QueueFiles::new();
    queue("a").write(&files);
    queue("b")
        .database_url(&format!("mysql://root@{}/nowhere", closed_port()))
        .error_backoff("100ms")
        .write(&files);
    let engine = Engine::start(load(&[files.path()]), &db.url);
    // Queue a is worked down.
    db.until_count("SELECT COUNT(*) FROM a WHERE state = 'done'", 3, 30)
        .await;
    let summary = engine.stop().await;
    assert_eq!(summary.counts("a").unwrap().done, 3);
    assert_eq!(summary.counts("b").unwrap().done, 0);
}

/// `--queue NAME` runs only the named queues; an unknown name is a usage error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_flag_picks_queues() {
    let db = TestDb::new().await;
    two_tables(&db).await;
    let files = QueueFiles::new();
    queue("a").write(&files);
    queue("b").write(&files);
    let mut cmd = tableq(&["run", "--stop-when-empty", "--queue", "b"]);
    cmd.arg(files.path()).env("TABLEQ_DATABASE_URL", &db.url);
    let done = run_to_end(cmd, Duration::from_secs(60)).await;
    assert_eq!(done.code(), Some(0), "{}", done.stderr);
    db.assert_count("SELECT COUNT(*) FROM b WHERE state = 'done'", 2)
        .await;
    db.assert_count_because(
        "SELECT COUNT(*) FROM a WHERE state = 'waiting'",
        3,
        "queue a ran",
    )
    .await;

    let mut cmd = tableq(&["run", "--queue", "c"]);
    cmd.arg(files.path()).env("TABLEQ_DATABASE_URL", &db.url);
    let done = run_to_end(cmd, Duration::from_secs(60)).await;
    assert_eq!(done.code(), Some(2));
    assert_has(
        &done.stderr,
        "--queue c: no queue has that name; the files define: a, b",
    );
}

/// Every interval each queue logs what it did; a failed item is logged with its
/// queue, key and error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_and_failures_are_logged() {
    let logs = support::logs::capture();
    let db = TestDb::new().await;
    db.exec(
        "CREATE TABLE logged (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting' CHECK (id <> 2 OR state <> 'done')) DEFAULT CHARSET=utf8mb4;
         INSERT INTO logged (id) VALUES (1), (2), (3)",
    )
    .await;
    let files = QueueFiles::new();
    let file = queue("logged").write(&files);
    let options = tableq::RunOptions {
        database_url: Some(db.url.clone()),
        progress_every: Duration::from_millis(300),
        ..tableq::RunOptions::default()
    };
    let engine = Engine::start_with(load(&[file]), options);
    eventually(
        "a progress line with the work done",
        Duration::from_secs(30),
        || {
            let logs = logs.clone();
            async move {
                // The counts of the lines so far add up to the work done, however
                // the items are spread over the lines (the first counts from before
                // any worker started).
                let lines = logs.lines_with("progress queue=logged");
                let sum = |field: &str| -> u64 {
                    lines
                        .iter()
                        .filter_map(|l| {
                            l.split(field)
                                .nth(1)?
                                .split(' ')
                                .next()?
                                .parse::<u64>()
                                .ok()
                        })
                        .sum()
                };
                sum("done=") == 2 && sum("failed=") == 1
            }
        },
    )
    .await;
    engine.stop().await;
    let failed = logs.lines_with("item failed");
    let line = failed
        .iter()
        .find(|l| l.contains("queue=logged"))
        .expect("a line for the failed item");
    assert!(
        line.contains("key=2") && line.contains("CONSTRAINT"),
        "{line}"
    );
}

/// With `--log-format json` every line is a JSON object; a failed item's line names
/// its queue, worker and key at the top level, where Loki and Elasticsearch look.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_carry_queue_worker_and_key() {
    let db = TestDb::new().await;
    db.exec(
        "CREATE TABLE j (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting' CHECK (id <> 2 OR state <> 'done')) DEFAULT CHARSET=utf8mb4;
         INSERT INTO j (id) VALUES (1), (2)",
    )
    .await;
    let files = QueueFiles::new();
    let file = queue("j").write(&files);
    let mut cmd = tableq(&["run", "--stop-when-empty", "--log-format", "json"]);
    cmd.arg(&file).env("TABLEQ_DATABASE_URL", &db.url);
    let done = run_to_end(cmd, Duration::from_secs(60)).await;
    assert_eq!(done.code(), Some(0), "{}", done.stderr);
    let lines: Vec<serde_json::Value> = done
        .stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let failed = lines
        .iter()
        .find(|l| l["message"] == "item failed")
        .expect("a failed-item line");
    assert_eq!(failed["level"], "WARN");
    assert_eq!(failed["queue"], "j", "{failed}");
    assert_eq!(failed["worker"], 0, "{failed}");
    assert_eq!(failed["key"], "2", "{failed}");
    assert!(failed.get("spans").is_none(), "{failed}");
    assert!(failed["error"].as_str().unwrap().contains("CONSTRAINT"));
}
