//! `[alerts]`: a breach is told once across every copy of tableq, and once more
//! when it clears — three real daemons on one database, a real receiver on
//! loopback — and a section written wrong is refused with what would be right.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::support::check::{assert_report, check_offline};
use crate::support::daemon::{run_to_end, tableq, Daemon};
use crate::support::web::{Recorded, Reply, WebServer};
use crate::support::{eventually, QueueFiles, TestDb};

/// What a copy logs (at debug) after each look at the queue's alerts.
const LOOKED: &str = "alerts looked at";

/// A job table whose rows have waited a minute already, and a queue of it that
/// alerts `receiver` when its oldest row has waited more than a second.
async fn aging_queue(db: &TestDb, files: &QueueFiles, receiver: &WebServer) -> PathBuf {
    db.exec(
        "CREATE TABLE job (id INT AUTO_INCREMENT PRIMARY KEY, state VARCHAR(16) NOT NULL, \
         created_at DATETIME(6) NOT NULL, KEY (state, id))",
    )
    .await;
    db.exec(
        "INSERT INTO job (state, created_at) SELECT 'waiting', NOW(6) - INTERVAL 1 MINUTE \
         FROM seq_1_to_5",
    )
    .await;
    let contents = format!(
        r#"name = "aging"
select = "SELECT id, created_at FROM job WHERE state = 'waiting' ORDER BY id"
waiting_since = "created_at"
poll_interval = "1s"

[action]
type = "sql"
sql = "DO :id"

[on_success]
sql = "UPDATE job SET state = 'done' WHERE id = :id"

[alerts]
webhook = "{}"
oldest_waiting = "1s"
allow_private_networks = true
"#,
        receiver.url("/alerts")
    );
    files.write("aging.toml", &contents)
}

/// `tableq pause|resume FILE --queue aging`, which must succeed.
async fn operate(db: &TestDb, file: &Path, what: &str) {
    let mut cmd = tableq(&[what, "--queue", "aging"]);
    cmd.arg(file).env("TABLEQ_DATABASE_URL", &db.url);
    let done = run_to_end(cmd, Duration::from_secs(60)).await;
    assert_eq!(done.code(), Some(0), "{}", done.stderr);
}

/// A copy of tableq that says each look at its alerts.
fn copy(file: &Path, db: &TestDb) -> Daemon {
    let mut cmd = tableq(&["run"]);
    cmd.arg(file)
        .env("TABLEQ_DATABASE_URL", &db.url)
        .env("TABLEQ_LOG", "info,tableq::engine::alerts=debug");
    Daemon::spawn(cmd)
}

/// Waits until every copy has looked twice more: any second message would be out.
async fn every_copy_looks_twice_more(copies: &[Daemon]) {
    for one in copies {
        let now = one.stderr().matches(LOOKED).count();
        one.wait_for_log_times(LOOKED, now + 2, Duration::from_secs(30))
            .await;
    }
}

/// Waits for the receiver's `n`th message.
async fn messages(receiver: &WebServer, n: usize) -> Vec<Recorded> {
    eventually("the alert's message", Duration::from_secs(30), || async {
        receiver.requests().len() >= n
    })
    .await;
    receiver.requests()
}

/// Three copies of a paused queue whose rows wait too long: the receiver gets one
/// "firing" message; once resumed and drained, one "resolved" — never two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_copies_tell_a_breach_once_and_its_end_once() {
    let db = TestDb::new().await;
    let receiver = WebServer::start(|_| Reply::status(204)).await;
    let files = QueueFiles::new();
    let file = aging_queue(&db, &files, &receiver).await;
    operate(&db, &file, "pause").await;
    let mut copies: Vec<Daemon> = (0..3).map(|_| copy(&file, &db)).collect();
    for one in &copies {
        one.wait_for_log("queue started", Duration::from_secs(30))
            .await;
    }
    let firing = messages(&receiver, 1).await[0].json();
    every_copy_looks_twice_more(&copies).await;
    assert_eq!(receiver.requests().len(), 1, "{:?}", receiver.requests());
    assert_eq!(firing["queue"], "aging");
    assert_eq!(firing["alert"], "oldest_waiting");
    assert_eq!(firing["state"], "firing");
    assert_eq!(firing["limit"], 1.0);
    assert!(firing["value"].as_f64().unwrap() >= 60.0, "{firing}");
    assert!(firing["at"].as_str().unwrap().ends_with('Z'), "{firing}");

    operate(&db, &file, "resume").await;
    let resolved = messages(&receiver, 2).await[1].json();
    every_copy_looks_twice_more(&copies).await;
    assert_eq!(receiver.requests().len(), 2, "{:?}", receiver.requests());
    assert_eq!(resolved["state"], "resolved");
    assert_eq!(resolved["alert"], "oldest_waiting");
    assert!(resolved["value"].as_f64().unwrap() <= 1.0, "{resolved}");
    let sent: u64 = db
        .scalar(
            "SELECT COUNT(*) FROM tableq_alerts WHERE queue = 'aging' AND sent = 1 AND flips = 2",
        )
        .await;
    assert_eq!(sent, 1, "the row says both messages went out");
    for one in &mut copies {
        one.terminate().await;
    }
}

