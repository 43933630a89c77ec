//! The same behaviour in both modes, as River's driver suite asks the same of every
//! driver: whatever a queue's mode, a loop is caught and stops the queue, recorded
//! failures do not slow it down, the circuit opens and closes, a full server is said,
//! connection errors are counted, `--stop-when-empty` drains, and kill -9 loses
//! nothing. Each behaviour is one function taking the [`Mode`]; `in_both_modes!`
//! makes a test of it for each mode.

use std::path::PathBuf;
use std::time::Duration;

use crate::support::daemon::{run_to_end, tableq, Daemon};
use crate::support::endpoint::{get, start_with_metrics};
use crate::support::scrape::sample;
use crate::support::{connections, eventually, private_db, MariaDb, QueueFile, QueueFiles, TestDb};

#[derive(Clone, Copy, Debug)]
pub enum Mode {
    Transaction,
    Lease,
}

/// `job`: a state, the attempts spent, and a lease (used in lease mode); `job_log`:
/// one line for each run of the action, its key first.
async fn job_table(db: &TestDb, rows: usize) {
    db.exec(
        "CREATE TABLE job (
           id INT PRIMARY KEY,
           state VARCHAR(10) NOT NULL DEFAULT 'waiting',
           attempts INT NOT NULL DEFAULT 0,
           lease_id VARCHAR(32) NULL,
           lease_until DATETIME(3) NULL,
           KEY (state, lease_until)
         ) DEFAULT CHARSET=utf8mb4",
    )
    .await;
    db.fill("job", "id", rows, |i| i.to_string()).await;
}

impl Mode {
    /// A queue of `job` in this mode whose action is `command`; with `on_success`
    /// given as the SET clause of the row's UPDATE (the lease guard is added in lease
    /// mode).
    fn queue(self, name: &str, command: &[&str], on_success: &str) -> QueueFile {
        let base = QueueFile::new(name)
            .poll_interval("200ms")
            .error_backoff("200ms")
            .action_command(command);
        let base = base.select(&self.select("id"));
        let base = match self {
            Mode::Transaction => base,
            Mode::Lease => base
                .set("mode", "lease")
                .lease_set(
                    "sql",
                    "UPDATE job SET state = 'leased', lease_id = :lease_id, \
                     lease_until = NOW(3) + INTERVAL 3 SECOND WHERE id = :id",
                )
                .lease_set(
                    "renew_sql",
                    "UPDATE job SET lease_until = NOW(3) + INTERVAL 3 SECOND \
                     WHERE id = :id AND lease_id = :lease_id",
                )
                .lease_set("renew_every", "1s"),
        };
        base.on_success(self.update(on_success))
    }

    /// The select of `columns` of the waiting rows of `job` (and in lease mode of
    /// those whose lease expired), in order.
    fn select(self, columns: &str) -> String {
        let waiting = match self {
            Mode::Transaction => "state = 'waiting'",
            Mode::Lease => "state = 'waiting' OR (state = 'leased' AND lease_until < NOW(3))",
        };
        format!("SELECT {columns} FROM job WHERE {waiting} ORDER BY id")
    }

    /// `UPDATE job SET <set> WHERE id = :id`, guarded by the lease in lease mode.
    fn update(self, set: &str) -> String {
        match self {
            Mode::Transaction => format!("UPDATE job SET {set} WHERE id = :id"),
            Mode::Lease => {
                format!("UPDATE job SET {set} WHERE id = :id AND lease_id = :lease_id")
            }
        }
    }
}

/// `tableq run --stop-when-empty` on `file`, logging JSON, to its end.
async fn run_until_empty(file: &PathBuf, url: &str, timeout: Duration) -> (Option<i32>, String) {
    let mut cmd = tableq(&["run", "--stop-when-empty"]);
    cmd.arg(file)
        .env("TABLEQ_DATABASE_URL", url)
        .env("TABLEQ_LOG_FORMAT", "json");
    let done = run_to_end(cmd, timeout).await;
    (done.code(), done.stderr)
}

