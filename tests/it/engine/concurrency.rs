//! `[concurrency]`: at most `limit` rows of one key in flight across every copy,
//! with a real HTTP receiver recording each call's start and end.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::wake::status;
use crate::support::daemon::{copies, copy};
use crate::support::endpoint::{get, start_with_metrics};
use crate::support::scrape::sample;
use crate::support::web::{Recorded, Reply, WebServer};
use crate::support::{eventually, jobs_done, load, run_until_empty, QueueFile, QueueFiles, TestDb};

/// Jobs of customers, and a queue calling `receiver` with one at a time per
/// customer.
async fn customers_queue(db: &TestDb, receiver: &WebServer) -> QueueFile {
    db.exec("CREATE TABLE job (id INT PRIMARY KEY, customer INT NOT NULL, state VARCHAR(10) NOT NULL DEFAULT 'waiting', KEY (state, id)) DEFAULT CHARSET=utf8mb4")
        .await;
    let mut key = toml::Table::new();
    key.insert("key".into(), "customer".into());
    key.insert("limit".into(), 1.into());
    QueueFile::new("hooks")
        .poll_interval("200ms")
        .set("concurrency", toml::Value::Table(key))
        .select("SELECT id, customer FROM job WHERE state = 'waiting' ORDER BY id")
        .action_http(&receiver.url("/hook"))
        .action_set("allow_private_networks", true)
        .on_success("UPDATE job SET state = 'done' WHERE id = :id")
}

/// The customer a call was for.
fn customer(call: &Recorded) -> i64 {
    call.json()["customer"].as_i64().expect("a customer")
}

/// The most calls of one customer open at once, each open from its start for
/// `took` (its reply's delay).
fn most_at_once(calls: &[Recorded], took: Duration) -> usize {
    let mut by_customer: HashMap<i64, Vec<Instant>> = HashMap::new();
    for call in calls {
        by_customer.entry(customer(call)).or_default().push(call.at);
    }
    let open = |starts: &[Instant], at: Instant| {
        starts
            .iter()
            .filter(|s| **s <= at && at < **s + took - Duration::from_millis(5))
            .count()
    };
    by_customer
        .values()
        .flat_map(|starts| starts.iter().map(|at| open(starts, *at)))
        .max()
        .unwrap_or(0)
}

/// Three copies × 4 workers (batch 2) over 6 customers' 90 rows never run two rows
/// of one customer at once, and every row is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_copies_never_run_two_rows_of_one_customer_at_once() {
    const TOOK: Duration = Duration::from_millis(60);
    let db = TestDb::new().await;
    let receiver = WebServer::start(|_| Reply::status(204).after(TOOK)).await;
    let files = QueueFiles::new();
    let file = customers_queue(&db, &receiver)
        .await
        .workers(4)
        .batch(2)
        .write(&files);
    db.exec("INSERT INTO job (id, customer) SELECT seq, seq % 6 FROM seq_1_to_90")
        .await;
    let mut copies = copies(3, &file, &db.url);
    jobs_done(&db, 90).await;
    let calls = receiver.requests();
    let most = most_at_once(&calls, TOOK);
    eprintln!(
        "3 copies x 4 workers: {} calls, at most {most} of one customer at once",
        calls.len()
    );
    assert_eq!(most, 1, "two rows of one customer ran at once");
    assert_eq!(calls.len(), 90, "each row once");
    for one in &mut copies {
        one.terminate().await;
    }
}

