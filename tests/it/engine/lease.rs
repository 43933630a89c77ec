//! `mode = "lease"` against a real MariaDB with real commands and signals: the
//! claim commits at once, progress reaches the row while the command runs, a lease
//! taken over by another worker cancels the first worker's command and discards its
//! outcome, a killed tableq's rows come back only when their leases expire, and a
//! stop past the shutdown timeout releases the rows.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support;
use crate::support::daemon::{run_binary_until_empty, tableq, Daemon};
use crate::support::process::{is_gone, wait_for_pid};
use crate::support::{assert_has, eventually, load, Engine, QueueFile, QueueFiles, TestDb};

/// Videos to render: a state, and the lease's columns.
const VIDEO_TABLE: &str = "CREATE TABLE video (id INT PRIMARY KEY,
    state VARCHAR(12) NOT NULL DEFAULT 'waiting', lease_until DATETIME(3) NULL,
    lease_id CHAR(32) NULL, worker VARCHAR(200) NULL, progress VARCHAR(200) NULL,
    result VARCHAR(200) NULL) DEFAULT CHARSET=utf8mb4";

/// Waiting videos, and those whose lease has expired.
const SELECT: &str = "SELECT id FROM video
    WHERE state = 'waiting' OR (state = 'rendering' AND lease_until < NOW(3)) ORDER BY id";

/// Whether a claim now would find the video `id` (waiting, or its lease expired).
const CLAIMABLE: &str = "SELECT COUNT(*) FROM video
    WHERE (state = 'waiting' OR (state = 'rendering' AND lease_until < NOW(3)))";

async fn videos(db: &TestDb, count: u32) {
    db.exec(VIDEO_TABLE).await;
    for id in 1..=count {
        db.exec(&format!("INSERT INTO video (id) VALUES ({id})"))
            .await;
    }
}

/// A job that writes its pid to `pids`, waits for the file `go`, and prints `ok`.
const WAIT_FOR_GO: &str = r#"echo $$ >> {dir}/pids
while [ ! -f {dir}/go ]; do sleep 0.05; done
printf ok"#;

/// A database with `count` videos waiting, and the script `render.sh` running
/// `body`, in which `{dir}` is the test's own directory.
async fn setup(count: u32, body: &str) -> (TestDb, QueueFiles, PathBuf) {
    let db = TestDb::new().await;
    videos(&db, count).await;
    let files = QueueFiles::new();
    let body = body.replace("{dir}", &files.path().display().to_string());
    let script = files.script("render.sh", &body);
    (db, files, script)
}

/// The queue `name`: a lease of `lease_seconds`, renewed every `renew_every`,
/// running `script`; the outcome records who held the lease and what it printed.
fn render(name: &str, script: &Path, lease_seconds: f64, renew_every: &str) -> QueueFile {
    let until = format!(
        "NOW(3) + INTERVAL {} MICROSECOND",
        (lease_seconds * 1e6) as u64
    );
    QueueFile::new(name)
        .set("mode", "lease")
        .select(SELECT)
        .poll_interval("100ms")
        .error_backoff("100ms")
        .action_command(&[script.to_str().unwrap()])
        .lease_set("sql", format!("UPDATE video SET state = 'rendering', lease_until = {until}, lease_id = :lease_id, worker = :worker WHERE id = :id"))
        .lease_set("renew_sql", format!("UPDATE video SET lease_until = {until}, progress = :progress WHERE id = :id AND lease_id = :lease_id"))
        .lease_set("renew_every", renew_every)
        .on_success("UPDATE video SET state = 'done', result = CONCAT(:worker, ' ', :output) WHERE id = :id AND lease_id = :lease_id")
        .on_failure("UPDATE video SET state = 'failed', result = :error WHERE id = :id AND lease_id = :lease_id")
}

