//! The console in real headless Chromium, driven by Playwright
//! (`console_browser.py`): at 1280 × 800 nothing scrolls sideways and every
//! heading of the queue list is in the window, with a long note on the page; a
//! browser signs in with the token, pauses, resumes, retries a failure kind,
//! discards one row and then every row that gave up (after a page that says how
//! many) — each seen in the database and on the page — and a form
//! posted without its CSRF token is refused. The screenshot of the list is the
//! docs' (docs/src/images/status-page.png), and so is a queue's page signed in
//! (docs/src/images/console-queue.png), written there when
//! `TABLEQ_UPDATE_SCREENSHOTS=1`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::console_api::{start_with_console, TOKEN};
use crate::support::daemon::{run_to_end, tableq};
use crate::support::{eventually, tools, QueueFile, QueueFiles, TestDb};

/// The browser, a step at a time (`console_history_browser.rs` drives it too).
pub(super) struct Browser {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl Browser {
    pub(super) fn start(python: &Path, chromium: &Path, base: &str, screenshot: &Path) -> Browser {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/telemetry/console_browser.py");
        let mut child = tokio::process::Command::new(python)
            .arg(script)
            .args([base, TOKEN])
            .arg(screenshot)
            .arg(chromium)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the browser script");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        Browser {
            child,
            stdin,
            stdout,
        }
    }

    /// Does `command` in the browser; what the page showed.
    pub(super) async fn step(&mut self, command: serde_json::Value) -> serde_json::Value {
        let line = format!("{command}\n");
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        let answer = tokio::time::timeout(Duration::from_secs(60), self.stdout.next_line())
            .await
            .expect("the browser answers within a minute")
            .unwrap()
            .expect("the browser script is running");
        let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
        assert!(answer.get("error").is_none(), "{command}: {answer}");
        answer
    }

    /// Ends the script (its stdin closed) and waits for it.
    pub(super) async fn close(self) {
        drop(self.stdin);
        let mut child = self.child;
        let _ = child.wait().await;
    }

    /// Does `command`, a form the console answers with a notice; checks the notice
    /// says `notice`.
    pub(super) async fn act(&mut self, command: serde_json::Value, notice: &str) {
        let done = self.step(command).await;
        assert!(done["notice"].as_str().unwrap().contains(notice), "{done}");
    }
}