/// A queue whose `[on_success]` leaves the row in the select is stopped after a row
/// came back `loop_limit` times: the log names the loop, the process does not exit
/// 0, and no row ran more than `loop_limit + 1` times.
pub async fn a_loop_stops_the_queue(mode: Mode) {
    let db = TestDb::new().await;
    job_table(&db, 2).await;
    let files = QueueFiles::new();
    let file = mode
        .queue(
            "looping",
            &["true"],
            "state = 'waiting', attempts = attempts + 1",
        )
        .batch(2)
        .write(&files);
    let (code, log) = run_until_empty(&file, &db.url, Duration::from_secs(60)).await;
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("an item completed again"), "{log}");
    assert!(log.contains("the queue loops"), "{log}");
    let most: i64 = db.scalar("SELECT MAX(attempts) FROM job").await;
    assert!(most <= 4, "a row ran {most} times");
}

/// A sole queue that loops does not end the process quietly: without
/// `--stop-when-empty` the process stays up, `/readyz` answers 503 naming the queue,
/// `tableq_queue_claiming` is 0, the status page says "stopped claiming: looping",
/// `tableq_loops_total` counted the loops, and no row ran more than `loop_limit + 1`
/// times.
pub async fn a_sole_looping_queue_keeps_the_process_up(mode: Mode) {
    let db = TestDb::new().await;
    job_table(&db, 2).await;
    let files = QueueFiles::new();
    mode.queue(
        "sole_looper",
        &["true"],
        "state = 'waiting', attempts = attempts + 1",
    )
    .batch(2)
    .write(&files);
    let (mut daemon, base) = start_with_metrics(&files, &db.url).await;
    daemon
        .wait_for_log("the queue loops", Duration::from_secs(60))
        .await;
    let claiming = "tableq_queue_claiming{queue=\"sole_looper\"}";
    eventually(
        "the queue shows as not claiming",
        Duration::from_secs(10),
        || async {
            let (_, metrics) = get(&format!("{base}/metrics")).await;
            sample(&metrics, claiming) == Some(0.0)
        },
    )
    .await;
    let (status, ready) = get(&format!("{base}/readyz")).await;
    assert_eq!(status, 503, "{ready}");
    assert!(
        ready.contains("queue sole_looper stopped claiming"),
        "{ready}"
    );
    let (_, page) = get(&format!("{base}/")).await;
    assert!(page.contains(">stopped claiming: looping<"), "{page}");
    // Each item completed again was counted as a loop: both rows, loop_limit times.
    let (_, metrics) = get(&format!("{base}/metrics")).await;
    let loops = sample(&metrics, "tableq_loops_total{queue=\"sole_looper\"}");
    assert!(loops.is_some_and(|n| n >= 3.0), "{loops:?}: {metrics}");
    assert!(
        daemon.try_status().is_none(),
        "the process exited: {}",
        daemon.stderr()
    );
    let most: i64 = db.scalar("SELECT MAX(attempts) FROM job").await;
    assert!(most <= 4, "a row ran {most} times");
    daemon.terminate().await;
}

/// 60 rows whose action fails for their own sake, each recorded by `[on_failure]`
/// until it gives up after three attempts, are all given up on in one short run: a
/// recorded failure is normal processing, not a reason to back off (at `batch = 1`
/// the old whole-batch backoff doubled the wait at every failure, past a minute).
pub async fn recorded_failures_do_not_slow_the_queue(mode: Mode) {
    let db = TestDb::new().await;
    job_table(&db, 60).await;
    let files = QueueFiles::new();
    let file =
        mode.queue("bouncing", &["false"], "state = 'done'")
            .set("error_backoff", "5s")
            .on_failure(mode.update(
                "state = IF(attempts + 1 >= 3, 'failed', 'waiting'), attempts = attempts + 1",
            ))
            .write(&files);
    let (code, log) = run_until_empty(&file, &db.url, Duration::from_secs(60)).await;
    assert_eq!(code, Some(0), "{log}");
    let failed = db
        .count("SELECT COUNT(*) FROM job WHERE state = 'failed' AND attempts = 3")
        .await;
    assert_eq!(
        failed, 60,
        "every row gave up after three recorded attempts"
    );
}