/// A `[circuit]` table of `pairs`.
fn circuit(pairs: &[(&str, toml::Value)]) -> toml::Value {
    let table = pairs.iter().map(|(k, v)| (k.to_string(), v.clone()));
    toml::Value::Table(table.collect())
}

async fn video(db: &TestDb, id: u32) -> (String, Option<String>, Option<String>) {
    db.rows(&format!(
        "SELECT state, progress, result FROM video WHERE id = {id}"
    ))
    .await
    .pop()
    .unwrap()
}

/// No transaction and no lock is held while the command runs; its progress lines
/// reach the row through `:progress` at the renewals; the outcome lands once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_reaches_the_row_while_no_transaction_is_open() {
    let (db, files, script) = setup(
        1,
        r#"echo "25%" >> "$TABLEQ_PROGRESS"
while [ ! -f {dir}/go ]; do sleep 0.05; done
echo "75%" >> "$TABLEQ_PROGRESS"
while [ ! -f {dir}/go2 ]; do sleep 0.05; done
printf rendered"#,
    )
    .await;
    let dir = files.path();
    let file = render("render", &script, 5.0, "200ms").write(&files);
    let engine = Engine::start(load(&[file]), &db.url);
    eventually("25% reaches the row", Duration::from_secs(30), || async {
        video(&db, 1).await.1.as_deref() == Some("25%")
    })
    .await;
    let open = db
        .count(&format!(
            "SELECT COUNT(*) FROM information_schema.INNODB_TRX t
             JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
             WHERE p.DB = '{}'",
            db.name
        ))
        .await;
    assert_eq!(open, 0, "no transaction is open while the command runs");
    std::fs::write(dir.join("go"), "").unwrap();
    eventually("75% reaches the row", Duration::from_secs(30), || async {
        video(&db, 1).await.1.as_deref() == Some("75%")
    })
    .await;
    assert_eq!(video(&db, 1).await.0, "rendering");
    std::fs::write(dir.join("go2"), "").unwrap();
    eventually("the video is done", Duration::from_secs(30), || async {
        video(&db, 1).await.0 == "done"
    })
    .await;
    let summary = engine.stop().await;
    let counts = summary.counts("render").unwrap();
    assert_eq!((counts.done, counts.leases_lost), (1, 0));
    let result = video(&db, 1).await.2.unwrap();
    assert!(result.ends_with(" rendered"), "{result}");
    assert!(
        result.contains(&format!(":{}:", std::process::id())),
        "`:worker` names the process: {result}"
    );
}

/// A command's stdout lines `progress: …` reach the row through `:progress` too
/// (the renewals', and the last one `[on_success]`'s), and stay in `:output`; the
/// status page lists the job in flight with its last line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_lines_on_stdout_reach_the_row() {
    let (db, files, script) = setup(
        1,
        r#"echo "progress: frame 1 of 2"
while [ ! -f {dir}/go ]; do sleep 0.05; done
echo "progress: frame 2 of 2"
while [ ! -f {dir}/go2 ]; do sleep 0.05; done
echo done"#,
    )
    .await;
    let dir = files.path();
    let file = render("render", &script, 5.0, "200ms")
        .on_success("UPDATE video SET state = 'done', result = CONCAT(:progress, '|', :output) WHERE id = :id AND lease_id = :lease_id")
        .write(&files);
    let monitor = std::sync::Arc::new(tableq::telemetry::stats::monitor::Monitor::default());
    let options = tableq::RunOptions {
        database_url: Some(db.url.clone()),
        monitor: monitor.clone(),
        ..tableq::RunOptions::default()
    };
    let engine = Engine::start_with(load(&[file]), options);
    for (step, progress) in [("go", "frame 1 of 2"), ("go2", "frame 2 of 2")] {
        eventually(progress, Duration::from_secs(30), || async {
            video(&db, 1).await.1.as_deref() == Some(progress)
        })
        .await;
        // The status page lists the job in flight, with its last progress line.
        let status = tableq::telemetry::http::status::Status::of(&monitor, 1);
        let runs = &status.queues[0].in_flight_runs;
        assert_eq!(runs.len(), 1, "{runs:?}");
        assert_eq!(runs[0].keys, ["1"]);
        assert_eq!(runs[0].progress.as_deref(), Some(progress));
        std::fs::write(dir.join(step), "").unwrap();
    }
    eventually("the video is done", Duration::from_secs(30), || async {
        video(&db, 1).await.0 == "done"
    })
    .await;
    engine.stop().await;
    let result = video(&db, 1).await.2.unwrap();
    assert_eq!(
        result, "frame 2 of 2|progress: frame 1 of 2\nprogress: frame 2 of 2\ndone\n",
        "the last progress line reaches [on_success], and :output keeps them all"
    );
}

