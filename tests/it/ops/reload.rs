//! SIGHUP reloads the queue files without dropping work in flight, and refuses
//! files that are wrong, keeping the queues that run. A reload touches only what
//! changed: an unchanged queue keeps running untouched, and a changed queue's old
//! version finishes its items however long they take.

use std::time::Duration;

use std::path::Path;

use crate::support::daemon::{tableq, Daemon};
use crate::support::{assert_has, eventually, running, QueueFile, QueueFiles, TestDb};

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

/// Sends SIGHUP and waits until the log says `outcome` ("reloaded", "reload refused").
async fn hangup(daemon: &Daemon, outcome: &str) {
    let before = daemon.stderr().matches(outcome).count();
    daemon.signal(libc::SIGHUP);
    daemon
        .wait_for_log_times(outcome, before + 1, Duration::from_secs(30))
        .await;
}

async fn state(db: &TestDb, id: u32) -> String {
    db.scalar(&format!("SELECT state FROM job WHERE id = {id}"))
        .await
}

/// Waits until job `id` is done by the file of version `version` (`what` says why).
async fn done_by(db: &TestDb, id: u32, version: &str, what: &str) {
    eventually(what, Duration::from_secs(30), || async {
        state(db, id).await == version
    })
    .await;
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
    hangup(&daemon, "reloaded").await;
    done_by(
        &db,
        1,
        "v1",
        "the item in flight finishes under the old file",
    )
    .await;

    db.exec("INSERT INTO job (id) VALUES (2)").await;
    done_by(&db, 2, "v2", "job 2 is done by the new file").await;

    // A broken file is refused; the running queue carries on.
    files.write(
        "jobs.toml",
        &version("v3", 0).replace("UPDATE job", "UPDTE job"),
    );
    hangup(&daemon, "reload refused").await;
    assert_has(&daemon.stderr(), "ERROR 1064");
    db.exec("INSERT INTO job (id) VALUES (3)").await;
    done_by(&db, 3, "v2", "job 3 is done by the running queue").await;

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
    hangup(&daemon, "reload refused").await;
    assert_has(&daemon.stderr(), "no database");
    db.exec("INSERT INTO job (id) VALUES (1)").await;
    done_by(&db, 1, "v1", "job 1 is done by the running queue").await;
    daemon.terminate().await;
}

/// A command queue on table `table`: `work.sh LABEL ID SECONDS` records its start and
/// end in `runs`, sleeping the row's `secs` between; success marks the row `LABEL`.
fn slow_queue(name: &str, table: &str, label: &str) -> QueueFile {
    QueueFile::new(name)
        .select(&format!(
            "SELECT id, secs FROM {table} WHERE state = 'waiting' ORDER BY id"
        ))
        .poll_interval("100ms")
        .action_command(&["./work.sh", label, "{id}", "{secs}"])
        .action_set("timeout", "60s")
        .on_success(format!("UPDATE {table} SET state = '{label}' WHERE id = :id").as_str())
}

async fn slow_table(db: &TestDb, table: &str, secs: u32) {
    db.exec(&format!(
        "CREATE TABLE {table} (id INT PRIMARY KEY, secs INT NOT NULL, state VARCHAR(10) NOT NULL DEFAULT 'waiting');
         INSERT INTO {table} (id, secs) VALUES (1, {secs})"
    ))
    .await;
}

fn work_script(files: &QueueFiles) {
    files.script(
        "work.sh",
        "echo \"$1 $2 start\" >> runs\nsleep \"$3\"\necho \"$1 $2 end\" >> runs",
    );
}

/// The lines of `runs` that are exactly `line`.
fn runs(dir: &Path, line: &str) -> usize {
    std::fs::read_to_string(dir.join("runs"))
        .unwrap_or_default()
        .lines()
        .filter(|l| *l == line)
        .count()
}

