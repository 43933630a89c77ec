//! `wake`: on a server that writes a row-based binary log, an idle queue claims a
//! new row within milliseconds of its commit, not at its next poll; a killed binary
//! log connection loses no row and comes back; one transaction of 10,000 rows is one
//! wake-up; where the log is off or the user may not read it, the queue polls and
//! says why once, and `wake = "binlog"` refuses to start, naming the grant.

use std::time::Duration;

use mysql_async::prelude::Queryable;

use crate::support::check::check;
use crate::support::daemon::{run_to_end, tableq, Daemon};
use crate::support::endpoint::{get, start_with_metrics, start_with_metrics_alone};
use crate::support::scrape::sample;
use crate::support::{assert_has, eventually, MariaDb, QueueFile, QueueFiles, TestDb};

const FOLLOWING: &str = "following the binary log";

/// A server writing a row-based binary log: the one `TABLEQ_TEST_DATABASE_URL` names
/// when it writes one (MySQL 8 does by default), else a private MariaDB.
pub(super) struct BinlogServer {
    _private: Option<MariaDb>,
    pub(super) base: String,
}

pub(super) async fn binlog_server() -> BinlogServer {
    let base = crate::support::shared_base_url();
    match writes_row_binlog(&base).await {
        true => BinlogServer {
            _private: None,
            base,
        },
        false => private_binlog_server().await,
    }
}

/// A server writing no binary log: the shared one, unless it writes one.
async fn no_binlog_server() -> BinlogServer {
    let base = crate::support::shared_base_url();
    if !writes_row_binlog(&base).await {
        return BinlogServer {
            _private: None,
            base,
        };
    }
    let server = tokio::task::spawn_blocking(MariaDb::start).await.unwrap();
    BinlogServer {
        base: server.base_url(),
        _private: Some(server),
    }
}

async fn writes_row_binlog(base: &str) -> bool {
    let mut conn = crate::support::connect(base).await;
    let logging: Option<(i64, String)> = conn
        .query_first("SELECT @@log_bin, @@binlog_format")
        .await
        .unwrap();
    logging.is_some_and(|(on, format)| on == 1 && format == "ROW")
}

/// A private MariaDB writing a row-based binary log: for the tests that kill its
/// connections or count every commit on it.
pub(super) async fn private_binlog_server() -> BinlogServer {
    let server = tokio::task::spawn_blocking(|| {
        MariaDb::start_with(&["--log-bin", "--binlog-format=ROW", "--server-id=1"])
    })
    .await
    .unwrap();
    BinlogServer {
        base: server.base_url(),
        _private: Some(server),
    }
}

/// The grants that let `user` read the binary log, as tableq names them.
pub(super) async fn grants_for(db: &TestDb, user: &str) -> String {
    let version: String = db.scalar("SELECT VERSION()").await;
    let grants = match version.to_ascii_lowercase().contains("mariadb") {
        true => "REPLICATION SLAVE, BINLOG MONITOR",
        false => "REPLICATION SLAVE, REPLICATION CLIENT",
    };
    format!("GRANT {grants} ON *.* TO '{user}'@'%'")
}

/// A database of its own on `server`, with the `job` table.
async fn with_jobs(server: BinlogServer) -> (BinlogServer, TestDb) {
    let db = TestDb::on(&server.base).await;
    job_table(&db).await;
    (server, db)
}

/// `job`: each row knows when it was inserted and when its action started.
async fn job_table(db: &TestDb) {
    db.exec(
        "CREATE TABLE job (id INT AUTO_INCREMENT PRIMARY KEY, \
         state VARCHAR(10) NOT NULL DEFAULT 'waiting', \
         created_at TIMESTAMP(6) NOT NULL DEFAULT NOW(6), started_at TIMESTAMP(6) NULL, \
         KEY (state)) DEFAULT CHARSET=utf8mb4",
    )
    .await;
}

/// A queue of `job` with the default `poll_interval` (a minute on the binary log).
fn jobs(name: &str) -> QueueFile {
    QueueFile::new(name)
        .select("SELECT id FROM job WHERE state = 'waiting' ORDER BY id")
        .workers(4)
        .action_sql("UPDATE job SET started_at = NOW(6) WHERE id = :id")
        .on_success("UPDATE job SET state = 'done' WHERE id = :id")
}

