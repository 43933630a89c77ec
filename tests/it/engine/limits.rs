//! A queue's rate and concurrency limits hold, whatever its workers and batch.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support;
use crate::support::web::{Reply, WebServer};
use crate::support::{assert_has, load, run_until_empty, QueueFile, QueueFiles, TestDb};

/// `rate_limit = "20/s"` over 200 items, 4 workers × batch 10: the first and last
/// items start 10 s ± 10 % apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_spaces_the_items() {
    let db = TestDb::new().await;
    db.exec(
        "CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting') DEFAULT CHARSET=utf8mb4;
         CREATE TABLE started (job_id INT NOT NULL, at DATETIME(6) NOT NULL) DEFAULT CHARSET=utf8mb4",
    )
    .await;
    db.fill("job", "id", 200, |i| i.to_string()).await;
    let files = QueueFiles::new();
    let file = QueueFile::new("jobs")
        .workers(4)
        .batch(10)
        .set("rate_limit", "20/s")
        .select("SELECT id FROM job WHERE state = 'waiting' ORDER BY id")
        .action_sql("INSERT INTO started (job_id, at) VALUES (:id, NOW(6))")
        .on_success("UPDATE job SET state = 'done' WHERE id = :id")
        .write(&files);
    run_until_empty(load(&[file]), &db.url).await;
    let span: f64 = db
        .scalar("SELECT TIMESTAMPDIFF(MICROSECOND, MIN(at), MAX(at)) / 1e6 FROM started")
        .await;
    db.assert_count("SELECT COUNT(DISTINCT job_id) FROM started", 200)
        .await;
    assert!(
        (9.0..=11.0).contains(&span),
        "200 items at 20/s took {span:.2} s"
    );
}

/// `max_in_flight = 3` with 8 workers: the receiver never sees more than 3 requests
/// at once — and does see 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_in_flight_caps_the_actions_running_at_once() {
    const DELAY: Duration = Duration::from_millis(150);
    let db = TestDb::new().await;
    db.exec("CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting') DEFAULT CHARSET=utf8mb4")
        .await;
    db.fill("job", "id", 40, |i| i.to_string()).await;
    let arrivals: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let seen = arrivals.clone();
    let receiver = WebServer::start(move |_| {
        seen.lock().unwrap().push(Instant::now());
        Reply::status(204).after(DELAY)
    })
    .await;
    let files = QueueFiles::new();
    let file = QueueFile::new("hooks")
        .workers(8)
        .batch(2)
        .set("max_in_flight", 3)
        .select("SELECT id FROM job WHERE state = 'waiting' ORDER BY id")
        .action_http(&receiver.url("/hook"))
        .action_set("allow_private_networks", true)
        .on_success("UPDATE job SET state = 'done' WHERE id = :id")
        .write(&files);
    run_until_empty(load(&[file]), &db.url).await;
    let arrivals = arrivals.lock().unwrap().clone();
    assert_eq!(arrivals.len(), 40);
    // A request holds its slot from before it arrives until its reply, DELAY later.
    let busy = |at: Instant| {
        arrivals
            .iter()
            .filter(|a| **a <= at && at < **a + DELAY - Duration::from_millis(10))
            .count()
    };
    let most = arrivals.iter().map(|a| busy(*a)).max().unwrap();
    assert_eq!(most, 3, "at most 3 at once, and 3 reached");
}

/// A `rate_limit` that is not a rate, and a `loop_limit` of 0, are refused with the
/// key's line and what would be right.
#[tokio::test]
async fn bad_limits_are_refused_with_their_lines() {
    let contents = "select = \"SELECT id FROM job\"\nrate_limit = \"fast\"\nloop_limit = 0\n[action]\ntype = \"sql\"\nsql = \"DO 1\"\n";
    let (done, shown) = support::check::check_offline(contents).await;
    assert_eq!(done.code(), Some(1), "{}", done.stdout);
    assert_has(&done.stdout, &format!(
            "{shown}:2: queue jobs: error: `rate_limit` = \"fast\" is not a rate: write items per second, minute or hour, e.g. \"50/s\", \"600/m\""
        ));
    assert_has(
        &done.stdout,
        &format!("{shown}:3: queue jobs: error: `loop_limit` = 0 is out of range: use 1 to 1000"),
    );
}