/// A hot customer's 120 rows in front of 60 rows of five others: the others' rows
/// all finish long before the hot customer's are half done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_customer_does_not_hold_up_the_others() {
    const TOOK: Duration = Duration::from_millis(40);
    let db = TestDb::new().await;
    let receiver = WebServer::start(|_| Reply::status(204).after(TOOK)).await;
    let files = QueueFiles::new();
    let file = customers_queue(&db, &receiver)
        .await
        .workers(4)
        .write(&files);
    db.exec(
        "INSERT INTO job (id, customer) SELECT seq, 0 FROM seq_1_to_120;
         INSERT INTO job (id, customer) SELECT 120 + seq, 1 + seq % 5 FROM seq_1_to_60",
    )
    .await;
    let began = Instant::now();
    run_until_empty(load(&[file]), &db.url).await;
    let calls = receiver.requests();
    assert_eq!(calls.len(), 180);
    let others_done = calls
        .iter()
        .filter(|c| customer(c) != 0)
        .map(|c| c.at + TOOK)
        .max()
        .expect("the others' calls");
    let hot: Vec<Instant> = calls
        .iter()
        .filter(|c| customer(c) == 0)
        .map(|c| c.at)
        .collect();
    let hot_half = hot[59];
    let (others, half) = (others_done - began, hot_half - began);
    eprintln!("hot customer: others all done after {others:?}; the hot one's 60th of 120 started after {half:?}, its last after {:?}", hot[119] - began);
    assert!(
        others * 2 < half,
        "the others done after {others:?}, the hot customer half done after {half:?}"
    );
    assert_eq!(most_at_once(&calls, TOOK), 1);
}

/// A copy killed (-9) in the middle of a customer's row frees the customer at once:
/// another copy starts that customer's next row within a second or two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_copy_frees_its_keys_at_once() {
    let db = TestDb::new().await;
    let receiver = WebServer::start(|call| match call.json()["id"].as_i64() {
        Some(1) => Reply::status(204).after(Duration::from_secs(120)),
        _ => Reply::status(204),
    })
    .await;
    let files = QueueFiles::new();
    let file = customers_queue(&db, &receiver)
        .await
        .workers(2)
        .write(&files);
    db.exec("INSERT INTO job (id, customer) VALUES (1, 7), (2, 7)")
        .await;
    let first = copy(&file, &db.url);
    eventually("row 1 started", Duration::from_secs(30), || async {
        !receiver.requests().is_empty()
    })
    .await;
    let second = copy(&file, &db.url);
    second
        .wait_for_log("queue started", Duration::from_secs(30))
        .await;
    // The second copy claims nothing of customer 7 while the first holds it.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(receiver.requests().len(), 1, "customer 7 ran twice at once");
    let killed = Instant::now();
    first.signal(libc::SIGKILL);
    eventually("customer 7's next row", Duration::from_secs(10), || async {
        receiver.requests().len() >= 2
    })
    .await;
    eprintln!("customer 7 freed {:?} after the kill", killed.elapsed());
    assert!(killed.elapsed() < Duration::from_secs(3));
    // The second copy now waits on row 1's hanging call: killed with the test.
    drop(second);
}

/// The cost of `[concurrency]` where keys never collide: items per second over
/// 4000 rows, 4 workers × batch 10, with and without it, in one run (a
/// measurement for docs/performance.md: `cargo test --release --test it --
/// --ignored concurrency_overhead --nocapture`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, not a test"]
async fn concurrency_overhead_on_keys_that_never_collide() {
    const ROWS: usize = 4000;
    let mut rates = Vec::new();
    for with in [false, true, false, true] {
        let db = TestDb::new().await;
        db.exec("CREATE TABLE job (id INT PRIMARY KEY, customer INT NOT NULL, state VARCHAR(10) NOT NULL DEFAULT 'waiting', KEY (state, id)) DEFAULT CHARSET=utf8mb4")
            .await;
        db.exec(&format!(
            "INSERT INTO job (id, customer) SELECT seq, seq FROM seq_1_to_{ROWS}"
        ))
        .await;
        let mut file = QueueFile::new("bench")
            .workers(4)
            .batch(10)
            .select("SELECT id, customer FROM job WHERE state = 'waiting' ORDER BY id")
            .action_sql("DO :customer")
            .on_success("UPDATE job SET state = 'done' WHERE id = :id");
        if with {
            let mut key = toml::Table::new();
            key.insert("key".into(), "customer".into());
            file = file.set("concurrency", toml::Value::Table(key));
        }
        let files = QueueFiles::new();
        let path = file.write(&files);
        let began = Instant::now();
        run_until_empty(load(&[path]), &db.url).await;
        let rate = ROWS as f64 / began.elapsed().as_secs_f64();
        eprintln!("[concurrency] {with}: {rate:.0} items/s");
        rates.push((with, rate));
    }
    let mean = |w: bool| {
        let r: Vec<f64> = rates
            .iter()
            .filter(|(x, _)| *x == w)
            .map(|(_, r)| *r)
            .collect();
        r.iter().sum::<f64>() / r.len() as f64
    };
    let (without, with) = (mean(false), mean(true));
    eprintln!(
        "without: {without:.0} items/s, with [concurrency]: {with:.0} items/s ({:+.1} %)",
        (with / without - 1.0) * 100.0
    );
}

