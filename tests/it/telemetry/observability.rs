//! What `/metrics` says after a known run: every claimed item in one outcome, the
//! histograms counting each item, the backlog counted in the background (below and
//! above its cap), the lag of rows inserted with known ages, and the items a
//! shutdown rolled back.

use std::time::Duration;

use crate::support;
use crate::support::endpoint::{get, start_with_metrics};
use crate::support::scrape::sample;
use crate::support::{eventually, load, private_db, Engine, QueueFile, QueueFiles, TestDb};

/// Ten jobs, 5 and 10 marked to fail, and the table `seen` their action inserts
/// into (holding the key 0 a failing job inserts).
const TEN_JOBS: &str =
    "CREATE TABLE job (id INT PRIMARY KEY, fail BOOL NOT NULL, state VARCHAR(10) NOT NULL DEFAULT 'waiting') DEFAULT CHARSET=utf8mb4;
         CREATE TABLE seen (id INT PRIMARY KEY) DEFAULT CHARSET=utf8mb4;
         INSERT INTO seen VALUES (0);
         INSERT INTO job (id, fail) VALUES (1,0),(2,0),(3,0),(4,0),(5,1),(6,0),(7,0),(8,0),(9,0),(10,1)";

/// Scrapes until `series` has `value`, then returns the whole scrape.
async fn scrape_until(base: &str, series: &str, value: f64) -> String {
    let url = format!("{base}/metrics");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let text = get(&url).await.1;
        if sample(&text, series) == Some(value) {
            return text;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {series} = {value}; the last scrape:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The counts of [`outcomes_and_histograms_account_for_every_item`]'s run.
const EVERY_ITEM_COUNTED: [(&str, f64); 9] = [
    (r#"tableq_items_total{queue="jobs",outcome="done"}"#, 8.0),
    (r#"tableq_items_total{queue="jobs",outcome="failed"}"#, 2.0),
    (
        r#"tableq_items_total{queue="jobs",outcome="returned"}"#,
        0.0,
    ),
    (
        r#"tableq_items_total{queue="jobs",outcome="rolled_back"}"#,
        2.0,
    ),
    (
        r#"tableq_action_duration_seconds_count{queue="jobs"}"#,
        12.0,
    ),
    (
        r#"tableq_transaction_duration_seconds_count{queue="jobs"}"#,
        12.0,
    ),
    (
        r#"tableq_action_duration_seconds_bucket{le="+Inf",queue="jobs"}"#,
        12.0,
    ),
    // 10 rows + 2 claimed again + the empty claim that found the queue drained.
    (r#"tableq_claims_total{queue="jobs"}"#, 13.0),
    (r#"tableq_claim_duration_seconds_count{queue="jobs"}"#, 13.0),
];

/// Ten rows, two of whose actions fail, one worker claiming one row at a time: 8
/// done, 2 failed, and the 2 optimistic transactions that had the failure rolled
/// back (then claimed again with a savepoint); an action and a transaction timed
/// for each of the 12 tries, a claim timed for each claim query.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outcomes_and_histograms_account_for_every_item() {
    let db = TestDb::new().await;
    db.exec(TEN_JOBS).await;
    let files = QueueFiles::new();
    QueueFile::new("jobs")
        .select("SELECT id, fail FROM job WHERE state = 'waiting' ORDER BY id")
        .batch(1)
        .poll_interval("1h")
        // A failing row inserts the key that is already there.
        .action_sql("INSERT INTO seen (id) VALUES (IF(:fail, 0, :id))")
        .on_success("UPDATE job SET state = 'done' WHERE id = :id")
        .on_failure("UPDATE job SET state = 'failed' WHERE id = :id")
        .write(&files);
    let (mut daemon, base) = start_with_metrics(&files, &db.url).await;
    // The last claim: the empty one that finds the queue drained, after the backoff.
    let text = scrape_until(
        &base,
        r#"tableq_claim_duration_seconds_count{queue="jobs"}"#,
        13.0,
    )
    .await;
    let value = |series: &str| sample(&text, series).unwrap_or_else(|| panic!("{series}: {text}"));
    for (series, expected) in EVERY_ITEM_COUNTED {
        assert_eq!(value(series), expected, "{series}");
    }
    assert_eq!(value(r#"tableq_workers_busy{queue="jobs"}"#), 0.0);
    for kind in [
        "connect",
        "deadlock",
        "lock_wait",
        "certification",
        "lost",
        "deadline",
        "other",
    ] {
        let series = format!(r#"tableq_db_errors_total{{queue="jobs",kind="{kind}"}}"#);
        assert_eq!(value(&series), 0.0, "{series}");
    }
    assert_eq!(
        value(&format!(
            r#"tableq_build_info{{version="{}"}}"#,
            env!("CARGO_PKG_VERSION")
        )),
        1.0
    );
    assert!(value("process_resident_memory_bytes") > 0.0, "{text}");
    assert!(value("process_open_fds") > 0.0, "{text}");
    assert!(value("process_start_time_seconds") > 1.7e9, "{text}");
    assert!(text.contains("process_cpu_seconds_total "), "{text}");
    assert!(
        !text.contains("tableq_queue_wait_seconds_count"),
        "no waiting_since: {text}"
    );
    daemon.terminate().await;
}

/// Inserts a waiting row `n * 10` seconds old for each `n`.
async fn insert_aged(db: &TestDb, ages: std::ops::RangeInclusive<u32>) {
    let rows: Vec<String> = ages
        .map(|n| format!("(NOW(6) - INTERVAL {} SECOND)", n * 10))
        .collect();
    db.exec(&format!(
        "INSERT INTO job (created_at) VALUES {}",
        rows.join(", ")
    ))
    .await;
}

/// `tableq_waiting` is the number of waiting rows, counted in the background: 7
/// below the cap of 10, then 10 once 25 wait; `tableq_oldest_waiting_seconds` the
/// age of the oldest, inserted 250 s old.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_rows_are_counted_up_to_the_cap_with_the_oldest_age() {
    let db = TestDb::new().await;
    db.exec(
        "CREATE TABLE job (id INT AUTO_INCREMENT PRIMARY KEY, created_at DATETIME(6) NOT NULL, state VARCHAR(10) NOT NULL DEFAULT 'waiting', KEY (state, created_at)) DEFAULT CHARSET=utf8mb4",
    )
    .await;
    let files = QueueFiles::new();
    QueueFile::new("backlog")
        .select("SELECT id, created_at FROM job WHERE state = 'waiting' ORDER BY created_at")
        // Polls once, finds nothing, and then waits an hour: the rows stay waiting.
        .poll_interval("1h")
        .set("stats_interval", "100ms")
        .set("waiting_cap", 10)
        .set("waiting_since", "created_at")
        .action_sql("DO :id")
        .on_success("UPDATE job SET state = 'done' WHERE id = :id")
        .write(&files);
    let (mut daemon, base) = start_with_metrics(&files, &db.url).await;
    let text = scrape_until(&base, r#"tableq_waiting{queue="backlog"}"#, 0.0).await;
    assert_eq!(
        sample(&text, r#"tableq_oldest_waiting_seconds{queue="backlog"}"#),
        Some(0.0)
    );
    scrape_until(
        &base,
        r#"tableq_claim_duration_seconds_count{queue="backlog"}"#,
        1.0,
    )
    .await;

    insert_aged(&db, 1..=7).await;
    let text = scrape_until(&base, r#"tableq_waiting{queue="backlog"}"#, 7.0).await;
    let oldest = sample(&text, r#"tableq_oldest_waiting_seconds{queue="backlog"}"#).unwrap();
    assert!((70.0..80.0).contains(&oldest), "70 s old, read {oldest}");

    insert_aged(&db, 8..=25).await;
    let text = scrape_until(&base, r#"tableq_waiting{queue="backlog"}"#, 10.0).await;
    let oldest = sample(&text, r#"tableq_oldest_waiting_seconds{queue="backlog"}"#).unwrap();
    assert!((250.0..260.0).contains(&oldest), "250 s old, read {oldest}");
    db.assert_count("SELECT COUNT(*) FROM job WHERE state = 'waiting'", 25)
        .await;
    assert_eq!(
        sample(
            &text,
            r#"tableq_items_total{queue="backlog",outcome="done"}"#
        ),
        Some(0.0)
    );
    daemon.terminate().await;
}

/// `tableq_queue_wait_seconds`: each claimed row's age by the database's clock —
/// three rows inserted 100 s old fall in the 300 s bucket, one 1000 s old (as a unix
/// time) in the 3600 s bucket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_wait_is_each_rows_age_at_its_claim() {
    let db = TestDb::new().await;
    db.exec(
        "CREATE TABLE job (id INT PRIMARY KEY, queued_at DATETIME NULL, queued_unix BIGINT NULL, state VARCHAR(10) NOT NULL DEFAULT 'waiting') DEFAULT CHARSET=utf8mb4;
         INSERT INTO job (id, queued_at) VALUES (1, NOW() - INTERVAL 100 SECOND), (2, NOW() - INTERVAL 100 SECOND), (3, NOW() - INTERVAL 100 SECOND);
         INSERT INTO job (id, queued_unix) VALUES (4, UNIX_TIMESTAMP() - 1000)",
    )
    .await;
    let files = QueueFiles::new();
    QueueFile::new("lagging")
        .select("SELECT id, COALESCE(queued_at, queued_unix) AS since FROM job WHERE state = 'waiting' ORDER BY id")
        .poll_interval("1h")
        .set("waiting_since", "since")
        .action_sql("DO :id")
        .on_success("UPDATE job SET state = 'done' WHERE id = :id")
        .write(&files);
    let (mut daemon, base) = start_with_metrics(&files, &db.url).await;
    let text = scrape_until(
        &base,
        r#"tableq_queue_wait_seconds_count{queue="lagging"}"#,
        4.0,
    )
    .await;
    let bucket = |le: &str| {
        sample(
            &text,
            &format!(r#"tableq_queue_wait_seconds_bucket{{le="{le}",queue="lagging"}}"#),
        )
        .unwrap_or_else(|| panic!("le={le}: {text}"))
    };
    assert_eq!(bucket("60.0"), 0.0, "{text}");
    assert_eq!(bucket("300.0"), 3.0, "{text}");
    assert_eq!(bucket("3600.0"), 4.0, "{text}");
    let sum = sample(&text, r#"tableq_queue_wait_seconds_sum{queue="lagging"}"#).unwrap();
    assert!(
        (1300.0..1340.0).contains(&sum),
        "3 × 100 s + 1000 s, read {sum}"
    );
    daemon.terminate().await;
}

/// A shutdown whose timeout passes mid-batch rolls the batch back: its 3 items
/// count as rolled back, none as done, failed or returned, and the `queue stopped`
/// line says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_rolled_back_at_the_shutdown_timeout_are_counted() {
    let logs = support::logs::capture();
    let db = TestDb::new().await;
    support::job_table(&db, &[1, 2, 3]).await;
    let files = QueueFiles::new();
    let file = QueueFile::new("slow_at_shutdown")
        .select("SELECT id FROM job WHERE state = 'waiting' ORDER BY id")
        .batch(3)
        .action_command(&["sleep", "60"])
        .on_success("UPDATE job SET state = 'done' WHERE id = :id")
        .write(&files);
    let monitor = std::sync::Arc::new(tableq::telemetry::stats::monitor::Monitor::default());
    let options = tableq::RunOptions {
        database_url: Some(db.url.clone()),
        shutdown_timeout: Duration::from_millis(500),
        monitor: monitor.clone(),
        ..tableq::RunOptions::default()
    };
    let engine = Engine::start_with(load(&[file]), options);
    let stats = || monitor.watched().into_iter().next().map(|(_, stats)| stats);
    eventually(
        "the worker is busy with the batch",
        Duration::from_secs(30),
        || async { stats().is_some_and(|s| s.observed.busy_workers() == 1) },
    )
    .await;
    let summary = engine.stop().await;
    let stats = stats().unwrap();
    assert_eq!(stats.observed.rolled_back(), 3);
    assert_eq!(stats.observed.busy_workers(), 0);
    let counts = summary.counts("slow_at_shutdown").unwrap();
    assert_eq!((counts.done, counts.failed, counts.returned), (0, 0, 0));
    assert_eq!(stats.observed.transaction.count(), 1);
    let stopped = logs.lines_of("slow_at_shutdown", "queue stopped");
    assert!(
        stopped.iter().any(|line| line.contains("rolled_back=3")),
        "{stopped:?}"
    );
    db.assert_count("SELECT COUNT(*) FROM job WHERE state = 'waiting'", 3)
        .await;
}

/// A database restart, counted by kind: the watcher's claim on the connection the
/// server closed is one `lost`; each failed reconnection is one `connect` (the log
/// says "cannot connect" once a minute, with the times since); nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_errors_are_counted_by_kind_across_a_restart() {
    // A server of this test's own: it is going to be stopped.
    let (server, db) = private_db(&[]).await;
    support::job_table(&db, &[1]).await;
    let files = QueueFiles::new();
    support::waiting_jobs("jobs")
        .poll_interval("200ms")
        .error_backoff("100ms")
        .set("stats_interval", "1h")
        .action_sql("DO :id")
        .write(&files);
    let (mut daemon, base) = start_with_metrics(&files, &db.url).await;
    scrape_until(
        &base,
        r#"tableq_items_total{queue="jobs",outcome="done"}"#,
        1.0,
    )
    .await;

    tokio::task::block_in_place(|| server.stop());
    scrape_until(
        &base,
        r#"tableq_db_errors_total{queue="jobs",kind="lost"}"#,
        1.0,
    )
    .await;
    let url = format!("{base}/metrics");
    eventually("a reconnection fails", Duration::from_secs(30), || async {
        sample(
            &get(&url).await.1,
            r#"tableq_db_errors_total{queue="jobs",kind="connect"}"#,
        )
        .is_some_and(|n| n >= 1.0)
    })
    .await;
    tokio::task::block_in_place(|| server.start_again());
    db.exec("INSERT INTO job (id) VALUES (2)").await;
    let text = scrape_until(
        &base,
        r#"tableq_items_total{queue="jobs",outcome="done"}"#,
        2.0,
    )
    .await;

    let value = |kind: &str| {
        let series = format!(r#"tableq_db_errors_total{{queue="jobs",kind="{kind}"}}"#);
        sample(&text, &series).unwrap_or_else(|| panic!("{series}: {text}"))
    };
    let refused = daemon
        .stderr()
        .lines()
        .filter(|line| line.contains("cannot connect to the database; retrying"))
        .count();
    assert_eq!(refused, 1, "said once a minute: {}", daemon.stderr());
    assert!(value("connect") >= 1.0, "{}", daemon.stderr());
    assert_eq!(value("lost"), 1.0);
    for kind in ["deadlock", "lock_wait", "deadline", "other"] {
        assert_eq!(value(kind), 0.0, "{kind}");
    }
    daemon.terminate().await;
    drop(db);
    drop(server);
}
