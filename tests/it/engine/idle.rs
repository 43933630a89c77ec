//! An empty queue costs one claim per poll_interval however many workers it has, and
//! a burst of rows still reaches every worker at once.

use std::time::Duration;

use crate::support;
use crate::support::{load, Engine, QueueFiles, TestDb};

const WORKERS: u64 = 8;

fn queue_file() -> String {
    format!(
        r#"
workers = {WORKERS}
poll_interval = "200ms"
select = "SELECT id FROM job WHERE state = 'waiting' ORDER BY id"
[action]
type = "sql"
sql = ["INSERT INTO job_log (job_id, connection) VALUES (:id, CONNECTION_ID())", "DO SLEEP(0.05)"]
[on_success]
sql = "UPDATE job SET state = 'done' WHERE id = :id"
"#
    )
}

async fn setup() -> (TestDb, QueueFiles, std::path::PathBuf) {
    let db = TestDb::new().await;
    db.exec(
        "CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting') DEFAULT CHARSET=utf8mb4;
         CREATE TABLE job_log (job_id INT NOT NULL, connection BIGINT NOT NULL) DEFAULT CHARSET=utf8mb4",
    )
    .await;
    let files = QueueFiles::new();
    let file = files.write("jobs.toml", &queue_file());
    (db, files, file)
}

/// Eight workers on an empty queue send about one claim per poll_interval, not
/// eight: each claims once at start, then one polls while the others sleep.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_queue_is_polled_by_one_worker() {
    let (db, _files, file) = setup().await;
    let engine = Engine::start(load(&[file]), &db.url);
    // The observation window: 2 s of polls at 200 ms.
    let started = std::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let counts = engine.stop().await.counts("jobs").unwrap();
    let polls = started.elapsed().as_millis() as u64 / 200;
    // Everyone polling would be WORKERS × polls (~80); one poller is ~polls (~10).
    assert!(
        counts.claims <= WORKERS + polls + 3,
        "{} claims in {polls} poll intervals with {WORKERS} workers",
        counts.claims
    );
}

/// Rows arriving while the workers sleep — with no connection: an idle queue keeps
/// only its watcher's — are spread over all of them at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_wakes_every_worker() {
    let (db, _files, file) = setup().await;
    let engine = Engine::start(load(&[file]), &db.url);
    support::burst_after_idle(&db, 160).await;
    engine.stop().await;
    let connections = db
        .count("SELECT COUNT(DISTINCT connection) FROM job_log")
        .await;
    assert_eq!(connections, WORKERS, "the burst reached every worker");
}