/// The history table as `run` creates it (`db::history::tables`), with two copies'
/// failures in the last complete minute: 3 each.
async fn six_failures_last_minute(db: &TestDb) {
    db.exec(
        "CREATE TABLE IF NOT EXISTS tableq_history (queue VARCHAR(191) NOT NULL, \
         minute_at DATETIME NOT NULL, copy VARCHAR(191) NOT NULL, \
         done INT UNSIGNED NOT NULL DEFAULT 0, failed INT UNSIGNED NOT NULL DEFAULT 0, \
         gave_up INT UNSIGNED NOT NULL DEFAULT 0, returned INT UNSIGNED NOT NULL DEFAULT 0, \
         held_back INT UNSIGNED NOT NULL DEFAULT 0, action_sketch MEDIUMTEXT NULL, \
         backlog INT UNSIGNED NULL, lag_s DOUBLE NULL, PRIMARY KEY (queue, minute_at, copy))",
    )
    .await;
    db.exec(
        "INSERT INTO tableq_history (queue, minute_at, copy, failed) SELECT 'giving', \
         DATE_FORMAT(UTC_TIMESTAMP() - INTERVAL 1 MINUTE, '%Y-%m-%d %H:%i:00'), \
         CONCAT('host-', seq, ':1:1'), 3 FROM seq_1_to_2",
    )
    .await;
}

/// Two copies of a queue whose rows gave up and whose copies failed 6 items last
/// minute, and a receiver that fails the first message: each alert is delivered
/// once — the failed one again by a copy, after its wait — and no more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_failed_is_sent_again_and_each_alert_delivered_once() {
    let db = TestDb::new().await;
    let first = std::sync::atomic::AtomicBool::new(true);
    let receiver = WebServer::start(move |_| match first.swap(false, Ordering::SeqCst) {
        true => Reply::status(500),
        false => Reply::status(200),
    })
    .await;
    db.exec("CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(16) NOT NULL)")
        .await;
    db.exec("INSERT INTO job VALUES (1, 'failed'), (2, 'failed')")
        .await;
    six_failures_last_minute(&db).await;
    let files = QueueFiles::new();
    let contents = format!(
        "name = \"giving\"\nselect = \"SELECT id FROM job WHERE state = 'waiting' ORDER BY id\"\n\
         [action]\ntype = \"sql\"\nsql = \"DO :id\"\n[failed]\n\
         select = \"SELECT id FROM job WHERE state = 'failed' ORDER BY id DESC\"\n\
         [alerts]\nwebhook = \"{}\"\nfailed_per_minute = 4\ngave_up = true\n\
         allow_private_networks = true\n",
        receiver.url("/alerts")
    );
    let file = files.write("giving.toml", &contents);
    let mut copies: Vec<Daemon> = (0..2).map(|_| copy(&file, &db)).collect();
    let requests = messages(&receiver, 3).await;
    every_copy_looks_twice_more(&copies).await;
    assert_eq!(receiver.requests().len(), 3, "{:?}", receiver.requests());
    let delivered: Vec<serde_json::Value> = requests[1..].iter().map(Recorded::json).collect();
    let of = |alert: &str| delivered.iter().find(|m| m["alert"] == alert).cloned();
    let failures = of("failed_per_minute").expect("failed_per_minute delivered");
    assert_eq!(
        (failures["value"].as_f64(), failures["limit"].as_f64()),
        (Some(6.0), Some(4.0))
    );
    let gave_up = of("gave_up").expect("gave_up delivered");
    assert_eq!(
        (gave_up["state"].as_str(), gave_up["value"].as_f64()),
        (Some("firing"), Some(2.0))
    );
    let retried: u64 = db
        .scalar("SELECT COUNT(*) FROM tableq_alerts WHERE sent = 1 AND send_attempts = 1")
        .await;
    assert_eq!(retried, 1, "one alert was sent on its second try");
    for one in &mut copies {
        one.terminate().await;
    }
}

