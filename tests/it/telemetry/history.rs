//! The console's memory in the database: the history survives a restart (its
//! minutes summed over copies, the rows that gave up searchable by their error
//! and their key, each failed attempt listed), every copy is listed and one killed
//! with -9 is shown gone, and a history that cannot be written holds no queue up.

use std::time::Duration;

use serde_json::Value;

use super::console_api::TOKEN;
use crate::support::daemon::{tableq, Daemon};
use crate::support::endpoint::{get, metrics_address};
use crate::support::scrape::sample;
use crate::support::{eventually, QueueFile, QueueFiles, TestDb};

/// 100 jobs; those whose id ends in 0 fail with an error naming them
/// (`bounced by mx-30`), twice, then give up.
async fn jobs(db: &TestDb) {
    db.exec(
        "CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting',
           attempts INT NOT NULL DEFAULT 0, KEY (state));
         CREATE PROCEDURE work(IN job_id INT) BEGIN
           IF job_id % 10 = 0 THEN
             SET @why = CONCAT('bounced by mx-', job_id);
             SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = @why;
           END IF;
         END",
    )
    .await;
    db.fill("job", "id", 100, |i| i.to_string()).await;
}

fn queue(files: &QueueFiles) {
    let failed = toml::Table::from_iter([
        (
            "select".to_string(),
            "SELECT id, attempts FROM job WHERE state = 'failed' ORDER BY id DESC".into(),
        ),
        (
            "retry".to_string(),
            "UPDATE job SET state = 'waiting', attempts = 0 WHERE id = :id AND state = 'failed'"
                .into(),
        ),
    ]);
    QueueFile::new("mail")
        .select("SELECT id FROM job WHERE state = 'waiting' ORDER BY id")
        .poll_interval("200ms")
        .action_sql("CALL work(:id)")
        .on_success("UPDATE job SET state = 'done' WHERE id = :id")
        .on_failure(
            "UPDATE job SET state = IF(attempts + 1 >= 2, 'failed', 'waiting'), \
             attempts = attempts + 1 WHERE id = :id",
        )
        .set("failed", failed)
        .write(files);
}

/// `tableq run` with the console (its token in a file), the history written
/// every second; the daemon and its base URL.
async fn start(files: &QueueFiles, url: &str, history: &[(&str, &str)]) -> (Daemon, String) {
    let token = files.path().join("console.token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let mut cmd = tableq(&["run", "--metrics-addr", "127.0.0.1:0"]);
    cmd.arg(files.path().join("mail.toml"))
        .env("TABLEQ_CONSOLE_TOKEN_FILE", &token)
        .env("TABLEQ_DATABASE_URL", url)
        .env("TABLEQ_HISTORY_EVERY", "1s")
        .env("TABLEQ_LOG_FORMAT", "json");
    for (name, value) in history {
        cmd.env(name, value);
    }
    let daemon = Daemon::spawn(cmd);
    let base = format!("http://{}", metrics_address(&daemon).await);
    (daemon, base)
}

/// `GET url` with the console's token: its status and JSON.
async fn api(url: &str) -> (u16, Value) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let response = reqwest::Client::new()
        .get(url)
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("the console answers");
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).expect(&text))
}

/// The sums of `field` over the last hour's buckets.
async fn summed(base: &str, field: &str) -> u64 {
    let (status, body) = api(&format!("{base}/api/queues/mail/history?since=1h")).await;
    assert_eq!(status, 200, "{body}");
    let buckets = body["buckets"].as_array().expect("buckets");
    assert_eq!(buckets.len(), 60, "an hour, minute by minute");
    buckets.iter().map(|b| b[field].as_u64().unwrap()).sum()
}

async fn settled(db: &TestDb) {
    db.until_count(
        "SELECT COUNT(*) FROM job WHERE state IN ('done', 'failed')",
        100,
        60,
    )
    .await;
}

/// 100 rows, 10 failing twice then giving up: after a restart, the history sums
/// to 90 done and 10 gave up, the rows are found by their error and their key,
/// and a row's two attempts are listed with their errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_history_survives_a_restart() {
    let db = TestDb::new().await;
    jobs(&db).await;
    let files = QueueFiles::new();
    queue(&files);
    let (mut first, _) = start(&files, &db.url, &[]).await;
    settled(&db).await;
    first.terminate().await;
    let (mut second, base) = start(&files, &db.url, &[]).await;
    assert_eq!(summed(&base, "done").await, 90);
    assert_eq!(summed(&base, "gave_up").await, 10);
    assert_eq!(
        summed(&base, "failed").await,
        20,
        "each of 10 rows failed twice"
    );
    let (status, found) = api(&format!("{base}/api/queues/mail/failed?q=mx-30")).await;
    assert_eq!(status, 200, "{found}");
    assert_eq!(found["keys"], serde_json::json!(["30"]), "{found}");
    assert_eq!(
        found["errors"]["30"]
            .as_str()
            .map(|e| e.contains("bounced by mx-30")),
        Some(true)
    );
    let (_, by_key) = api(&format!("{base}/api/queues/mail/failed?q=70")).await;
    assert_eq!(by_key["keys"], serde_json::json!(["70"]), "{by_key}");
    let (_, all) = api(&format!("{base}/api/queues/mail/failed?limit=4")).await;
    assert_eq!(
        all["keys"],
        serde_json::json!(["100", "90", "80", "70"]),
        "{all}"
    );
    let (_, next) = api(&format!("{base}/api/queues/mail/failed?limit=4&after=70")).await;
    assert_eq!(next["keys"][0], "60", "{next}");
    let (_, attempts) = api(&format!("{base}/api/queues/mail/attempts?key=30")).await;
    let attempts = attempts["attempts"].as_array().expect("attempts").clone();
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    for (n, attempt) in attempts.iter().enumerate() {
        assert_eq!(attempt["attempt"], n as u64 + 1, "{attempt}");
        assert!(
            attempt["error"]
                .as_str()
                .unwrap()
                .contains("bounced by mx-30"),
            "{attempt}"
        );
    }
    assert_eq!(
        (
            attempts[0]["gave_up"].as_bool(),
            attempts[1]["gave_up"].as_bool()
        ),
        (Some(false), Some(true))
    );
    second.terminate().await;
}

