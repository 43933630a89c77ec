//! Operating the rows that gave up, through `[failed]`: `tableq failed` lists what
//! `[failed] select` returns, `inspect` shows one row, `retry` and `discard` change
//! exactly the rows named (or all), `--dry-run` changes nothing, and `check` proves
//! `retry` and `discard` on a sample row, rolled back.

use std::path::PathBuf;
use std::time::Duration;

use crate::support::daemon::{run_binary_until_empty, run_to_end, tableq, Finished};
use crate::support::{assert_has, QueueFile, QueueFiles, TestDb};

const RETRY: &str =
    "UPDATE job SET state = 'waiting', attempts = 0 WHERE id = :id AND state = 'failed'";
const DISCARD: &str = "UPDATE job SET state = 'discarded' WHERE id = :id AND state = 'failed'";

/// Ten jobs: 1–6 waiting, 7–10 given up after three attempts.
async fn jobs(db: &TestDb) {
    db.exec(
        "CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting',
         attempts INT NOT NULL DEFAULT 0, last_error VARCHAR(200) NULL, KEY (state))",
    )
    .await;
    db.fill("job", "id", 10, |i| i.to_string()).await;
    db.exec("UPDATE job SET state = 'failed', attempts = 3, last_error = CONCAT('bounced ', id) WHERE id > 6")
        .await;
}

/// A queue of `job` whose `[failed]` has `retry`.
fn queue(retry: &str) -> QueueFile {
    let failed = toml::Table::from_iter([
        (
            "select".to_string(),
            "SELECT id, attempts, last_error FROM job WHERE state = 'failed' ORDER BY id DESC"
                .into(),
        ),
        ("retry".to_string(), retry.into()),
        ("discard".to_string(), DISCARD.into()),
    ]);
    QueueFile::new("mail")
        .select("SELECT id FROM job WHERE state = 'waiting' ORDER BY id")
        .action_sql("DO :id")
        .on_success("UPDATE job SET state = 'done' WHERE id = :id")
        .on_failure("UPDATE job SET state = 'failed', attempts = attempts + 1 WHERE id = :id")
        .set("failed", failed)
}

/// `tableq ARGS… FILE` against `db`, to its end.
async fn operate(db: &TestDb, file: &PathBuf, args: &[&str]) -> Finished {
    let mut cmd = tableq(args);
    cmd.arg(file).env("TABLEQ_DATABASE_URL", &db.url);
    run_to_end(cmd, Duration::from_secs(60)).await
}

async fn states(db: &TestDb) -> Vec<(u32, String)> {
    db.rows("SELECT id, state FROM job ORDER BY id").await
}

/// `failed` lists exactly the rows of `[failed] select`, newest first, as text and
/// as a JSON array typed as an HTTP body is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_lists_the_rows_that_gave_up() {
    let db = TestDb::new().await;
    jobs(&db).await;
    let files = QueueFiles::new();
    let file = queue(RETRY).write(&files);
    let text = operate(&db, &file, &["failed"]).await;
    assert_eq!(text.code(), Some(0), "{}", text.stderr);
    let lines: Vec<&str> = text.stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "queue mail: 4 rows",
            "id\tattempts\tlast_error",
            "10\t3\tbounced 10",
            "9\t3\tbounced 9",
            "8\t3\tbounced 8",
            "7\t3\tbounced 7"
        ]
    );
    let json = operate(&db, &file, &["failed", "--format", "json", "--limit", "2"]).await;
    let rows: serde_json::Value = serde_json::from_str(&json.stdout).expect(&json.stdout);
    assert_eq!(
        rows,
        serde_json::json!([
            {"id": 10, "attempts": 3, "last_error": "bounced 10"},
            {"id": 9, "attempts": 3, "last_error": "bounced 9"}
        ])
    );
}

/// `retry --all` puts every given-up row back and a following run finishes them;
/// `discard --key` takes one row out for good; a key that matches nothing is
/// reported and the exit status says so; `--dry-run` changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_and_discard_change_exactly_the_rows_named() {
    let db = TestDb::new().await;
    jobs(&db).await;
    let files = QueueFiles::new();
    let file = queue(RETRY).write(&files);
    let before = states(&db).await;
    let dry = operate(
        &db,
        &file,
        &["retry", "--queue", "mail", "--all", "--dry-run"],
    )
    .await;
    assert_eq!(dry.code(), Some(0), "{}", dry.stderr);
    assert_has(
        &dry.stdout,
        "mail: would retry 4 of 4 keys (dry run: nothing changed)",
    );
    assert_eq!(states(&db).await, before, "--dry-run changed nothing");

    let discard = operate(
        &db,
        &file,
        &["discard", "--queue", "mail", "--key", "8", "--key", "3"],
    )
    .await;
    assert_eq!(
        discard.code(),
        Some(1),
        "key 3 has not given up: {}",
        discard.stdout
    );
    assert_has(&discard.stdout, "mail: key 8: discarded (1 row changed)");
    assert_has(&discard.stdout, "mail: key 3: matched no row");
    assert_has(&discard.stderr, "1 key matched no row");

    let retry = operate(&db, &file, &["retry", "--queue", "mail", "--all"]).await;
    assert_eq!(retry.code(), Some(0), "{}", retry.stderr);
    assert_has(&retry.stdout, "mail: retried 3 of 3 keys");
    let done = run_binary_until_empty(&file, &db.url).await;
    assert_eq!(done.code(), Some(0), "{}", done.stderr);
    let expected: Vec<(u32, String)> = (1..=10)
        .map(|id| (id, if id == 8 { "discarded" } else { "done" }.to_string()))
        .collect();
    assert_eq!(states(&db).await, expected);
}

