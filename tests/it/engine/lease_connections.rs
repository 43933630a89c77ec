//! Lease mode's point: many long jobs at once on few connections. 100 commands of
//! 20 s each with `workers = 100`, on a private server with `max_connections = 30`:
//! every row completes exactly once, tableq never holds more connections than its
//! pool (4), and no transaction of its lives longer than 2 s.

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;

use crate::support::daemon::{tableq, Daemon};
use crate::support::{assert_has, private_db, QueueFile, QueueFiles, TestDb};

const ROWS: usize = 100;
/// Each job's length: ten renewals of a 6 s lease.
const JOB_SECONDS: u32 = 20;
const POOL: u64 = 4;

/// The lease-mode queue `render`: each job appends its key to `runs` and sleeps
/// [`JOB_SECONDS`], one worker a row, [`POOL`] connections; its file.
fn render_queue(files: &QueueFiles, runs: &std::path::Path) -> std::path::PathBuf {
    let script = files.script(
        "render.sh",
        &format!(
            "echo \"$TABLEQ_KEY\" >> {}\nsleep {JOB_SECONDS}",
            runs.display()
        ),
    );
    QueueFile::new("render")
        .set("mode", "lease")
        .workers(ROWS as u32)
        .poll_interval("200ms")
        .select("SELECT id FROM video WHERE state = 'waiting' OR (state = 'rendering' AND lease_until < NOW(3)) ORDER BY id")
        .action_command(&[script.to_str().unwrap()])
        .action_set("timeout", "1m")
        .lease_set("sql", "UPDATE video SET state = 'rendering', lease_until = NOW(3) + INTERVAL 6 SECOND, lease_id = :lease_id WHERE id = :id")
        .lease_set("renew_sql", "UPDATE video SET lease_until = NOW(3) + INTERVAL 6 SECOND WHERE id = :id AND lease_id = :lease_id")
        .lease_set("renew_every", "2s")
        .lease_set("connections", POOL as i64)
        .on_success("UPDATE video SET state = 'done', lease_id = NULL WHERE id = :id AND lease_id = :lease_id")
        .write(files)
}

/// Watches the run until every job is done (2 minutes at most), from one connection:
/// connections opened and closed for each look would linger in the process list and
/// be counted. The most sessions tableq held at once, how many of its transactions
/// were seen older than 2 s, and how many looks were taken.
async fn watch_until_done(db: &TestDb) -> (u64, u64, u64) {
    let mut watcher = db.conn().await;
    let tableq_sessions = format!(
        "FROM information_schema.PROCESSLIST p WHERE p.DB = '{}' AND p.ID <> CONNECTION_ID()",
        db.name
    );
    let connected = format!("SELECT COUNT(*) {tableq_sessions}");
    let old_transactions = format!(
        "SELECT COUNT(*) FROM information_schema.INNODB_TRX t
         WHERE t.trx_started < NOW() - INTERVAL 2 SECOND
         AND t.trx_mysql_thread_id IN (SELECT p.ID {tableq_sessions})"
    );
    let done = "SELECT COUNT(*) FROM video WHERE state = 'done'";
    let (mut most_connections, mut old, mut samples) = (0, 0, 0);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if count(&mut watcher, done).await == ROWS as u64 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the jobs finish within 2 minutes"
        );
        most_connections = most_connections.max(count(&mut watcher, &connected).await);
        old += count(&mut watcher, &old_transactions).await;
        samples += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (most_connections, old, samples)
}

/// 100 jobs of 20 s, 100 workers, `max_connections = 30`: all done exactly once,
/// never more than the pool's 4 connections, no transaction older than 2 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_long_jobs_share_a_pool_of_four_connections() {
    let (_server, db) = private_db(&["--max-connections=30"]).await;
    db.exec(
        "CREATE TABLE video (id INT PRIMARY KEY, state VARCHAR(12) NOT NULL DEFAULT 'waiting',
         lease_until DATETIME(3) NULL, lease_id CHAR(32) NULL) DEFAULT CHARSET=utf8mb4",
    )
    .await;
    db.fill("video", "id", ROWS, |i| i.to_string()).await;
    let files = QueueFiles::new();
    let runs = files.path().join("runs");
    let file = render_queue(&files, &runs);
    // No history: the test counts the pool's connections alone.
    let mut cmd = tableq(&["run", "--stop-when-empty", "--history", "off"]);
    cmd.arg(&file).env("TABLEQ_DATABASE_URL", &db.url);
    let mut daemon = Daemon::spawn(cmd);
    let (most_connections, old, samples) = watch_until_done(&db).await;
    let status = daemon.wait(Duration::from_secs(60)).await;
    assert!(status.success(), "{status:?}: {}", daemon.stderr());

    let started = std::fs::read_to_string(&runs).unwrap();
    let mut keys: Vec<&str> = started.lines().collect();
    assert_eq!(keys.len(), ROWS, "each job started once");
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), ROWS, "no job started twice");
    assert!(samples > 50, "watched the run: {samples} samples");
    assert!(
        most_connections <= POOL,
        "at most the pool's {POOL} connections, saw {most_connections}"
    );
    assert!(most_connections >= 1, "saw tableq's connections");
    assert_eq!(old, 0, "no tableq transaction older than 2 s");
    assert!(
        !daemon.stderr().contains("lease lost"),
        "{}",
        daemon.stderr()
    );
    assert_has(
        &daemon.stderr(),
        "done=100 failed=0 returned=0 rolled_back=0 leases_lost=0",
    );
    eprintln!("{samples} samples; at most {most_connections} connections");
}

async fn count(conn: &mut mysql_async::Conn, sql: &str) -> u64 {
    let found: Option<u64> = conn.query_first(sql).await.unwrap();
    found.unwrap_or_default()
}
