//! A receiver that cannot be reached at all — nothing listens on its port — is
//! waited for, with or without `[circuit]`: no row spends an attempt or gives up,
//! the queue says so once, tries every second, and claims again as soon as the
//! receiver listens.

use std::time::{Duration, Instant};

use crate::support::logs;
use crate::support::queue_file::table;
use crate::support::web::{closed_port, Reply, WebServer};
use crate::support::{load, Engine, QueueFile, QueueFiles, TestDb};

const ROWS: usize = 50;

/// The webhook's port closed for a while under a backlog, `[circuit]` off: every
/// row waits with no attempt spent, one warning says so within a second or two, and
/// once the receiver listens every row is delivered within seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_port_spends_no_attempt_and_gives_no_row_up() {
    let logs = logs::capture();
    let db = TestDb::new().await;
    db.exec(
        "CREATE TABLE hook (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting',
           attempts INT NOT NULL DEFAULT 0) DEFAULT CHARSET=utf8mb4",
    )
    .await;
    db.fill("hook", "id", ROWS, |i| i.to_string()).await;
    let receiver = closed_port();
    let files = QueueFiles::new();
    let file = QueueFile::new("hooks")
        .workers(2)
        .select("SELECT id FROM hook WHERE state = 'waiting' ORDER BY id")
        .action_http(&format!("http://{receiver}/hook"))
        .action_set("allow_private_networks", true)
        .set("circuit", table(&[("enabled", false.into())]))
        .on_success("UPDATE hook SET state = 'done' WHERE id = :id")
        .on_failure(
            "UPDATE hook SET attempts = attempts + 1, state = IF(attempts >= 3, 'failed', 'waiting') WHERE id = :id",
        )
        .write(&files);
    let started = Instant::now();
    let engine = Engine::start(load(&[file]), &db.url);
    logs.wait_for("hooks", "the handler cannot be reached")
        .await;
    let said_in = started.elapsed();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let spent = "SELECT COUNT(*) FROM hook WHERE attempts > 0 OR state = 'failed'";
    db.assert_count_because(spent, 0, "an attempt spent on a closed port")
        .await;
    let _receiver = WebServer::start_on(receiver, |_| Reply::status(204)).await;
    let back = Instant::now();
    // Every row delivered.
    db.until_count(
        "SELECT COUNT(*) FROM hook WHERE state = 'done'",
        ROWS as u64,
        60,
    )
    .await;
    let drained_in = back.elapsed();
    engine.stop().await;
    db.assert_count(spent, 0).await;
    let warned = logs.lines_of("hooks", "the handler cannot be reached");
    assert_eq!(warned.len(), 1, "said once: {warned:?}");
    assert!(
        warned[0].contains(&format!("connection refused to {receiver}")),
        "{warned:?}"
    );
    eprintln!("port closed: said {said_in:.2?} after the start; open: all {ROWS} delivered {drained_in:.2?} after");
    assert!(
        drained_in < Duration::from_secs(10),
        "{drained_in:?} to drain"
    );
}

/// In lease mode too: the receiver's port closed, each lease is released without a
/// failure (no attempt spent, nothing left leased), and once it listens every row is
/// delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_lease_mode_a_closed_port_releases_the_lease_unspent() {
    let logs = logs::capture();
    let db = TestDb::new().await;
    db.exec(
        "CREATE TABLE leased_hook (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting',
           attempts INT NOT NULL DEFAULT 0, lease_until DATETIME(3) NULL, lease_id CHAR(32) NULL)
           DEFAULT CHARSET=utf8mb4",
    )
    .await;
    db.fill("leased_hook", "id", 20, |i| i.to_string()).await;
    let receiver = closed_port();
    let files = QueueFiles::new();
    let file = QueueFile::new("leased_hooks")
        .set("mode", "lease")
        .workers(2)
        .select("SELECT id FROM leased_hook WHERE state = 'waiting' OR (state = 'leased' AND lease_until < NOW(3)) ORDER BY id")
        .lease_set("sql", "UPDATE leased_hook SET state = 'leased', lease_until = NOW(3) + INTERVAL 30 SECOND, lease_id = :lease_id WHERE id = :id")
        .lease_set("release_sql", "UPDATE leased_hook SET state = 'waiting', lease_until = NULL, lease_id = NULL WHERE id = :id AND lease_id = :lease_id")
        .action_http(&format!("http://{receiver}/hook"))
        .action_set("allow_private_networks", true)
        .on_success("UPDATE leased_hook SET state = 'done' WHERE id = :id AND lease_id = :lease_id")
        .on_failure("UPDATE leased_hook SET state = 'waiting', attempts = attempts + 1 WHERE id = :id AND lease_id = :lease_id")
        .write(&files);
    let engine = Engine::start(load(&[file]), &db.url);
    logs.wait_for("leased_hooks", "the handler cannot be reached")
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let spent = "SELECT COUNT(*) FROM leased_hook WHERE attempts > 0";
    db.assert_count_because(spent, 0, "an attempt spent on a closed port")
        .await;
    let _receiver = WebServer::start_on(receiver, |_| Reply::status(204)).await;
    // Every row delivered.
    db.until_count(
        "SELECT COUNT(*) FROM leased_hook WHERE state = 'done'",
        20,
        60,
    )
    .await;
    engine.stop().await;
    db.assert_count(spent, 0).await;
}
