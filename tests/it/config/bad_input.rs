//! A user's mistake stops `run` with exit status 2 and a message that names the
//! file, the line, the queue and the key — before any row is touched.

use std::time::Duration;

use crate::support::daemon::{run_to_end, tableq, Daemon, Finished};
use crate::support::{assert_has, load, run_until_empty, QueueFile, QueueFiles, TestDb};

const GOOD_ACTION: &str = "[action]\ntype = \"sql\"\nsql = \"DO 1\"\n";

/// `tableq run FILE` against `url`; it must fail fast.
async fn run_file(files: &QueueFiles, name: &str, contents: &str, url: &str) -> (Finished, String) {
    let path = files.write(name, contents);
    let mut cmd = tableq(&["run"]);
    cmd.arg(&path).env("TABLEQ_DATABASE_URL", url);
    (
        run_to_end(cmd, Duration::from_secs(60)).await,
        path.display().to_string(),
    )
}

/// Runs `contents` and expects exit 2 with `expected` on a line naming `file:line`.
async fn expect_rejected(contents: &str, line: usize, expected: &[&str]) {
    let files = QueueFiles::new();
    let (done, path) = run_file(
        &files,
        "broken.toml",
        contents,
        "mysql://root@127.0.0.1:1/none",
    )
    .await;
    assert_eq!(done.code(), Some(2), "stderr:\n{}", done.stderr);
    let prefix = format!("{path}:{line}: ");
    let message = done
        .stderr
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no message for {prefix}; stderr:\n{}", done.stderr));
    for part in expected {
        assert!(message.contains(part), "{message:?} should say {part:?}");
    }
    assert!(!done.stderr.contains("panicked"), "{}", done.stderr);
}

/// Malformed TOML is reported with its line; a value missing where a number belongs
/// says what the key takes.
#[tokio::test]
async fn malformed_toml() {
    expect_rejected(
        &format!("select = \"SELECT 1\"\nworkers = \n{GOOD_ACTION}"),
        2,
        &[
            "error:",
            "`workers` must be a whole number, such as `workers = 4`",
        ],
    )
    .await;
}

/// An unknown key (a typo) is rejected, naming the key and the ones that exist.
#[tokio::test]
async fn unknown_key() {
    expect_rejected(
        &format!("select = \"SELECT 1\"\nwrokers = 2\n{GOOD_ACTION}"),
        2,
        &["unknown field `wrokers`", "`workers`"],
    )
    .await;
    expect_rejected(
        &format!("select = \"SELECT 1\"\n{GOOD_ACTION}retries = 3\n"),
        5,
        &["`action`: unknown field `retries`"],
    )
    .await;
}

/// A `type` that names no kind is said at its line, with every kind there is and
/// the one a common other name means.
#[tokio::test]
async fn unknown_kind() {
    expect_rejected(
        "select = \"SELECT 1\"\n[action]\ntype = \"webhook\"\nurl = \"http://x/\"\n",
        3,
        &["`action.type`: `webhook` is not a kind of action; expected one of \"sql\", \"http\", \
           \"command\", \"amqp\", \"nats\", \"worker\", \"fastcgi\" (a webhook is `type = \"http\"`)"],
    )
    .await;
    expect_rejected(
        "select = \"SELECT 1\"\n[action]\ntype = \"rabbitmq\"\n",
        3,
        &["(RabbitMQ is `type = \"amqp\"`)"],
    )
    .await;
}

/// A value of the wrong type names the key and the type it should be.
#[tokio::test]
async fn wrong_type() {
    expect_rejected(
        &format!("select = \"SELECT 1\"\nworkers = \"four\"\n{GOOD_ACTION}"),
        2,
        &["`workers`", "expected a whole number"],
    )
    .await;
}

/// A duration that does not parse shows what one looks like.
#[tokio::test]
async fn bad_duration() {
    expect_rejected(
        &format!("select = \"SELECT 1\"\npoll_interval = \"5 parsecs\"\n{GOOD_ACTION}"),
        2,
        &["`poll_interval`", "\"5s\""],
    )
    .await;
}