/// A lease too short for its job, renewed too late: a second worker takes the row
/// over; the first one's renewal matches no row, its command is killed, its outcome
/// never runs, and the second worker's result is the one recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_taken_over_cancels_the_first_worker() {
    // The first run waits for ever; the second prints "second" at once.
    let (db, files, script) = setup(
        1,
        r#"cd {dir}
if mkdir first 2>/dev/null; then echo $$ > first_pid; exec sleep 600; fi
printf second"#,
    )
    .await;
    let dir = files.path();
    let file = render("render", &script, 1.0, "3s")
        .workers(2)
        .write(&files);
    let engine = Engine::start(load(&[file]), &db.url);
    let first = wait_for_pid(&dir.join("first_pid")).await;
    eventually(
        "the second worker records its result",
        Duration::from_secs(30),
        || async { video(&db, 1).await.0 == "done" },
    )
    .await;
    eventually(
        "the first command is killed",
        Duration::from_secs(30),
        || async { is_gone(first) },
    )
    .await;
    let summary = engine.stop().await;
    let counts = summary.counts("render").unwrap();
    assert_eq!((counts.done, counts.leases_lost), (1, 1), "{counts:?}");
    let result = video(&db, 1).await.2.unwrap();
    assert!(
        result.ends_with(" second"),
        "the second worker's result: {result}"
    );
}

fn start(file: &Path, db: &TestDb, extra: &[&str]) -> Daemon {
    let mut cmd = tableq(&["run"]);
    cmd.args(extra)
        .arg(file)
        .env("TABLEQ_DATABASE_URL", &db.url);
    Daemon::spawn(cmd)
}

/// tableq killed -9 mid-action: its rows stay leased until the leases expire (not
/// before), a second tableq then finishes them, and the killed run's outcomes never
/// land.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_of_a_killed_tableq_come_back_when_their_leases_expire() {
    let (db, files, script) = setup(2, WAIT_FOR_GO).await;
    let dir = files.path();
    let file = render("render", &script, 4.0, "1s")
        .workers(2)
        .write(&files);
    let mut first = start(&file, &db, &[]);
    eventually(
        "both videos are rendering",
        Duration::from_secs(30),
        || async {
            std::fs::read_to_string(dir.join("pids")).map_or(0, |p| p.lines().count()) == 2
        },
    )
    .await;
    let killed = format!(":{}:", first.pid());
    first.signal(libc::SIGKILL);
    first.wait(Duration::from_secs(10)).await;
    db.assert_count_because(CLAIMABLE, 0, "leased rows are out of the select")
        .await;
    // The killed run's commands finish; nobody records their outcome.
    std::fs::write(dir.join("go"), "").unwrap();
    let rendering = db
        .count("SELECT COUNT(*) FROM video WHERE state = 'rendering'")
        .await;
    assert_eq!(rendering, 2, "the leases still hold");
    // The leases expire.
    db.until_count(CLAIMABLE, 2, 30).await;
    let second = run_binary_until_empty(&file, &db.url).await;
    assert_has(&second.stderr, "the queue is drained");
    let results: Vec<(String, String)> = db.rows("SELECT state, result FROM video").await;
    for (state, result) in results {
        assert_eq!(state, "done");
        assert!(
            !result.contains(&killed),
            "the killed run's outcome landed: {result}"
        );
    }
}

