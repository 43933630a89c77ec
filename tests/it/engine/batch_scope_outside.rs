//! HTTP and command actions in `scope = "batch"`: one request (or one command) per
//! batch with the rows as a JSON array, and per-item delivery when the batch fails.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::web::{Recorded, Reply, WebServer};
use crate::support::{eventually, load, run_until_empty, Engine, QueueFile, QueueFiles, TestDb};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// The ids of `:batch`, joined to the hook table.
const HOOKS: &str = "JSON_TABLE(:batch, '$[*]' COLUMNS (id INT PATH '$.id',
    status INT PATH '$.status', error VARCHAR(500) PATH '$.error')) AS b";

/// Ten waiting hooks, each with a name.
async fn hook_db() -> TestDb {
    let db = TestDb::new().await;
    db.exec(
        "CREATE TABLE hook (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL,
         state VARCHAR(10) NOT NULL DEFAULT 'waiting', http_status INT NULL,
         error VARCHAR(500) NULL) DEFAULT CHARSET=utf8mb4",
    )
    .await;
    db.fill("hook", "id, name", 10, |i| format!("{i}, 'hook {i}'"))
        .await;
    db
}

/// The hook queue in batch scope, delivering to `url`, signed.
fn hook_queue(url: &str) -> QueueFile {
    hooks()
        .action_http(url)
        .action_set("signing_secret", SECRET)
}

/// The hook queue in batch scope, without its action.
fn hooks() -> QueueFile {
    QueueFile::new("hooks")
        .set("scope", "batch")
        .batch(10)
        .select("SELECT id, name FROM hook WHERE state = 'waiting' ORDER BY id")
        .on_success(format!(
            "UPDATE hook JOIN {HOOKS} USING (id) SET hook.state = 'done', hook.http_status = b.status"
        ))
        .on_failure(format!(
            "UPDATE hook JOIN {HOOKS} USING (id) SET hook.state = 'failed', hook.http_status = b.status, hook.error = b.error"
        ))
}

/// The ids in a request's JSON array body.
fn ids(request: &Recorded) -> Vec<i64> {
    match request.json() {
        Value::Array(items) => items.iter().filter_map(|i| i["id"].as_i64()).collect(),
        other => panic!("the body is not a JSON array: {other}"),
    }
}

/// Verifies a request's Standard Webhooks signature with an independent implementation.
fn verify(request: &Recorded) {
    let mut headers = axum::http::HeaderMap::new();
    for name in ["webhook-id", "webhook-timestamp", "webhook-signature"] {
        headers.insert(name, request.headers[name].clone());
    }
    standardwebhooks::Webhook::new(SECRET)
        .unwrap()
        .verify(&request.body, &headers)
        .expect("the signature verifies");
}

/// A batch of ten goes out as one signed request with a JSON array body, and a 2xx
/// settles all ten with one `[on_success]`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_one_signed_request_with_an_array_body() {
    let server = WebServer::start(|_| Reply::status(204)).await;
    let db = hook_db().await;
    let files = QueueFiles::new();
    let file = hook_queue(&server.url("/hooks")).write(&files);
    let summary = run_until_empty(load(&[file]), &db.url).await;
    assert_eq!(summary.counts("hooks").unwrap().done, 10);
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "one request for the batch");
    let request = &requests[0];
    assert_eq!(ids(request), (1..=10).collect::<Vec<_>>());
    assert_eq!(request.json()[2], json!({"id": 3, "name": "hook 3"}));
    assert_eq!(request.header("content-type"), "application/json");
    assert!(request.header("webhook-id").starts_with("hooks_batch_"));
    verify(request);
    db.assert_count(
        "SELECT COUNT(*) FROM hook WHERE state = 'done' AND http_status = 204",
        10,
    )
    .await;
}