/// A queue without a select says what the select is for.
#[tokio::test]
async fn missing_select() {
    expect_rejected(
        &format!("workers = 2\n{GOOD_ACTION}"),
        1,
        &["missing field `select`"],
    )
    .await;
}

/// A select that already claims (LIMIT, FOR UPDATE) is refused: tableq appends that.
#[tokio::test]
async fn limit_or_locking_in_select() {
    expect_rejected(
        &format!("workers = 1\nselect = \"SELECT id FROM t ORDER BY id LIMIT 10\"\n{GOOD_ACTION}"),
        2,
        &["queue broken", "`select` ends in LIMIT", "set `batch`"],
    )
    .await;
    expect_rejected(
        &format!("select = \"SELECT id FROM t FOR UPDATE\"\n{GOOD_ACTION}"),
        1,
        &["`FOR UPDATE`", "appends"],
    )
    .await;
}

/// A `${VAR}` that is not set names the variable.
#[tokio::test]
async fn missing_env_var() {
    expect_rejected(
        &format!("select = \"SELECT 1\"\ndatabase_url = \"mysql://app:${{TABLEQ_TEST_SURELY_UNSET}}@db/x\"\n{GOOD_ACTION}"),
        2,
        &["`database_url`", "`TABLEQ_TEST_SURELY_UNSET` is not set"],
    )
    .await;
}

/// Two files that define the same queue name are refused.
#[tokio::test]
async fn duplicate_names() {
    let files = QueueFiles::new();
    let queue = format!("name = \"mail\"\nselect = \"SELECT 1\"\n{GOOD_ACTION}");
    files.write("a.toml", &queue);
    files.write("b.toml", &queue);
    let mut cmd = tableq(&["run"]);
    cmd.arg(files.path())
        .env("TABLEQ_DATABASE_URL", "mysql://root@127.0.0.1:1/x");
    let done = run_to_end(cmd, Duration::from_secs(30)).await;
    assert_eq!(done.code(), Some(2));
    assert!(
        done.stderr
            .contains("b.toml:1: queue mail: error: queue name `mail` is already used by")
            && done.stderr.contains("a.toml"),
        "{}",
        done.stderr
    );
}

const JOB_TABLE: &str =
    "CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting') DEFAULT CHARSET=utf8mb4;
     INSERT INTO job (id) VALUES (1), (2)";

/// Runs `jobs.toml` (`contents`) against [`JOB_TABLE`]: it must stop at start with
/// exit 2 and `finding` (after the file's path), both rows still waiting.
async fn refused_before_any_row(contents: &str, finding: &str) {
    let db = TestDb::new().await;
    db.exec(JOB_TABLE).await;
    let files = QueueFiles::new();
    let (done, path) = run_file(&files, "jobs.toml", contents, &db.url).await;
    assert_eq!(done.code(), Some(2), "{}", done.stderr);
    assert_has(&done.stderr, &format!("{path}:{finding}"));
    db.assert_count_because(
        "SELECT COUNT(*) FROM job WHERE state = 'waiting'",
        2,
        "a row was touched",
    )
    .await;
}

/// SQL the server rejects stops `run` at start, before any row is touched.
#[tokio::test]
async fn syntax_error_in_on_success() {
    refused_before_any_row(
        "select = \"SELECT id FROM job WHERE state = 'waiting'\"\n[action]\ntype = \"sql\"\nsql = \"UPDATE job SET state = 'x' WHERE id = :id\"\n\n[on_success]\nsql = \"UPDTE job SET state = 'done' WHERE id = :id\"\n",
        "7: queue jobs: error: `on_success.sql`: the server rejects it: ERROR 1064",
    )
    .await;
}

