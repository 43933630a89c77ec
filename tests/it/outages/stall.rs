//! A network path to the database that goes silent — no reset, no close — is cut at
//! the queue's `database_timeout`, shown on /readyz, and costs nothing.

use std::net::SocketAddr;
use std::time::Duration;

use crate::support::daemon::Daemon;
use crate::support::endpoint::{get, start_with_metrics, start_with_metrics_logging};
use crate::support::proxy::StallingProxy;
use crate::support::{
    each_job_done_and_logged_once, eventually, logged_jobs, QueueFile, QueueFiles, TestDb,
};

/// Jobs, waiting until done.
const JOB: &str =
    "CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting') DEFAULT CHARSET=utf8mb4";

const ROWS: usize = 300;
const WORKERS: usize = 4;

/// The address of `url`'s server, and the same URL through `proxy`.
fn through(url: &str, proxy: SocketAddr) -> (SocketAddr, String) {
    let authority = url
        .trim_start_matches("mysql://")
        .split('/')
        .next()
        .unwrap()
        .rsplit('@')
        .next()
        .unwrap()
        .to_string();
    let target: SocketAddr = authority
        .parse()
        .expect("the test server is on an IP address");
    (target, url.replacen(&authority, &proxy.to_string(), 1))
}

/// A proxy in front of `db`'s server, to stall, and `db`'s URL through it.
async fn stalling_path(db: &TestDb) -> (StallingProxy, String) {
    let placeholder: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let (target, _) = through(&db.url, placeholder);
    let proxy = StallingProxy::start(target).await;
    let (_, proxied) = through(&db.url, proxy.addr);
    (proxy, proxied)
}

/// Waits until at least `rows` jobs are done.
async fn rows_done(db: &TestDb, rows: u64) {
    db.until_count_at_least("SELECT COUNT(*) FROM job WHERE state = 'done'", rows, 30)
        .await;
}

/// A silent stall between tableq and MariaDB: every worker gives its connection up
/// at `database_timeout`, logging what it waited for; /readyz is 503 during the stall
/// and 200 after; every row is done exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_silent_stall_is_cut_at_the_deadline_and_nothing_is_lost_or_doubled() {
    let db = TestDb::new().await;
    logged_jobs(&db, ROWS).await;
    let (proxy, proxied) = stalling_path(&db).await;
    let files = QueueFiles::new();
    QueueFile::new("jobs")
        .workers(WORKERS as u32)
        .poll_interval("100ms")
        .error_backoff("100ms")
        .set("database_timeout", "2s")
        .select("SELECT id FROM job WHERE state = 'waiting' ORDER BY id")
        .action_sql([
            "INSERT INTO job_log (job_id) VALUES (:id)",
            "DO SLEEP(0.02)",
        ])
        .action_set("timeout", "1s")
        .on_success("UPDATE job SET state = 'done' WHERE id = :id")
        .write(&files);
    let (mut daemon, base) = start_with_metrics_logging(&files, &proxied, "debug").await;
    let readyz = format!("{base}/readyz");
    rows_done(&db, 20).await;
    assert_eq!(get(&readyz).await.0, 200, "ready before the stall");

    proxy.stall();
    // Whatever each worker was waiting for — its claim, its SQL action (cut at the
    // action's timeout), a COMMIT — the answer does not come.
    let cut = "no answer from the database within";
    daemon
        .wait_for_log_times(cut, WORKERS, Duration::from_secs(20))
        .await;
    eventually(
        "/readyz names the stalled workers",
        Duration::from_secs(10),
        || async {
            let (status, reasons) = get(&readyz).await;
            status == 503
                && reasons.contains("queue jobs: worker")
                && reasons.contains("has waited")
        },
    )
    .await;

    proxy.resume();
    // Every row done.
    db.until_count(
        "SELECT COUNT(*) FROM job WHERE state = 'done'",
        ROWS as u64,
        60,
    )
    .await;
    eventually("ready again", Duration::from_secs(20), || async {
        get(&readyz).await.0 == 200
    })
    .await;
    daemon.terminate().await;
    each_job_done_and_logged_once(&db, ROWS).await;
}

/// A stall while a long SQL action runs (its timeout the default minute) shows on
/// /readyz within seconds of `database_timeout`, not when the action's own timeout
/// would have passed: a side look finds the server unreachable.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stall_during_an_sql_action_shows_at_once() {
    let db = TestDb::new().await;
    db.exec(JOB).await;
    db.fill("job", "id", 2000, |i| i.to_string()).await;
    let (proxy, proxied) = stalling_path(&db).await;
    let files = QueueFiles::new();
    QueueFile::new("slow_sql")
        .set("database_timeout", "2s")
        .select("SELECT id FROM job WHERE state = 'waiting' ORDER BY id")
        .action_sql("DO SLEEP(3)")
        .on_success("UPDATE job SET state = 'done' WHERE id = :id")
        .write(&files);
    let (mut daemon, base) = start_with_metrics(&files, &proxied).await;
    let readyz = format!("{base}/readyz");
    rows_done(&db, 1).await;
    proxy.stall();
    let stalled_at = std::time::Instant::now();
    eventually(
        "/readyz says the worker is stalled",
        Duration::from_secs(30),
        || async {
            let (status, reasons) = get(&readyz).await;
            status == 503 && reasons.contains("has waited")
        },
    )
    .await;
    let noticed = stalled_at.elapsed();
    proxy.resume();
    daemon.terminate().await;
    assert!(
        noticed < Duration::from_secs(25),
        "noticed after {noticed:?}"
    );
}