/// A receiver that rejects the batch (a 4xx, for one bad item) gets every item again
/// on its own, each as a one-element array: nine are done, the bad one failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_batch_falls_back_to_per_item_delivery() {
    let server = WebServer::start(|request| {
        if ids(request).contains(&7) {
            Reply::status(422).body("item 7 is malformed")
        } else {
            Reply::status(200)
        }
    })
    .await;
    let db = hook_db().await;
    let files = QueueFiles::new();
    let file = hook_queue(&server.url("/hooks")).write(&files);
    let summary = run_until_empty(load(&[file]), &db.url).await;
    let counts = summary.counts("hooks").unwrap();
    assert_eq!((counts.done, counts.failed), (9, 1));
    let requests = server.requests();
    assert_eq!(requests.len(), 11, "the batch, then each item");
    assert_eq!(ids(&requests[0]).len(), 10);
    let mut singles: Vec<i64> = requests[1..].iter().flat_map(ids).collect();
    singles.sort();
    assert_eq!(singles, (1..=10).collect::<Vec<_>>());
    requests.iter().for_each(verify);
    let ids_sent: std::collections::HashSet<&str> =
        requests.iter().map(|r| r.header("webhook-id")).collect();
    assert_eq!(ids_sent.len(), 11, "each message has its own webhook-id");
    let failed: Vec<(u32, u32, String)> = db
        .rows("SELECT id, http_status, error FROM hook WHERE state = 'failed'")
        .await;
    assert_eq!(
        failed,
        vec![(7, 422, "HTTP 422 Unprocessable Entity".to_string())]
    );
    db.assert_count(
        "SELECT COUNT(*) FROM hook WHERE state = 'done' AND http_status = 200",
        9,
    )
    .await;
}

/// When the batch's `[on_success]` fails (one row cannot be marked done), only that
/// set is settled item by item, in the same transaction: nine are done, the tenth
/// waits, and the nine are not delivered again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_batch_outcome_sql_is_settled_item_by_item_without_resending() {
    let server = WebServer::start(|_| Reply::status(200)).await;
    let db = hook_db().await;
    db.exec("ALTER TABLE hook ADD CONSTRAINT not_four CHECK (id <> 4 OR state <> 'done')")
        .await;
    let files = QueueFiles::new();
    let file = hook_queue(&server.url("/hooks"))
        .poll_interval("50ms")
        .error_backoff("50ms")
        .write(&files);
    let engine = Engine::start(load(&[file]), &db.url);
    // Nine hooks are done.
    db.until_count("SELECT COUNT(*) FROM hook WHERE state = 'done'", 9, 30)
        .await;
    eventually(
        "hook 4 was offered again",
        Duration::from_secs(30),
        || async { server.requests().len() >= 2 },
    )
    .await;
    let summary = engine.stop().await;
    assert_eq!(summary.counts("hooks").unwrap().done, 9);
    db.assert_count(
        "SELECT COUNT(*) FROM hook WHERE id = 4 AND state = 'waiting'",
        1,
    )
    .await;
    let requests = server.requests();
    assert_eq!(ids(&requests[0]), (1..=10).collect::<Vec<_>>());
    for later in &requests[1..] {
        assert_eq!(ids(later), vec![4], "only hook 4 is delivered again");
    }
}

/// A command in batch scope runs once for the batch, the rows as a JSON array on
/// stdin and their keys in `TABLEQ_KEYS`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_gets_the_batch_on_stdin_and_its_keys() {
    let db = hook_db().await;
    let files = QueueFiles::new();
    let seen = files.path().join("seen");
    let script = files.script(
        "record.sh",
        &format!(
            "cat >> {seen}; echo >> {seen}; echo \"$TABLEQ_KEYS\" >> {seen}",
            seen = seen.display()
        ),
    );
    let script = script.display().to_string();
    let file = hooks().action_command(&[&script]).write(&files);
    let summary = run_until_empty(load(&[file]), &db.url).await;
    assert_eq!(summary.counts("hooks").unwrap().done, 10);
    let seen = std::fs::read_to_string(&seen).unwrap();
    let lines: Vec<&str> = seen.lines().collect();
    assert_eq!(lines.len(), 2, "one run for the batch: {seen}");
    let stdin: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(stdin.as_array().map(Vec::len), Some(10));
    assert_eq!(stdin[0], json!({"id": 1, "name": "hook 1"}));
    assert_eq!(lines[1], "[1,2,3,4,5,6,7,8,9,10]");
}
