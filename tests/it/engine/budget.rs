//! The process's connection budget: however many queues and workers, tableq holds
//! at most `--max-connections` database connections at once, and every row is done.

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;

use crate::support::daemon::{tableq, Daemon};
use crate::support::endpoint::{get, metrics_address};
use crate::support::{assert_has, eventually, private_db, QueueFile, QueueFiles, TestDb};

/// Six queues of four workers each under `--max-connections 3`: never more than three
/// of tableq's connections on the server (two samples 50 ms apart), and every row
/// done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tableq_holds_no_more_connections_than_its_budget() {
    let db = TestDb::new().await;
    let files = QueueFiles::new();
    for queue in 0..6 {
        db.exec(&format!(
            "CREATE TABLE job{queue} (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting') DEFAULT CHARSET=utf8mb4"
        ))
        .await;
        db.fill(&format!("job{queue}"), "id", 50, |i| i.to_string())
            .await;
        QueueFile::new(&format!("jobs{queue}"))
            .workers(4)
            .poll_interval("100ms")
            .select(&format!(
                "SELECT id FROM job{queue} WHERE state = 'waiting' ORDER BY id"
            ))
            .action_sql("DO SLEEP(0.01)")
            .on_success(format!(
                "UPDATE job{queue} SET state = 'done' WHERE id = :id"
            ))
            .write(&files);
    }
    let mut cmd = tableq(&["run", "--max-connections", "3"]);
    cmd.arg(files.path()).env("TABLEQ_DATABASE_URL", &db.url);
    let mut daemon = Daemon::spawn(cmd);
    let connections = format!(
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = '{}' AND ID <> CONNECTION_ID()",
        db.name
    );
    let done: Vec<String> = (0..6)
        .map(|q| format!("SELECT COUNT(*) FROM job{q} WHERE state = 'done'"))
        .collect();
    // One connection of the test's own for every look, so that none of its
    // connections lingers in the list as it closes.
    let mut look = db.conn().await;
    let mut count =
        async |sql: &str| -> u64 { look.query_first(sql).await.unwrap().unwrap_or_default() };
    // A connection tableq has just closed can still be listed for a moment while
    // the one that took its place opens: a count is held against the budget when
    // two samples 50 ms apart both show it.
    let (mut most, mut previous) = (0, 0);
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let now = count(&connections).await;
        most = most.max(now.min(previous));
        previous = now;
        let mut finished = 0;
        for done in &done {
            finished += count(done).await;
        }
        if finished == 300 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{}", daemon.stderr());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    daemon.terminate().await;
    assert!(most <= 3, "tableq held {most} connections");
    assert_has(&daemon.stderr(), "the process's connection budget is spent");
}

/// The server's count of connections opened since it started.
async fn connections_opened(db: &TestDb) -> u64 {
    let status: Vec<(String, u64)> = db.rows("SHOW GLOBAL STATUS LIKE 'Connections'").await;
    status[0].1
}

/// 300 idle queues under `--max-connections 48`: /readyz says 200 within seconds
/// (a queue that takes its turns on the budget's connections is working), and once
/// running the process opens at most a few connections a second — a session given
/// up between polls passes to the next queue waiting, not closed and reopened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_queues_than_the_budget_take_turns_without_opening_connections() {
    const QUEUES: usize = 300;
    let (_server, db) = private_db(&[]).await;
    db.exec(
        "CREATE TABLE job (queue VARCHAR(20) NOT NULL, id INT NOT NULL,
           state VARCHAR(10) NOT NULL DEFAULT 'waiting', PRIMARY KEY (queue, state, id))",
    )
    .await;
    let files = QueueFiles::new();
    for queue in 0..QUEUES {
        QueueFile::new(&format!("turns{queue}"))
            .select("SELECT id FROM job WHERE queue = :queue AND state = 'waiting' ORDER BY id")
            .action_sql("DO :id")
            .on_success("UPDATE job SET state = 'done' WHERE queue = :queue AND id = :id")
            .write(&files);
    }
    let mut cmd = tableq(&[
        "run",
        "--metrics-addr",
        "127.0.0.1:0",
        "--max-connections",
        "48",
    ]);
    cmd.arg(files.path())
        .env("TABLEQ_DATABASE_URL", &db.url)
        .env("TABLEQ_LOG_FORMAT", "json");
    let started = Instant::now();
    let mut daemon = Daemon::spawn(cmd);
    let readyz = format!("http://{}/readyz", metrics_address(&daemon).await);
    eventually("ready", Duration::from_secs(60), || async {
        get(&readyz).await.0 == 200
    })
    .await;
    let ready_after = started.elapsed();
    // Settled: every queue has polled at least twice.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let (before, from) = (connections_opened(&db).await, Instant::now());
    let mut not_ready = 0;
    while from.elapsed() < Duration::from_secs(15) {
        if get(&readyz).await.0 != 200 {
            not_ready += 1;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let per_second = (connections_opened(&db).await - before) as f64 / from.elapsed().as_secs_f64();
    eprintln!("{QUEUES} queues, --max-connections 48: ready after {ready_after:?}, {per_second:.2} connections/s");
    daemon.terminate().await;
    assert!(
        ready_after < Duration::from_secs(20),
        "ready after {ready_after:?}"
    );
    assert_eq!(
        not_ready, 0,
        "/readyz stayed 200 while the queues took turns"
    );
    assert!(per_second <= 3.0, "{per_second:.2} connections a second");
}