pub(super) async fn status(base: &str, queue: &str) -> serde_json::Value {
    let text = get(&format!("{base}/status.json")).await.1;
    let status: serde_json::Value = serde_json::from_str(&text).expect("status.json");
    let queues = status["queues"].as_array().expect("queues").clone();
    queues
        .into_iter()
        .find(|q| q["name"] == queue)
        .expect("the queue in status.json")
}

async fn wake_events(base: &str, queue: &str) -> f64 {
    let text = get(&format!("{base}/metrics")).await.1;
    sample(
        &text,
        &format!(r#"tableq_wake_events_total{{queue="{queue}"}}"#),
    )
    .unwrap_or(0.0)
}

/// Inserts `count` jobs one at a time, each once the one before is done; returns
/// each one's pickup: from its insert to its action's start.
async fn pickups(db: &TestDb, count: usize) -> Vec<Duration> {
    let mut conn = db.conn().await;
    let mut pickups = Vec::new();
    for _ in 0..count {
        conn.query_drop("INSERT INTO job () VALUES ()")
            .await
            .unwrap();
        let id: u64 = conn
            .query_first("SELECT LAST_INSERT_ID()")
            .await
            .unwrap()
            .unwrap();
        let query = format!(
            "SELECT TIMESTAMPDIFF(MICROSECOND, created_at, started_at) FROM job \
             WHERE id = {id} AND state = 'done'"
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        let took = loop {
            if let Some(took) = conn.query_first::<i64, _>(&query).await.unwrap() {
                break took;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "job {id} not done in 2 minutes"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        pickups.push(Duration::from_micros(took.max(0) as u64));
    }
    pickups.sort();
    pickups
}

/// Five single inserts: the median is picked up within half a second (a poll
/// would take seconds).
async fn picked_up_in_milliseconds(db: &TestDb, what: &str) {
    let pickups = pickups(db, 5).await;
    assert!(
        pickups[2] < Duration::from_millis(500),
        "{what}: {pickups:?}"
    );
}

/// The daemon on `db`'s queues in `files`, once it follows the binary log.
pub(super) async fn start_following(files: &QueueFiles, db: &TestDb) -> (Daemon, String) {
    let (daemon, base) = start_with_metrics(files, &db.url).await;
    following(&daemon, 1).await;
    (daemon, base)
}

/// As [`start_following`], keeping no history: for a test that counts wake-ups
/// or statements (the history's heartbeat is a commit in the queue's database).
pub(super) async fn start_following_alone(files: &QueueFiles, db: &TestDb) -> (Daemon, String) {
    let (daemon, base) = start_with_metrics_alone(files, &db.url).await;
    following(&daemon, 1).await;
    (daemon, base)
}

async fn following(daemon: &Daemon, times: usize) {
    daemon
        .wait_for_log_times(FOLLOWING, times, Duration::from_secs(60))
        .await;
}

/// With the defaults (4 workers, a minute between polls on the binary log), single
/// inserts are picked up in milliseconds; the status page says where wake-ups come
/// from and the metric counts them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_queue_picks_up_single_inserts_in_milliseconds() {
    let (_server, db) = with_jobs(binlog_server().await).await;
    let files = QueueFiles::new();
    jobs("jobs").write(&files);
    let (mut daemon, base) = start_following(&files, &db).await;
    let pickups = pickups(&db, 20).await;
    let median = pickups[pickups.len() / 2];
    let slowest = *pickups.last().unwrap();
    assert!(
        median < Duration::from_millis(250) && slowest < Duration::from_secs(2),
        "pickups from insert to action: {pickups:?}"
    );
    let queue = status(&base, "jobs").await;
    assert_eq!(queue["wake"]["source"], "binlog", "{queue}");
    assert!(wake_events(&base, "jobs").await >= 20.0);
    let page = get(&format!("{base}/")).await.1;
    assert!(page.contains("wakes on the binary log ("), "{page}");
    daemon.terminate().await;
    assert!(!daemon.stderr().contains("panicked"), "{}", daemon.stderr());
}

/// A lease-mode queue is woken as well.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_mode_queue_is_woken_too() {
    let (_server, db) = with_jobs(binlog_server().await).await;
    db.exec("ALTER TABLE job ADD lease_until DATETIME(3) NULL, ADD lease_id VARCHAR(40) NULL")
        .await;
    let files = QueueFiles::new();
    QueueFile::new("leased")
        .set("mode", "lease")
        .select("SELECT id FROM job WHERE state = 'waiting' ORDER BY id")
        .action_command(&["true"])
        .lease_set("sql", "UPDATE job SET state = 'leased', started_at = NOW(6), lease_until = NOW(3) + INTERVAL 1 MINUTE, lease_id = :lease_id WHERE id = :id")
        .on_success("UPDATE job SET state = 'done' WHERE id = :id AND lease_id = :lease_id")
        .write(&files);
    let (mut daemon, _base) = start_following(&files, &db).await;
    picked_up_in_milliseconds(&db, "pickups").await;
    daemon.terminate().await;
}

/// The binary log connection killed while rows keep coming: every row is done, the
/// stream comes back, and the next row is picked up in milliseconds again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_binlog_connection_loses_no_row_and_comes_back() {
    let (_server, db) = with_jobs(private_binlog_server().await).await;
    let files = QueueFiles::new();
    jobs("jobs").poll_interval("2s").write(&files);
    let (mut daemon, _base) = start_following(&files, &db).await;
    // Rows keep coming from before the KILL until the stream is back.
    let back = tokio_util::sync::CancellationToken::new();
    let writer = {
        let url = db.url.clone();
        let back = back.clone();
        tokio::spawn(async move {
            let mut conn = crate::support::connect(&url).await;
            let mut written = 0u64;
            while !back.is_cancelled() || written < 200 {
                conn.query_drop("INSERT INTO job () VALUES ()")
                    .await
                    .unwrap();
                written += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            written
        })
    };
    // The writer is under way.
    db.until_count_at_least("SELECT COUNT(*) FROM job", 20, 30)
        .await;
    let dump: Vec<u64> = db
        .rows("SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'")
        .await;
    assert_eq!(dump.len(), 1, "one binary log connection: {dump:?}");
    db.exec(&format!("KILL {}", dump[0])).await;
    following(&daemon, 2).await;
    back.cancel();
    let written = writer.await.unwrap();
    // Every row done.
    db.until_count("SELECT COUNT(*) FROM job WHERE state <> 'done'", 0, 120)
        .await;
    db.assert_count("SELECT COUNT(*) FROM job", written).await;
    assert!(daemon
        .stderr()
        .contains("the queues poll every poll_interval until the binary log can be followed"));
    picked_up_in_milliseconds(&db, "pickups after the reconnect").await;
    daemon.terminate().await;
}

/// One transaction of 10,000 rows in a watched table is one wake-up; a table the
/// select does not read wakes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_of_10000_rows_is_one_wake_up() {
    let (_server, db) = with_jobs(private_binlog_server().await).await;
    db.exec("CREATE TABLE other (id INT PRIMARY KEY)").await;
    let files = QueueFiles::new();
    // A select no row ever matches: the queue's own outcomes wake nothing.
    QueueFile::new("never")
        .select("SELECT id FROM job WHERE state = 'never'")
        .action_sql("DO :id")
        .on_success("UPDATE job SET state = 'done' WHERE id = :id")
        .write(&files);
    let (mut daemon, base) = start_following_alone(&files, &db).await;
    db.exec(
        "INSERT INTO other SELECT seq FROM seq_1_to_100; \
         START TRANSACTION; INSERT INTO job (state) SELECT 'waiting' FROM seq_1_to_10000; COMMIT",
    )
    .await;
    db.assert_count("SELECT COUNT(*) FROM job", 10_000).await;
    eventually(
        "the bulk insert woke the queue",
        Duration::from_secs(30),
        || async { wake_events(&base, "never").await >= 1.0 },
    )
    .await;
    // A second, one-row commit: once it is counted, the bulk one's count is complete.
    db.exec("INSERT INTO job () VALUES ()").await;
    eventually(
        "the marker woke the queue",
        Duration::from_secs(30),
        || async { wake_events(&base, "never").await >= 2.0 },
    )
    .await;
    assert_eq!(
        wake_events(&base, "never").await,
        2.0,
        "{}",
        daemon.stderr()
    );
    daemon.terminate().await;
}

/// Without the binary log, the queue polls, and says why once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_binary_log_the_queue_polls_and_says_why_once() {
    let (_server, db) = with_jobs(no_binlog_server().await).await;
    let files = QueueFiles::new();
    jobs("jobs").poll_interval("200ms").write(&files);
    let (mut daemon, base) = start_with_metrics(&files, &db.url).await;
    let why = "not woken by the binary log: the server writes no binary log (log_bin is off)";
    daemon.wait_for_log(why, Duration::from_secs(30)).await;
    // Polls every 200 ms: a pickup takes at most that, and a claim.
    let pickups = pickups(&db, 3).await;
    assert!(pickups[1] < Duration::from_secs(1), "pickups: {pickups:?}");
    let queue = status(&base, "jobs").await;
    assert_eq!(queue["wake"]["source"], "poll", "{queue}");
    assert!(
        queue["wake"]["why"]
            .as_str()
            .unwrap()
            .contains("log_bin is off"),
        "{queue}"
    );
    daemon.terminate().await;
    assert_eq!(
        daemon.stderr().matches(why).count(),
        1,
        "{}",
        daemon.stderr()
    );
}

