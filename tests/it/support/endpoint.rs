//! The daemon's metrics and health endpoint, as a monitoring system sees it.

use std::time::Duration;

use super::daemon::{tableq, Daemon};
use super::QueueFiles;

/// `tableq run --metrics-addr 127.0.0.1:0` on the queues in `files`, logging JSON;
/// returns it and the base URL of its metrics endpoint.
pub async fn start_with_metrics(files: &QueueFiles, url: &str) -> (Daemon, String) {
    start_with_metrics_logging(files, url, "info").await
}

/// As [`start_with_metrics`], keeping no history (`--history off`): for a test that
/// counts the queue's own statements, connections or wake-ups (the history's are
/// `telemetry::history`'s).
pub async fn start_with_metrics_alone(files: &QueueFiles, url: &str) -> (Daemon, String) {
    let mut cmd = tableq(&["run", "--metrics-addr", "127.0.0.1:0", "--history", "off"]);
    cmd.arg(files.path())
        .env("TABLEQ_DATABASE_URL", url)
        .env("TABLEQ_LOG_FORMAT", "json");
    let daemon = Daemon::spawn(cmd);
    let base = format!("http://{}", metrics_address(&daemon).await);
    (daemon, base)
}

/// As [`start_with_metrics`], logging at `level` (`debug`: every line a throttled
/// warning holds back too).
pub async fn start_with_metrics_logging(
    files: &QueueFiles,
    url: &str,
    level: &str,
) -> (Daemon, String) {
    let mut cmd = tableq(&["run", "--metrics-addr", "127.0.0.1:0"]);
    cmd.arg(files.path())
        .env("TABLEQ_DATABASE_URL", url)
        .env("TABLEQ_LOG_FORMAT", "json")
        .env("TABLEQ_LOG", level);
    let daemon = Daemon::spawn(cmd);
    let base = format!("http://{}", metrics_address(&daemon).await);
    (daemon, base)
}

/// The address the daemon logged it listens on.
pub async fn metrics_address(daemon: &Daemon) -> String {
    daemon
        .wait_for_log("metrics listening", Duration::from_secs(30))
        .await;
    let log = daemon.stderr();
    let line = log
        .lines()
        .find(|l| l.contains("metrics listening"))
        .unwrap();
    let event: serde_json::Value = serde_json::from_str(line).expect("a JSON log line");
    event["addr"].as_str().expect("the address").to_string()
}

pub async fn get(url: &str) -> (u16, String) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let response = reqwest::get(url)
        .await
        .expect("the metrics endpoint answers");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

/// A daemon on `db` whose queues export every metric family (a `waiting_since`
/// column, so the lag too; a schedule queue, `ticks`, once it ran), once their
/// first counts are in; returns it and the URL of its `/metrics`, and its queue
/// files. `rows` wait in `job`.
pub async fn exporting_every_family(
    db: &super::TestDb,
    rows: &[u32],
) -> (Daemon, String, QueueFiles) {
    super::job_table(db, rows).await;
    db.exec("ALTER TABLE job ADD COLUMN created_at DATETIME NULL")
        .await;
    let files = QueueFiles::new();
    super::waiting_jobs("jobs")
        .select("SELECT id, created_at FROM job WHERE state = 'waiting' ORDER BY id")
        .set("waiting_since", "created_at")
        .action_sql("DO :id")
        .write(&files);
    super::QueueFile::new("ticks")
        .set("schedule", "every 1s")
        .set("stats_interval", "200ms")
        .action_sql("DO :scheduled_at")
        .write(&files);
    let (daemon, base) = start_with_metrics(&files, &db.url).await;
    let url = format!("{base}/metrics");
    super::eventually("the first counts", Duration::from_secs(30), || async {
        let scrape = get(&url).await.1;
        scrape.contains("tableq_waiting{queue=\"jobs\"")
            && scrape.contains("tableq_schedule_last_success_timestamp_seconds{")
    })
    .await;
    (daemon, url, files)
}
