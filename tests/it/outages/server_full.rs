//! More workers than the database allows connections: tableq says so, and `check`
//! says so before it runs.

use std::time::Duration;

use crate::support::check::check;
use crate::support::daemon::{run_to_end, tableq};
use crate::support::{MariaDb, QueueFile, QueueFiles, TestDb};

const ROWS: usize = 100;
const WORKERS: u32 = 30;

/// 30 workers against a server with `max_connections = 10`: the daemon warns that
/// the database refused connections for being full, with a count and the advice,
/// and still finishes every row once; `check` warns that the workers would take
/// more than half of `max_connections`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_workers_than_connections_is_said_and_checked() {
    let server = tokio::task::spawn_blocking(|| MariaDb::start_with(&["--max-connections=10"]))
        .await
        .unwrap();
    let db = TestDb::on(&server.base_url()).await;
    db.exec(
        "CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting') DEFAULT CHARSET=utf8mb4;
         CREATE TABLE job_log (job_id INT NOT NULL) DEFAULT CHARSET=utf8mb4",
    )
    .await;
    db.fill("job", "id", ROWS, |i| i.to_string()).await;
    let files = QueueFiles::new();
    let file = QueueFile::new("jobs")
        .workers(WORKERS)
        .poll_interval("100ms")
        .error_backoff("100ms")
        .select("SELECT id FROM job WHERE state = 'waiting' ORDER BY id")
        .action_sql([
            "INSERT INTO job_log (job_id) VALUES (:id)",
            "DO SLEEP(0.05)",
        ])
        .on_success("UPDATE job SET state = 'done' WHERE id = :id")
        .write(&files);

    let checked = check(&[], &[&file], Some(&db.url)).await;
    assert!(
        checked.stdout.contains(&format!(
            "run {WORKERS} workers, more than half of the server's max_connections (10)"
        )),
        "{}",
        checked.stdout
    );

    let mut cmd = tableq(&["run", "--stop-when-empty"]);
    cmd.arg(&file)
        .env("TABLEQ_DATABASE_URL", &db.url)
        .env("TABLEQ_LOG_FORMAT", "json");
    let done = run_to_end(cmd, Duration::from_secs(120)).await;
    assert_eq!(done.code(), Some(0), "{}", done.stderr);
    let warnings: Vec<&str> = done
        .stderr
        .lines()
        .filter(|l| l.contains("the database refused connections: it is full"))
        .collect();
    assert!(!warnings.is_empty(), "{}", done.stderr);
    let first: serde_json::Value = serde_json::from_str(warnings[0]).expect("a JSON log line");
    assert!(first["refused"].as_u64().is_some_and(|n| n >= 1), "{first}");
    assert!(
        first["message"]
            .as_str()
            .unwrap()
            .contains("lower `workers`"),
        "{first}"
    );
    assert!(
        warnings.len() <= 2,
        "once a minute per queue, not per attempt: {warnings:#?}"
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM job WHERE state = 'done'")
            .await,
        ROWS as u64
    );
    assert_eq!(
        db.count("SELECT COUNT(DISTINCT job_id) FROM job_log").await,
        ROWS as u64
    );
    assert_eq!(db.count("SELECT COUNT(*) FROM job_log").await, ROWS as u64);
}