/// A run that ends at once (`--stop-when-empty` on an empty queue) still says why
/// its queue polled: the stop waits for the look at the binary log under way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_ends_at_once_still_says_why_it_polled() {
    let (_server, db) = with_jobs(no_binlog_server().await).await;
    let files = QueueFiles::new();
    let file = jobs("jobs").write(&files);
    for _ in 0..3 {
        let mut cmd = tableq(&["run", "--stop-when-empty"]);
        cmd.arg(&file).env("TABLEQ_DATABASE_URL", &db.url);
        let run = run_to_end(cmd, Duration::from_secs(30)).await;
        assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
        let why = "not woken by the binary log: the server writes no binary log (log_bin is off)";
        assert_eq!(run.stderr.matches(why).count(), 1, "{}", run.stderr);
    }
}

/// A user without the replication grants: `auto` polls and names the grant once;
/// `binlog` refuses to start, naming the key and the grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_without_the_grants_polls_or_is_refused() {
    let (_server, db) = with_jobs(binlog_server().await).await;
    let user = format!("plain_{}", db.name);
    db.exec(&format!(
        "CREATE USER `{user}`@'%'; GRANT ALL ON `{}`.* TO `{user}`@'%'",
        db.name
    ))
    .await;
    let url = db.url.replacen("root@", &format!("{user}@"), 1);
    assert_ne!(url, db.url, "the test URL names root");
    let grant = grants_for(&db, &user).await;

    let files = QueueFiles::new();
    jobs("jobs").poll_interval("200ms").write(&files);
    let (mut daemon, _base) = start_with_metrics(&files, &url).await;
    daemon.wait_for_log(&grant, Duration::from_secs(30)).await;
    assert_eq!(pickups(&db, 2).await.len(), 2);
    daemon.terminate().await;
    assert_eq!(
        daemon.stderr().matches(&grant).count(),
        1,
        "{}",
        daemon.stderr()
    );

    let insisting = QueueFiles::new();
    let file = jobs("jobs").set("wake", "binlog").write(&insisting);
    let mut cmd = tableq(&["run"]);
    cmd.arg(&file).env("TABLEQ_DATABASE_URL", &url);
    let ran = run_to_end(cmd, Duration::from_secs(60)).await;
    assert_eq!(ran.code(), Some(2), "{}", ran.stderr);
    assert_has(&ran.stderr, "`wake = \"binlog\"`, but user");
    assert_has(&ran.stderr, &grant);
}