/// SIGTERM with a command running past the shutdown timeout: the command is killed
/// and `release_sql` puts the row back in the select at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_past_the_shutdown_timeout_releases_the_row() {
    let (db, files, script) = setup(1, "echo $$ > {dir}/pid\nexec sleep 600").await;
    let dir = files.path();
    let file = render("render", &script, 600.0, "1s")
        .lease_set("release_sql", "UPDATE video SET state = 'waiting', lease_id = NULL WHERE id = :id AND lease_id = :lease_id")
        .write(&files);
    let mut daemon = start(&file, &db, &["--shutdown-timeout", "1s"]);
    let pid = wait_for_pid(&dir.join("pid")).await;
    daemon.signal(libc::SIGTERM);
    let status = daemon.wait(Duration::from_secs(30)).await;
    assert!(status.success(), "{}", daemon.stderr());
    assert!(is_gone(pid), "the command is killed");
    assert_eq!(video(&db, 1).await.0, "waiting", "{}", daemon.stderr());
    assert_has(&daemon.stderr(), "lease released");
}

/// An HTTP action in lease mode whose row the application takes back while the
/// webhook hangs: the next renewal finds the lease lost, the request is dropped, and
/// no outcome is recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_lost_drops_a_hanging_request() {
    use support::web::{Reply, WebServer};
    let logs = support::logs::capture();
    let server = WebServer::start(|_| Reply::status(200).after(Duration::from_secs(600))).await;
    let db = TestDb::new().await;
    videos(&db, 1).await;
    let files = QueueFiles::new();
    let file = QueueFile::new("hanging")
        .set("mode", "lease")
        .select(SELECT)
        .poll_interval("100ms")
        .action_http(&server.url("/render/{id}"))
        .action_set("timeout", "10m")
        .lease_set("sql", "UPDATE video SET state = 'rendering', lease_until = NOW(3) + INTERVAL 1 MINUTE, lease_id = :lease_id WHERE id = :id")
        .lease_set("renew_sql", "UPDATE video SET lease_until = NOW(3) + INTERVAL 1 MINUTE WHERE id = :id AND lease_id = :lease_id")
        .lease_set("renew_every", "200ms")
        .on_success("UPDATE video SET state = 'done' WHERE id = :id AND lease_id = :lease_id")
        .write(&files);
    let engine = Engine::start(load(&[file]), &db.url);
    eventually(
        "the request is in flight",
        Duration::from_secs(30),
        || async { video(&db, 1).await.0 == "rendering" },
    )
    .await;
    db.exec("UPDATE video SET state = 'cancelled', lease_id = 'the application' WHERE id = 1")
        .await;
    eventually(
        "the lease is found lost",
        Duration::from_secs(30),
        || async { !logs.lines_of("hanging", "lease lost").is_empty() },
    )
    .await;
    let counts = engine.stop().await.counts("hanging").unwrap();
    assert_eq!((counts.done, counts.leases_lost), (0, 1), "{counts:?}");
    assert_eq!(video(&db, 1).await.0, "cancelled", "no outcome recorded");
    let sent = server.requests();
    let traceparent = sent[0].header("traceparent");
    assert!(
        traceparent.starts_with("00-") && traceparent.len() == 55,
        "the request carries its trace context: {traceparent:?}"
    );
}

