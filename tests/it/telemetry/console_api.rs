//! The console's API: without a token file every action answers 403 and changes
//! nothing; with one, a request without the token or with a wrong one answers 401
//! (a wrong one after a pause) and changes nothing, and the bearer of the token
//! pauses, resumes, retries and discards — through the queue file's `[failed]`
//! SQL, a queue without it answered 409 — and looks rows up, each action logged.

use std::time::{Duration, Instant};

use crate::support::daemon::{tableq, Daemon};
use crate::support::endpoint::{metrics_address, start_with_metrics};
use crate::support::{eventually, QueueFile, QueueFiles, TestDb};

pub const TOKEN: &str = "a-console-token-for-the-tests-0123456789";

/// Jobs 1–3 waiting; 7–10 gave up, 7 and 8 with one error, 9 and 10 another.
pub async fn jobs(db: &TestDb) {
    db.exec(
        "CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting',
         last_error VARCHAR(200) NULL, KEY (state));
         INSERT INTO job (id) VALUES (1), (2), (3), (7), (8), (9), (10);
         UPDATE job SET state = 'failed', last_error = 'bounced' WHERE id > 6",
    )
    .await;
}

/// Queue `mail` over `job`, with `[failed]` retry and discard; and `plain`, without.
pub fn queues(files: &QueueFiles) {
    let failed = toml::Table::from_iter([
        (
            "select".to_string(),
            "SELECT id, last_error FROM job WHERE state = 'failed' ORDER BY id DESC".into(),
        ),
        (
            "retry".to_string(),
            "UPDATE job SET state = 'waiting' WHERE id = :id AND state = 'failed'".into(),
        ),
        (
            "discard".to_string(),
            "UPDATE job SET state = 'discarded' WHERE id = :id AND state = 'failed'".into(),
        ),
    ]);
    QueueFile::new("mail")
        .select("SELECT id FROM job WHERE state = 'waiting' ORDER BY id")
        .poll_interval("200ms")
        .action_sql("DO :id")
        .on_success("UPDATE job SET state = 'done' WHERE id = :id")
        .set("failed", failed)
        .write(files);
    QueueFile::new("plain")
        .select("SELECT id FROM job WHERE state = 'never'")
        .poll_interval("200ms")
        .action_sql("DO :id")
        .on_success("UPDATE job SET state = 'done' WHERE id = :id")
        .write(files);
}

/// A database of [`jobs`], and the queue files of [`queues`].
async fn jobs_and_queues() -> (TestDb, QueueFiles) {
    let db = TestDb::new().await;
    jobs(&db).await;
    let files = QueueFiles::new();
    queues(&files);
    (db, files)
}

/// `tableq run --metrics-addr … --console-token-file FILE` (the file holding
/// [`TOKEN`]); the daemon and its base URL.
pub async fn start_with_console(files: &QueueFiles, url: &str) -> (Daemon, String) {
    start_console(files, url, &["mail.toml", "plain.toml"], &[]).await
}

