//! What the log lines say, as an operator reads them: no Rust debug text
//! (`Some("…")`) and waits at a person's precision, in a run that goes wrong in
//! several ways — a receiver that refuses connections (the circuit opens, a probe
//! fails), a database that cannot be reached.

use std::time::Duration;

use crate::support::daemon::{tableq, Daemon};
use crate::support::web::closed_port;
use crate::support::{QueueFile, QueueFiles, TestDb};

/// A word like `193us` or `796ns`: a wait said below the millisecond.
fn below_a_millisecond(word: &str) -> bool {
    ["us", "µs", "ns"].iter().any(|unit| {
        word.strip_suffix(unit)
            .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
    })
}

/// `1s 651ms`: a wait over a second said to the millisecond.
fn seconds_then_millis(line: &str) -> bool {
    let words: Vec<&str> = line
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    words.windows(2).any(|pair| {
        let digits = |w: &str, unit: &str| {
            w.strip_suffix(unit)
                .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
        };
        digits(pair[0], "s") && digits(pair[1], "ms")
    })
}

/// A run whose webhook is refused (the queue waits for it, trying every second)
/// and whose other queue's database cannot be reached logs no `Some(`, and
/// says every wait rounded (`651ms`, `1.7s`), never `651ms 193us 796ns`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_lines_hold_no_debug_text_and_round_their_waits() {
    let db = TestDb::new().await;
    db.exec(
        "CREATE TABLE refused_hooks (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting');
         INSERT INTO refused_hooks (id) VALUES (1), (2), (3), (4), (5), (6), (7), (8)",
    )
    .await;
    let files = QueueFiles::new();
    let circuit = toml::Table::from_iter([
        ("min_items".to_string(), toml::Value::Integer(3)),
        ("cool_down".to_string(), "1s".into()),
        ("max_cool_down".to_string(), "2s".into()),
    ]);
    QueueFile::new("refused_hooks")
        .select("SELECT id FROM refused_hooks WHERE state = 'waiting' ORDER BY id")
        .poll_interval("200ms")
        .error_backoff("300ms")
        .set("circuit", circuit)
        .action_http(&format!("http://{}/hook/{{id}}", closed_port()))
        .action_set("allow_private_networks", true)
        .action_set("timeout", "2s")
        .on_success("UPDATE refused_hooks SET state = 'done' WHERE id = :id")
        .write(&files);
    let away = format!("mysql://root@127.0.0.1:{}/away", closed_port().port());
    QueueFile::new("away_db")
        .database_url(&away)
        .select("SELECT id FROM t WHERE state = 'waiting'")
        .action_sql("DO :id")
        .on_success("UPDATE t SET state = 'done' WHERE id = :id")
        .write(&files);
    let mut cmd = tableq(&["run"]);
    cmd.arg(files.path())
        .env("TABLEQ_DATABASE_URL", &db.url)
        .env("TABLEQ_LOG", "info,tableq=debug");
    let mut daemon = Daemon::spawn(cmd);
    let within = Duration::from_secs(60);
    daemon
        .wait_for_log("the handler cannot be reached", within)
        .await;
    daemon
        .wait_for_log("cannot connect to the database", within)
        .await;
    daemon.terminate().await;
    let log = daemon.stderr();
    for line in log.lines() {
        assert!(!line.contains("Some("), "Rust debug text: {line}");
        let words = line.split(|c: char| c.is_whitespace() || c == '=' || c == '"');
        assert!(
            !words.clone().any(below_a_millisecond),
            "a wait below the millisecond: {line}"
        );
        assert!(!seconds_then_millis(line), "a wait to the ms: {line}");
    }
    assert!(log.contains("retry_in="), "{log}");
}