/// A command that exits 75 (EX_TEMPFAIL) while a marker file exists opens the
/// circuit after `min_items` attempts; once the marker is gone the probe gets
/// through, the circuit closes, and every row is done.
pub async fn the_circuit_opens_and_closes(mode: Mode) {
    let db = TestDb::new().await;
    job_table(&db, 20).await;
    let files = QueueFiles::new();
    let marker = files.path().join("down");
    std::fs::write(&marker, "").unwrap();
    let script = files.script(
        "deliver",
        &format!("[ -e '{}' ] && exit 75\nexit 0", marker.display()),
    );
    let script = script.to_string_lossy().into_owned();
    let circuit = toml::Value::Table(
        [
            ("min_items", 3.into()),
            ("cool_down", "1s".into()),
            ("max_cool_down", "2s".into()),
        ]
        .into_iter()
        .map(|(key, value): (&str, toml::Value)| (key.to_string(), value))
        .collect(),
    );
    mode.queue("guarded", &[script.as_str()], "state = 'done'")
        .workers(2)
        .set("circuit", circuit)
        .write(&files);
    let (mut daemon, base) = start_with_metrics(&files, &db.url).await;
    let open = "tableq_circuit_transitions_total{queue=\"guarded\",to=\"open\"}";
    eventually("the circuit opens", Duration::from_secs(30), || async {
        let (_, metrics) = get(&format!("{base}/metrics")).await;
        sample(&metrics, open).is_some_and(|n| n >= 1.0)
    })
    .await;
    assert_eq!(
        db.count("SELECT COUNT(*) FROM job WHERE state = 'done'")
            .await,
        0
    );
    std::fs::remove_file(&marker).unwrap();
    eventually("every row is done", Duration::from_secs(60), || async {
        db.count("SELECT COUNT(*) FROM job WHERE state = 'done'")
            .await
            == 20
    })
    .await;
    let (_, metrics) = get(&format!("{base}/metrics")).await;
    let closed = "tableq_circuit_transitions_total{queue=\"guarded\",to=\"closed\"}";
    assert!(
        sample(&metrics, closed).is_some_and(|n| n >= 1.0),
        "{metrics}"
    );
    daemon.terminate().await;
    assert!(
        daemon.stderr().contains("the circuit is closed"),
        "{}",
        daemon.stderr()
    );
}

/// More connections than the server allows: tableq says the database is full,
/// with the advice, and still finishes every row.
pub async fn a_full_server_is_said(mode: Mode) {
    let server = tokio::task::spawn_blocking(|| MariaDb::start_with(&["--max-connections=4"]))
        .await
        .unwrap();
    let db = TestDb::on(&server.base_url()).await;
    job_table(&db, 40).await;
    let files = QueueFiles::new();
    let queue = mode
        .queue("crowded", &["true"], "state = 'done'")
        .workers(12);
    let file = match mode {
        Mode::Transaction => queue,
        Mode::Lease => queue.lease_set("connections", 12),
    }
    .write(&files);
    let (code, log) = run_until_empty(&file, &db.url, Duration::from_secs(120)).await;
    assert_eq!(code, Some(0), "{log}");
    assert!(
        log.contains("the database refused connections: it is full"),
        "{log}"
    );
    assert!(log.contains("lower `workers`"), "{log}");
    assert_eq!(
        db.count("SELECT COUNT(*) FROM job WHERE state = 'done'")
            .await,
        40
    );
}

