//! `--metrics-addr`: Prometheus counters per queue, liveness, and readiness that
//! tells a queue without a database connection.

use std::time::Duration;

use crate::support;
use crate::support::daemon::tableq;
use crate::support::endpoint::{get, start_with_metrics};
use crate::support::web::closed_port;
use crate::support::{eventually, QueueFile, QueueFiles, TestDb};

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

    eventually("the jobs are done", Duration::from_secs(30), || async {
        db.count("SELECT COUNT(*) FROM job WHERE state = 'done'")
            .await
            == 3
    })
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
    assert!(
        done.stderr
            .contains(&format!("--metrics-addr {addr}: cannot listen")),
        "{}",
        done.stderr
    );
}