/// Orders 1–4 fail with "order N not found in ledger 7" and 5–6 with "ledger 0x1fN
/// locked", each on its first attempt only; `mail` runs them, `zz_exports` is paused
/// with a long reason before the copy starts.
async fn failing_orders(db: &TestDb, files: &QueueFiles) {
    db.exec(
        "CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting',
         attempts INT NOT NULL DEFAULT 0, KEY (state));
         INSERT INTO job (id) VALUES (1), (2), (3), (4), (5), (6)",
    )
    .await;
    files.script(
        "order.sh",
        "if [ \"$1\" != 0 ]; then exit 0; fi\n\
         if [ \"$TABLEQ_KEY\" -le 4 ]; then echo \"order $TABLEQ_KEY not found in ledger 7\" >&2; \
         else echo \"ledger 0x1f$TABLEQ_KEY locked\" >&2; fi\nexit 3",
    );
    let failed = toml::Table::from_iter([
        (
            "select".to_string(),
            "SELECT id, attempts FROM job WHERE state = 'failed' ORDER BY id".into(),
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
        .select("SELECT id, attempts FROM job WHERE state = 'waiting' ORDER BY id")
        .poll_interval("200ms")
        .set("stats_interval", "200ms")
        .action_command(&["./order.sh", "{attempts}"])
        .on_success("UPDATE job SET state = 'done' WHERE id = :id")
        .on_failure("UPDATE job SET state = 'failed', attempts = attempts + 1 WHERE id = :id")
        .set("failed", failed)
        .write(files);
    QueueFile::new("plain")
        .select("SELECT id FROM job WHERE state = 'never'")
        .poll_interval("200ms")
        .action_sql("DO :id")
        .on_success("UPDATE job SET state = 'done' WHERE id = :id")
        .write(files);
    let reason = format!(
        "disk full on the export volume, waiting for the storage team to grow it: {}",
        "ticket-".repeat(30)
    );
    let mut pause = tableq(&["pause", "--queue", "plain", "--reason", &reason]);
    pause
        .arg(files.path().join("plain.toml"))
        .env("TABLEQ_DATABASE_URL", &db.url);
    let paused = run_to_end(pause, Duration::from_secs(60)).await;
    assert_eq!(paused.code(), Some(0), "{}", paused.stderr);
}

async fn states(db: &TestDb) -> Vec<(u32, String)> {
    db.rows("SELECT id, state FROM job ORDER BY id").await
}

async fn paused(db: &TestDb, queue: &str) -> Option<String> {
    let rows: Vec<String> = db
        .rows(&format!(
            "SELECT reason FROM tableq_paused WHERE queue = '{queue}'"
        ))
        .await;
    rows.into_iter().next()
}

/// The screenshot of the list: the one the docs show when
/// `TABLEQ_UPDATE_SCREENSHOTS=1` (as the generated reference is written anew), else
/// one beside the test's build, so a test run leaves the checkout as it was.
pub(super) fn screenshot() -> PathBuf {
    let folder = if std::env::var_os("TABLEQ_UPDATE_SCREENSHOTS").is_some_and(|v| v == "1") {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/images")
    } else {
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots")
    };
    folder.join("status-page.png")
}

/// At 1280 × 800 nothing scrolls sideways, every heading of the list is in the
/// window, the long note is on the page, and the screenshot is written.
async fn the_list_fits_the_window(browser: &mut Browser) {
    let layout = browser.step(serde_json::json!({"op": "layout"})).await;
    assert!(
        layout["body"].as_str().unwrap().contains("ticket-ticket-"),
        "the long note is there"
    );
    assert!(
        layout["scroll_width"].as_u64() <= layout["client_width"].as_u64(),
        "{layout}"
    );
    assert_eq!(layout["sideways"], serde_json::json!([]), "{layout}");
    let width = layout["inner_width"].as_f64().unwrap();
    for heading in layout["headings"].as_array().unwrap() {
        let (left, right) = (
            heading["left"].as_f64().unwrap(),
            heading["right"].as_f64().unwrap(),
        );
        assert!(
            left >= 0.0 && right <= width,
            "{heading} outside 0..{width}"
        );
    }
    assert_eq!(layout["headings"].as_array().unwrap().len(), 10);
    let rightmost = layout["headings"][9]["right"].as_f64().unwrap();
    println!(
        "at 1280 x 800: page {} px wide in a {} px window; the last heading ends at {rightmost:.0} px",
        layout["scroll_width"], layout["client_width"]
    );
    assert!(std::fs::metadata(screenshot()).is_ok_and(|m| m.len() > 1000));
}

/// No button before signing in, the failure kinds listed; a wrong token is refused,
/// the right one signs in; a form posted without its CSRF token changes nothing.
async fn only_the_token_signs_in(browser: &mut Browser, db: &TestDb) {
    let page = browser
        .step(serde_json::json!({"op": "page", "queue": "mail"}))
        .await;
    assert_eq!(page["buttons"], 0, "no button before signing in: {page}");
    let kinds = page["body"].as_str().unwrap();
    assert!(
        kinds.contains("order # not found in ledger #") && kinds.contains("ledger # locked"),
        "{kinds}"
    );
    let wrong = browser
        .step(serde_json::json!({"op": "sign_in", "token": "wrong"}))
        .await;
    assert!(
        wrong["body"]
            .as_str()
            .unwrap()
            .contains("not the console token"),
        "{wrong}"
    );
    let signed = browser.step(serde_json::json!({"op": "sign_in"})).await;
    assert!(
        signed["body"].as_str().unwrap().contains("signed in"),
        "{signed}"
    );
    let forged = browser
        .step(serde_json::json!({"op": "post_without_csrf", "queue": "mail"}))
        .await;
    assert_eq!(forged["status"], 403, "{forged}");
    assert_eq!(
        paused(db, "mail").await,
        None,
        "a form without its CSRF token changes nothing"
    );
}

/// Pausing is seen in the database and on the page; resuming in the database.
async fn pause_and_resume(browser: &mut Browser, db: &TestDb, base: &str) {
    let pause = serde_json::json!({"op": "pause", "queue": "mail", "reason": "deploy"});
    browser.act(pause, "queue mail paused").await;
    assert_eq!(paused(db, "mail").await.as_deref(), Some("deploy"));
    eventually(
        "the page says it is paused",
        Duration::from_secs(30),
        || async {
            let page = browser_free_get(&format!("{base}/queues/mail")).await;
            page.contains("paused (deploy)")
        },
    )
    .await;
    let resume = serde_json::json!({"op": "resume", "queue": "mail"});
    browser.act(resume, "queue mail resumed").await;
    assert_eq!(paused(db, "mail").await, None);
}

/// The states of orders 1–6 once 1–4 are done, 5 discarded and 6 `six`.
fn after_discarding_five(six: &str) -> Vec<(u32, String)> {
    (1..=6)
        .map(|id| {
            let state = match id {
                5 => "discarded",
                6 => six,
                _ => "done",
            };
            (id, state.to_string())
        })
        .collect()
}

/// A failure kind retried (its four orders then done), one row discarded, then every
/// row that gave up: asked first with the count, discarding nothing until confirmed.
async fn retry_and_discard(browser: &mut Browser, db: &TestDb) {
    let kind = "order # not found in ledger #";
    let retry = serde_json::json!({"op": "retry_group", "queue": "mail", "kind": kind});
    browser.act(retry, "retried 4 of 4 keys").await;
    eventually(
        "orders 1–4, retried, are done",
        Duration::from_secs(30),
        || async { states(db).await[..4].iter().all(|(_, s)| s == "done") },
    )
    .await;
    let discard = serde_json::json!({"op": "discard_key", "queue": "mail", "key": "5"});
    browser.act(discard, "discarded 1 of 1 key").await;
    assert_eq!(states(db).await, after_discarding_five("failed"));
    // Every row that gave up: asked first, with the count; nothing discarded yet.
    let asked = browser
        .step(serde_json::json!({"op": "discard_all", "queue": "mail"}))
        .await;
    let body = asked["body"].as_str().unwrap();
    assert!(body.contains("Discard 1 row?"), "{asked}");
    assert!(
        body.contains("every row that gave up now — 1 row"),
        "{asked}"
    );
    assert_eq!(
        states(db).await,
        after_discarding_five("failed"),
        "asking discards nothing"
    );
    browser
        .act(serde_json::json!({"op": "confirm"}), "discarded 1 of 1 key")
        .await;
    assert_eq!(states(db).await, after_discarding_five("discarded"));
}

/// Signed in, a queue's page has its forms; its screenshot is the docs'.
async fn the_queue_page_signed_in(browser: &mut Browser) {
    let page = browser
        .step(serde_json::json!({"op": "page", "queue": "mail"}))
        .await;
    assert!(
        page["buttons"].as_u64().unwrap() > 4,
        "signed in: the forms: {page}"
    );
    let shot = screenshot().with_file_name("console-queue.png");
    let path = shot.to_str().unwrap();
    let command = serde_json::json!({"op": "screenshot", "queue": "mail", "path": path});
    browser.step(command).await;
    assert!(std::fs::metadata(&shot).is_ok_and(|m| m.len() > 1000));
}

/// At 1280 × 800 the list fits; a browser signs in, pauses, resumes, retries a kind,
/// discards a row, and every row that gave up once a page said how many (each in
/// the database and on the page); a form without its CSRF token is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_in_a_browser() {
    let Some((chromium, python)) = browser_tools("the console in a browser") else {
        return;
    };
    let db = TestDb::new().await;
    let files = QueueFiles::new();
    failing_orders(&db, &files).await;
    let (mut daemon, base) = start_with_console(&files, &db.url).await;
    eventually(
        "every order failed once",
        Duration::from_secs(60),
        || async { states(&db).await.iter().all(|(_, s)| s == "failed") },
    )
    .await;
    // Both queues read their pause before they say they started: `plain`'s note is in.
    daemon
        .wait_for_log_times("queue started", 2, Duration::from_secs(30))
        .await;
    std::fs::create_dir_all(screenshot().parent().unwrap()).unwrap();
    let mut browser = Browser::start(&python, &chromium, &base, &screenshot());
    the_list_fits_the_window(&mut browser).await;
    only_the_token_signs_in(&mut browser, &db).await;
    pause_and_resume(&mut browser, &db, &base).await;
    retry_and_discard(&mut browser, &db).await;
    the_queue_page_signed_in(&mut browser).await;
    browser.close().await;
    let log = daemon.stderr();
    for action in ["pause", "resume", "retry", "discard"] {
        assert!(
            log.contains(&format!("\"action\":\"{action}\"")),
            "{action} logged: {log}"
        );
    }
    daemon.terminate().await;
}

/// Chromium and the Python that has Playwright; `None` (the test skips, saying
/// `unchecked` was not checked) where they are missing outside CI.
pub(super) fn browser_tools(unchecked: &str) -> Option<(PathBuf, PathBuf)> {
    let chromium = tools::required(
        &["chromium", "chromium-browser", "google-chrome"],
        "apt-get install chromium",
        unchecked,
    )?;
    Some((chromium, tools::playwright_python()?))
}

/// The page as a client with no cookie gets it.
async fn browser_free_get(url: &str) -> String {
    crate::support::endpoint::get(url).await.1
}