/// The database goes away while the queue runs: every failed connection is
/// counted (`tableq_db_errors_total{kind="connect"}`), and once it is back the rows
/// are done.
pub async fn connection_errors_are_counted(mode: Mode) {
    let server = tokio::task::spawn_blocking(MariaDb::start).await.unwrap();
    let db = TestDb::on(&server.base_url()).await;
    job_table(&db, 10).await;
    let files = QueueFiles::new();
    let flag = files.path().join("go");
    let script = files.script(
        "wait_for_go",
        &format!("while [ ! -e '{}' ]; do sleep 0.1; done", flag.display()),
    );
    let script = script.to_string_lossy().into_owned();
    mode.queue("outage", &[script.as_str()], "state = 'done'")
        .write(&files);
    let (mut daemon, base) = start_with_metrics(&files, &db.url).await;
    let connect = "tableq_db_errors_total{queue=\"outage\",kind=\"connect\"}";
    eventually("the queue started", Duration::from_secs(30), || async {
        daemon.stderr().contains("queue started")
    })
    .await;
    let server = std::sync::Arc::new(server);
    let stopping = server.clone();
    tokio::task::spawn_blocking(move || stopping.stop())
        .await
        .unwrap();
    eventually(
        "connection errors are counted",
        Duration::from_secs(60),
        || async {
            let (_, metrics) = get(&format!("{base}/metrics")).await;
            sample(&metrics, connect).is_some_and(|n| n >= 2.0)
        },
    )
    .await;
    let starting = server.clone();
    tokio::task::spawn_blocking(move || starting.start_again())
        .await
        .unwrap();
    std::fs::write(&flag, "").unwrap();
    eventually("every row is done", Duration::from_secs(90), || async {
        db.count("SELECT COUNT(*) FROM job WHERE state = 'done'")
            .await
            == 10
    })
    .await;
    daemon.terminate().await;
}

/// `--stop-when-empty` exits 0 once every row is done, and not before.
pub async fn stop_when_empty_drains(mode: Mode) {
    let db = TestDb::new().await;
    job_table(&db, 30).await;
    let files = QueueFiles::new();
    let file = mode
        .queue("drained", &["true"], "state = 'done'")
        .workers(3)
        .batch(4)
        .write(&files);
    let (code, log) = run_until_empty(&file, &db.url, Duration::from_secs(60)).await;
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("the queue is drained"), "{log}");
    assert_eq!(
        db.count("SELECT COUNT(*) FROM job WHERE state = 'done'")
            .await,
        30
    );
}

/// tableq killed with SIGKILL while an action runs: the row is not lost — a second
/// run (in lease mode once the lease expires) finishes every row.
pub async fn kill_9_loses_nothing(mode: Mode) {
    let db = TestDb::new().await;
    job_table(&db, 5).await;
    let files = QueueFiles::new();
    let started = files.path().join("started");
    let script = files.script(
        "slow",
        &format!(
            "echo \"$TABLEQ_KEY\" >> '{}'\n[ \"$TABLEQ_KEY\" = 3 ] && [ ! -e '{}.again' ] && \
             touch '{}.again' && sleep 5\nexit 0",
            started.display(),
            started.display(),
            started.display()
        ),
    );
    let script = script.to_string_lossy().into_owned();
    let file = mode
        .queue("killed", &[script.as_str()], "state = 'done'")
        .write(&files);
    let mut cmd = tableq(&["run"]);
    cmd.arg(&file).env("TABLEQ_DATABASE_URL", &db.url);
    let mut daemon = Daemon::spawn(cmd);
    let again = files.path().join("started.again");
    eventually("row 3's action runs", Duration::from_secs(30), || async {
        again.exists()
    })
    .await;
    daemon.signal(libc::SIGKILL);
    daemon.wait(Duration::from_secs(10)).await;
    if let Mode::Lease = mode {
        // A leased row is out of the select until its lease expires.
        let expired =
            "SELECT COUNT(*) FROM job WHERE id = 3 AND state = 'leased' AND lease_until < NOW(3)";
        eventually("row 3's lease expires", Duration::from_secs(30), || async {
            db.count(expired).await == 1
        })
        .await;
    }
    let (code, log) = run_until_empty(&file, &db.url, Duration::from_secs(60)).await;
    assert_eq!(code, Some(0), "{log}");
    assert_eq!(
        db.count("SELECT COUNT(*) FROM job WHERE state = 'done'")
            .await,
        5
    );
}

/// How the database comes to refuse writes, and takes them again.
#[derive(Clone, Copy)]
struct Refusal {
    start: &'static str,
    end: &'static str,
    /// What `/readyz` says meanwhile.
    said: &'static str,
}

