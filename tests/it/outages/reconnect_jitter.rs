//! After the database comes back, workers reconnect spread out in time, not all in
//! the same instant: every wait tableq makes between retries is jittered.

use std::time::Duration;

use crate::support::daemon::{tableq, Daemon};
use crate::support::{eventually, private_db, QueueFile, QueueFiles};

const WORKERS: usize = 16;

/// The time of day of a JSON log line, in microseconds.
fn micros(line: &str) -> i64 {
    let event: serde_json::Value = serde_json::from_str(line).expect("a JSON log line");
    let stamp = event["timestamp"].as_str().expect("a timestamp");
    // 2026-12-01T04:35:14.023892Z: hours, minutes, seconds and microseconds.
    let time = &stamp[11..stamp.len() - 1];
    let (hms, fraction) = time.split_once('.').unwrap_or((time, "0"));
    let mut parts = hms.split(':').map(|p| p.parse::<i64>().unwrap());
    let seconds = parts.next().unwrap() * 3600 + parts.next().unwrap() * 60 + parts.next().unwrap();
    let fraction: String = fraction
        .chars()
        .chain(std::iter::repeat('0'))
        .take(6)
        .collect();
    seconds * 1_000_000 + fraction.parse::<i64>().unwrap()
}

/// 16 busy workers lose their database to a restart: when it is back, their
/// reconnections are spread over more than 100 ms, not made in step. (Unjittered,
/// they came within 8–65 ms of each other; jittered, 0.5–3 s.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workers_reconnect_spread_out_after_a_restart() {
    let (server, db) = private_db(&[]).await;
    db.exec("CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting') DEFAULT CHARSET=utf8mb4")
        .await;
    db.fill("job", "id", 5_000, |i| i.to_string()).await;
    let files = QueueFiles::new();
    let file = QueueFile::new("jobs")
        .workers(WORKERS as u32)
        .poll_interval("100ms")
        .error_backoff("500ms")
        .select("SELECT id FROM job WHERE state = 'waiting' ORDER BY id")
        .action_sql("DO SLEEP(0.02)")
        .on_success("UPDATE job SET state = 'done' WHERE id = :id")
        .write(&files);
    let mut cmd = tableq(&["run"]);
    cmd.arg(&file)
        .env("TABLEQ_DATABASE_URL", &db.url)
        .env("TABLEQ_LOG_FORMAT", "json")
        .env("TABLEQ_LOG", "debug");
    let mut daemon = Daemon::spawn(cmd);
    // Every worker is busy.
    db.until_count_at_least("SELECT COUNT(*) FROM job WHERE state = 'done'", 200, 60)
        .await;
    tokio::task::block_in_place(|| server.stop());
    // Each worker meets the loss in a claim or, between two claims, in reading
    // whether the queue is paused.
    let lost = "database error; the transaction is rolled back";
    let lost_reading_the_pause = "could not read whether the queue is paused";
    eventually(
        "every worker lost the database",
        Duration::from_secs(60),
        || async {
            let log = daemon.stderr();
            log.matches(lost).count() + log.matches(lost_reading_the_pause).count() >= WORKERS
        },
    )
    .await;
    tokio::task::block_in_place(|| server.start_again());
    let back = "connected to the database again";
    daemon
        .wait_for_log_times(back, WORKERS, Duration::from_secs(120))
        .await;
    daemon.terminate().await;
    let times: Vec<i64> = daemon
        .stderr()
        .lines()
        .filter(|l| l.contains(back))
        .map(micros)
        .collect();
    let spread = times.iter().max().unwrap() - times.iter().min().unwrap();
    eprintln!("{} reconnections spread over {spread} µs", times.len());
    assert!(
        spread > 100_000,
        "{} workers reconnected within {spread} µs of each other",
        times.len()
    );
}
