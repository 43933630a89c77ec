//! A paused queue claims nothing, whatever wakes it: rows that gave up, retried
//! while the queue is paused — from the console's API or with `tableq retry` — wait
//! until `resume`, in transaction and lease mode, with several workers, on the
//! binary log and polling, also when the pause came while the workers waited out
//! the circuit's cool-down. A pause from the console holds in its own copy before
//! its answer: no claim starts after the 2xx.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::future::join_all;

use super::wake::binlog_server;
use crate::support::daemon::{run_to_end, tableq, Daemon};
use crate::support::endpoint::{get, metrics_address};
use crate::support::scrape::sample;
use crate::support::{eventually, QueueFile, QueueFiles, TestDb};
use crate::telemetry::console_api::{post, TOKEN};

const POLL: Duration = Duration::from_secs(1);
const ROWS: u64 = 10;
const COOL_DOWN: &str = "4s";
const BUSY_ROWS: u64 = 300;

/// How a queue is paused, retried and resumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    Console,
    Cli,
}

/// One queue of the run: its name, mode and how it is operated.
#[derive(Debug, Clone, Copy)]
struct Case {
    name: &'static str,
    lease: bool,
    via: Via,
}

const CASES: [Case; 4] = [
    Case {
        name: "tx_console",
        lease: false,
        via: Via::Console,
    },
    Case {
        name: "tx_cli",
        lease: false,
        via: Via::Cli,
    },
    Case {
        name: "lease_console",
        lease: true,
        via: Via::Console,
    },
    Case {
        name: "lease_cli",
        lease: true,
        via: Via::Cli,
    },
];

/// The table `t`: `rows` rows waiting.
async fn waiting(db: &TestDb, t: &str, rows: usize) {
    db.exec(&format!(
        "CREATE TABLE {t} (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting', \
         lease_id VARCHAR(40) NULL, lease_until DATETIME(3) NULL, KEY (state))"
    ))
    .await;
    db.fill(t, "id", rows, |i| i.to_string()).await;
}

/// `case`'s queue: three workers, polling every [`POLL`] (or woken by the log, as
/// `wake` says); a command that fails downstream (exit 75) until the file `up`
/// exists, a row that failed gives up at once, and the circuit opens after two
/// such failures for a few seconds; `[failed]` retry.
fn queue(case: &Case, wake: &str, up: &Path) -> QueueFile {
    let t = case.name;
    let failed = toml::Table::from_iter([
        (
            "select".to_string(),
            format!("SELECT id FROM {t} WHERE state = 'failed' ORDER BY id").into(),
        ),
        (
            "retry".to_string(),
            format!("UPDATE {t} SET state = 'waiting' WHERE id = :id AND state = 'failed'").into(),
        ),
    ]);
    let circuit = toml::Table::from_iter([
        ("min_items".to_string(), toml::Value::Integer(2)),
        ("cool_down".to_string(), COOL_DOWN.into()),
        ("max_cool_down".to_string(), COOL_DOWN.into()),
    ]);
    let test_up = format!("test -e '{}' || exit 75", up.display());
    let file = QueueFile::new(t)
        .workers(3)
        .poll_interval("1s")
        .set("wake", wake)
        .set("failed", failed)
        .set("circuit", circuit)
        .action_command(&["sh", "-c", &test_up]);
    let (done, gave_up) = (
        format!("UPDATE {t} SET state = 'done' WHERE id = :id"),
        format!("UPDATE {t} SET state = 'failed' WHERE id = :id"),
    );
    match case.lease {
        false => file
            .select(&format!(
                "SELECT id FROM {t} WHERE state = 'waiting' ORDER BY id"
            ))
            .on_success(done)
            .on_failure(gave_up),
        true => file
            .set("mode", "lease")
            .select(&format!(
                "SELECT id FROM {t} WHERE state = 'waiting' \
                 OR (state = 'leased' AND lease_until < NOW(3)) ORDER BY id"
            ))
            .lease_set(
                "sql",
                format!(
                    "UPDATE {t} SET state = 'leased', lease_id = :lease_id, \
                     lease_until = NOW(3) + INTERVAL 2 SECOND WHERE id = :id"
                ),
            )
            .on_success(format!("{done} AND lease_id = :lease_id"))
            .on_failure(format!("{gave_up} AND lease_id = :lease_id")),
    }
}