/// In batch scope each row of a batch holds its own key's slot: 2 copies × 3
/// workers at batch 5 over 4 customers' 60 rows do every row once, and no
/// customer is in two batches running at once (each batch logs its customers'
/// start, then takes 50 ms).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_scope_holds_each_rows_key() {
    let db = TestDb::new().await;
    db.exec(
        "CREATE TABLE job (id INT PRIMARY KEY, customer INT NOT NULL, state VARCHAR(10) NOT NULL DEFAULT 'waiting', KEY (state, id)) DEFAULT CHARSET=utf8mb4;
         CREATE TABLE started (n INT AUTO_INCREMENT PRIMARY KEY, customer INT NOT NULL, at DATETIME(6) NOT NULL) DEFAULT CHARSET=utf8mb4;
         INSERT INTO job (id, customer) SELECT seq, seq % 4 FROM seq_1_to_60",
    )
    .await;
    let columns = "JSON_TABLE(:batch, '$[*]' COLUMNS (id INT PATH '$.id', customer INT PATH '$.customer')) AS b";
    let mut key = toml::Table::new();
    key.insert("key".into(), "customer".into());
    let files = QueueFiles::new();
    let log =
        format!("INSERT INTO started (customer, at) SELECT b.customer, NOW(6) FROM {columns}");
    let file = QueueFile::new("batches")
        .workers(3)
        .batch(5)
        .set("scope", "batch")
        .set("concurrency", toml::Value::Table(key))
        .poll_interval("200ms")
        .select("SELECT id, customer FROM job WHERE state = 'waiting' ORDER BY id")
        .action_sql([log.as_str(), "DO SLEEP(0.05)"])
        .on_success(
            format!("UPDATE job j JOIN {columns} ON j.id = b.id SET j.state = 'done'").as_str(),
        )
        .write(&files);
    let mut copies = copies(2, &file, &db.url);
    jobs_done(&db, 60).await;
    for one in &mut copies {
        one.terminate().await;
    }
    assert_eq!(
        db.count("SELECT COUNT(*) FROM started").await,
        60,
        "each row once"
    );
    let overlapping = db
        .count(
            "SELECT COUNT(*) FROM started a JOIN started b ON a.customer = b.customer AND a.n < b.n
             AND ABS(TIMESTAMPDIFF(MICROSECOND, a.at, b.at)) < 45000",
        )
        .await;
    assert_eq!(overlapping, 0, "one customer in two batches at once");
}