/// A read-only failover in mid-run: the outcomes of the actions in flight are kept
/// and written once the server takes writes again — no action runs twice — no
/// worker claims meanwhile, `/readyz` says "read-only" for the whole spell, and
/// every row is done.
pub async fn read_only_repeats_nothing(mode: Mode) {
    let read_only = Refusal {
        start: "SET GLOBAL read_only = 1",
        end: "SET GLOBAL read_only = 0",
        said: "read-only",
    };
    refused_writes_repeat_nothing(mode, read_only).await;
}

/// The user's UPDATE privilege taken away in mid-run, then given back: as for a
/// read-only server, nothing is done twice and `/readyz` says "permission denied".
pub async fn a_revoked_grant_repeats_nothing(mode: Mode) {
    let revoked = Refusal {
        start: "REVOKE UPDATE ON job FROM 'app'@'%'",
        end: "GRANT UPDATE ON job TO 'app'@'%'",
        said: "permission denied",
    };
    refused_writes_repeat_nothing(mode, revoked).await;
}

async fn refused_writes_repeat_nothing(mode: Mode, refusal: Refusal) {
    let (_server, db) = private_db(&[]).await;
    job_table(&db, 40).await;
    let app_url = app_user(&db).await;
    let files = QueueFiles::new();
    let runs = files.path().join("runs");
    let script = files.script(
        "deliver",
        &format!("echo \"$TABLEQ_KEY\" >> '{}'\nsleep 0.3", runs.display()),
    );
    let script = script.to_string_lossy().into_owned();
    mode.queue("failover", &[script.as_str()], "state = 'done'")
        .workers(3)
        .write(&files);
    let (mut daemon, base) = start_with_metrics(&files, &app_url).await;
    let done = "SELECT COUNT(*) FROM job WHERE state = 'done'";
    db.until_count_at_least(done, 5, 30).await;
    db.exec(refusal.start).await;
    let said = readyz_while_refused(mode, &base, refusal, &runs).await;
    db.exec(refusal.end).await;
    for answer in &said {
        assert!(
            answer.contains(refusal.said) && !answer.contains("no database connection"),
            "/readyz said {answer:?} while the database refused writes ({}): {said:#?}",
            refusal.said
        );
    }
    db.until_count(done, 40, 90).await;
    daemon.terminate().await;
    each_ran_once(&runs, 40, &daemon.stderr());
}

/// An ordinary user of `db`, whose URL it returns: root's privileges write through
/// `read_only`. UPDATE on the table is its own grant, so that taking it away counts
/// at once.
async fn app_user(db: &TestDb) -> String {
    db.exec(&format!(
        "CREATE USER 'app'@'%' IDENTIFIED BY 'app';
         GRANT SELECT, INSERT, DELETE ON `{0}`.* TO 'app'@'%';
         GRANT UPDATE ON `{0}`.job TO 'app'@'%'",
        db.name
    ))
    .await;
    db.url.replacen("root@", "app:app@", 1)
}

/// What `/readyz` says while the database refuses writes, from when it first says
/// why until the actions in flight have ended (no new line in `runs`), and in
/// transaction mode for 3 s more, past the first backoffs, with every worker
/// waiting unconnected at the gate (not in lease mode, whose 3 s leases would run
/// out in a longer spell, and their jobs rightly run again).
async fn readyz_while_refused(
    mode: Mode,
    base: &str,
    refusal: Refusal,
    runs: &std::path::Path,
) -> Vec<String> {
    let readyz = || async { get(&format!("{base}/readyz")).await.1 };
    eventually("/readyz says why", Duration::from_secs(30), || async {
        readyz().await.contains(refusal.said)
    })
    .await;
    let ran = || {
        std::fs::read_to_string(runs)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let before = ran();
    let said = std::cell::RefCell::new(Vec::new());
    let until_quiet = Duration::from_secs(10);
    eventually("the actions in flight have ended", until_quiet, || async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let answer = readyz().await;
        said.borrow_mut().push(answer);
        ran() == before
    })
    .await;
    let longer = match mode {
        Mode::Transaction => 6,
        Mode::Lease => 0,
    };
    let mut said = said.into_inner();
    for _ in 0..longer {
        tokio::time::sleep(Duration::from_millis(500)).await;
        said.push(readyz().await);
    }
    said
}