/// `tableq run --metrics-addr … --console-token-file FILE` on the queues `names`
/// of `files`.
async fn start(files: &QueueFiles, url: &str, names: &[&str]) -> (Daemon, String) {
    let token = files.path().join("console.token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let mut cmd = tableq(&["run", "--metrics-addr", "127.0.0.1:0"]);
    for name in names {
        cmd.arg(files.path().join(format!("{name}.toml")));
    }
    cmd.env("TABLEQ_CONSOLE_TOKEN_FILE", &token)
        .env("TABLEQ_DATABASE_URL", url)
        .env("TABLEQ_LOG_FORMAT", "json");
    let daemon = Daemon::spawn(cmd);
    let base = format!("http://{}", metrics_address(&daemon).await);
    (daemon, base)
}

async fn claims(base: &str, queue: &str) -> f64 {
    let text = get(&format!("{base}/metrics")).await.1;
    sample(&text, &format!(r#"tableq_claims_total{{queue="{queue}"}}"#))
        .expect("the queue's claims counted")
}

async fn count(db: &TestDb, table: &str, state: &str) -> u64 {
    db.count(&format!(
        "SELECT COUNT(*) FROM {table} WHERE state = '{state}'"
    ))
    .await
}

/// Pauses, retries or resumes `case`'s queue the way the case says.
async fn operate(base: &str, file: &Path, url: &str, case: &Case, what: &str) {
    let q = case.name;
    match case.via {
        Via::Console => {
            let (path, body) = match what {
                "pause" => ("pause", r#"{"reason": "deploy"}"#),
                "retry" => ("failed/retry", r#"{"all": true}"#),
                _ => ("resume", ""),
            };
            let url = format!("{base}/api/queues/{q}/{path}");
            let (status, answer) = post(&url, Some(TOKEN), body).await;
            assert_eq!(status, 200, "{q}: {what}: {answer}");
        }
        Via::Cli => {
            let mut args = vec![what, "--queue", q];
            if what == "retry" {
                args.push("--all");
            }
            let mut cmd = tableq(&args);
            cmd.arg(file).env("TABLEQ_DATABASE_URL", url);
            let done = run_to_end(cmd, Duration::from_secs(60)).await;
            assert_eq!(done.code(), Some(0), "{q}: {what}: {}", done.stderr);
        }
    }
}

/// The circuit open after the first failures → pause → retry every row that gave
/// up, and the handler back → nothing is claimed through the cool-down's end and
/// three polls after (from the console: not one claim after the pause's answer);
/// resume → every row done.
async fn pause_then_retry(db: &TestDb, base: &str, file: PathBuf, up: &Path, case: Case) {
    let q = case.name;
    eventually("the circuit opens", Duration::from_secs(60), || async {
        status_of(base, q)
            .await
            .is_some_and(|s| s["circuit"] == "open")
    })
    .await;
    operate(base, &file, &db.url, &case, "pause").await;
    let before = claims(base, q).await;
    operate(base, &file, &db.url, &case, "retry").await;
    assert!(
        count(db, q, "failed").await == 0,
        "{q}: every row waits again"
    );
    std::fs::write(up, "").unwrap();
    eventually("the cool-down ends", Duration::from_secs(30), || async {
        status_of(base, q)
            .await
            .is_some_and(|s| s["circuit"] != "open")
    })
    .await;
    // Three reads of the pause; on the binary log, the retry's wake-up among them.
    tokio::time::sleep(3 * POLL).await;
    assert_eq!(
        count(db, q, "done").await,
        0,
        "{q}: nothing worked while paused"
    );
    assert_eq!(claims(base, q).await, before, "{q}: no claim while paused");
    operate(base, &file, &db.url, &case, "resume").await;
    eventually(
        "every row done after resume",
        Duration::from_secs(60),
        || async { count(db, q, "done").await == ROWS },
    )
    .await;
}

async fn status_of(base: &str, queue: &str) -> Option<serde_json::Value> {
    let text = get(&format!("{base}/status.json")).await.1;
    let status: serde_json::Value = serde_json::from_str(&text).ok()?;
    let queues = status["queues"].as_array()?.clone();
    queues.into_iter().find(|q| q["name"] == queue)
}

/// Four queues — each mode, operated from the console and the CLI — of one copy,
/// woken as `wake` says.
async fn every_case(db: &TestDb, wake: &str) {
    let files = QueueFiles::new();
    let mut written = Vec::new();
    for case in CASES {
        waiting(db, case.name, ROWS as usize).await;
        let up = files.path().join(format!("{}.up", case.name));
        written.push((queue(&case, wake, &up).write(&files), up));
    }
    let (mut daemon, base) = start(&files, &db.url, &CASES.map(|c| c.name)).await;
    let base = base.as_str();
    let runs = CASES
        .iter()
        .zip(written)
        .map(
            |(case, (file, up))| async move { pause_then_retry(db, base, file, &up, *case).await },
        );
    join_all(runs).await;
    daemon.terminate().await;
}

/// Woken by the binary log: a retry's commit wakes the paused queues, which claim
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_queue_woken_by_a_retry_claims_nothing() {
    let server = binlog_server().await;
    let db = TestDb::on(&server.base).await;
    every_case(&db, "auto").await;
}

/// Polling: a paused queue's polls read the pause, and claim nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_queue_that_polls_claims_nothing_retried() {
    let server = binlog_server().await;
    let db = TestDb::on(&server.base).await;
    every_case(&db, "poll").await;
}

/// A busy queue of [`BUSY_ROWS`] rows, each taking a little while (in lease mode or
/// not), polling seldom: its workers claim back to back, between reads of the pause.
fn busy(name: &str, lease: bool) -> QueueFile {
    let file = QueueFile::new(name)
        .workers(3)
        .poll_interval("5s")
        .set("wake", "poll");
    let done = format!("UPDATE {name} SET state = 'done' WHERE id = :id");
    match lease {
        false => file
            .select(&format!(
                "SELECT id FROM {name} WHERE state = 'waiting' ORDER BY id"
            ))
            .action_sql("DO SLEEP(0.02)")
            .on_success(done),
        true => file
            .set("mode", "lease")
            .select(&format!(
                "SELECT id FROM {name} WHERE state = 'waiting' ORDER BY id"
            ))
            .lease_set(
                "sql",
                format!("UPDATE {name} SET state = 'leased', lease_id = :lease_id WHERE id = :id"),
            )
            .action_command(&["sleep", "0.02"])
            .on_success(format!("{done} AND lease_id = :lease_id")),
    }
}

/// A pause from the console holds in its own copy before the answer: once the 2xx
/// is in, no worker starts a claim (they were claiming back to back, and the queue
/// reads its pause every 5 s), in either mode; a resume there claims again at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_from_the_console_holds_before_its_answer() {
    let db = TestDb::new().await;
    let files = QueueFiles::new();
    let names = ["busy_tx", "busy_lease"];
    for (name, lease) in names.into_iter().zip([false, true]) {
        waiting(&db, name, BUSY_ROWS as usize).await;
        busy(name, lease).write(&files);
    }
    let (mut daemon, base) = start(&files, &db.url, &names).await;
    for q in names {
        eventually("the queue works", Duration::from_secs(60), || async {
            count(&db, q, "done").await >= 10
        })
        .await;
        let url = format!("{base}/api/queues/{q}/pause");
        let (status, answer) = post(&url, Some(TOKEN), "{}").await;
        assert_eq!(status, 200, "{answer}");
        assert!(answer.contains("this copy claims nothing more"), "{answer}");
        let answered = claims(&base, q).await;
        // A poll's worth less than its 5 s: the workers claimed many times a second.
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(
            claims(&base, q).await,
            answered,
            "{q}: a claim after the answer"
        );
        let status = status_of(&base, q).await.expect("listed");
        assert!(!status["paused"].is_null(), "{q}: shown paused at once");
        let url = format!("{base}/api/queues/{q}/resume");
        let (status, answer) = post(&url, Some(TOKEN), "").await;
        assert_eq!(status, 200, "{answer}");
    }
    for q in names {
        eventually("every row done", Duration::from_secs(60), || async {
            count(&db, q, "done").await == BUSY_ROWS
        })
        .await;
    }
    daemon.terminate().await;
}
