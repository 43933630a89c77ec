//! SIGHUP reloads the queue files without dropping work in flight, and refuses
//! files that are wrong, keeping the queues that run.

mod support;

use std::time::Duration;

use support::daemon::{tableq, Daemon};
use support::{eventually, running, QueueFiles, TestDb};

fn version(label: &str, sleep: u32) -> String {
    format!(
        r#"
select = "SELECT id FROM job WHERE state = 'waiting' ORDER BY id"
poll_interval = "100ms"
[action]
type = "sql"
sql = "DO SLEEP({sleep})"
[on_success]
sql = "UPDATE job SET state = '{label}' WHERE id = :id"
"#
    )
}

async fn state(db: &TestDb, id: u32) -> String {
    db.scalar(&format!("SELECT state FROM job WHERE id = {id}"))
        .await
}

/// SIGHUP mid-item: the item finishes under the old file, new rows use the new one,
/// and a broken file is refused while the queue keeps running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_without_dropping_work_in_flight() {
    let db = TestDb::new().await;
    db.exec(
        "CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting') DEFAULT CHARSET=utf8mb4;
         INSERT INTO job (id) VALUES (1)",
    )
    .await;
    let files = QueueFiles::new();
    let file = files.write("jobs.toml", &version("v1", 2));
    let mut cmd = tableq(&["run"]);
    cmd.arg(&file).env("TABLEQ_DATABASE_URL", &db.url);
    let mut daemon = Daemon::spawn(cmd);

    eventually("job 1 is in flight", Duration::from_secs(30), || {
        running(&db, "DO SLEEP")
    })
    .await;
    files.write("jobs.toml", &version("v2", 0));
    daemon.signal(libc::SIGHUP);
    daemon
        .wait_for_log("reloaded", Duration::from_secs(30))
        .await;
    assert_eq!(
        state(&db, 1).await,
        "v1",
        "the item in flight finished under the old file"
    );

    db.exec("INSERT INTO job (id) VALUES (2)").await;
    eventually(
        "job 2 is done by the new file",
        Duration::from_secs(30),
        || async { state(&db, 2).await == "v2" },
    )
    .await;

    // A broken file is refused; the running queue carries on.
    files.write(
        "jobs.toml",
        &version("v3", 0).replace("UPDATE job", "UPDTE job"),
    );
    daemon.signal(libc::SIGHUP);
    daemon
        .wait_for_log("reload refused", Duration::from_secs(30))
        .await;
    assert!(
        daemon.stderr().contains("ERROR 1064"),
        "{}",
        daemon.stderr()
    );
    db.exec("INSERT INTO job (id) VALUES (3)").await;
    eventually(
        "job 3 is done by the running queue",
        Duration::from_secs(30),
        || async { state(&db, 3).await == "v2" },
    )
    .await;

    daemon.terminate().await;
}

/// A reload that would leave a queue without a database is refused; the daemon keeps
/// running the queues it has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_without_a_database_is_refused() {
    let db = TestDb::new().await;
    db.exec("CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting') DEFAULT CHARSET=utf8mb4")
        .await;
    let files = QueueFiles::new();
    files.write(
        "jobs.toml",
        &format!("database_url = \"{}\"\n{}", db.url, version("v1", 0)),
    );
    let mut cmd = tableq(&["run"]);
    cmd.arg(files.path());
    let mut daemon = Daemon::spawn(cmd);
    daemon
        .wait_for_log("queue started", Duration::from_secs(30))
        .await;

    files.write("other.toml", &version("v9", 0));
    daemon.signal(libc::SIGHUP);
    daemon
        .wait_for_log("reload refused", Duration::from_secs(30))
        .await;
    assert!(
        daemon.stderr().contains("no database"),
        "{}",
        daemon.stderr()
    );
    db.exec("INSERT INTO job (id) VALUES (1)").await;
    eventually(
        "job 1 is done by the running queue",
        Duration::from_secs(30),
        || async { state(&db, 1).await == "v1" },
    )
    .await;
    daemon.terminate().await;
}
