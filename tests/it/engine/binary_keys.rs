//! Keys that are not text — a BINARY(16) UUID, with a NUL byte or bytes that are not
//! UTF-8 — reach a command's `TABLEQ_KEY`, a webhook's `webhook-id` and the log as
//! `hex:` and their bytes: a NUL never stops a command, and two keys never share
//! one text.

use std::time::Duration;

use crate::support::daemon::{run_binary_until_empty, run_to_end, tableq};
use crate::support::web::{Reply, WebServer};
use crate::support::{QueueFile, QueueFiles, TestDb};

/// Three BINARY(16) keys: one with NUL bytes, and two that differ only in a first
/// byte that is not UTF-8 (the same text once such bytes are replaced).
const KEYS: [&str; 3] = [
    "00112233445566778899AABBCCDDEE00",
    "FF0102030405060708090A0B0C0D0E0F",
    "FE0102030405060708090A0B0C0D0E0F",
];

async fn binary_table(db: &TestDb) {
    db.exec(
        "CREATE TABLE bin_job (id BINARY(16) PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting')",
    )
    .await;
    for key in KEYS {
        db.exec(&format!("INSERT INTO bin_job (id) VALUES (X'{key}')"))
            .await;
    }
}

fn hex(key: &str) -> String {
    format!("hex:{}", key.to_ascii_lowercase())
}

/// A command runs for a key with a NUL byte, and each command sees its own key in
/// `TABLEQ_KEY` as `hex:…`; a failed item's log line names its key the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_keys_reach_commands_and_the_log_as_hex() {
    let db = TestDb::new().await;
    binary_table(&db).await;
    let files = QueueFiles::new();
    let seen = files.path().join("keys.txt");
    let script = files.script(
        "record.sh",
        &format!(
            "printf '%s\\n' \"$TABLEQ_KEY\" >> '{}'\ncase \"$TABLEQ_KEY\" in hex:fe*) exit 1;; esac",
            seen.display()
        ),
    );
    let file = QueueFile::new("binary_keys_command")
        .select("SELECT id FROM bin_job WHERE state = 'waiting' ORDER BY id")
        .action_command(&[script.to_str().unwrap()])
        .on_success("UPDATE bin_job SET state = 'done' WHERE id = :id")
        .on_failure("UPDATE bin_job SET state = 'failed' WHERE id = :id")
        .write(&files);
    let mut cmd = tableq(&["run", "--stop-when-empty"]);
    cmd.arg(&file).env("TABLEQ_DATABASE_URL", &db.url);
    let finished = run_to_end(cmd, Duration::from_secs(60)).await;
    assert_eq!(finished.code(), Some(0), "{}", finished.stderr);

    let mut keys: Vec<String> = std::fs::read_to_string(&seen)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    keys.sort();
    let mut expected: Vec<String> = KEYS.iter().map(|k| hex(k)).collect();
    expected.sort();
    assert_eq!(keys, expected, "{}", finished.stderr);
    assert_eq!(
        db.count("SELECT COUNT(*) FROM bin_job WHERE state = 'done'")
            .await,
        2,
        "{}",
        finished.stderr
    );
    let failed = finished
        .stderr
        .lines()
        .find(|line| line.contains("item failed"))
        .unwrap_or_else(|| panic!("no failed item logged:\n{}", finished.stderr));
    assert!(
        failed.contains(&format!("key={}", hex(KEYS[2]))),
        "{failed}"
    );
}

/// Each webhook of a binary key has its own `webhook-id`, `<queue>_hex:…`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_keys_give_distinct_webhook_ids() {
    let db = TestDb::new().await;
    binary_table(&db).await;
    let server = WebServer::start(|_| Reply::status(204)).await;
    let files = QueueFiles::new();
    let file = QueueFile::new("binkeys")
        .select("SELECT id FROM bin_job WHERE state = 'waiting' ORDER BY id")
        .action_http(&server.url("/hook"))
        .action_set("signing_secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        .on_success("UPDATE bin_job SET state = 'done' WHERE id = :id")
        .write(&files);
    run_binary_until_empty(&file, &db.url).await;
    let mut ids: Vec<String> = server
        .requests()
        .iter()
        .map(|r| r.header("webhook-id").to_string())
        .collect();
    ids.sort();
    let mut expected: Vec<String> = KEYS.iter().map(|k| format!("binkeys_{}", hex(k))).collect();
    expected.sort();
    assert_eq!(ids, expected);
}
