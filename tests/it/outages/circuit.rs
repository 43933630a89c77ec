//! The circuit breaker: an outage downstream costs a queue's rows (almost) no
//! attempts, and the queue delivers everything once the receiver is back.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::check::{assert_report, check_offline, GOOD};
use crate::support::endpoint::{get, start_with_metrics};
use crate::support::logs;
use crate::support::queue_file::table as table_of;
use crate::support::web::{Reply, WebServer};
use crate::support::{eventually, load, Engine, QueueFile, QueueFiles, TestDb};

const ROWS: usize = 1000;
const OUTAGE: Duration = Duration::from_secs(30);
const MIN_ITEMS: usize = 10;
const MAX_COOL_DOWN: Duration = Duration::from_secs(8);

/// A webhook table with a retry budget of 8 attempts, as `config/webhook.toml` keeps.
async fn hook_table(db: &TestDb, table: &str) {
    db.exec(&format!(
        "CREATE TABLE {table} (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting',
           attempts INT NOT NULL DEFAULT 0, next_at DATETIME(3) NOT NULL DEFAULT '2000-01-01',
           INDEX (state, next_at, id)) DEFAULT CHARSET=utf8mb4"
    ))
    .await;
    db.fill(table, "id", ROWS, |i| i.to_string()).await;
}

/// The queue on [`hook_table`]'s `table`, with `[circuit]` as given; the caller sets
/// the action.
fn hook_queue(table: &str, circuit: toml::Value) -> QueueFile {
    QueueFile::new(table)
        .workers(4)
        .batch(100)
        .error_backoff("500ms")
        .set("circuit", circuit)
        .select(&format!(
            "SELECT id FROM {table} WHERE state = 'waiting' AND next_at <= NOW(3) ORDER BY next_at, id"
        ))
        .on_success(format!("UPDATE {table} SET state = 'done' WHERE id = :id"))
        .on_failure(format!(
            "UPDATE {table} SET attempts = attempts + 1, next_at = NOW(3) + INTERVAL 1 SECOND,
               state = IF(attempts >= 8, 'failed', 'waiting') WHERE id = :id"
        ))
}

fn webhook(queue: QueueFile, url: &str) -> QueueFile {
    queue
        .action_http(url)
        .action_set("allow_private_networks", true)
        .action_set("timeout", "2s")
}

/// A receiver that answers 503 for 30 s, then recovers. With the breaker,
/// the outage costs at most `min_items` attempts plus one per probe, no row fails
/// for good, and everything is delivered within two cool-downs of the recovery;
/// the same queue without it spends an attempt on every row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_downstream_spends_no_attempts_with_the_breaker() {
    let logs = logs::capture();
    let db = TestDb::new().await;
    hook_table(&db, "guarded").await;
    hook_table(&db, "unguarded").await;
    let down = Arc::new(AtomicBool::new(true));
    let answers = down.clone();
    let receiver = WebServer::start(move |_| match answers.load(Ordering::SeqCst) {
        true => Reply::status(503),
        false => Reply::status(204),
    })
    .await;
    let url = receiver.url("/hook");
    let files = QueueFiles::new();
    let breaker = table_of(&[
        ("min_items", toml::Value::Integer(MIN_ITEMS as i64)),
        ("cool_down", "2s".into()),
        ("max_cool_down", "8s".into()),
    ]);
    let guarded = webhook(hook_queue("guarded", breaker), &url).write(&files);
    let no_breaker = table_of(&[("enabled", false.into())]);
    let unguarded = webhook(hook_queue("unguarded", no_breaker), &url).write(&files);
    let engine = Engine::start(load(&[guarded, unguarded]), &db.url);

    tokio::time::sleep(OUTAGE).await;
    let attempts_in_outage: u64 = db.scalar("SELECT SUM(attempts) FROM guarded").await;
    let probes = logs.lines_of("guarded", "tried as a probe").len() as u64;
    down.store(false, Ordering::SeqCst);
    let recovered = Instant::now();

    let untouched_unguarded = db
        .count("SELECT COUNT(*) FROM unguarded WHERE attempts = 0")
        .await;
    assert_eq!(
        untouched_unguarded, 0,
        "without the breaker every row spends attempts on the outage"
    );
    assert!(probes >= 2, "probes during a 30 s outage: {probes}");
    assert!(
        attempts_in_outage <= MIN_ITEMS as u64 + probes,
        "the outage cost {attempts_in_outage} attempts: more than {MIN_ITEMS} + {probes} probes"
    );
    eventually(
        "every guarded row delivered within two cool-downs of the recovery",
        2 * MAX_COOL_DOWN,
        || async {
            db.count("SELECT COUNT(*) FROM guarded WHERE state = 'done'")
                .await
                == ROWS as u64
        },
    )
    .await;
    let drained_in = recovered.elapsed();
    engine.stop().await;
    db.assert_count("SELECT COUNT(*) FROM guarded WHERE state = 'failed'", 0)
        .await;
    let unguarded_attempts: u64 = db.scalar("SELECT SUM(attempts) FROM unguarded").await;
    let unguarded_failed = db
        .count("SELECT COUNT(*) FROM unguarded WHERE state = 'failed'")
        .await;
    eprintln!(
        "with the breaker: {attempts_in_outage} attempts in the outage ({probes} probes), all {ROWS} \
         delivered {drained_in:.1?} after the recovery; without: {unguarded_attempts} attempts, \
         {unguarded_failed} rows failed for good"
    );
}