/// Asserts that `runs` holds `rows` lines, each key once: every action ran once.
fn each_ran_once(runs: &std::path::Path, rows: usize, stderr: &str) {
    let log = std::fs::read_to_string(runs).unwrap();
    let mut keys: Vec<&str> = log.lines().collect();
    let all = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!(
        (all, keys.len()),
        (rows, rows),
        "every action ran once:\n{stderr}"
    );
}

/// `[concurrency]` in either mode: while a key's one slot is held (its row's job
/// waits for a file), `tableq_concurrency_keys_at_limit` counts it; once every row
/// of the key is done, it counts none. (Lease mode, whose slots are held on the
/// copy's own connection, used to leave the gauge at 0.)
pub async fn a_key_at_its_limit_is_counted(mode: Mode) {
    let db = TestDb::new().await;
    job_table(&db, 3).await;
    let files = QueueFiles::new();
    let go = files.path().join("go");
    let script = files.script("waits", &until_exists(&go));
    let mut key = toml::Table::new();
    key.insert("key".into(), "customer".into());
    mode.queue("gauged", &[&script.to_string_lossy()], "state = 'done'")
        .select(&mode.select("id, 7 AS customer"))
        .set("concurrency", toml::Value::Table(key))
        .workers(2)
        .write(&files);
    let (mut daemon, base) = start_with_metrics(&files, &db.url).await;
    let at_limit = |keys: f64| {
        let base = base.clone();
        move || {
            let base = base.clone();
            async move {
                let metrics = get(&format!("{base}/metrics")).await.1;
                let series = r#"tableq_concurrency_keys_at_limit{queue="gauged"}"#;
                sample(&metrics, series) == Some(keys)
            }
        }
    };
    let within = Duration::from_secs(30);
    eventually(
        "the running row's key counted at its limit",
        within,
        at_limit(1.0),
    )
    .await;
    std::fs::write(&go, "").unwrap();
    eventually("every row done", within, || async {
        db.count("SELECT COUNT(*) FROM job WHERE state = 'done'")
            .await
            == 3
    })
    .await;
    eventually("no key counted at its limit", within, at_limit(0.0)).await;
    daemon.terminate().await;
}

/// A script's body that waits (up to a minute) until `go` exists, then succeeds.
fn until_exists(go: &std::path::Path) -> String {
    format!(
        "for _ in $(seq 600); do [ -e '{}' ] && exit 0; sleep 0.1; done\nexit 1",
        go.display()
    )
}

/// A URL of two hosts whose first refused writes as the queue started: once the
/// first takes writes again, every session of the queue moves back to it — in
/// lease mode the pool's too, which used to stay on the second host for good — and
/// the rows there are worked.
pub async fn sessions_move_back_to_the_first_host(mode: Mode) {
    let first = tokio::task::spawn_blocking(MariaDb::start).await.unwrap();
    let second = TestDb::new().await;
    let twin = second.twin_on(&first.base_url()).await;
    job_table(&second, 3).await;
    job_table(&twin, 0).await;
    twin.exec("SET GLOBAL read_only = 1").await;
    let host = |url: &str| {
        let rest = url.split_once('@').map_or(url, |(_, rest)| rest);
        rest.split('/').next().unwrap_or(rest).to_string()
    };
    let url = format!(
        "mysql://root@{},{}/{}",
        host(&twin.url),
        host(&second.url),
        second.name
    );
    let files = QueueFiles::new();
    mode.queue("moving", &["true"], "state = 'done'")
        .workers(3)
        .write(&files);
    let (mut daemon, _) = start_with_metrics(&files, &url).await;
    let within = Duration::from_secs(60);
    let done = "SELECT COUNT(*) FROM job WHERE state = 'done'";
    eventually("the rows on the second host done", within, || async {
        second.count(done).await == 3
    })
    .await;
    twin.exec("SET GLOBAL read_only = 0; INSERT INTO job (id) VALUES (11), (12), (13)")
        .await;
    eventually("the rows on the first host done", within, || async {
        twin.count(done).await == 3
    })
    .await;
    eventually("no session left on the second host", within, || async {
        connections(&second).await == 0
    })
    .await;
    assert!(connections(&twin).await > 0, "{}", daemon.stderr());
    daemon.terminate().await;
}