/// A claim that runs past `database_timeout` is given up and killed on the server:
/// no claim of tableq's runs on toward its natural end (each would take 20 s). The
/// bound is half that, not the deadline plus a little: on a loaded machine the side
/// connection that sends the KILL may itself take seconds to open. The server is
/// watched until tableq's claims are gone after the daemon stops, so a claim left
/// running would be seen at its full length.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_abandoned_at_its_deadline_is_killed_on_the_server() {
    let db = TestDb::new().await;
    db.exec(
        "CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting') DEFAULT CHARSET=utf8mb4;
         INSERT INTO job (id) VALUES (1)",
    )
    .await;
    let files = QueueFiles::new();
    QueueFile::new("slow_claim")
        .set("database_timeout", "1s")
        .error_backoff("100ms")
        .select("SELECT id FROM job WHERE state = 'waiting' AND SLEEP(20) = 0 ORDER BY id")
        .action_sql("DO :id")
        .on_success("UPDATE job SET state = 'done' WHERE id = :id")
        .write(&files);
    let (mut daemon, _base) = start_with_metrics_logging(&files, &db.url, "debug").await;
    let claims = format!(
        "SELECT COALESCE(MAX(TIME_MS), 0) FROM information_schema.PROCESSLIST
         WHERE DB = '{}' AND ID <> CONNECTION_ID() AND INFO LIKE '%SKIP LOCKED%'",
        db.name
    );
    let mut longest = 0f64;
    let cut = "no answer from the database within 1s while waiting for the claim";
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while daemon.stderr().matches(cut).count() < 3 {
        assert!(std::time::Instant::now() < deadline, "{}", daemon.stderr());
        let running: f64 = db.scalar(&claims).await;
        longest = longest.max(running);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    daemon.terminate().await;
    loop {
        let running: f64 = db.scalar(&claims).await;
        longest = longest.max(running);
        if running == 0.0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "a claim still runs");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(longest < 10_000.0, "a claim ran on for {longest} ms");
}

/// Stalls the path of `daemon`'s queue `leased_stall`; how soon /readyz turns 503,
/// a warning is logged, and `tableq_db_errors_total` counts errors.
async fn how_soon_the_stall_is_seen(
    proxy: &StallingProxy,
    daemon: &Daemon,
    base: &str,
) -> (Duration, Duration, Duration) {
    let readyz = format!("{base}/readyz");
    let errors = || async {
        let metrics = get(&format!("{base}/metrics")).await.1;
        metrics
            .lines()
            .filter(|l| l.starts_with("tableq_db_errors_total{") && l.contains("leased_stall"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    let before = errors().await;

    proxy.stall();
    let stalled_at = std::time::Instant::now();
    eventually("/readyz turns 503", Duration::from_secs(30), || async {
        let (status, reasons) = get(&readyz).await;
        status == 503 && reasons.contains("queue leased_stall")
    })
    .await;
    let noticed = stalled_at.elapsed();
    eventually("a warning", Duration::from_secs(20), || async {
        daemon.stderr().lines().any(|l| {
            l.contains("WARN")
                && l.contains("leased_stall")
                && l.contains("no answer from the database")
        })
    })
    .await;
    let warned = stalled_at.elapsed();
    eventually("the errors counted", Duration::from_secs(20), || async {
        errors().await > before
    })
    .await;
    let counted = stalled_at.elapsed();
    (noticed, warned, counted)
}

/// Lease mode behind a path that goes silent: /readyz turns 503 within
/// `database_timeout` and a little, a warning is logged, and
/// `tableq_db_errors_total` counts the errors; ready again once the path moves.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stall_in_lease_mode_is_seen_within_the_deadline() {
    let db = TestDb::new().await;
    db.exec(
        "CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting',
           lease_until DATETIME(3) NULL, lease_id CHAR(32) NULL) DEFAULT CHARSET=utf8mb4",
    )
    .await;
    db.fill("job", "id", 100_000, |i| i.to_string()).await;
    let (proxy, proxied) = stalling_path(&db).await;
    let files = QueueFiles::new();
    QueueFile::new("leased_stall")
        .set("mode", "lease")
        .workers(4)
        .poll_interval("100ms")
        .error_backoff("100ms")
        .set("database_timeout", "2s")
        .select(
            "SELECT id FROM job WHERE state = 'waiting' \
             OR (state = 'leased' AND lease_until < NOW(3)) ORDER BY id",
        )
        .lease_set("sql", "UPDATE job SET state = 'leased', lease_id = :lease_id, lease_until = NOW(3) + INTERVAL 30 SECOND WHERE id = :id")
        .action_command(&["sleep", "0.05"])
        .on_success("UPDATE job SET state = 'done' WHERE id = :id AND lease_id = :lease_id")
        .write(&files);
    let (mut daemon, base) = start_with_metrics(&files, &proxied).await;
    let readyz = format!("{base}/readyz");
    rows_done(&db, 20).await;
    assert_eq!(get(&readyz).await.0, 200, "ready before the stall");
    let (noticed, warned, counted) = how_soon_the_stall_is_seen(&proxy, &daemon, &base).await;
    eprintln!(
        "lease mode, database_timeout 2s: /readyz 503 after {noticed:?}, a warning after \
         {warned:?}, the errors counted after {counted:?}"
    );
    assert!(
        noticed < Duration::from_secs(6),
        "noticed after {noticed:?}"
    );
    assert!(warned < Duration::from_secs(10), "warned after {warned:?}");
    assert!(
        counted < Duration::from_secs(10),
        "counted after {counted:?}"
    );

    proxy.resume();
    eventually("ready again", Duration::from_secs(30), || async {
        get(&readyz).await.0 == 200
    })
    .await;
    daemon.terminate().await;
}