/// A command's transient exit code in lease mode: the circuit opens after
/// `min_items`, only those rows spend an attempt, and every row that ran or was
/// claimed while the circuit was open is released at once by `release_sql` — none
/// is left leased. The metrics show the circuit and the leases lost (none).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transient_exit_code_opens_the_circuit_and_releases_the_leases() {
    use support::endpoint::{get, start_with_metrics};
    let (db, files, script) = setup(40, "#!/bin/sh\nsleep 0.2\nexit 75\n").await;
    let breaker = circuit(&[
        ("min_items", 3.into()),
        ("cool_down", "10m".into()),
        ("max_cool_down", "10m".into()),
    ]);
    render("render", &script, 60.0, "20s")
        .workers(4)
        .set("circuit", breaker)
        .lease_set("release_sql", "UPDATE video SET state = 'waiting', lease_id = NULL WHERE id = :id AND lease_id = :lease_id")
        .write(&files);
    let (mut daemon, base) = start_with_metrics(&files, &db.url).await;
    daemon
        .wait_for_log("the circuit is open", Duration::from_secs(30))
        .await;
    let settled = "SELECT COUNT(*) FROM video WHERE state = 'failed'
        OR (state = 'waiting' AND lease_id IS NULL)";
    // Every row is failed or released.
    db.until_count(settled, 40, 30).await;
    let failed = db
        .count("SELECT COUNT(*) FROM video WHERE state = 'failed'")
        .await;
    assert_eq!(
        failed, 3,
        "only the items that opened the circuit spent an attempt"
    );
    let (_, metrics) = get(&format!("{base}/metrics")).await;
    for line in [
        "tableq_circuit_state{queue=\"render\",state=\"open\"} 1",
        "tableq_leases_lost_total{queue=\"render\"} 0",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "no {line} in\n{metrics}"
        );
    }
    let (_, status) = get(&format!("{base}/status.json")).await;
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    let render = &status["queues"][0];
    assert_eq!(render["circuit"], "open", "{render}");
    assert_eq!(render["leases_lost"], 0, "{render}");
    let (_, page) = get(&format!("{base}/")).await;
    assert!(
        page.contains("data-field=\"circuit\">circuit open<"),
        "{page}"
    );
    daemon.terminate().await;
}

/// The database out of reach when a long job ends: the outcome is tried again until
/// it can be recorded, so the job is not done twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outcome_waits_out_a_short_outage() {
    use support::proxy::StallingProxy;
    let logs = support::logs::capture();
    let (db, files, script) = setup(1, WAIT_FOR_GO).await;
    let dir = files.path();
    let authority = db
        .url
        .trim_start_matches("mysql://")
        .split('/')
        .next()
        .unwrap();
    let authority = authority.rsplit('@').next().unwrap().to_string();
    let proxy = StallingProxy::start(authority.parse().unwrap()).await;
    let proxied = db.url.replacen(&authority, &proxy.addr.to_string(), 1);
    let file = render("outage", &script, 600.0, "1m")
        .error_backoff("200ms")
        .write(&files);
    let engine = Engine::start(load(&[file]), &proxied);
    wait_for_pid(&dir.join("pids")).await;
    proxy.reset();
    std::fs::write(dir.join("go"), "").unwrap();
    eventually("a try fails", Duration::from_secs(30), || async {
        logs.lines_with("outage")
            .iter()
            .any(|l| l.contains("could not record the outcome; trying again"))
    })
    .await;
    proxy.resume();
    eventually(
        "the outcome is recorded",
        Duration::from_secs(30),
        || async { video(&db, 1).await.0 == "done" },
    )
    .await;
    let counts = engine.stop().await.counts("outage").unwrap();
    assert_eq!((counts.done, counts.leases_lost), (1, 0), "{counts:?}");
    let runs = std::fs::read_to_string(dir.join("pids")).unwrap();
    assert_eq!(runs.lines().count(), 1, "the job ran once");
}

