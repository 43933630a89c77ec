//! The database going away mid-run is a pause, not a failure.

use std::time::{Duration, Instant};

use crate::support;
use crate::support::daemon::{tableq, Daemon};
use crate::support::{
    each_job_done_and_logged_once, eventually, load, logged_jobs, private_db, Engine, QueueFiles,
};

const ROWS: usize = 400;

/// The queue's name, which no other test gives a queue: the log is the process's.
const QUEUE: &str = "restarted";

/// True once the log says the workers lost the database: their items are waiting
/// again, or they cannot connect.
fn lost_the_database(logs: &support::logs::Logs) -> bool {
    !logs
        .lines_of(QUEUE, "its items are waiting again")
        .is_empty()
        || !logs.lines_of(QUEUE, "cannot connect").is_empty()
}

/// A private MariaDB stopped and restarted mid-run: the daemon keeps going and
/// finishes every row, each exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_daemon_rides_out_a_database_restart() {
    let logs = support::logs::capture();
    // Always a server of this test's own: it is going to be stopped.
    let (server, db) = private_db(&[]).await;
    logged_jobs(&db, ROWS).await;
    let files = QueueFiles::new();
    let file = files.write(
        &format!("{QUEUE}.toml"),
        r#"
workers = 4
poll_interval = "100ms"
error_backoff = "100ms"
select = "SELECT id FROM job WHERE state = 'waiting' ORDER BY id"
[action]
type = "sql"
sql = ["INSERT INTO job_log (job_id) VALUES (:id)", "DO SLEEP(0.02)"]
[on_success]
sql = "UPDATE job SET state = 'done' WHERE id = :id"
"#,
    );
    let options = tableq::RunOptions {
        database_url: Some(db.url.clone()),
        stop_when_empty: true,
        ..tableq::RunOptions::default()
    };
    let engine = Engine::start_with(load(&[file]), options);

    // Some jobs are done.
    db.until_count_at_least("SELECT COUNT(*) FROM job_log", 40, 60)
        .await;
    tokio::task::block_in_place(|| server.stop());
    // The server stays down until the daemon has seen it go: an item rolled back, or
    // a connection refused.
    eventually(
        "the daemon notices the database is gone",
        Duration::from_secs(60),
        || {
            let logs = logs.clone();
            async move { lost_the_database(&logs) }
        },
    )
    .await;
    tokio::task::block_in_place(|| server.start_again());
    let done_before_end: u64 = db
        .count("SELECT COUNT(*) FROM job WHERE state = 'done'")
        .await;
    assert!(
        done_before_end < ROWS as u64,
        "the restart came after the queue was done"
    );

    let summary = engine.finish().await;
    each_job_done_and_logged_once(&db, ROWS).await;
    assert!(summary.counts(QUEUE).unwrap().done > 0);
    assert!(
        !logs
            .lines_of(QUEUE, "connected to the database again")
            .is_empty(),
        "the workers never reconnected:\n{}",
        logs.lines_of(QUEUE, "").join("\n")
    );
    assert!(lost_the_database(&logs));
    drop(db);
    drop(server);
}

/// A database down for 15 s — long enough for the backoff to have grown to 8–16 s —
/// is used again within about two seconds of taking connections: a server that
/// worked until lately is tried again promptly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_back_after_an_outage_is_used_within_seconds() {
    let (server, db) = private_db(&[]).await;
    db.exec("CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting')")
        .await;
    let files = QueueFiles::new();
    let file = support::QueueFile::new("back_promptly")
        .workers(2)
        .poll_interval("100ms")
        .error_backoff("500ms")
        .select("SELECT id FROM job WHERE state = 'waiting' ORDER BY id")
        .action_sql("DO 1")
        .on_success("UPDATE job SET state = 'done' WHERE id = :id")
        .write(&files);
    let mut cmd = tableq(&["run"]);
    cmd.arg(&file).env("TABLEQ_DATABASE_URL", &db.url);
    let mut daemon = Daemon::spawn(cmd);
    let done = |rows: u64| {
        let db = &db;
        async move {
            db.count("SELECT COUNT(*) FROM job WHERE state = 'done'")
                .await
                == rows
        }
    };
    db.exec("INSERT INTO job (id) VALUES (1)").await;
    eventually("the first row is done", Duration::from_secs(30), || done(1)).await;
    tokio::task::block_in_place(|| server.stop());
    // The outage itself: 0.5 + 1 + 2 + 4 + 8 s of doubling backoff fit in it.
    tokio::time::sleep(Duration::from_secs(15)).await;
    tokio::task::block_in_place(|| server.start_again());
    let back = Instant::now();
    db.exec("INSERT INTO job (id) VALUES (2)").await;
    eventually("the second row is done", Duration::from_secs(30), || {
        done(2)
    })
    .await;
    let used_again = back.elapsed();
    eprintln!("a database back after 15 s down was used again after {used_again:.1?}");
    daemon.terminate().await;
    assert!(
        used_again < Duration::from_secs(3),
        "used again {used_again:?} after it took connections:\n{}",
        daemon.stderr()
    );
}
