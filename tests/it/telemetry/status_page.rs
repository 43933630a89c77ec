//! The status page in a real browser: headless Chromium opens it during a run and
//! finds every queue with the numbers `/status.json` gives, and a failing queue's
//! last errors; screenshots (desktop, phone) are left under the target directory.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::support::daemon::{run_to_end, tableq};
use crate::support::endpoint::{get, start_with_metrics};
use crate::support::{eventually, tools, QueueFile, QueueFiles, TestDb};

/// Debian's `chromium` (or another Chromium); under `CI`, missing is a failure.
fn chromium() -> Option<PathBuf> {
    tools::required(
        &["chromium", "chromium-browser", "google-chrome"],
        "apt-get install chromium",
        "the status page in a browser",
    )
}

/// Runs headless Chromium on `url` with `args`; its stdout.
fn browse(chromium: &Path, args: &[&str], url: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let output = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(url)
        .output()
        .expect("run chromium");
    assert!(
        output.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// The text of the first `data-field="field"` element in `html`.
fn field<'a>(html: &'a str, field: &str) -> &'a str {
    let marker = format!("data-field=\"{field}\">");
    let start = html
        .find(&marker)
        .unwrap_or_else(|| panic!("{field} in {html}"))
        + marker.len();
    &html[start..start + html[start..].find('<').unwrap()]
}

/// The part of the page from `marker` to the end of its table row.
fn row<'a>(html: &'a str, marker: &str) -> &'a str {
    let start = html
        .find(marker)
        .unwrap_or_else(|| panic!("{marker} in {html}"));
    let rest = &html[start..];
    &rest[..rest.find("</tr>").unwrap()]
}