/// `check` says which source each queue would use, and why; `wake = "binlog"`
/// without the grants is an error pointing at `wake`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_says_where_each_queues_wake_ups_come_from() {
    let (_server, db) = with_jobs(binlog_server().await).await;
    let user = format!("plain_{}", db.name);
    db.exec(&format!(
        "CREATE USER `{user}`@'%'; GRANT ALL ON `{}`.* TO `{user}`@'%'",
        db.name
    ))
    .await;
    let plain = db.url.replacen("root@", &format!("{user}@"), 1);
    let files = QueueFiles::new();
    jobs("woken").write(&files);
    jobs("polled").set("wake", "poll").write(&files);
    let ran = check(&[], &[&files.path()], Some(&db.url)).await;
    assert_eq!(ran.code(), Some(0), "{}", ran.stdout);
    assert_has(&ran.stdout, "wake-ups: polled by polling every 5s\nwake-ups: woken on the binary log (polls every 1m)\nchecked ");

    let ran = check(&[], &[&files.path()], Some(&plain)).await;
    let grant = grants_for(&db, &user).await;
    assert_has(
        &ran.stdout,
        &format!("wake-ups: woken by polling every 5s, as user '{user}'@'%' may not read"),
    );
    assert_has(&ran.stdout, &grant);

    // Two queues of the one user: the grant is said once in the summary.
    jobs("woken_too").write(&files);
    let ran = check(&[], &[&files.path()], Some(&plain)).await;
    assert_eq!(ran.stdout.matches(&grant).count(), 1, "{}", ran.stdout);
    assert_has(&ran.stdout, "woken, woken_too by polling every 5s, as user");
    // TABLEQ_WAKE=poll: the queues that set no `wake` poll on purpose, and nothing
    // speaks of the binary log.
    let mut cmd = tableq(&["check"]);
    cmd.arg(files.path())
        .env("TABLEQ_DATABASE_URL", &plain)
        .env("TABLEQ_WAKE", "poll");
    let ran = run_to_end(cmd, Duration::from_secs(60)).await;
    assert_eq!(ran.code(), Some(0), "{}", ran.stdout);
    assert_has(
        &ran.stdout,
        "wake-ups: polled, woken, woken_too by polling every 5s\nchecked ",
    );
    assert!(!ran.stdout.contains("binary log"), "{}", ran.stdout);

    let insisting = QueueFiles::new();
    jobs("insisting").set("wake", "binlog").write(&insisting);
    let ran = check(&[], &[&insisting.path()], Some(&plain)).await;
    assert_eq!(ran.code(), Some(1), "{}", ran.stdout);
    assert_has(
        &ran.stdout,
        "queue insisting: error: `wake = \"binlog\"`, but user",
    );
}

