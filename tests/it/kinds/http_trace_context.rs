//! HTTP actions carry W3C trace context: a `traceparent` per delivery, continuing
//! the row's own trace when the select returns one, and the item's log lines carry
//! its trace id.

use std::time::Duration;

use crate::support;
use crate::support::daemon::{tableq, Daemon};
use crate::support::web::{Reply, WebServer};
use crate::support::{QueueFile, QueueFiles, TestDb};

const ROW_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

/// Runs the queue file `file` (logging JSON) until its three hooks failed and each
/// failure is logged.
async fn run_until_the_three_failed(file: &std::path::Path, db: &TestDb) -> Daemon {
    let mut cmd = tableq(&["run"]);
    cmd.arg(file)
        .env("TABLEQ_DATABASE_URL", &db.url)
        .env("TABLEQ_LOG_FORMAT", "json");
    let daemon = Daemon::spawn(cmd);
    db.until_count("SELECT COUNT(*) FROM hook WHERE state = 'failed'", 3, 60)
        .await;
    daemon
        .wait_for_log_times("\"item failed\"", 3, Duration::from_secs(10))
        .await;
    daemon
}

/// Three rows: two without a trace get two new ones, the third continues its
/// row's `traceparent` under a new span; each failed delivery's log line names the
/// trace id the receiver saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_delivery_sends_a_traceparent_and_logs_its_trace_id() {
    let server = WebServer::start(|_| Reply::status(500)).await;
    let db = TestDb::new().await;
    db.exec(&format!(
        "CREATE TABLE hook (id INT PRIMARY KEY, traceparent VARCHAR(55) NULL, state VARCHAR(10) NOT NULL DEFAULT 'waiting') DEFAULT CHARSET=utf8mb4;
         INSERT INTO hook (id, traceparent) VALUES (1, NULL), (2, 'not a trace'), (3, '00-{ROW_TRACE}-00f067aa0ba902b7-01')"
    ))
    .await;
    let files = QueueFiles::new();
    let file = QueueFile::new("hooks")
        .select("SELECT id, traceparent FROM hook WHERE state = 'waiting' ORDER BY id")
        .batch(3)
        .poll_interval("1h")
        .action_http(&server.url("/hook"))
        .action_set("allow_private_networks", true)
        .on_success("UPDATE hook SET state = 'done' WHERE id = :id")
        .on_failure("UPDATE hook SET state = 'failed' WHERE id = :id")
        .write(&files);
    let mut daemon = run_until_the_three_failed(&file, &db).await;

    let mut traces = Vec::new();
    for request in server.requests() {
        let key = request.json()["id"].to_string();
        let header = request.header("traceparent").to_string();
        let parts: Vec<&str> = header.split('-').collect();
        assert_eq!(parts.len(), 4, "{header}");
        assert_eq!((parts[0], parts[3]), ("00", "01"), "{header}");
        assert_eq!((parts[1].len(), parts[2].len()), (32, 16), "{header}");
        assert_ne!(parts[2], "00f067aa0ba902b7", "a span of its own");
        let logged = daemon
            .stderr()
            .lines()
            .filter(|line| line.contains("\"item failed\""))
            .find(|line| line.contains(&format!("\"key\":\"{key}\"")))
            .unwrap_or_else(|| panic!("no log line for {key}: {}", daemon.stderr()))
            .to_string();
        assert!(
            logged.contains(&format!("\"trace_id\":\"{}\"", parts[1])),
            "{logged}"
        );
        traces.push((key, parts[1].to_string()));
    }
    traces.sort();
    assert_eq!(traces.len(), 3);
    assert_eq!(traces[2], ("3".to_string(), ROW_TRACE.to_string()));
    assert_ne!(traces[0].1, traces[1].1, "a new trace per item");
    assert!(traces[..2].iter().all(|(_, trace)| trace != ROW_TRACE));
    daemon.terminate().await;
}

/// In `scope = "batch"` the batch's one request starts a trace of its own; when it
/// fails and is redone item by item, each one-row request has its item's trace (the
/// row's own for a row with a `traceparent`), and each item's log line names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_request_has_a_trace_and_so_has_each_item_after() {
    let server = WebServer::start(|_| Reply::status(500)).await;
    let db = TestDb::new().await;
    db.exec(&format!(
        "CREATE TABLE hook (id INT PRIMARY KEY, traceparent VARCHAR(55) NULL, state VARCHAR(10) NOT NULL DEFAULT 'waiting') DEFAULT CHARSET=utf8mb4;
         INSERT INTO hook (id, traceparent) VALUES (1, NULL), (2, NULL), (3, '00-{ROW_TRACE}-00f067aa0ba902b7-01')"
    ))
    .await;
    let batch = "JSON_TABLE(:batch, '$[*]' COLUMNS (id INT PATH '$.id')) AS b";
    let files = QueueFiles::new();
    let file = QueueFile::new("hooks")
        .set("scope", "batch")
        .select("SELECT id, traceparent FROM hook WHERE state = 'waiting' ORDER BY id")
        .batch(3)
        .poll_interval("1h")
        .action_http(&server.url("/hook"))
        .action_set("allow_private_networks", true)
        .on_success(format!(
            "UPDATE hook JOIN {batch} USING (id) SET hook.state = 'done'"
        ))
        .on_failure(format!(
            "UPDATE hook JOIN {batch} USING (id) SET hook.state = 'failed'"
        ))
        .write(&files);
    let mut daemon = run_until_the_three_failed(&file, &db).await;

    let requests = server.requests();
    assert_eq!(requests.len(), 4, "the batch, then each item");
    let trace_of = |request: &support::web::Recorded| {
        let header = request.header("traceparent").to_string();
        assert_eq!(header.len(), 55, "{header}");
        header[3..35].to_string()
    };
    assert_eq!(requests[0].json().as_array().map(Vec::len), Some(3));
    let batch_trace = trace_of(&requests[0]);
    let logs = daemon.stderr();
    for request in &requests[1..] {
        let key = request.json()[0]["id"].to_string();
        let trace = trace_of(request);
        assert_ne!(trace, batch_trace);
        assert_eq!(key == "3", trace == ROW_TRACE, "{key}: {trace}");
        let logged = logs
            .lines()
            .find(|l| l.contains("\"item failed\"") && l.contains(&format!("\"key\":\"{key}\"")))
            .unwrap_or_else(|| panic!("no log line for {key}: {logs}"));
        assert!(
            logged.contains(&format!("\"trace_id\":\"{trace}\"")),
            "{logged}"
        );
    }
    daemon.terminate().await;
}