/// SIGHUP while a leased job runs: the job finishes and is recorded under the old
/// file; a row that comes later is done under the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_lets_a_leased_job_finish() {
    let (db, files, script) = setup(
        1,
        r#"echo $$ >> {dir}/pids
while [ ! -f {dir}/go ]; do sleep 0.05; done
printf "$1""#,
    )
    .await;
    let dir = files.path();
    let version = |label: &str| {
        render("render", &script, 60.0, "1s")
            .action_set("command", vec![script.to_str().unwrap(), label])
            .write(&files)
    };
    let file = version("v1");
    let mut daemon = start(&file, &db, &[]);
    wait_for_pid(&dir.join("pids")).await;
    version("v2");
    daemon.signal(libc::SIGHUP);
    daemon
        .wait_for_log("reloaded", Duration::from_secs(30))
        .await;
    std::fs::write(dir.join("go"), "").unwrap();
    eventually(
        "the job in flight is recorded",
        Duration::from_secs(30),
        || async { video(&db, 1).await.0 == "done" },
    )
    .await;
    assert!(video(&db, 1).await.2.unwrap().ends_with(" v1"));
    db.exec("INSERT INTO video (id) VALUES (2)").await;
    eventually("the new row is done", Duration::from_secs(30), || async {
        video(&db, 2).await.0 == "done"
    })
    .await;
    assert!(video(&db, 2).await.2.unwrap().ends_with(" v2"));
    daemon.terminate().await;
}

/// `renew_sql` that keeps failing on its own — a progress line too long for its
/// column — cancels the action before the lease runs out (else another worker would
/// do the job too) and records it as the item's failure, so an attempt is spent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_that_keeps_failing_cancels_the_action_and_records_a_failure() {
    let logs = support::logs::capture();
    let (db, files, script) = setup(
        1,
        r#"printf '%0300d\n' 0 >> "$TABLEQ_PROGRESS"
sleep 30
touch {dir}/finished"#,
    )
    .await;
    let file = render("renewals", &script, 5.0, "200ms").write(&files);
    let engine = Engine::start(load(&[file]), &db.url);
    eventually("the video failed", Duration::from_secs(30), || async {
        video(&db, 1).await.0 == "failed"
    })
    .await;
    let counts = engine.stop().await.counts("renewals").unwrap();
    assert_eq!((counts.failed, counts.leases_lost), (1, 0), "{counts:?}");
    let error = video(&db, 1).await.2.unwrap();
    assert!(error.starts_with("renew_sql failed: "), "{error}");
    assert!(
        !files.path().join("finished").exists(),
        "the command was cancelled, not waited for"
    );
    let said = logs.lines_with("renew_sql keeps failing");
    assert!(said.iter().any(|l| l.contains("renewals")), "{said:?}");
}

/// A receiver out of service (503) in lease mode: the circuit opens after
/// `min_items` failures, rows claimed meanwhile are released without spending an
/// attempt, and once the receiver is back a probe closes the circuit and every row
/// is delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_in_lease_mode_costs_min_items_attempts_then_recovers() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use support::web::{Reply, WebServer};
    let logs = support::logs::capture();
    let up = Arc::new(AtomicBool::new(false));
    let receiver = up.clone();
    let server = WebServer::start(move |_| {
        let status = if receiver.load(Ordering::SeqCst) {
            200
        } else {
            503
        };
        Reply::status(status).after(Duration::from_millis(50))
    })
    .await;
    let db = TestDb::new().await;
    videos(&db, 30).await;
    let files = QueueFiles::new();
    let breaker = circuit(&[
        ("min_items", 3.into()),
        ("cool_down", "1s".into()),
        ("max_cool_down", "2s".into()),
    ]);
    let file = QueueFile::new("unavailable")
        .set("mode", "lease")
        .set("circuit", breaker)
        .workers(4)
        .select(SELECT)
        .poll_interval("100ms")
        .error_backoff("100ms")
        .action_http(&server.url("/render/{id}"))
        .action_set("allow_private_networks", true)
        .lease_set("sql", "UPDATE video SET state = 'rendering', lease_until = NOW(3) + INTERVAL 1 MINUTE, lease_id = :lease_id WHERE id = :id")
        .lease_set("release_sql", "UPDATE video SET state = 'waiting', lease_id = NULL WHERE id = :id AND lease_id = :lease_id")
        .on_success("UPDATE video SET state = 'done' WHERE id = :id AND lease_id = :lease_id")
        .on_failure("UPDATE video SET state = 'failed' WHERE id = :id AND lease_id = :lease_id")
        .write(&files);
    let engine = Engine::start(load(&[file]), &db.url);
    eventually("the circuit opens", Duration::from_secs(30), || async {
        !logs
            .lines_of("unavailable", "the circuit is open")
            .is_empty()
    })
    .await;
    up.store(true, Ordering::SeqCst);
    let settled = "SELECT COUNT(*) FROM video WHERE state IN ('done', 'failed')";
    // Every row is done or failed.
    db.until_count(settled, 30, 30).await;
    engine.stop().await;
    let failed = db
        .count("SELECT COUNT(*) FROM video WHERE state = 'failed'")
        .await;
    assert_eq!(
        failed, 3,
        "only the rows that opened the circuit spent an attempt"
    );
}

