//! The real binary under real signals: SIGKILL loses nothing, SIGTERM finishes the
//! item in flight (or rolls it back once the shutdown timeout passes), and a second
//! SIGTERM exits at once.

use std::time::{Duration, Instant};

use crate::support::daemon::{run_binary_until_empty, tableq, Daemon};
use crate::support::process::{is_gone, wait_for_pid};
use crate::support::{assert_has, claimable, eventually, running, QueueFile, QueueFiles, TestDb};

/// A queue over the job table that marks a job done when its action succeeds.
fn job_queue(name: &str) -> QueueFile {
    QueueFile::new(name)
        .select("SELECT id FROM job WHERE state = 'waiting' ORDER BY id")
        .on_success("UPDATE job SET state = 'done' WHERE id = :id")
}

/// An SQL action that logs the job, then sleeps `sleep` seconds.
fn log_and_sleep(queue: QueueFile, sleep: u32) -> QueueFile {
    let sleep = format!("DO SLEEP({sleep})");
    queue.action_sql(["INSERT INTO job_log (job_id) VALUES (:id)", sleep.as_str()])
}

/// Three jobs whose action logs the job, then sleeps `sleep` seconds.
async fn setup(sleep: u32) -> (TestDb, QueueFiles, std::path::PathBuf) {
    let db = TestDb::new().await;
    db.exec(
        "CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting') DEFAULT CHARSET=utf8mb4;
         CREATE TABLE job_log (job_id INT NOT NULL) DEFAULT CHARSET=utf8mb4;
         INSERT INTO job (id) VALUES (1), (2), (3)",
    )
    .await;
    let files = QueueFiles::new();
    let file = log_and_sleep(job_queue("jobs").poll_interval("100ms"), sleep).write(&files);
    (db, files, file)
}

fn start(file: &std::path::Path, db: &TestDb, extra: &[&str]) -> Daemon {
    let mut cmd = tableq(&["run"]);
    cmd.args(extra)
        .arg(file)
        .env("TABLEQ_DATABASE_URL", &db.url);
    Daemon::spawn(cmd)
}

/// [`start`], then waits until an item is in flight (its action sleeping).
async fn start_until_in_flight(file: &std::path::Path, db: &TestDb, extra: &[&str]) -> Daemon {
    let daemon = start(file, db, extra);
    eventually("an item is in flight", Duration::from_secs(30), || {
        running(db, "DO SLEEP")
    })
    .await;
    daemon
}

/// Every job is either done with exactly one log line, or waiting with none.
async fn assert_consistent(db: &TestDb) {
    let inconsistent = db
        .count(
            "SELECT COUNT(*) FROM job j WHERE (SELECT COUNT(*) FROM job_log l WHERE l.job_id = j.id)
             <> IF(j.state = 'done', 1, 0)",
        )
        .await;
    assert_eq!(inconsistent, 0, "a job's log disagrees with its state");
}

/// Killed with SIGKILL mid-item: the row is waiting again, and a second run
/// finishes every job with nothing lost and nothing done twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_item_loses_nothing() {
    // Long enough that the item is still in flight when it is looked at, however
    // slow the machine; the second run's items sleep no time.
    let (db, files, file) = setup(5).await;
    let mut daemon = start_until_in_flight(&file, &db, &[]).await;
    assert!(
        !claimable(&db, "job", "id = 1").await,
        "job 1 is locked by the worker"
    );
    daemon.signal(libc::SIGKILL);
    let status = daemon.wait(Duration::from_secs(10)).await;
    assert_eq!(status.code(), None, "killed by a signal");

    // The server rolls the dead session back; the row is claimable again.
    eventually(
        "the killed item is waiting again",
        Duration::from_secs(30),
        || claimable(&db, "job", "id = 1 AND state = 'waiting'"),
    )
    .await;
    eventually(
        "the killed session is gone",
        Duration::from_secs(30),
        || async { !running(&db, "DO SLEEP").await },
    )
    .await;
    assert_consistent(&db).await;
    assert!(
        db.count("SELECT COUNT(*) FROM job WHERE state = 'waiting'")
            .await
            > 0
    );

    let file = log_and_sleep(job_queue("jobs").poll_interval("100ms"), 0).write(&files);
    run_binary_until_empty(&file, &db.url).await;
    db.assert_count("SELECT COUNT(*) FROM job WHERE state = 'done'", 3)
        .await;
    db.assert_count_because("SELECT COUNT(*) FROM job_log", 3, "a job was done twice")
        .await;
    assert_consistent(&db).await;
}