/// As [`start_with_console`], on the queue files `queues` of `files`, with the
/// environment variables `env` besides.
pub async fn start_console(
    files: &QueueFiles,
    url: &str,
    queues: &[&str],
    env: &[(&str, &str)],
) -> (Daemon, String) {
    let token = files.path().join("console.token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let mut cmd = tableq(&["run", "--metrics-addr", "127.0.0.1:0"]);
    cmd.args(queues.iter().map(|queue| files.path().join(queue)))
        .envs(env.iter().copied())
        .env("TABLEQ_CONSOLE_TOKEN_FILE", &token)
        .env("TABLEQ_DATABASE_URL", url)
        .env("TABLEQ_LOG_FORMAT", "json")
        .env("TABLEQ_LOG", "info");
    let daemon = Daemon::spawn(cmd);
    let base = format!("http://{}", metrics_address(&daemon).await);
    (daemon, base)
}

/// `POST url` with `body`, and `Authorization: Bearer token` when given.
pub async fn post(url: &str, token: Option<&str>, body: &str) -> (u16, String) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut request = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("the console answers");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

async fn get_with(url: &str, token: &str) -> (u16, serde_json::Value) {
    let (status, body) = get_text_with(url, token).await;
    (status, serde_json::from_str(&body).unwrap())
}

/// `GET url` with `Authorization: Bearer token`: the status and the body.
pub async fn get_text_with(url: &str, token: &str) -> (u16, String) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let response = reqwest::Client::new()
        .get(url)
        .bearer_auth(token)
        .send()
        .await
        .expect("the console answers");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

async fn states(db: &TestDb) -> Vec<(u32, String)> {
    db.rows("SELECT id, state FROM job ORDER BY id").await
}

/// Waits until the three waiting jobs are done: both queues are listed by then
/// (a run launches its queues together).
async fn waiting_jobs_done(db: &TestDb) {
    eventually(
        "the waiting jobs are done",
        Duration::from_secs(30),
        || async {
            let done = states(db).await.iter().filter(|(_, s)| s == "done").count();
            done == 3
        },
    )
    .await;
}

async fn paused(db: &TestDb) -> Vec<(String, String)> {
    db.rows("SELECT queue, reason FROM tableq_paused").await
}

/// Without `--console-token-file`, every action answers 403 and nothing changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_file_the_console_refuses_every_action() {
    let (db, files) = jobs_and_queues().await;
    let (mut daemon, base) = start_with_metrics(&files, &db.url).await;
    waiting_jobs_done(&db).await;
    let before = states(&db).await;
    for action in ["pause", "resume", "failed/retry", "failed/discard"] {
        let url = format!("{base}/api/queues/mail/{action}");
        let (status, body) = post(&url, Some(TOKEN), r#"{"all": true}"#).await;
        assert_eq!(status, 403, "{action}: {body}");
        assert!(body.contains("--console-token-file"), "{body}");
    }
    let (status, _) = post(&format!("{base}/sign-in"), None, "token=x").await;
    assert_eq!(status, 403);
    assert_eq!(states(&db).await, before);
    let page = crate::support::endpoint::get(&format!("{base}/queues/mail"))
        .await
        .1;
    assert!(
        !page.contains("<button"),
        "no button without a token: {page}"
    );
    assert!(!page.contains("sign-in"), "{page}");
    daemon.terminate().await;
}

/// No token or a wrong one → 401 (a wrong one after a pause), and nothing changes.
async fn no_token_or_a_wrong_one_is_refused(db: &TestDb, api: &impl Fn(&str) -> String) {
    let before = states(db).await;
    let (status, _) = post(&api("mail/failed/retry"), None, r#"{"all": true}"#).await;
    assert_eq!(status, 401);
    let started = Instant::now();
    let (status, _) = post(
        &api("mail/failed/discard"),
        Some("wrong"),
        r#"{"all": true}"#,
    )
    .await;
    assert_eq!(status, 401);
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "a wrong token waits"
    );
    assert_eq!(states(db).await, before, "nothing changed");
}

/// The bearer pauses (a row in `tableq_paused`) and resumes (the row gone).
async fn the_bearer_pauses_and_resumes(db: &TestDb, api: &impl Fn(&str) -> String) {
    let body = r#"{"reason": "deploy", "for": "1h"}"#;
    let (status, answer) = post(&api("mail/pause"), Some(TOKEN), body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        paused(db).await,
        [("mail".to_string(), "deploy".to_string())]
    );
    let (status, answer) = post(&api("mail/resume"), Some(TOKEN), "").await;
    assert_eq!(
        (status, answer.contains("\"rows\":1")),
        (200, true),
        "{answer}"
    );
    assert!(paused(db).await.is_empty());
}

/// The bearer retries one key (then done) and discards every row that gave up.
async fn the_bearer_retries_and_discards(db: &TestDb, api: &impl Fn(&str) -> String) {
    let (status, answer) = post(&api("mail/failed/retry"), Some(TOKEN), r#"{"keys": [9]}"#).await;
    assert_eq!(status, 200, "{answer}");
    let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(
        (answer["rows"].as_u64(), answer["keys"].as_u64()),
        (Some(1), Some(1))
    );
    eventually(
        "job 9, retried, is done",
        Duration::from_secs(30),
        || async { states(db).await.contains(&(9, "done".to_string())) },
    )
    .await;
    let (status, answer) = post(&api("mail/failed/discard"), Some(TOKEN), r#"{"all": true}"#).await;
    assert_eq!(status, 200, "{answer}");
    let discarded: Vec<u32> = states(db)
        .await
        .into_iter()
        .filter(|(_, s)| s == "discarded")
        .map(|(id, _)| id)
        .collect();
    assert_eq!(discarded, [7, 8, 10]);
}

/// A queue without `[failed]` → 409, an unknown queue → 404; rows are looked up.
async fn the_bearer_is_told_what_cannot_be_done(api: &impl Fn(&str) -> String) {
    let (status, answer) = post(&api("plain/failed/retry"), Some(TOKEN), r#"{"all": true}"#).await;
    assert_eq!(status, 409, "{answer}");
    assert!(
        answer.contains("queue plain has no `[failed] retry`"),
        "{answer}"
    );
    let (status, _) = post(&api("nosuch/pause"), Some(TOKEN), "").await;
    assert_eq!(status, 404);
    let (status, found) = get_with(&api("mail/inspect?key=9"), TOKEN).await;
    assert_eq!(status, 200);
    assert_eq!(found["where"], "exists; not in the select, not in [failed]");
    let (status, found) = get_with(&api("mail/inspect?key=99"), TOKEN).await;
    assert_eq!(
        (status, found["where"].as_str()),
        (404, Some("no such row"))
    );
}

/// Each action is logged with its queue, rows and client; the token never is.
fn each_action_is_logged(log: &str) {
    let acted: Vec<serde_json::Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("console: queue"))
        })
        .collect();
    let said: Vec<(&str, u64)> = acted
        .iter()
        .map(|l| (l["action"].as_str().unwrap(), l["rows"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        said,
        [("pause", 1), ("resume", 1), ("retry", 1), ("discard", 3)],
        "{log}"
    );
    assert!(acted
        .iter()
        .all(|l| l["queue"] == "mail" && l["from"].as_str().unwrap().starts_with("127.0.0.1:")));
    assert!(!log.contains(TOKEN), "the token is never logged");
}

/// With a token file: no token or a wrong one → 401 (a wrong one after a pause)
/// and nothing changes; the bearer pauses, resumes, retries one key, discards all,
/// looks rows up; a queue without `[failed]` → 409; each action logged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bearer_of_the_token_acts_and_no_one_else() {
    let (db, files) = jobs_and_queues().await;
    let (mut daemon, base) = start_with_console(&files, &db.url).await;
    let api = |path: &str| format!("{base}/api/queues/{path}");
    waiting_jobs_done(&db).await;
    no_token_or_a_wrong_one_is_refused(&db, &api).await;
    the_bearer_pauses_and_resumes(&db, &api).await;
    the_bearer_retries_and_discards(&db, &api).await;
    the_bearer_is_told_what_cannot_be_done(&api).await;
    each_action_is_logged(&daemon.stderr());
    daemon.terminate().await;
}
