//! The process's connection budget: however many queues and workers, tableq holds
//! at most `--max-connections` database connections at once, and every row is done.

use std::time::Duration;

use mysql_async::prelude::Queryable;

use crate::support::daemon::{tableq, Daemon};
use crate::support::{QueueFile, QueueFiles, TestDb};

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
    assert!(
        daemon
            .stderr()
            .contains("the process's connection budget is spent"),
        "{}",
        daemon.stderr()
    );
}