/// SIGTERM mid-item: the item finishes and commits, and tableq exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_the_item_in_flight_finish() {
    let (db, _files, file) = setup(2).await;
    let mut daemon = start_until_in_flight(&file, &db, &[]).await;
    daemon.terminate().await;
    assert_has(
        &daemon.stderr(),
        "no new claims; finishing the items in flight",
    );
    db.assert_count("SELECT COUNT(*) FROM job WHERE state = 'done'", 1)
        .await;
    db.assert_count("SELECT COUNT(*) FROM job_log", 1).await;
    assert_consistent(&db).await;
}

/// SIGTERM with a shutdown timeout shorter than the item: rolled back, waiting, exit 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_past_the_shutdown_timeout_rolls_the_item_back() {
    let (db, _files, file) = setup(60).await;
    let mut daemon = start_until_in_flight(&file, &db, &["--shutdown-timeout", "300ms"]).await;
    let signalled = Instant::now();
    daemon.signal(libc::SIGTERM);
    let status = daemon.wait(Duration::from_secs(30)).await;
    assert_eq!(status.code(), Some(0), "{}", daemon.stderr());
    assert!(
        signalled.elapsed() < Duration::from_secs(30),
        "it waited for the 60 s item"
    );
    assert_has(&daemon.stderr(), "rolling back the items in flight");
    eventually("the item is waiting again", Duration::from_secs(10), || {
        claimable(&db, "job", "id = 1 AND state = 'waiting'")
    })
    .await;
    db.assert_count_because(
        "SELECT COUNT(*) FROM job_log",
        0,
        "the rolled-back item left a trace",
    )
    .await;
    assert_consistent(&db).await;
}

/// A second SIGTERM exits at once (status 1), and the item rolls back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_sigterm_exits_at_once() {
    let (db, _files, file) = setup(60).await;
    let mut daemon = start_until_in_flight(&file, &db, &[]).await;
    daemon.signal(libc::SIGTERM);
    daemon
        .wait_for_log("stop requested", Duration::from_secs(10))
        .await;
    daemon.signal(libc::SIGTERM);
    let status = daemon.wait(Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(1), "{}", daemon.stderr());
    assert_has(&daemon.stderr(), "second stop signal");
    db.assert_count("SELECT COUNT(*) FROM job WHERE state = 'done'", 0)
        .await;
    eventually("the item is waiting again", Duration::from_secs(70), || {
        claimable(&db, "job", "id = 1 AND state = 'waiting'")
    })
    .await;
    assert_consistent(&db).await;
}

/// SIGTERM in the middle of a batch: the item in flight finishes; the batch's items
/// not yet started are left untouched, waiting for the next run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_mid_batch_returns_the_items_not_started() {
    let (db, files, _) = setup(2).await;
    let file = log_and_sleep(job_queue("batch").batch(3), 2).write(&files);
    let mut daemon = start(&file, &db, &[]);
    eventually(
        "the first item is in flight",
        Duration::from_secs(30),
        || running(&db, "DO SLEEP"),
    )
    .await;
    daemon.terminate().await;
    let states: Vec<(u32, String)> = db.rows("SELECT id, state FROM job ORDER BY id").await;
    assert_eq!(
        states,
        [
            (1, "done".into()),
            (2, "waiting".into()),
            (3, "waiting".into())
        ]
    );
    assert_consistent(&db).await;
    assert!(claimable(&db, "job", "id = 2").await && claimable(&db, "job", "id = 3").await);
}

/// A second SIGTERM exits at once, and takes the commands in flight with it (their
/// process groups are killed), so no stray command outlives tableq.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_sigterm_kills_the_commands_in_flight() {
    let (db, files, _) = setup(0).await;
    files.script("hang.sh", "echo $$ > running.pid\nsleep 300");
    let file = job_queue("commands")
        .action_command(&["./hang.sh"])
        .write(&files);
    let mut daemon = start(&file, &db, &[]);
    let pid = wait_for_pid(&files.path().join("running.pid")).await;
    daemon.signal(libc::SIGTERM);
    daemon
        .wait_for_log("stop requested", Duration::from_secs(10))
        .await;
    daemon.signal(libc::SIGTERM);
    assert_eq!(daemon.wait(Duration::from_secs(10)).await.code(), Some(1));
    eventually(
        "the command is gone",
        Duration::from_secs(10),
        || async move { is_gone(pid) },
    )
    .await;
}
