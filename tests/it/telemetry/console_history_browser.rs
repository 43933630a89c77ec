//! The console's memory in real headless Chromium, driven by Playwright
//! (`console_browser.py`), against the real daemon writing its history every 2 s
//! (`TABLEQ_HISTORY_EVERY`) to a real MariaDB: a browser signs in, sees a queue's
//! charts with the data points the history holds, searches the failed rows by a text
//! only one row's error has, opens that row's attempts, retries it and sees it done;
//! the fleet lists this copy. At 1280 and at 390 px (a phone) no page scrolls
//! sideways and the charts' labels stay readable. Screenshots of each page at both
//! widths go to the folder the test prints (`docs/src/images/console-*.png` when
//! `TABLEQ_UPDATE_SCREENSHOTS=1`).

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use super::console_api::start_console;
use super::console_browser::{browser_tools, screenshot, Browser};
use crate::support::endpoint::get;
use crate::support::{eventually, QueueFile, QueueFiles, TestDb};

/// The text only payment 7's error has.
const UNIQUE: &str = "cus_Q7ZX";

/// Twelve payments; 3 and 11 fail their first attempt with a gateway timeout, 7
/// with a card declined for customer `cus_Q7ZX`; a retried payment succeeds.
async fn payments(db: &TestDb, files: &QueueFiles) {
    db.exec(
        "CREATE TABLE payment (id INT PRIMARY KEY, customer VARCHAR(20) NOT NULL,
         state VARCHAR(10) NOT NULL DEFAULT 'waiting', attempts INT NOT NULL DEFAULT 0,
         KEY (state))",
    )
    .await;
    for id in 1..=12 {
        let sql = format!("INSERT INTO payment (id, customer) VALUES ({id}, 'cus_{id:04}')");
        db.exec(&sql).await;
    }
    files.script(
        "charge.sh",
        &format!(
            "if [ \"$1\" != 0 ]; then exit 0; fi\n\
             case \"$TABLEQ_KEY\" in\n\
             7) echo \"card declined for customer {UNIQUE}\" >&2; exit 1;;\n\
             3|11) echo \"gateway timeout after 30 s\" >&2; exit 1;;\n\
             esac"
        ),
    );
    let failed = toml::Table::from_iter([
        (
            "select".to_string(),
            "SELECT id, customer, attempts FROM payment WHERE state = 'failed' ORDER BY id DESC"
                .into(),
        ),
        (
            "retry".to_string(),
            "UPDATE payment SET state = 'waiting' WHERE id = :id AND state = 'failed'".into(),
        ),
    ]);
    QueueFile::new("pay")
        .select("SELECT id, attempts FROM payment WHERE state = 'waiting' ORDER BY id")
        .poll_interval("200ms")
        .action_command(&["./charge.sh", "{attempts}"])
        .on_success("UPDATE payment SET state = 'done' WHERE id = :id")
        .on_failure("UPDATE payment SET state = 'failed', attempts = attempts + 1 WHERE id = :id")
        .set("failed", failed)
        .write(files);
}

async fn state_of(db: &TestDb, id: u32) -> String {
    db.scalar(&format!("SELECT state FROM payment WHERE id = {id}"))
        .await
}

/// Done and failed summed over the history's buckets of the last hour, as the API
/// answers.
async fn history_sums(base: &str) -> (u64, u64) {
    let (status, body) = get(&format!("{base}/api/queues/pay/history?since=1h")).await;
    let Ok(history) = serde_json::from_str::<Value>(&body) else {
        return (0, 0);
    };
    let buckets = history["buckets"].as_array().cloned().unwrap_or_default();
    let sum = |field: &str| buckets.iter().map(|b| b[field].as_u64().unwrap_or(0)).sum();
    assert!(status == 200 || status == 404, "{status}: {body}");
    (sum("done"), sum("failed"))
}

/// The screenshot `name` (`console-fleet-390.png`), in the folder the test prints.
fn shot(name: &str) -> PathBuf {
    screenshot().with_file_name(name)
}

/// Nothing scrolls sideways; the charts' labels (if any) are at least 10 px.
fn fits(answer: &Value, what: &str) {
    let fits = &answer["fits"];
    assert!(
        fits["scroll_width"].as_u64() <= fits["inner_width"].as_u64(),
        "{what} scrolls sideways: {fits}"
    );
    assert_eq!(fits["sideways"], json!([]), "{what}: {fits}");
    if let Some(smallest) = fits["smallest_label_px"].as_f64() {
        assert!(smallest >= 10.0, "{what}: axis labels of {smallest} px");
    }
}