/// A test per behaviour and mode, in `modes::transaction` and `modes::lease`.
macro_rules! in_both_modes {
    ($($behaviour:ident),* $(,)?) => {
        mod transaction {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $behaviour() {
                    super::$behaviour(super::Mode::Transaction).await
                }
            )*
        }
        mod lease {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $behaviour() {
                    super::$behaviour(super::Mode::Lease).await
                }
            )*
        }
    };
}

in_both_modes!(
    a_loop_stops_the_queue,
    a_sole_looping_queue_keeps_the_process_up,
    recorded_failures_do_not_slow_the_queue,
    the_circuit_opens_and_closes,
    a_full_server_is_said,
    connection_errors_are_counted,
    stop_when_empty_drains,
    kill_9_loses_nothing,
    read_only_repeats_nothing,
    a_revoked_grant_repeats_nothing,
    a_key_at_its_limit_is_counted,
    sessions_move_back_to_the_first_host,
);

/// Lease mode: renewals refused by a read-only server (a failover) are the
/// database's condition, not the SQL's: while its lease lasts the job runs on through
/// three refused renewals and is recorded done once, with no attempt spent (they used
/// to cancel it after two and record it failed, blaming the SQL).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_renewals_do_not_cancel_a_leased_job() {
    let server = tokio::task::spawn_blocking(MariaDb::start).await.unwrap();
    let db = TestDb::on(&server.base_url()).await;
    job_table(&db, 1).await;
    db.exec(&format!(
        "CREATE USER 'app'@'%' IDENTIFIED BY 'app';
         GRANT SELECT, INSERT, UPDATE, DELETE ON `{}`.* TO 'app'@'%'",
        db.name
    ))
    .await;
    let files = QueueFiles::new();
    let (runs, go) = (files.path().join("runs"), files.path().join("go"));
    let script = files.script(
        "long",
        &format!(
            "echo \"$TABLEQ_KEY\" >> '{}'\nfor _ in $(seq 600); do [ -e '{}' ] && exit 0; sleep 0.1; done\nexit 1",
            runs.display(),
            go.display()
        ),
    );
    let script = script.to_string_lossy().into_owned();
    // A 30 s lease: three refused renewals a second apart leave it held.
    Mode::Lease
        .queue("renewing", &[script.as_str()], "state = 'done'")
        .lease_set(
            "sql",
            "UPDATE job SET state = 'leased', lease_id = :lease_id, \
             lease_until = NOW(3) + INTERVAL 30 SECOND WHERE id = :id",
        )
        .lease_set(
            "renew_sql",
            "UPDATE job SET lease_until = NOW(3) + INTERVAL 30 SECOND \
             WHERE id = :id AND lease_id = :lease_id",
        )
        .on_failure(Mode::Lease.update("state = 'failed', attempts = attempts + 1"))
        .write(&files);
    let mut cmd = tableq(&["run"]);
    cmd.arg(files.path()).env(
        "TABLEQ_DATABASE_URL",
        db.url.replacen("root@", "app:app@", 1),
    );
    let mut daemon = Daemon::spawn(cmd);
    eventually("the job runs", Duration::from_secs(30), || async {
        runs.exists()
    })
    .await;
    db.exec("SET GLOBAL read_only = 1").await;
    daemon
        .wait_for_log_times("could not renew the lease", 3, Duration::from_secs(30))
        .await;
    db.exec("SET GLOBAL read_only = 0").await;
    std::fs::write(&go, "").unwrap();
    eventually(
        "the job is recorded done",
        Duration::from_secs(30),
        || async {
            db.count("SELECT COUNT(*) FROM job WHERE state = 'done' AND attempts = 0")
                .await
                == 1
        },
    )
    .await;
    daemon.terminate().await;
    let log = daemon.stderr();
    assert!(!log.contains("renew_sql keeps failing"), "{log}");
    assert!(log.contains("read-only"), "{log}");
    assert_eq!(
        std::fs::read_to_string(&runs).unwrap().lines().count(),
        1,
        "{log}"
    );
}
