//! The daemon's metrics and health endpoint, as a monitoring system sees it.

use std::time::Duration;

use super::daemon::{tableq, Daemon};
use super::QueueFiles;

/// `tableq run --metrics-addr 127.0.0.1:0` on the queues in `files`, logging JSON;
/// returns it and the base URL of its metrics endpoint.
pub async fn start_with_metrics(files: &QueueFiles, url: &str) -> (Daemon, String) {
    start_with_metrics_logging(files, url, "info").await
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