/// The queue's charts hold the history's points: the done line's values sum to the
/// payments done (`done`, or more: a retried one), the failed line's to the three
/// failures, over the window `since` (`1h`, `24h`, `7d`); the page fits a window
/// `width` px wide.
async fn the_charts_have_the_points(browser: &mut Browser, width: u32, since: &str, done: f64) {
    let answer = browser
        .step(json!({"op": "charts", "queue": "pay", "since": since}))
        .await;
    fits(&answer, &format!("the queue's page at {width} px"));
    let charts = answer["charts"].as_array().unwrap();
    let ids: Vec<&str> = charts.iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["chart-throughput", "chart-p95", "chart-backlog"]);
    let points = charts[0]["points"].as_array().unwrap();
    let sum = |series: &str| -> f64 {
        let of = points.iter().filter(|p| p["series"] == series);
        of.map(|p| p["value"].as_f64().unwrap()).sum()
    };
    assert!(sum("done") >= done && sum("failed") == 3.0, "{answer}");
    let counted = charts[0]["points_count"].as_u64().unwrap();
    assert_eq!(counted as usize, points.len(), "{answer}");
    assert!(!charts[1]["points"].as_array().unwrap().is_empty(), "a p95");
    println!(
        "at {width} px over {since}: {} points on the throughput chart; labels at least {} px",
        points.len(),
        answer["fits"]["smallest_label_px"]
    );
}

/// Searching by the text only payment 7's error has finds payment 7 alone; its
/// attempts page lists its one failed attempt with that error.
async fn search_and_open_the_attempts(browser: &mut Browser) {
    let all = browser.step(json!({"op": "search", "q": ""})).await;
    assert_eq!(all["keys"], json!(["11", "7", "3"]), "newest first: {all}");
    let found = browser.step(json!({"op": "search", "q": UNIQUE})).await;
    assert_eq!(found["keys"], json!(["7"]), "{found}");
    let opened = browser
        .step(json!({"op": "open_attempts", "key": "7"}))
        .await;
    assert!(
        opened["url"]
            .as_str()
            .unwrap()
            .ends_with("/queues/pay/attempts?key=7"),
        "{opened}"
    );
    let attempts = opened["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 1, "{opened}");
    assert_eq!(attempts[0]["attempt"], 1);
    assert_eq!(attempts[0]["status"], "1");
    let error = attempts[0]["error"].as_str().unwrap();
    assert!(
        error.contains(&format!("card declined for customer {UNIQUE}")),
        "{opened}"
    );
    fits(&opened, "the attempts page at 1280 px");
}

/// Each page at `width` px fits, and is photographed.
async fn photograph(browser: &mut Browser, width: u32) {
    browser
        .step(json!({"op": "viewport", "width": width, "height": 800}))
        .await;
    let pages = [
        ("queues/pay?since=1h", "queue"),
        ("queues/pay/attempts?key=7", "attempts"),
        ("copies", "fleet"),
    ];
    for (path, name) in pages {
        let opened = browser.step(json!({"op": "open", "path": path})).await;
        fits(&opened, &format!("{path} at {width} px"));
        let file = shot(&format!("console-{name}-{width}.png"));
        let path = file.to_str().unwrap();
        browser.step(json!({"op": "shot", "path": path})).await;
        assert!(std::fs::metadata(&file).is_ok_and(|m| m.len() > 1000));
    }
}

/// Signed in, the queue's charts show the history, a search finds payment 7 by its
/// error, its attempts page lists that attempt, Retry makes it done; the fleet lists
/// this copy; at 1280 and 390 px nothing scrolls sideways.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_consoles_memory_in_a_browser() {
    let Some((chromium, python)) = browser_tools("the console's history in a browser") else {
        return;
    };
    let db = TestDb::new().await;
    let files = QueueFiles::new();
    payments(&db, &files).await;
    let every = [("TABLEQ_HISTORY_EVERY", "2s")];
    let (mut daemon, base) = start_console(&files, &db.url, &["pay.toml"], &every).await;
    eventually(
        "the history holds 9 done and 3 failed",
        Duration::from_secs(40),
        || async { history_sums(&base).await == (9, 3) },
    )
    .await;
    let folder = screenshot().parent().unwrap().to_path_buf();
    std::fs::create_dir_all(&folder).unwrap();
    println!("screenshots in {}", folder.display());
    let mut browser = Browser::start(&python, &chromium, &base, &screenshot());
    browser.step(json!({"op": "sign_in"})).await;
    the_charts_have_the_points(&mut browser, 1280, "1h", 9.0).await;
    search_and_open_the_attempts(&mut browser).await;
    browser
        .act(json!({"op": "retry_row"}), "retried 1 of 1 key")
        .await;
    eventually(
        "payment 7, retried, is done",
        Duration::from_secs(30),
        || async { state_of(&db, 7).await == "done" },
    )
    .await;
    let after = browser.step(json!({"op": "search", "q": UNIQUE})).await;
    assert_eq!(after["keys"], json!([]), "no longer a failed row: {after}");
    let fleet = browser.step(json!({"op": "open", "path": "copies"})).await;
    let body = fleet["body"].as_str().unwrap();
    assert!(
        body.contains("(this copy)") && body.contains("pay"),
        "{fleet}"
    );
    photograph(&mut browser, 1280).await;
    photograph(&mut browser, 390).await;
    the_charts_have_the_points(&mut browser, 390, "1h", 9.0).await;
    the_charts_have_the_points(&mut browser, 390, "7d", 9.0).await;
    browser.close().await;
    daemon.terminate().await;
}
