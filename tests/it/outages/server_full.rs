//! More workers than the database allows connections: tableq says so, and `check`
//! says so before it runs; a server already full when a queue starts is said with
//! the same advice.

use std::time::Duration;

use crate::support::check::check;
use crate::support::daemon::{run_to_end, tableq, Daemon};
use crate::support::{
    assert_has, each_job_done_and_logged_once, logged_jobs, private_db, QueueFile, QueueFiles,
};

const ROWS: usize = 100;
const WORKERS: u32 = 30;

/// 30 workers against a server with `max_connections = 10`: the daemon warns that
/// the database refused connections for being full, with a count and the advice,
/// and still finishes every row once; `check` warns that the workers would take
/// more than half of `max_connections`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_workers_than_connections_is_said_and_checked() {
    let (_server, db) = private_db(&["--max-connections=10"]).await;
    logged_jobs(&db, ROWS).await;
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
    assert_has(
        &checked.stdout,
        &format!("run {WORKERS} workers, more than half of the server's max_connections (10)"),
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
    each_job_done_and_logged_once(&db, ROWS).await;
}

/// A server whose every connection is taken when the queue starts: its first
/// session is refused, and the daemon says the database is full with the advice
/// (not only that it cannot connect); once connections are free the queue starts
/// and does every row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_full_at_start_is_said_with_the_advice() {
    let (_server, db) = private_db(&["--max-connections=4"]).await;
    db.exec(&format!(
        "CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting');
         INSERT INTO job (id) VALUES (1), (2), (3);
         CREATE USER 'app'@'%' IDENTIFIED BY 'app';
         GRANT ALL ON `{0}`.* TO 'app'@'%';
         CREATE USER 'filler'@'%' IDENTIFIED BY 'filler';
         GRANT USAGE ON *.* TO 'filler'@'%'",
        db.name
    ))
    .await;
    // Every connection an ordinary user may have taken: the queue's is refused for
    // the server being full (root keeps a way in).
    let filler = db.url.replacen("root@", "filler:filler@", 1);
    let filler = filler.rsplit_once('/').unwrap().0.to_string();
    let mut held = Vec::new();
    while let Ok(conn) = mysql_async::Conn::from_url(filler.as_str()).await {
        held.push(conn);
        assert!(held.len() <= 10, "max_connections = 4 lets no more in");
    }
    assert!(!held.is_empty());
    let files = QueueFiles::new();
    let file = QueueFile::new("full_at_start")
        .error_backoff("200ms")
        .set("wake", "poll")
        .select("SELECT id FROM job WHERE state = 'waiting' ORDER BY id")
        .action_sql("DO :id")
        .on_success("UPDATE job SET state = 'done' WHERE id = :id")
        .write(&files);
    let mut cmd = tableq(&["run", "--stop-when-empty"]);
    cmd.arg(&file).env(
        "TABLEQ_DATABASE_URL",
        db.url.replacen("root@", "app:app@", 1),
    );
    let mut daemon = Daemon::spawn(cmd);
    let full = "the database refused connections: it is full";
    daemon.wait_for_log(full, Duration::from_secs(30)).await;
    for conn in held {
        conn.disconnect().await.ok();
    }
    assert_eq!(daemon.wait(Duration::from_secs(60)).await.code(), Some(0));
    let log = daemon.stderr();
    let said = log.lines().find(|l| l.contains(full)).unwrap();
    assert!(said.contains("lower `workers`"), "{said}");
    assert!(
        log.find(full) < log.find("queue started"),
        "said before the queue could start: {log}"
    );
    let done = db.count("SELECT COUNT(*) FROM job WHERE state = 'done'");
    assert_eq!(done.await, 3);
}