/// Text as the page escapes it: control characters as the log writes them, then
/// HTML's.
fn escaped(text: &str) -> String {
    let visible: String = text
        .chars()
        .map(|c| match c {
            '\n' => "\\n".to_string(),
            c if c.is_control() => format!("\\u{{{:x}}}", c as u32),
            c => c.to_string(),
        })
        .collect();
    visible
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Writes the queues of the page: `emails` works, `webhooks` fails (its errors carry
/// markup and control characters), `xfer` holds its one job until the file `go`
/// appears, and `zip_exports` is paused (by `tableq pause`) before the copy starts.
async fn four_queues(db: &TestDb, files: &QueueFiles) {
    db.exec(
        "CREATE TABLE email (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting') DEFAULT CHARSET=utf8mb4;
         CREATE TABLE hook (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting') DEFAULT CHARSET=utf8mb4;
         INSERT INTO email (id) VALUES (1), (2), (3), (4), (5);
         INSERT INTO hook (id) VALUES (7), (8)",
    )
    .await;
    let queue = |name: &str, select: &str| {
        QueueFile::new(name)
            .select(select)
            .poll_interval("1h")
            .set("stats_interval", "200ms")
    };
    queue(
        "emails",
        "SELECT id FROM email WHERE state = 'waiting' ORDER BY id",
    )
    .workers(2)
    .action_sql("DO :id")
    .on_success("UPDATE email SET state = 'done' WHERE id = :id")
    .write(files);
    files.script(
        "fail.sh",
        "printf 'no route to <host> for %s: \\033[31mred\\007\\010\\000!\\n' \"$TABLEQ_KEY\" >&2\nexit 3",
    );
    queue(
        "webhooks",
        "SELECT id FROM hook WHERE state = 'waiting' ORDER BY id",
    )
    .action_command(&["./fail.sh"])
    .on_success("UPDATE hook SET state = 'done' WHERE id = :id")
    .on_failure("UPDATE hook SET state = 'failed' WHERE id = :id")
    .set(
        "failed",
        toml::Table::from_iter([(
            "select".to_string(),
            "SELECT id FROM hook WHERE state = 'failed' ORDER BY id DESC".into(),
        )]),
    )
    .write(files);
    // A queue whose job runs until told to end: in flight meanwhile.
    db.exec("CREATE TABLE xfer (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting'); INSERT INTO xfer (id) VALUES (42)").await;
    files.script("hold.sh", "while [ ! -f go ]; do sleep 0.05; done");
    queue("xfer", "SELECT id FROM xfer WHERE state = 'waiting'")
        .action_command(&["./hold.sh"])
        .on_success("UPDATE xfer SET state = 'done' WHERE id = :id")
        .write(files);
    // A queue paused before the copy starts (named to come last).
    queue("zip_exports", "SELECT id FROM email WHERE state = 'zipped'")
        .action_sql("DO :id")
        .on_success("UPDATE email SET state = 'done' WHERE id = :id")
        .write(files);
    let mut pause = tableq(&["pause", "--queue", "zip_exports", "--reason", "disk full"]);
    pause.arg(files.path()).env("TABLEQ_DATABASE_URL", &db.url);
    let paused = run_to_end(pause, Duration::from_secs(60)).await;
    assert_eq!(paused.code(), Some(0), "{}", paused.stderr);
}

/// `/status.json` of the copy at `base`.
async fn status_json(base: &str) -> serde_json::Value {
    serde_json::from_str(&get(&format!("{base}/status.json")).await.1).unwrap()
}

/// Each queue's row of `page` shows the numbers of `status` (its connected workers
/// those of `before` or of `status`: a worker gives its connection up and takes one
/// again as it sleeps and wakes), its chart and its action's percentiles.
fn each_row_matches_status_json(
    page: &str,
    before: &serde_json::Value,
    status: &serde_json::Value,
) {
    let workers = |status: &serde_json::Value, n: usize| {
        let queue = &status["queues"][n];
        format!(
            "{} / {} / {}",
            queue["busy"], queue["connected"], queue["workers"]
        )
    };
    for (n, queue) in status["queues"].as_array().unwrap().iter().enumerate() {
        let name = queue["name"].as_str().unwrap();
        let html = row(page, &format!("data-queue=\"{name}\""));
        for key in ["done", "failed", "returned", "rolled_back", "waiting"] {
            assert_eq!(field(html, key), queue[key].to_string(), "{name}: {key}");
        }
        let shown = field(html, "workers");
        assert!(
            shown == workers(before, n) || shown == workers(status, n),
            "{name}: {shown} is neither {} nor {}",
            workers(before, n),
            workers(status, n)
        );
        assert!(html.contains("<svg class=\"spark\""), "{name}: the chart");
        for minutes in [5, 15] {
            let action = format!("data-field=\"action_{minutes}m\">{minutes} min: ");
            assert!(html.contains(&action), "{name}: the action's p50 / p99");
        }
    }
}

/// The failing queue's own page lists its failures (key, status, error) grouped by
/// error text as /status.json does, control characters escaped; the front page
/// counts its kinds and the rows that gave up.
fn the_failures_are_grouped_by_kind(
    chromium: &Path,
    base: &str,
    page: &str,
    status: &serde_json::Value,
) {
    let failures = status["queues"][1]["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 2);
    // The failures are on the queue's own page, grouped by kind.
    let queue_page = browse(
        chromium,
        &["--dump-dom"],
        &format!("{base}/queues/webhooks"),
    );
    let html = &queue_page[queue_page.find("id=\"kinds\"").expect(&queue_page)..];
    // Two failures whose texts differ only in the key are one kind.
    assert_eq!(html.matches("class=\"failure\"").count(), 1, "{html}");
    for failure in failures {
        let key = failure["key"].as_str().unwrap();
        let error = failure["error"].as_str().unwrap();
        assert!(
            error.contains(&format!(
                "no route to <host> for {key}: \u{1b}[31mred\u{7}\u{8}"
            )),
            "{error:?}"
        );
        assert!(
            html.contains(&format!("data-field=\"key\">{key}<")),
            "{html}"
        );
    }
    // Control characters reach the page escaped, as in the log and status.json.
    let latest = failures[0]["error"].as_str().unwrap();
    assert_eq!(field(html, "error"), escaped(latest), "{html}");
    assert!(
        field(html, "error").contains("\\u{1b}[31mred\\u{7}\\u{8}\\u{0}!"),
        "{html}"
    );
    assert!(!queue_page.contains('\u{1b}') && !page.contains('\u{1b}'));
    assert!(
        field(html, "kind").contains("no route to &lt;host&gt; for #: "),
        "{html}"
    );
    assert!(
        queue_page.contains("data-field=\"failure_total\">2 failures, 1 kind<"),
        "{queue_page}"
    );
    assert!(
        html.contains("data-field=\"count\">2<") && html.contains(" s ago</time>"),
        "{html}"
    );
    assert_eq!(
        field(row(page, "data-queue=\"webhooks\""), "kinds"),
        "1 kind"
    );
    let emails = browse(chromium, &["--dump-dom"], &format!("{base}/queues/emails"));
    assert!(emails.contains(">0 failures, 0 kinds<"), "{emails}");
    assert_eq!(
        status["queues"][1]["failure_groups"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // The rows that gave up, from [failed] select; none shown without [failed].
    let html = row(page, "data-queue=\"webhooks\"");
    assert_eq!(field(html, "gave_up"), "2 gave up", "{html}");
    assert!(status["queues"][0]["gave_up"].is_null(), "{status}");
    assert!(!row(page, "data-queue=\"emails\"").contains("gave_up"));
}

/// Which copy this is: host, pid and uptime, in the page and in the JSON.
fn the_page_names_the_copy(page: &str, status: &serde_json::Value, pid: i32) {
    assert_eq!(status["pid"].as_u64(), Some(pid as u64), "{status}");
    let host = status["host"].as_str().unwrap();
    assert!(
        page.contains(&format!("data-field=\"host\">{}<", escaped(host))),
        "{page}"
    );
    assert!(
        page.contains(&format!("data-field=\"pid\">{pid}<")),
        "{page}"
    );
    assert!(status["uptime_seconds"].as_u64().is_some(), "{status}");
}

/// The paused queue, said in its row and in the summary.
fn the_paused_queue_is_said(page: &str) {
    let html = row(page, "data-queue=\"zip_exports\"");
    assert!(
        field(html, "paused").starts_with("paused (disk full) by root@"),
        "{html}"
    );
    assert!(
        html.contains(" s ago</time>, until resumed</span>"),
        "{html}"
    );
    assert_eq!(field(page, "paused_queues"), "paused: 1", "{page}");
    assert!(!row(page, "data-queue=\"emails\"").contains("data-field=\"paused\""));
}

/// Screenshots of the page on a desktop and on a phone's screen, left under the
/// target directory.
fn screenshots(chromium: &Path, base: &str) {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .to_path_buf();
    for (file, size) in [("status.png", "1280,800"), ("status-phone.png", "390,844")] {
        let shot = target.join(file);
        let _ = std::fs::remove_file(&shot);
        let arg = format!("--screenshot={}", shot.display());
        let size = format!("--window-size={size}");
        browse(chromium, &[&arg, &size], &format!("{base}/"));
        assert!(std::fs::metadata(&shot).is_ok_and(|m| m.len() > 1000));
        println!("the status page's screenshot: {}", shot.display());
    }
}

/// Chromium opens the page of a run with a working and a failing queue: each queue's
/// row shows the numbers of /status.json, the failing queue lists its failures
/// (key, status, error) grouped by error text as /status.json does, and the page
/// names the host, pid and uptime of the copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_in_a_browser_matches_status_json() {
    let Some(chromium) = chromium() else { return };
    let db = TestDb::new().await;
    let files = QueueFiles::new();
    four_queues(&db, &files).await;
    let (mut daemon, base) = start_with_metrics(&files, &db.url).await;
    eventually(
        "both queues are done and counted",
        Duration::from_secs(60),
        || async {
            let status = status_json(&base).await;
            let queue = |n: usize, key: &str| status["queues"][n][key].as_u64();
            queue(0, "done") == Some(5)
                && queue(1, "failed") == Some(2)
                && queue(0, "waiting") == Some(0)
                && queue(1, "waiting") == Some(0)
                && queue(1, "gave_up") == Some(2)
                && queue(2, "in_flight") == Some(1)
                && queue(3, "waiting") == Some(0)
                && status["queues"][3]["paused"]["reason"] == "disk full"
        },
    )
    .await;
    let before = status_json(&base).await;
    let page = browse(&chromium, &["--dump-dom"], &format!("{base}/"));
    let status = status_json(&base).await;
    each_row_matches_status_json(&page, &before, &status);
    the_failures_are_grouped_by_kind(&chromium, &base, &page, &status);
    the_page_names_the_copy(&page, &status, daemon.pid());
    // The job in flight, on its queue's page.
    let xfer = browse(&chromium, &["--dump-dom"], &format!("{base}/queues/xfer"));
    assert_eq!(field(&xfer, "in_flight"), "1", "{xfer}");
    assert!(field(&xfer, "run").starts_with("42 (started "), "{xfer}");
    assert_eq!(status["queues"][2]["in_flight_runs"][0]["keys"][0], "42");
    std::fs::write(files.path().join("go"), "").unwrap();
    the_paused_queue_is_said(&page);
    screenshots(&chromium, &base);
    daemon.terminate().await;
}