/// A `:param` that is not a column of the select is named, with the columns there are.
#[tokio::test]
async fn parameter_the_select_does_not_return() {
    refused_before_any_row(
        "select = \"SELECT id FROM job WHERE state = 'waiting'\"\n[action]\ntype = \"sql\"\nsql = \"DO 1\"\n[on_success]\nsql = \"UPDATE job SET state = :new_state WHERE id = :id\"\n",
        "6: queue jobs: error: `on_success.sql` uses `:new_state`, which is not a column the select returns (id)",
    )
    .await;
}

/// An unreachable database at start is waited for, and said so; SIGTERM still exits 0.
#[tokio::test]
async fn unreachable_database_at_start_keeps_retrying() {
    let files = QueueFiles::new();
    let path = QueueFile::new("jobs")
        .error_backoff("100ms")
        .select("SELECT id FROM job")
        .action_sql("DO 1")
        .write(&files);
    let mut cmd = tableq(&["run"]);
    cmd.arg(&path)
        .env(
            "TABLEQ_DATABASE_URL",
            "mysql://root:hunter2@127.0.0.1:1/nowhere",
        )
        .env("TABLEQ_LOG", "debug");
    let mut daemon = Daemon::spawn(cmd);
    daemon
        .wait_for_log(
            "cannot connect to the database; the queue starts once it can",
            Duration::from_secs(30),
        )
        .await;
    // Still retrying, with a growing backoff, a few attempts later (said at info
    // once a minute, at debug every time).
    daemon
        .wait_for_log_times(
            "cannot connect to the database; retrying",
            3,
            Duration::from_secs(30),
        )
        .await;
    assert_has(&daemon.stderr(), "root@127.0.0.1:1/nowhere");
    assert!(
        !daemon.stderr().contains("hunter2"),
        "the password was logged"
    );
    daemon.signal(libc::SIGTERM);
    assert_eq!(daemon.wait(Duration::from_secs(10)).await.code(), Some(0));
}

/// Rows with NULLs and bytes that are not UTF-8 travel through bound parameters intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nulls_and_non_utf8_bytes_arrive_intact() {
    let db = TestDb::new().await;
    db.exec(
        "CREATE TABLE blob_job (id INT PRIMARY KEY, payload VARBINARY(64) NULL, note VARCHAR(50) NULL,
           state VARCHAR(10) NOT NULL DEFAULT 'waiting') DEFAULT CHARSET=utf8mb4;
         CREATE TABLE blob_copy (id INT PRIMARY KEY, payload VARBINARY(64) NULL, note VARCHAR(50) NULL) DEFAULT CHARSET=utf8mb4;
         INSERT INTO blob_job (id, payload, note) VALUES
           (1, X'FF00FE80', NULL), (2, NULL, 'émoji 🎉'), (3, X'', ''), (4, NULL, NULL)",
    )
    .await;
    let files = QueueFiles::new();
    let file = files.write(
        "blobs.toml",
        r#"
select = "SELECT id, payload, note FROM blob_job WHERE state = 'waiting' ORDER BY id"
batch = 4
[action]
type = "sql"
sql = "INSERT INTO blob_copy (id, payload, note) VALUES (:id, :payload, :note)"
[on_success]
sql = "UPDATE blob_job SET state = 'done' WHERE id = :id"
"#,
    );
    let summary = run_until_empty(load(&[file]), &db.url).await;
    assert_eq!(summary.counts("blobs").unwrap().done, 4);
    let differing = db
        .count(
            "SELECT COUNT(*) FROM blob_job j JOIN blob_copy c USING (id)
             WHERE NOT (j.payload <=> c.payload) OR NOT (j.note <=> c.note)",
        )
        .await;
    assert_eq!(differing, 0);
    db.assert_count("SELECT COUNT(*) FROM blob_copy", 4).await;
    db.assert_count(
        "SELECT COUNT(*) FROM blob_copy WHERE payload IS NULL AND note IS NULL",
        1,
    )
    .await;
}
