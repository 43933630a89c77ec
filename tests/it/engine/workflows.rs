//! Workflows written as selects, run from the how-to's queue files
//! (`examples/workflows/`): fan-in (an order completed once, soon after its last
//! item, by two copies — also when its last two items commit at the same instant),
//! a chain (step 2 reads step 1's results in a subquery) and debounce (the newest
//! request per key; older ones superseded by the outcome SQL).

use std::path::PathBuf;
use std::time::Duration;

use mysql_async::prelude::Queryable;

use super::wake::binlog_server;
use crate::support::check::check;
use crate::support::daemon::{copies, run_binary_until_empty, Daemon};
use crate::support::{assert_has, TestDb};

/// The how-to's files of one pattern.
fn example(pattern: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("examples/workflows")
        .join(pattern)
}

/// A database with the pattern's `schema.sql`.
async fn with_schema(db: TestDb, pattern: &str) -> TestDb {
    let sql = std::fs::read_to_string(example(pattern).join("schema.sql")).unwrap();
    db.exec(&sql).await;
    db
}

/// Two copies of `tableq run` on the pattern's files, once both follow the log.
async fn two_copies(pattern: &str, db: &TestDb) -> Vec<Daemon> {
    let copies = copies(2, &example(pattern), &db.url);
    for copy in &copies {
        copy.wait_for_log("following the binary log", Duration::from_secs(60))
            .await;
    }
    copies
}

/// Each order logged (completed) exactly once, `orders` of them.
async fn each_order_completed_once(db: &TestDb, orders: u64) {
    db.until_count(
        "SELECT COUNT(*) FROM orders WHERE state = 'completed'",
        orders,
        120,
    )
    .await;
    db.assert_count_because(
        "SELECT COUNT(*) FROM (SELECT order_id FROM order_log GROUP BY order_id \
         HAVING COUNT(*) > 1) twice",
        0,
        "an order completed twice",
    )
    .await;
    db.assert_count("SELECT COUNT(*) FROM order_log", orders)
        .await;
}

/// From each order's last item's change to the order's completion, sorted.
async fn completion_lags(db: &TestDb) -> Vec<Duration> {
    let lags: Vec<i64> = db
        .rows(
            "SELECT TIMESTAMPDIFF(MICROSECOND, MAX(i.done_at), o.completed_at) AS lag \
             FROM orders o JOIN order_items i ON i.order_id = o.id GROUP BY o.id ORDER BY lag",
        )
        .await;
    lags.into_iter()
        .map(|us| Duration::from_micros(us.max(0) as u64))
        .collect()
}

/// p50 and max of sorted `lags`, said, and p50 under a generous second.
fn said(what: &str, lags: &[Duration]) {
    let (p50, max) = (lags[lags.len() / 2], lags[lags.len() - 1]);
    eprintln!(
        "{what}: {} orders, from the last item to the order: p50 {p50:?}, max {max:?}",
        lags.len()
    );
    assert!(p50 < Duration::from_secs(1), "{what}: p50 {p50:?}");
}

/// 1,000 orders × 5 items arriving over time, worked by two copies of the fan-in
/// files: every order is completed exactly once, soon after its last item.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fan_in_completes_each_order_once_after_its_last_item() {
    let server = binlog_server().await;
    let db = with_schema(TestDb::on(&server.base).await, "fan-in").await;
    let mut copies = two_copies("fan-in", &db).await;
    // As the application writes them: an order and its items in one transaction.
    for first in (1..=1000).step_by(50) {
        let last = first + 49;
        db.exec(&format!(
            "START TRANSACTION; \
             INSERT INTO orders (id) SELECT seq FROM seq_{first}_to_{last}; \
             INSERT INTO order_items (order_id) SELECT o.seq \
             FROM seq_{first}_to_{last} o, seq_1_to_5 n; COMMIT"
        ))
        .await;
    }
    each_order_completed_once(&db, 1000).await;
    said("1,000 × 5 on two copies", &completion_lags(&db).await);
    for copy in &mut copies {
        copy.terminate().await;
        assert!(!copy.stderr().contains("panicked"), "{}", copy.stderr());
    }
}