/// A queue file with `alerts` as its `[alerts]` section (and `extra` at the top).
fn with_alerts(extra: &str, alerts: &str) -> String {
    format!(
        "select = \"SELECT id, created_at FROM job WHERE state = 'waiting' ORDER BY id\"\n{extra}\
         [action]\ntype = \"sql\"\nsql = \"DO 1\"\n\n[alerts]\n{alerts}"
    )
}

/// Checks `contents` offline and expects exactly `errors` (each after the path).
async fn refused(contents: &str, errors: &[&str]) {
    let (done, shown) = check_offline(contents).await;
    let findings: Vec<String> = errors.iter().map(|e| format!("{shown}:{e}")).collect();
    let counts = format!(
        ": {} error{}, 0 warnings",
        errors.len(),
        if errors.len() == 1 { "" } else { "s" }
    );
    assert_report(&done, &findings, &counts, 1);
}

/// `[alerts]` without a webhook says, at the section, that the key is missing.
#[tokio::test]
async fn alerts_without_a_webhook_are_refused() {
    refused(
        &with_alerts(
            "waiting_since = \"created_at\"\n",
            "oldest_waiting = \"5m\"\n",
        ),
        &[
            "7: queue jobs: error: `alerts`: missing field `webhook`: the URL alerts are posted \
           to, e.g. webhook = \"https://hooks.slack.com/services/…\"",
        ],
    )
    .await;
}

/// A loopback webhook needs `allow_private_networks = true`; the message names the
/// host, not the URL (whose path may be a key).
#[tokio::test]
async fn a_private_webhook_is_refused_unless_allowed() {
    let alerts = "webhook = \"http://127.0.0.1:9/hooks/T0SECRET\"\noldest_waiting = \"5m\"\n";
    refused(
        &with_alerts("waiting_since = \"created_at\"\n", alerts),
        &[
            "8: queue jobs: error: `alerts.webhook` points at 127.0.0.1, a loopback or private \
           address: alerts go to public addresses only, unless the section sets \
           `allow_private_networks = true`",
        ],
    )
    .await;
    let allowed = format!("{alerts}allow_private_networks = true\n");
    let (done, _) = check_offline(&with_alerts("waiting_since = \"created_at\"\n", &allowed)).await;
    assert_eq!(done.code(), Some(0), "{}", done.stdout);
}

/// A format that is not json or slack, a condition missing what it needs, and no
/// condition at all are each said at their line.
#[tokio::test]
async fn a_wrong_format_and_conditions_are_refused() {
    let webhook = "webhook = \"https://hooks.example.com/in\"\n";
    refused(
        &with_alerts("", &format!("{webhook}format = \"xml\"\ngave_up = true\n")),
        &[
            "8: queue jobs: error: `alerts.format` = \"xml\" is not a format: use \"json\" or \
             \"slack\"",
            "9: queue jobs: error: `alerts.gave_up` needs a `[failed]` table: its select names \
             the rows that gave up",
        ],
    )
    .await;
    refused(
        &with_alerts("", &format!("{webhook}oldest_waiting = \"5m\"\n")),
        &[
            "8: queue jobs: error: `alerts.oldest_waiting` needs `waiting_since`: name the \
           select's column that holds when a row started waiting, e.g. waiting_since = \
           \"created_at\"",
        ],
    )
    .await;
    refused(
        &with_alerts("", webhook),
        &[
            "6: queue jobs: error: `[alerts]` names no condition: set `oldest_waiting` (e.g. \
           \"5m\"), `failed_per_minute` (e.g. 10) or `gave_up = true`",
        ],
    )
    .await;
}
