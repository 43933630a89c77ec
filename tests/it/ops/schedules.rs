//! `tableq schedules` lists each schedule queue as its row of `tableq_schedules`
//! says it is — before any copy opened it, and while the daemon runs it — and
//! `/metrics` exports the row's last success, next due time, runs and misses, and
//! the status page shows it.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::support::daemon::{run_to_end, tableq, Finished};
use crate::support::endpoint::{get, start_with_metrics};
use crate::support::{assert_has, eventually, QueueFile, QueueFiles, TestDb};

/// `tableq ARGS… FILE` against `db`, to its end.
async fn operate(db: &TestDb, file: &PathBuf, args: &[&str]) -> Finished {
    let mut cmd = tableq(args);
    cmd.arg(file).env("TABLEQ_DATABASE_URL", &db.url);
    run_to_end(cmd, Duration::from_secs(60)).await
}

/// A schedule queue `ticker`, every second, whose SQL action writes a tick.
fn ticker(files: &QueueFiles) -> PathBuf {
    QueueFile::new("ticker")
        .set("schedule", "every 1s")
        .set("stats_interval", "200ms")
        .action_sql("INSERT INTO tick (due) VALUES (:scheduled_at)")
        .write(files)
}

/// `tableq schedules --format json`, parsed: one object per schedule queue.
async fn listed(db: &TestDb, file: &PathBuf) -> Vec<Value> {
    let done = operate(db, file, &["schedules", "--format", "json"]).await;
    assert_eq!(done.code(), Some(0), "{}", done.stderr);
    let shown: Value = serde_json::from_str(&done.stdout).expect(&done.stdout);
    shown.as_array().expect("a JSON array").clone()
}

/// The value of the sample `name{queue="ticker"}` in a scrape.
fn sample(scrape: &str, name: &str) -> Option<f64> {
    let prefix = format!("{name}{{queue=\"ticker\"}} ");
    scrape
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|value| value.trim().parse().ok())
}

/// A schedule `every 1s` with an SQL action, run by the daemon: `tableq schedules`
/// shows its runs (two or more), its last run done and its next due time, as JSON
/// and as a table; `/metrics` exports its last success and its missed count; the
/// status page and `/status.json` show it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_shows_what_a_running_schedule_did_and_metrics_export_it() {
    let db = TestDb::new().await;
    db.exec("CREATE TABLE tick (id INT AUTO_INCREMENT PRIMARY KEY, due DATETIME(6) NOT NULL)")
        .await;
    let files = QueueFiles::new();
    let file = ticker(&files);
    let (mut daemon, base) = start_with_metrics(&files, &db.url).await;
    eventually("two ticks", Duration::from_secs(30), || async {
        db.count("SELECT COUNT(*) FROM tick").await >= 2
    })
    .await;

    let metrics = format!("{base}/metrics");
    eventually(
        "the schedule's metrics",
        Duration::from_secs(30),
        || async {
            let scrape = get(&metrics).await.1;
            sample(&scrape, "tableq_schedule_runs_total").is_some_and(|runs| runs >= 2.0)
        },
    )
    .await;
    let scrape = get(&metrics).await.1;
    let success = sample(&scrape, "tableq_schedule_last_success_timestamp_seconds");
    assert!(success.is_some_and(|at| at > 1.7e9), "{scrape}");
    assert!(
        sample(&scrape, "tableq_schedule_missed_total").is_some(),
        "{scrape}"
    );
    assert!(
        sample(&scrape, "tableq_schedule_next_due_timestamp_seconds")
            .is_some_and(|at| at >= success.unwrap_or_default()),
        "{scrape}"
    );

    let status: Value =
        serde_json::from_str(&get(&format!("{base}/status.json")).await.1).expect("status.json");
    let schedule = &status["queues"][0]["schedule"];
    assert_eq!(schedule["schedule"], "every 1s", "{status}");
    assert!(
        schedule["runs"].as_u64().is_some_and(|runs| runs >= 2),
        "{schedule}"
    );
    assert_has(&get(&base).await.1, "data-field=\"schedule\">every 1s · ");

    let shown = listed(&db, &file).await;
    daemon.terminate().await;
    let [ticker] = &shown[..] else {
        panic!("one schedule: {shown:?}");
    };
    assert_eq!(ticker["queue"], "ticker");
    assert_eq!(ticker["schedule"], "every 1s");
    assert!(
        ticker["runs"].as_u64().is_some_and(|runs| runs >= 2),
        "{ticker}"
    );
    assert_eq!(ticker["last_outcome"], "done", "{ticker}");
    let next = ticker["next_due"].as_str().expect("a next due time");
    let last = ticker["last_scheduled_at"].as_str().expect("a last run");
    assert!(next.ends_with('Z') && next > last, "{ticker}");

    let table = operate(&db, &file, &["schedules"]).await;
    assert_eq!(table.code(), Some(0), "{}", table.stderr);
    let lines: Vec<&str> = table.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", table.stdout);
    assert!(
        lines[0].starts_with("QUEUE   SCHEDULE  STATE"),
        "{}",
        lines[0]
    );
    assert!(lines[1].starts_with("ticker  every 1s"), "{}", lines[1]);
    assert_has(lines[1], ", started +");
}

/// Before any copy opened it, a schedule is listed as not started; files without a
/// schedule queue are a usage error (exit 2) that says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_says_not_started_and_no_schedule_here() {
    let db = TestDb::new().await;
    let files = QueueFiles::new();
    let file = ticker(&files);
    let shown = listed(&db, &file).await;
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert_eq!(shown[0]["state"], "not_started");
    assert_eq!(shown[0]["next_due"], Value::Null);

    let other = QueueFiles::new();
    let plain = QueueFile::new("plain")
        .select("SELECT 1 AS id FROM DUAL WHERE FALSE")
        .action_sql("DO :id")
        .write(&other);
    let done = operate(&db, &plain, &["schedules"]).await;
    assert_eq!(done.code(), Some(2), "{}", done.stderr);
    assert_has(&done.stderr, "no schedule queue here (queue plain)");
}