/// Orders whose last two items commit at the same instant, from two sessions, with
/// two copies woken by both commits: each order is completed exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fan_in_when_the_last_two_items_commit_together() {
    let server = binlog_server().await;
    let db = with_schema(TestDb::on(&server.base).await, "fan-in").await;
    let mut copies = two_copies("fan-in", &db).await;
    // Three items done, two `held` (no queue takes them): the test finishes those.
    db.exec(
        "START TRANSACTION; INSERT INTO orders (id) SELECT seq FROM seq_1_to_30; \
         INSERT INTO order_items (order_id, state, done_at) \
         SELECT o.seq, IF(n.seq <= 3, 'done', 'held'), IF(n.seq <= 3, NOW(6), NULL) \
         FROM seq_1_to_30 o, seq_1_to_5 n; COMMIT",
    )
    .await;
    let (mut a, mut b) = (db.conn().await, db.conn().await);
    for order in 1..=30u64 {
        let held: Vec<u64> = db
            .rows(&format!(
                "SELECT id FROM order_items WHERE order_id = {order} AND state = 'held'"
            ))
            .await;
        for (session, item) in [(&mut a, held[0]), (&mut b, held[1])] {
            session
                .query_drop(format!(
                    "BEGIN; UPDATE order_items SET state = 'done', done_at = NOW(6) \
                     WHERE id = {item}"
                ))
                .await
                .unwrap();
        }
        let (ended_a, ended_b) = tokio::join!(a.query_drop("COMMIT"), b.query_drop("COMMIT"));
        ended_a.and(ended_b).unwrap();
        let completed = format!("SELECT COUNT(*) FROM order_log WHERE order_id = {order}");
        db.until_count(&completed, 1, 30).await;
    }
    each_order_completed_once(&db, 30).await;
    said("last two items together", &completion_lags(&db).await);
    for copy in &mut copies {
        copy.terminate().await;
    }
}

/// A chain: step 2 makes a thumbnail of each upload step 1 found clean, once each;
/// check explains step 2's subquery and warns of no join.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_runs_step_two_over_step_ones_results() {
    let db = with_schema(TestDb::new().await, "chain").await;
    db.exec(
        "INSERT INTO uploads (path) SELECT CONCAT('file-', seq, IF(seq % 5 = 0, '.exe', '.png')) \
         FROM seq_1_to_40",
    )
    .await;
    run_binary_until_empty(&example("chain"), &db.url).await;
    db.assert_count("SELECT COUNT(*) FROM scans", 40).await;
    db.assert_count("SELECT COUNT(*) FROM thumbnails", 32).await;
    db.assert_count(
        "SELECT COUNT(*) FROM thumbnails t JOIN scans s USING (upload_id) WHERE NOT s.clean",
        0,
    )
    .await;
    db.assert_count("SELECT COUNT(*) FROM uploads WHERE error IS NOT NULL", 0)
        .await;
    let ran = check(&[], &[&example("chain")], Some(&db.url)).await;
    assert_has(
        &ran.stdout,
        "reads: queue thumbnail: table scans: read by the select (EXISTS subquery), ",
    );
    assert!(!ran.stdout.contains("locked with each"), "{}", ran.stdout);
}

/// Debounce: 20 requests for each of 10 documents are 10 re-indexes, each of its
/// document's newest request, the others superseded; a later request runs again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debounce_runs_the_newest_request_per_key_once() {
    let db = with_schema(TestDb::new().await, "debounce").await;
    db.exec("INSERT INTO reindex_requests (doc_id) SELECT seq % 10 FROM seq_1_to_200")
        .await;
    run_binary_until_empty(&example("debounce"), &db.url).await;
    db.assert_count("SELECT COUNT(*) FROM reindexed", 10).await;
    db.assert_count(
        "SELECT COUNT(*) FROM reindexed x WHERE x.request_id = \
         (SELECT MAX(id) FROM reindex_requests r WHERE r.doc_id = x.doc_id)",
        10,
    )
    .await;
    db.assert_count(
        "SELECT COUNT(*) FROM reindex_requests WHERE state = 'superseded'",
        190,
    )
    .await;
    db.exec("INSERT INTO reindex_requests (doc_id) VALUES (3), (3), (3)")
        .await;
    run_binary_until_empty(&example("debounce"), &db.url).await;
    db.assert_count("SELECT COUNT(*) FROM reindexed WHERE doc_id = 3", 2)
        .await;
    db.assert_count(
        "SELECT COUNT(*) FROM reindex_requests WHERE state = 'waiting'",
        0,
    )
    .await;
}