/// Row data needs the token; the aggregates are open without a read token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_need_the_token_and_aggregates_are_open() {
    let db = TestDb::new().await;
    jobs(&db).await;
    let files = QueueFiles::new();
    queue(&files);
    let (mut daemon, base) = start(&files, &db.url, &[]).await;
    let (status, _) = get(&format!("{base}/api/queues/mail/failed")).await;
    assert_eq!(status, 401);
    let (status, _) = get(&format!("{base}/api/queues/mail/attempts?key=1")).await;
    assert_eq!(status, 401);
    let (status, body) = get(&format!("{base}/api/queues/mail/history?since=24h")).await;
    assert_eq!(status, 200, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        body["buckets"].as_array().map(Vec::len),
        Some(288),
        "a day in 5 minutes"
    );
    let (status, _) = get(&format!("{base}/api/queues/mail/history?since=2h")).await;
    assert_eq!(status, 400);
    let (status, _) = get(&format!("{base}/api/copies")).await;
    assert_eq!(status, 200);
    daemon.terminate().await;
}

/// `--history off`: no table is created, the queue drains, the API has nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_off_writes_nothing() {
    let db = TestDb::new().await;
    jobs(&db).await;
    let files = QueueFiles::new();
    queue(&files);
    let (mut daemon, base) = start(&files, &db.url, &[("TABLEQ_HISTORY", "off")]).await;
    settled(&db).await;
    assert_eq!(summed(&base, "done").await, 0);
    let (_, copies) = api(&format!("{base}/api/copies")).await;
    assert_eq!(copies["copies"], serde_json::json!([]));
    daemon.terminate().await;
    let tables = "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() \
                  AND TABLE_NAME LIKE 'tableq\\_%'";
    db.assert_count(tables, 0).await;
}

/// Both copies are listed; one killed with -9 is shown gone within three
/// heartbeats, the other is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_copy_is_listed_and_a_killed_one_is_gone() {
    let db = TestDb::new().await;
    jobs(&db).await;
    let files = QueueFiles::new();
    queue(&files);
    let (mut one, base) = start(&files, &db.url, &[]).await;
    let (two, _) = start(&files, &db.url, &[]).await;
    let copies = |base: String| async move {
        let (_, body) = api(&format!("{base}/api/copies")).await;
        body["copies"].as_array().cloned().unwrap_or_default()
    };
    eventually(
        "both copies are listed",
        Duration::from_secs(30),
        || async { copies(base.clone()).await.len() == 2 },
    )
    .await;
    let listed = copies(base.clone()).await;
    assert!(
        listed
            .iter()
            .all(|c| c["queues"] == serde_json::json!(["mail"])),
        "{listed:?}"
    );
    // Each copy's console, at the address it bound (port 0 asked for any).
    let first = listed
        .iter()
        .find(|c| c["pid"] == one.pid())
        .expect("the first copy");
    assert_eq!(first["console"].as_str(), Some(base.as_str()), "{listed:?}");
    two.signal(libc::SIGKILL);
    let gone = |pid: i32| {
        let base = base.clone();
        async move {
            let listed = copies(base).await;
            listed.iter().any(|c| c["pid"] == pid && c["gone"] == true)
                && listed.iter().any(|c| c["pid"] != pid && c["gone"] == false)
        }
    };
    eventually(
        "the killed copy is shown gone",
        Duration::from_secs(45),
        || gone(two.pid()),
    )
    .await;
    one.terminate().await;
}

/// A history table that cannot be written: the queue drains all the same, one
/// WARN says so, and the counter rises.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unwritable_history_holds_no_queue_up() {
    let db = TestDb::new().await;
    jobs(&db).await;
    db.exec("CREATE TABLE tableq_attempts (id INT); CREATE TABLE tableq_history (id INT)")
        .await;
    let files = QueueFiles::new();
    queue(&files);
    let (mut daemon, base) = start(&files, &db.url, &[]).await;
    settled(&db).await;
    eventually(
        "the errors are counted",
        Duration::from_secs(20),
        || async {
            let (_, metrics) = get(&format!("{base}/metrics")).await;
            sample(&metrics, "tableq_history_write_errors_total").is_some_and(|n| n >= 20.0)
        },
    )
    .await;
    let warned = |table: &str| {
        daemon
            .stderr()
            .lines()
            .filter(|l| l.contains("cannot write the history") && l.contains(table))
            .count()
    };
    assert_eq!(warned("tableq_attempts"), 1, "{}", daemon.stderr());
    assert_eq!(warned("tableq_history"), 1, "{}", daemon.stderr());
    daemon.terminate().await;
}