fn daemon_on(files: &QueueFiles, db: &TestDb, shutdown_timeout: &str) -> Daemon {
    let mut cmd = tableq(&["run", "--shutdown-timeout", shutdown_timeout]);
    cmd.arg(files.path())
        .current_dir(files.path())
        .env("TABLEQ_DATABASE_URL", &db.url);
    Daemon::spawn(cmd)
}

async fn state_of(db: &TestDb, table: &str) -> String {
    db.scalar(&format!("SELECT state FROM {table} WHERE id = 1"))
        .await
}

/// A reload with unchanged files leaves an 8 s command — longer than the 3 s
/// shutdown timeout — running to completion, exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_with_unchanged_files_leaves_a_long_command_running_once() {
    let db = TestDb::new().await;
    slow_table(&db, "job", 8).await;
    let files = QueueFiles::new();
    work_script(&files);
    slow_queue("jobs", "job", "done").write(&files);
    let mut daemon = daemon_on(&files, &db, "3s");
    eventually("the command runs", Duration::from_secs(30), || async {
        runs(&files.path(), "done 1 start") == 1
    })
    .await;

    hangup(&daemon, "reloaded").await;
    assert_has(&daemon.stderr(), "queue unchanged");
    eventually("the item is done", Duration::from_secs(30), || async {
        state_of(&db, "job").await == "done"
    })
    .await;
    assert_eq!(runs(&files.path(), "done 1 start"), 1, "it ran once");
    assert_eq!(runs(&files.path(), "done 1 end"), 1, "to its end");
    assert_eq!(
        daemon.stderr().matches("queue started").count(),
        1,
        "the queue was never restarted: {}",
        daemon.stderr()
    );
    daemon.terminate().await;
}

/// A reload that changes one of two queues leaves the other untouched, and the
/// changed queue's old version finishes its 5 s item past the 1 s shutdown timeout,
/// while its new version already takes new rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_changes_one_queue_leaves_the_other_untouched() {
    let db = TestDb::new().await;
    slow_table(&db, "job_a", 5).await;
    slow_table(&db, "job_b", 5).await;
    let files = QueueFiles::new();
    work_script(&files);
    slow_queue("a", "job_a", "a1").write(&files);
    slow_queue("b", "job_b", "b").write(&files);
    let mut daemon = daemon_on(&files, &db, "1s");
    eventually("both commands run", Duration::from_secs(30), || async {
        runs(&files.path(), "a1 1 start") == 1 && runs(&files.path(), "b 1 start") == 1
    })
    .await;

    slow_queue("a", "job_a", "a2").write(&files);
    hangup(&daemon, "reloaded").await;
    let log = daemon.stderr();
    let line = |queue: &str, change: &str| {
        log.lines()
            .any(|l| l.contains(change) && l.contains(&format!("queue={queue}")))
    };
    assert!(line("b", "queue unchanged"), "{log}");
    assert!(line("a", "queue changed"), "{log}");

    db.exec("INSERT INTO job_a (id, secs) VALUES (2, 0)").await;
    eventually(
        "the new version takes new rows",
        Duration::from_secs(30),
        || async {
            db.scalar::<String>("SELECT state FROM job_a WHERE id = 2")
                .await
                == "a2"
        },
    )
    .await;
    eventually(
        "both items in flight finish",
        Duration::from_secs(30),
        || async { state_of(&db, "job_a").await == "a1" && state_of(&db, "job_b").await == "b" },
    )
    .await;
    for line in ["a1 1 start", "a1 1 end", "b 1 start", "b 1 end"] {
        assert_eq!(runs(&files.path(), line), 1, "{line}");
    }
    let started = |queue: &str| {
        daemon
            .stderr()
            .lines()
            .filter(|l| l.contains("queue started") && l.contains(&format!("queue={queue}")))
            .count()
    };
    assert_eq!(started("b"), 1, "b was never restarted");
    assert_eq!(started("a"), 2, "a's new version started");
    daemon
        .wait_for_log("old version finished", Duration::from_secs(30))
        .await;
    daemon.terminate().await;
}
