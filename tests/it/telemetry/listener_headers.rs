//! The metrics and status listener's answers carry `X-Content-Type-Options:
//! nosniff`, so a browser never takes one for something its Content-Type is not.

use crate::support::endpoint::start_with_metrics;
use crate::support::{QueueFile, QueueFiles, TestDb};

/// The table of the queue whose listener is asked: no row waits.
const SNIFF_JOB: &str =
    "CREATE TABLE sniff_job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'done')";

/// Every path the listener answers — and one it does not know — says nosniff.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_says_nosniff() {
    let db = TestDb::new().await;
    db.exec(SNIFF_JOB).await;
    let files = QueueFiles::new();
    QueueFile::new("sniff")
        .select("SELECT id FROM sniff_job WHERE state = 'waiting' ORDER BY id")
        .action_sql("UPDATE sniff_job SET state = 'done' WHERE id = :id")
        .write(&files);
    let (mut daemon, base) = start_with_metrics(&files, &db.url).await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    for path in [
        "/metrics",
        "/healthz",
        "/readyz",
        "/",
        "/status.json",
        "/no-such-page",
    ] {
        let response = reqwest::get(format!("{base}{path}")).await.unwrap();
        assert_eq!(
            response
                .headers()
                .get("x-content-type-options")
                .map(|v| v.to_str().unwrap().to_string()),
            Some("nosniff".to_string()),
            "{path} ({})",
            response.status()
        );
    }
    daemon.terminate().await;
}
