//! Many workers in several daemons share one table through MySQL's locks alone.

use std::time::Instant;

use crate::support::{email_table, load, run_until_empty, QueueFiles, TestDb};

const ROWS: usize = 5_000;

fn queue_file(batch: usize, workers: usize) -> String {
    format!(
        r#"
workers = {workers}
batch = {batch}
poll_interval = "100ms"
select = "SELECT id, recipient FROM email WHERE status = 'waiting' ORDER BY id"

[action]
type = "sql"
sql = "INSERT INTO sent_log (email_id, recipient, by_connection) VALUES (:id, :recipient, CONNECTION_ID())"

[on_success]
sql = "UPDATE email SET status = 'sent' WHERE id = :id"

[on_failure]
sql = "UPDATE email SET status = 'failed' WHERE id = :id"
"#
    )
}

async fn setup() -> TestDb {
    let db = TestDb::new().await;
    email_table(&db, ROWS).await;
    db.exec(
        "CREATE TABLE sent_log (seq BIGINT AUTO_INCREMENT PRIMARY KEY, email_id BIGINT NOT NULL,
         recipient VARCHAR(250) NOT NULL, by_connection BIGINT NOT NULL) DEFAULT CHARSET=utf8mb4",
    )
    .await;
    db
}

async fn assert_each_row_done_once(db: &TestDb) {
    db.assert_count(
        "SELECT COUNT(*) FROM email WHERE status = 'sent'",
        ROWS as u64,
    )
    .await;
    db.assert_count_because(
        "SELECT COUNT(*) FROM sent_log",
        ROWS as u64,
        "some item was done twice",
    )
    .await;
    db.assert_count("SELECT COUNT(DISTINCT email_id) FROM sent_log", ROWS as u64)
        .await;
    let mismatched = db
        .count("SELECT COUNT(*) FROM sent_log l JOIN email e ON e.id = l.email_id WHERE e.recipient <> l.recipient")
        .await;
    assert_eq!(mismatched, 0, "an action saw another row's values");
}

/// 5,000 rows, two daemons of 8 workers each at once: every row done, none twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_engines_of_eight_workers_do_every_row_exactly_once() {
    let db = setup().await;
    let files = QueueFiles::new();
    let file = files.write("email.toml", &queue_file(1, 8));
    let started = Instant::now();
    let (a, b) = tokio::join!(
        run_until_empty(load(std::slice::from_ref(&file)), &db.url),
        run_until_empty(load(std::slice::from_ref(&file)), &db.url)
    );
    let elapsed = started.elapsed();
    assert_each_row_done_once(&db).await;
    let done_a = a.counts("email").unwrap().done;
    let done_b = b.counts("email").unwrap().done;
    assert_eq!(done_a + done_b, ROWS as u64);
    assert!(
        done_a > 0 && done_b > 0,
        "both daemons took part: {done_a} + {done_b}"
    );
    let connections = db
        .count("SELECT COUNT(DISTINCT by_connection) FROM sent_log")
        .await;
    assert!(
        connections >= 8,
        "work was shared out over {connections} connections"
    );
    eprintln!(
        "exactly-once: {ROWS} items in {elapsed:.2?} = {:.0} items/s (debug build, 2 x 8 workers, batch 1)",
        ROWS as f64 / elapsed.as_secs_f64()
    );
}

/// The same with batch = 100 and 16 workers per daemon: batching keeps exactly-once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn batches_of_a_hundred_keep_every_row_exactly_once() {
    let db = setup().await;
    let files = QueueFiles::new();
    let file = files.write("email.toml", &queue_file(100, 16));
    let (a, b) = tokio::join!(
        run_until_empty(load(std::slice::from_ref(&file)), &db.url),
        run_until_empty(load(std::slice::from_ref(&file)), &db.url)
    );
    assert_each_row_done_once(&db).await;
    assert_eq!(
        a.counts("email").unwrap().done + b.counts("email").unwrap().done,
        ROWS as u64
    );
}