/// A row whose `[lease] sql` fails on its own is skipped — left waiting, its
/// failure logged once and counted — while the other rows of the claim are leased
/// and done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_whose_lease_sql_fails_is_skipped_and_the_others_are_done() {
    let logs = support::logs::capture();
    let (db, files, script) = setup(3, "printf rendered").await;
    // Row 2's lease SQL meets a subquery of two rows (error 1242).
    let file = render("skips", &script, 5.0, "1s")
        .batch(3)
        .lease_set("sql", "UPDATE video SET state = 'rendering', lease_until = NOW(3) + INTERVAL 5 SECOND, lease_id = :lease_id, worker = :worker, result = IF(id = 2, (SELECT 1 UNION SELECT 2), NULL) WHERE id = :id")
        .write(&files);
    let engine = Engine::start(load(&[file]), &db.url);
    let done = "SELECT COUNT(*) FROM video WHERE state = 'done' AND id IN (1, 3)";
    // Rows 1 and 3 are done.
    db.until_count(done, 2, 30).await;
    let counts = engine.stop().await.counts("skips").unwrap();
    assert_eq!(counts.done, 2, "{counts:?}");
    assert!(counts.outcome_sql_failures >= 1, "{counts:?}");
    assert_eq!(counts.returned, counts.outcome_sql_failures, "{counts:?}");
    assert_eq!(video(&db, 2).await.0, "waiting", "row 2 is left as it was");
    let said: Vec<String> = logs
        .lines_with("[lease] sql failed")
        .into_iter()
        .filter(|l| l.contains("skips"))
        .collect();
    assert_eq!(said.len(), 1, "said once: {said:?}");
}

/// A command that exits while its worker waits in a renewal longer than the orphan
/// reaper's grace (`renew_sql` sleeps 35 s) is recorded as it ended — done — and not
/// failed with "No child processes" after the reaper took its exit status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_renewal_does_not_lose_the_commands_exit_status() {
    let (db, files, script) = setup(1, "sleep 2\nprintf rendered").await;
    let file = render("slow_renewal", &script, 120.0, "1s")
        .set("database_timeout", "60s")
        .lease_set("renew_sql", "UPDATE video SET lease_until = NOW(3) + INTERVAL 120 SECOND, progress = IF(SLEEP(35) = 0, :progress, NULL) WHERE id = :id AND lease_id = :lease_id")
        .write(&files);
    let done = run_binary_until_empty(&file, &db.url).await;
    assert_eq!(done.code(), Some(0), "{}", done.stderr);
    let (state, _, result) = video(&db, 1).await;
    assert_eq!(state, "done", "{result:?}\n{}", done.stderr);
    assert!(
        result.as_deref().is_some_and(|r| r.ends_with("rendered")),
        "{result:?}"
    );
}