/// `inspect` shows one row as its action would get it, and where it is now: waiting,
/// gave up, there but in neither (done: exit 0), or no such row (exit 1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_shows_a_row_and_where_it_is() {
    let db = TestDb::new().await;
    jobs(&db).await;
    db.exec("UPDATE job SET state = 'done' WHERE id = 5").await;
    let files = QueueFiles::new();
    let file = queue(RETRY).write(&files);
    let shown = |done: &Finished| -> serde_json::Value {
        serde_json::from_str(&done.stdout).expect(&done.stdout)
    };
    let waiting = operate(&db, &file, &["inspect", "--queue", "mail", "--key", "2"]).await;
    assert_eq!(waiting.code(), Some(0), "{}", waiting.stderr);
    assert_eq!(
        shown(&waiting),
        serde_json::json!({"queue": "mail", "key": "2", "in_select": true, "in_failed": false,
            "exists": true, "where": "waiting (in the select)", "row": {"id": 2}})
    );
    let gave_up = operate(&db, &file, &["inspect", "--queue", "mail", "--key", "9"]).await;
    assert_eq!(
        shown(&gave_up),
        serde_json::json!({"queue": "mail", "key": "9", "in_select": false, "in_failed": true,
            "exists": true, "where": "gave up (in [failed])",
            "row": {"id": 9, "attempts": 3, "last_error": "bounced 9"}})
    );
    let done = operate(&db, &file, &["inspect", "--queue", "mail", "--key", "5"]).await;
    assert_eq!(done.code(), Some(0), "{}", done.stderr);
    assert_eq!(
        shown(&done),
        serde_json::json!({"queue": "mail", "key": "5", "in_select": false, "in_failed": false,
            "exists": true, "where": "exists; not in the select, not in [failed]",
            "row": {"id": 5}})
    );
    let missing = operate(&db, &file, &["inspect", "--queue", "mail", "--key", "99"]).await;
    assert_eq!(missing.code(), Some(1), "{}", missing.stderr);
    assert_eq!(shown(&missing)["where"], "no such row");
    assert_eq!(shown(&missing)["exists"], false);
    assert_has(&missing.stderr, "queue mail: key 99: no such row");
}

/// `check` proves `retry` and `discard` on a row that gave up, and leaves it as it
/// was; a `retry` that leaves the row out of the select is an error naming it, and so
/// is a `[failed] select` without the key (which `retry --all` refuses).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_proves_retry_and_discard() {
    let db = TestDb::new().await;
    jobs(&db).await;
    let files = QueueFiles::new();
    let good = queue(RETRY).write(&files);
    let before = states(&db).await;
    let checked = operate(&db, &good, &["check", "--strict"]).await;
    assert_eq!(checked.code(), Some(0), "{}", checked.stdout);
    assert!(!checked.stdout.contains("failed."), "{}", checked.stdout);
    let wrong = files.write(
        "mail.toml",
        &queue("UPDATE job SET state = 'later' WHERE id = :id AND state = 'failed'").to_string(),
    );
    let refused = operate(&db, &wrong, &["check"]).await;
    assert_eq!(refused.code(), Some(1), "{}", refused.stdout);
    assert_has(
        &refused.stdout,
        "error: `failed.retry` on row id = 10: leaves the row out of the queue's select",
    );
    assert_eq!(states(&db).await, before, "check changed nothing");
    // A [failed] select without the key: check says so, and retry --all refuses
    // rather than name rows by another column.
    let keyless = queue(RETRY).set(
        "failed",
        toml::Table::from_iter([
            (
                "select".to_string(),
                "SELECT attempts, last_error FROM job WHERE state = 'failed'".into(),
            ),
            ("retry".to_string(), RETRY.into()),
        ]),
    );
    let keyless = files.write("mail.toml", &keyless.to_string());
    let refused = operate(&db, &keyless, &["check"]).await;
    assert_has(
        &refused.stdout,
        "error: `failed.select` does not return `id`",
    );
    let retry = operate(&db, &keyless, &["retry", "--queue", "mail", "--all"]).await;
    assert_eq!(retry.code(), Some(1), "{}", retry.stdout);
    assert_has(&retry.stderr, "`id` is not among the columns it returns");
    assert_eq!(states(&db).await, before, "nothing changed");
}