/// The status page says since when `tempfail`'s circuit is open, why, and when the
/// next probe is due.
async fn the_status_page_says_when_the_next_probe_is_due(base: &str) {
    let json: serde_json::Value =
        serde_json::from_str(&get(&format!("{base}/status.json")).await.1).unwrap();
    let tempfail = json["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == "tempfail")
        .unwrap();
    let open = &tempfail["circuit_open"];
    let (since, probe) = (open["since_at"].as_u64(), open["next_probe_at"].as_u64());
    assert!(
        open["reason"]
            .as_str()
            .unwrap()
            .contains("3 of the last 3 items failed downstream"),
        "{open}"
    );
    // A cool-down of 10 minutes, jittered.
    assert!(probe > since.map(|s| s + 60), "{open}");
    let page = get(&format!("{base}/")).await.1;
    assert!(
        page.contains("data-field=\"circuit_open\">since "),
        "{page}"
    );
    assert!(page.contains("; next probe in "), "{page}");
}

/// A command's transient exit code (75, EX_TEMPFAIL, by default) opens the circuit:
/// `/readyz` stays 200 and says so, the metrics show it, and only `min_items` rows
/// spent an attempt; exit code 1 is the item's own failure and opens nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transient_exit_code_opens_the_circuit_and_readyz_says_so() {
    let db = TestDb::new().await;
    for table in ["tempfail", "broken"] {
        hook_table(&db, table).await;
    }
    let files = QueueFiles::new();
    for (table, code) in [("tempfail", "75"), ("broken", "1")] {
        let breaker = table_of(&[
            ("min_items", toml::Value::Integer(3)),
            ("cool_down", "10m".into()),
            ("max_cool_down", "10m".into()),
        ]);
        hook_queue(table, breaker)
            .action_command(&["/bin/sh", "-c", &format!("exit {code}")])
            .write(&files);
    }
    let (mut daemon, base) = start_with_metrics(&files, &db.url).await;
    daemon
        .wait_for_log("the circuit is open", Duration::from_secs(30))
        .await;
    // The broken queue records failures well past min_items.
    db.until_count_at_least("SELECT COUNT(*) FROM broken WHERE attempts > 0", 200, 60)
        .await;
    let (status, ready) = get(&format!("{base}/readyz")).await;
    assert_eq!(status, 200, "{ready}");
    assert!(ready.contains("queue tempfail: circuit open"), "{ready}");
    assert!(!ready.contains("queue broken: circuit"), "{ready}");
    let (_, metrics) = get(&format!("{base}/metrics")).await;
    for line in [
        "tableq_circuit_state{queue=\"tempfail\",state=\"open\"} 1",
        "tableq_circuit_state{queue=\"tempfail\",state=\"closed\"} 0",
        "tableq_circuit_state{queue=\"broken\",state=\"closed\"} 1",
        "tableq_circuit_state{queue=\"broken\",state=\"open\"} 0",
        "tableq_circuit_transitions_total{queue=\"tempfail\",to=\"open\"} 1",
        "tableq_circuit_transitions_total{queue=\"broken\",to=\"open\"} 0",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "no {line} in\n{metrics}"
        );
    }
    the_status_page_says_when_the_next_probe_is_due(&base).await;
    let spent: u64 = db.scalar("SELECT SUM(attempts) FROM tempfail").await;
    assert_eq!(
        spent, 3,
        "only the items that opened the circuit spent an attempt"
    );
    daemon.terminate().await;
}

/// `[circuit]` is checked like every other key: on an SQL queue, and out of range.
#[tokio::test]
async fn circuit_mistakes_are_named() {
    let sql_queue = format!("{GOOD}[circuit]\nmin_items = 5\n");
    let (done, shown) = check_offline(&sql_queue).await;
    assert_report(
        &done,
        &[format!(
            "{shown}:9: queue jobs: error: `[circuit]` is for actions that reach outside the \
             database: a `type = \"sql\"` action runs in it, with nothing downstream to break; \
             remove the table"
        )],
        "offline: 1 error, 0 warnings",
        1,
    );
    let command = GOOD.replace(
        "type = \"sql\"\nsql = \"DO :id\"",
        "type = \"command\"\ncommand = [\"/bin/true\"]",
    );
    let (done, shown) = check_offline(&format!(
        "{command}[circuit]\nfailure_ratio = 1.5\ncool_down = \"10m\"\n"
    ))
    .await;
    assert_report(
        &done,
        &[
            format!(
                "{shown}:10: queue jobs: error: `circuit.failure_ratio` = 1.5 is out of range: a \
                 share above 0 and below 1, e.g. 0.5 (the circuit opens when more than half the \
                 items failed downstream)"
            ),
            format!(
                "{shown}:11: queue jobs: error: `circuit.cool_down` = 10m is longer than \
                 `circuit.max_cool_down` = 5m: the cool-down doubles up to max_cool_down, so it \
                 must start below it"
            ),
        ],
        "offline: 2 errors, 0 warnings",
        1,
    );
}
