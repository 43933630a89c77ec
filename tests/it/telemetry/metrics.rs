//! `--metrics-addr`: Prometheus counters per queue, liveness, and readiness that
//! tells a queue without a database connection; the two exposition formats, as
//! `promtool` and an OpenMetrics parser read them.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support;
use crate::support::daemon::tableq;
use crate::support::endpoint::{exporting_every_family, get, start_with_metrics};
use crate::support::web::closed_port;
use crate::support::{assert_has, eventually, QueueFile, QueueFiles, TestDb};

/// A queue `name` over the job table whose action marks the job done.
fn queue(name: &str) -> QueueFile {
    QueueFile::new(name)
        .select("SELECT id FROM job WHERE state = 'waiting' ORDER BY id")
        .poll_interval("100ms")
        .error_backoff("100ms")
        .action_sql("UPDATE job SET state = 'done' WHERE id = :id")
}

/// /metrics counts each queue's items, /healthz answers, and /readyz is 503 while a
/// queue has no database connection, naming it — 200 once every queue has one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_health_and_readiness() {
    let db = TestDb::new().await;
    db.exec(
        "CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting') DEFAULT CHARSET=utf8mb4;
         INSERT INTO job (id) VALUES (1), (2), (3)",
    )
    .await;
    let files = QueueFiles::new();
    queue("jobs").write(&files);
    queue("lost")
        .database_url(&format!("mysql://root@{}/none", closed_port()))
        .write(&files);
    let (mut daemon, base) = start_with_metrics(&files, &db.url).await;

    // The jobs are done.
    db.until_count("SELECT COUNT(*) FROM job WHERE state = 'done'", 3, 30)
        .await;
    let (status, text) = get(&format!("{base}/metrics")).await;
    assert_eq!(status, 200);
    assert!(
        text.contains(r#"tableq_items_total{queue="jobs",outcome="done"} 3"#),
        "{text}"
    );
    assert!(
        text.contains(r#"tableq_workers_connected{queue="jobs"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"tableq_workers_connected{queue="lost"} 0"#),
        "{text}"
    );
    assert!(
        text.contains(r#"tableq_claims_total{queue="jobs"}"#),
        "{text}"
    );
    assert_eq!(
        get(&format!("{base}/healthz")).await,
        (200, "ok\n".to_string())
    );
    assert_eq!(
        get(&format!("{base}/readyz")).await,
        (503, "queue lost has no database connection\n".to_string())
    );
    daemon.terminate().await;

    // Only the reachable queue: ready.
    let files = QueueFiles::new();
    queue("jobs").write(&files);
    let (mut daemon, base) = start_with_metrics(&files, &db.url).await;
    let readyz = format!("{base}/readyz");
    eventually("/readyz answers 200", Duration::from_secs(10), || async {
        get(&readyz).await.0 == 200
    })
    .await;
    assert_eq!(get(&readyz).await, (200, "ready\n".to_string()));
    daemon.terminate().await;
}

/// A metrics address that cannot be bound fails the start with exit status 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_metrics_port_fails_the_start() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let files = QueueFiles::new();
    let file = queue("jobs").write(&files);
    let mut cmd = tableq(&["run", "--metrics-addr", &addr]);
    cmd.arg(&file)
        .env("TABLEQ_DATABASE_URL", "mysql://root@127.0.0.1:1/x");
    let done = support::daemon::run_to_end(cmd, Duration::from_secs(30)).await;
    assert_eq!(done.code(), Some(1), "{}", done.stderr);
    assert_has(
        &done.stderr,
        &format!("--metrics-addr {addr}: cannot listen"),
    );
}

/// `/metrics` answers a plain request (curl's `Accept: */*`, or none) and
/// `Accept: text/plain; version=0.0.4` in the Prometheus text format, which
/// `promtool check metrics` passes (counters' HELP and TYPE name their `_total`
/// samples), as Prometheus's own clients do; a request that names
/// `application/openmetrics-text` — Prometheus's own `Accept` — gets OpenMetrics,
/// which a strict OpenMetrics parser reads; both hold the circuit per state and the
/// whole `process_*` set, `process_max_fds` among it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promtool_passes_a_live_scrape_in_either_format() {
    let db = TestDb::new().await;
    let (mut daemon, url, _files) = exporting_every_family(&db, &[1, 2]).await;

    for accept in [None, Some("*/*"), Some("text/plain; version=0.0.4")] {
        let (content_type, text) = scrape(&url, accept).await;
        assert_eq!(
            content_type, "text/plain; version=0.0.4; charset=utf-8",
            "{accept:?}"
        );
        assert_eq!(run_checker(&["promtool", "check", "metrics"], &text), "");
        assert!(text.contains("# HELP tableq_claims_total "), "{text}");
        assert!(!text.contains("# EOF"), "{text}");
        assert_holds_every_family(&text);
    }

    let prometheus_accept = "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
    for accept in ["application/openmetrics-text", prometheus_accept] {
        let (content_type, text) = scrape(&url, Some(accept)).await;
        assert_eq!(
            content_type,
            "application/openmetrics-text; version=1.0.0; charset=utf-8"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert_eq!(run_checker(&openmetrics_parser(), &text), "");
        assert_holds_every_family(&text);
    }
    daemon.terminate().await;
}

/// The samples a scrape of a running queue holds in either format.
fn assert_holds_every_family(text: &str) {
    for sample in [
        r#"tableq_circuit_state{queue="jobs",state="closed"} 1"#,
        r#"tableq_circuit_state{queue="jobs",state="open"} 0"#,
        r#"tableq_circuit_state{queue="jobs",state="half_open"} 0"#,
        "\nprocess_cpu_seconds_total ",
        "\nprocess_resident_memory_bytes ",
        "\nprocess_virtual_memory_bytes ",
        "\nprocess_virtual_memory_max_bytes ",
        "\nprocess_open_fds ",
        "\nprocess_max_fds ",
        "\nprocess_threads ",
        "\nprocess_start_time_seconds ",
    ] {
        assert!(text.contains(sample), "no {sample:?} in:\n{text}");
    }
}

/// GET `url` with `accept` (none: reqwest sends no `Accept`): the answer's
/// `Content-Type` and body.
async fn scrape(url: &str, accept: Option<&str>) -> (String, String) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut request = reqwest::Client::new().get(url);
    if let Some(accept) = accept {
        request = request.header("Accept", accept);
    }
    let response = request.send().await.expect("/metrics answers");
    assert_eq!(response.status().as_u16(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    (content_type, response.text().await.unwrap())
}

/// A strict OpenMetrics parser: the Python client's (Debian's
/// python3-prometheus-client, which .ci/run installs), run by the system's Python.
fn openmetrics_parser() -> Vec<&'static str> {
    let script = "import sys\n\
        from prometheus_client.openmetrics.parser import text_string_to_metric_families\n\
        list(text_string_to_metric_families(sys.stdin.read()))\n";
    let python = ["python3", "/usr/bin/python3"]
        .into_iter()
        .find(|python| {
            Command::new(python)
                .args(["-c", "import prometheus_client.openmetrics.parser"])
                .output()
                .is_ok_and(|out| out.status.success())
        })
        .expect("a python3 with prometheus_client (apt-get install python3-prometheus-client)");
    vec![python, "-c", script]
}

/// Runs `command` with `input` on its standard input, asserts it succeeds, and
/// returns what it printed.
fn run_checker(command: &[&str], input: &str) -> String {
    let mut child = Command::new(command[0])
        .args(&command[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e} (.ci/run installs it)", command[0]));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{command:?} failed: {said}\non:\n{input}"
    );
    said
}