/// Lease mode holds a row's key for its lease's life — from the claim until its
/// outcome is recorded — though no transaction is open meanwhile: 2 copies × 3
/// workers over 2 customers' 12 rows, each call taking 150 ms, never run two calls
/// of one customer at once, and every row is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_mode_holds_the_key_for_the_jobs_life() {
    const TOOK: Duration = Duration::from_millis(150);
    let db = TestDb::new().await;
    let receiver = WebServer::start(|_| Reply::status(204).after(TOOK)).await;
    db.exec(
        "CREATE TABLE job (id INT PRIMARY KEY, customer INT NOT NULL, state VARCHAR(10) NOT NULL DEFAULT 'waiting',
           lease_until DATETIME(3) NULL, lease_id CHAR(32) NULL, KEY (state, id)) DEFAULT CHARSET=utf8mb4;
         INSERT INTO job (id, customer) SELECT seq, seq % 2 FROM seq_1_to_12",
    )
    .await;
    let mut key = toml::Table::new();
    key.insert("key".into(), "customer".into());
    let files = QueueFiles::new();
    let file = QueueFile::new("leased")
        .set("mode", "lease")
        .workers(3)
        .poll_interval("200ms")
        .set("concurrency", toml::Value::Table(key))
        .select("SELECT id, customer FROM job WHERE state = 'waiting' OR (state = 'leased' AND lease_until < NOW(3)) ORDER BY id")
        .action_http(&receiver.url("/hook"))
        .action_set("allow_private_networks", true)
        .lease_set("sql", "UPDATE job SET state = 'leased', lease_until = NOW(3) + INTERVAL 1 MINUTE, lease_id = :lease_id WHERE id = :id")
        .on_success("UPDATE job SET state = 'done', lease_id = NULL WHERE id = :id AND lease_id = :lease_id")
        .write(&files);
    let mut copies = copies(2, &file, &db.url);
    jobs_done(&db, 12).await;
    for one in &mut copies {
        one.terminate().await;
    }
    let calls = receiver.requests();
    assert_eq!(calls.len(), 12, "each row once");
    assert_eq!(
        most_at_once(&calls, TOOK),
        1,
        "two calls of one customer at once"
    );
}

/// Rows `[concurrency]` hands back untouched are counted as held back, apart from
/// rows that came back failed: two copies over three customers' 150 rows (50 in a
/// row each, so a batch of 3 holds two back) do every row, return none, and show the rows they held back alike in `/status.json`, on
/// the page and in `tableq_items_total{outcome="held_back"}` (the older
/// `tableq_concurrency_held_back_total` too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_held_back_are_not_counted_as_returned() {
    let db = TestDb::new().await;
    let receiver = WebServer::start(|_| Reply::status(204).after(Duration::from_millis(20))).await;
    let files = QueueFiles::new();
    customers_queue(&db, &receiver)
        .await
        .workers(4)
        .batch(3)
        .write(&files);
    db.exec("INSERT INTO job (id, customer) SELECT seq, (seq - 1) DIV 50 FROM seq_1_to_150")
        .await;
    let mut copies = vec![
        start_with_metrics(&files, &db.url).await,
        start_with_metrics(&files, &db.url).await,
    ];
    jobs_done(&db, 150).await;
    let mut held_back = 0.0;
    for (_, base) in &copies {
        let queue = status(base, "hooks").await;
        let metrics = get(&format!("{base}/metrics")).await.1;
        let outcome = |o: &str| {
            sample(
                &metrics,
                &format!(r#"tableq_items_total{{queue="hooks",outcome="{o}"}}"#),
            )
        };
        assert_eq!(queue["returned"], 0, "none failed back: {queue}");
        assert_eq!(outcome("returned"), Some(0.0), "{metrics}");
        let shown = queue["held_back"].as_f64().expect("held_back");
        assert_eq!(outcome("held_back"), Some(shown), "{metrics}");
        let older = sample(
            &metrics,
            r#"tableq_concurrency_held_back_total{queue="hooks"}"#,
        );
        assert_eq!(older, Some(shown), "{metrics}");
        let page = get(&format!("{base}/")).await.1;
        if shown > 0.0 {
            assert!(page.contains(&format!("data-field=\"held_back\" title=\"handed back untouched: their [concurrency] key was at its limit\">{shown} held back<")), "{page}");
        }
        held_back += shown;
    }
    println!("two copies over three customers: {held_back} rows held back, 0 returned");
    assert!(
        held_back > 0.0,
        "a batch of one customer's rows holds some back"
    );
    for (daemon, _) in &mut copies {
        daemon.terminate().await;
    }
}