/// `tableq resume` reaches a paused queue on the binary log at once, not at its
/// next read of the pause (`poll_interval`, 5 s here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_is_seen_at_once() {
    let (_server, db) = with_jobs(binlog_server().await).await;
    let files = QueueFiles::new();
    let file = jobs("jobs").write(&files);
    let (mut daemon, base) = start_following(&files, &db).await;
    let run = |args: &'static [&'static str]| {
        let mut cmd = tableq(args);
        cmd.arg(&file).env("TABLEQ_DATABASE_URL", &db.url);
        run_to_end(cmd, Duration::from_secs(60))
    };
    assert_eq!(run(&["pause", "--queue", "jobs"]).await.code(), Some(0));
    eventually("the queue is paused", Duration::from_secs(30), || async {
        !status(&base, "jobs").await["paused"].is_null()
    })
    .await;
    db.exec("INSERT INTO job () VALUES ()").await;
    assert_eq!(run(&["resume", "--queue", "jobs"]).await.code(), Some(0));
    let resumed = std::time::Instant::now();
    // The row is done.
    db.until_count("SELECT COUNT(*) FROM job WHERE state = 'done'", 1, 30)
        .await;
    assert!(
        resumed.elapsed() < Duration::from_secs(2),
        "done {:?} after the resume",
        resumed.elapsed()
    );
    daemon.terminate().await;
}
