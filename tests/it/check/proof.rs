//! The leave-the-query proof of `tableq check`: outcome SQL that leaves the row in
//! the queue or fails on it, what keeps it from running (an empty queue, locked
//! rows, a key that names no single row), and that it never changes anything: its
//! transaction is always rolled back, and actions other than SQL never run.

use std::path::Path;
use std::time::Duration;

use crate::support;
use crate::support::check::{
    assert_one_error_online, assert_report, check, check_online, counting_jobs, job_db, JobRow,
    ALL_JOBS, GOOD,
};
use crate::support::{QueueFiles, TestDb};

/// What check adds when a sample outcome is too long for its column.
const TOO_LONG: &str = "; `:error` may be 8 KiB and `:output` 64 KiB: keep what fits the column \
                        with LEFT(:error, n) (or LEFT(:output, n)), n its length";

/// [on_success] that leaves the row matching the select is an error naming it.
#[tokio::test]
async fn on_success_that_keeps_the_row_waiting() {
    let db = job_db().await;
    assert_one_error_online(
        &db,
        &GOOD.replace(
            "SET state = 'done' WHERE id = :id",
            "SET attempts = attempts WHERE id = :id",
        ),
        "5: queue jobs: error: on success the row stays in the queue: after the SQL \
             action and [on_success] on row id = 1 the select still returns it, so it would be \
             processed again and again; change the row in [on_success] so the select no longer \
             returns it",
    )
    .await;
}

/// [on_failure] that retries at once (the row still matches now) is an error.
#[tokio::test]
async fn on_failure_that_retries_at_once() {
    let db = job_db().await;
    assert_one_error_online(
        &db,
        &GOOD.replace(
            "attempts = attempts + 1, retry_at = UNIX_TIMESTAMP() + 60",
            "attempts = attempts + 1",
        ),
        "7: queue jobs: error: on failure the row stays in the queue: after \
             [on_failure] on row id = 1 the select still returns it now, so a failing item comes \
             straight back, at the front of the queue; change the row so it no longer matches \
             now (a retry time in the future, or a final status)",
    )
    .await;
}

/// [on_success] SQL that the server rejects while proving is an error naming the row.
#[tokio::test]
async fn on_success_that_fails_on_a_row() {
    let db = job_db().await;
    db.exec("ALTER TABLE job ADD CONSTRAINT short_state CHECK (LENGTH(state) <= 7)")
        .await;
    let (done, shown) = check_online(
        &db,
        &GOOD.replace(
            "UPDATE job SET state = 'done' WHERE id = :id",
            "UPDATE job SET state = 'finished' WHERE id = :id",
        ),
    )
    .await;
    assert_report(
        &done,
        &[format!(
            "{shown}:6: queue jobs: error: `on_success.sql` fails on row id = 1: ERROR 4025 \
             (23000): CONSTRAINT `short_state` failed for `{}`.`job`; the item would be rolled \
             back and come straight back",
            db.name
        )],
        ": 1 error, 0 warnings",
        1,
    );
}

/// With nothing waiting, the proof and the self-test cannot run: a note says so, and
/// `--strict` (a deploy pipeline's check) passes on the empty, correct queue.
#[tokio::test]
async fn an_empty_queue_is_not_proven_and_passes_strict() {
    let db = job_db().await;
    db.exec("UPDATE job SET state = 'done'").await;
    let (_files, path, shown) = support::check::jobs_file(GOOD);
    let not_proven = format!(
        "{shown}:1: queue jobs: note: not proven: queue is empty — with no row to claim, \
         neither the leave-the-query proof nor the two-session SKIP LOCKED self-test could \
         run; check again when a row is waiting"
    );
    for strict in [&[][..], &["--strict"][..]] {
        let done = check(strict, &[&path], Some(&db.url)).await;
        assert_report(
            &done,
            std::slice::from_ref(&not_proven),
            ": 0 errors, 0 warnings",
            0,
        );
    }
}

/// When running workers hold every waiting row, check says no unlocked row is waiting
/// rather than that the queue is empty.
#[tokio::test]
async fn every_waiting_row_locked_by_workers() {
    let db = job_db().await;
    let mut worker = hold_locks(&db, "SELECT * FROM job FOR UPDATE").await;
    let (done, shown) = check_online(&db, GOOD).await;
    mysql_async::prelude::Queryable::query_drop(&mut worker, "ROLLBACK")
        .await
        .unwrap();
    assert_report(
        &done,
        &[format!(
            "{shown}:1: queue jobs: warning: not proven: no unlocked row is waiting (3 waiting \
             rows are locked by running transactions) — with no row to claim, neither the \
             leave-the-query proof nor the two-session SKIP LOCKED self-test could run; check \
             again when a row is waiting"
        )],
        ": 0 errors, 1 warning",
        0,
    );
}

/// A lock held by a running transaction is a warning on the statement that waited
/// for it, after a short wait — not a lost connection.
#[tokio::test]
async fn a_lock_held_by_a_running_transaction() {
    let db = job_db().await;
    let (_files, path, shown) = counting_jobs(&db).await;
    let mut worker = hold_locks(&db, "SELECT * FROM stats FOR UPDATE").await;
    let started = std::time::Instant::now();
    let done = check(&[], &[&path], Some(&db.url)).await;
    let waited = started.elapsed();
    mysql_async::prelude::Queryable::query_drop(&mut worker, "ROLLBACK")
        .await
        .unwrap();
    assert_report(
        &done,
        &[format!(
            "{shown}:6: queue jobs: warning: not proven: a running transaction held a lock the \
             proof needed (`on_success.sql` waited for it: ERROR 1205 (HY000): Lock wait \
             timeout exceeded; try restarting transaction); check again"
        )],
        ": 0 errors, 1 warning",
        0,
    );
    assert!(waited < Duration::from_secs(30), "check waited {waited:?}");
}

/// A `key` shared by several waiting rows, or NULL, is a warning and not a false
/// error: the self-test compares whole rows, and the proof does not run on it.
#[tokio::test]
async fn a_key_that_is_not_unique_or_null() {
    let db = job_db().await;
    let files = QueueFiles::new();
    let shared = files.write("shared.toml", &format!("key = \"attempts\"\n{GOOD}"));
    let null = files.write(
        "null.toml",
        &format!(
            "key = \"retry_at\"\n{}",
            GOOD.replace(
                "SELECT id, attempts FROM",
                "SELECT id, attempts, retry_at FROM"
            )
        ),
    );
    let done = check(&[], &[&files.path()], Some(&db.url)).await;
    let advice = "set `key` to a column that identifies one row (unique, and never NULL)";
    // Outcome SQL by `id` is not by the key: true, given the key.
    let not_by = |file: &Path, line: usize, path: &str, key: &str| {
        format!(
            "{}:{line}: queue {}: warning: `{path}` does not touch the item's row by its key (no \
             `:{key}` in its WHERE): a range of rows here locks rows other workers hold, and \
             deadlocks against them; write `WHERE {key} = :{key}`",
            file.display(),
            file.file_stem().unwrap().to_string_lossy()
        )
    };
    assert_report(
        &done,
        &[
            not_by(&null, 7, "on_success.sql", "retry_at"),
            not_by(&null, 9, "on_failure.sql", "retry_at"),
            format!(
                "{}:1: queue null: warning: not proven: `key` retry_at is NULL on a waiting \
                 row; {advice}",
                null.display()
            ),
            not_by(&shared, 7, "on_success.sql", "attempts"),
            not_by(&shared, 9, "on_failure.sql", "attempts"),
            format!(
                "{}:1: queue shared: warning: not proven: `key` attempts is not unique among \
                 waiting rows (3 rows have attempts = 0); {advice}",
                shared.display()
            ),
        ],
        ": 0 errors, 6 warnings",
        0,
    );
}

/// The proof's sample parameters are as big as real ones: a long `:error` and, for
/// an HTTP or command action, 64 KiB of `:output` — too big for a short column.
#[tokio::test]
async fn sample_parameters_as_big_as_real_ones() {
    let db = job_db().await;
    db.exec("ALTER TABLE job ADD last_error VARCHAR(20) NULL, ADD output TEXT NULL")
        .await;
    let files = QueueFiles::new();
    let error = files.write(
        "error.toml",
        &GOOD.replace(
            "retry_at = UNIX_TIMESTAMP() + 60 WHERE",
            "retry_at = UNIX_TIMESTAMP() + 60, last_error = :error WHERE",
        ),
    );
    let output = files.write(
        "output.toml",
        &GOOD
            .replace(
                "type = \"sql\"\nsql = \"DO :id\"",
                "type = \"command\"\ncommand = [\"/bin/true\"]",
            )
            .replace(
                "SET state = 'done' WHERE",
                "SET state = 'done', output = :output WHERE",
            ),
    );
    let done = check(&[], &[&files.path()], Some(&db.url)).await;
    assert_report(
        &done,
        &[
            format!(
                "{}:8: queue error: error: `on_failure.sql` fails on row id = 1: ERROR 1406 \
                 (22001): Data too long for column 'last_error' at row 1; the item would be \
                 rolled back and come straight back{TOO_LONG}",
                error.display()
            ),
            format!(
                "{}:6: queue output: error: `on_success.sql` fails on row id = 1: ERROR 1406 \
                 (22001): Data too long for column 'output' at row 1; the item would be rolled \
                 back and come straight back{TOO_LONG}",
                output.display()
            ),
        ],
        ": 2 errors, 0 warnings",
        1,
    );
}

/// The proof, the self-test and the index measurement leave every table exactly as it
/// was: all of it runs in transactions that are rolled back.
#[tokio::test]
async fn the_proof_leaves_the_tables_unchanged() {
    let db = TestDb::new().await;
    support::email_table(&db, 5).await;
    db.exec(
        "CREATE TABLE proof_outbox (email_id BIGINT NOT NULL, recipient VARCHAR(250) NOT NULL) ENGINE=InnoDB;
         UPDATE email SET attempts = 2 WHERE id = 3",
    )
    .await;
    let files = QueueFiles::new();
    let path = files.write(
        "email.toml",
        r#"select = "SELECT id, recipient, attempts FROM email WHERE status = 'waiting' AND (retry_at IS NULL OR retry_at <= UNIX_TIMESTAMP()) ORDER BY id"
[action]
type = "sql"
sql = ["INSERT INTO proof_outbox (email_id, recipient) VALUES (:id, :recipient)", "UPDATE email SET subject = 'sending' WHERE id = :id"]
[on_success]
sql = "UPDATE email SET status = 'sent' WHERE id = :id"
[on_failure]
sql = "UPDATE email SET status = IF(attempts + 1 >= 5, 'failed', 'waiting'), retry_at = UNIX_TIMESTAMP() + 60, attempts = attempts + 1 WHERE id = :id"
"#,
    );
    type Row = (i64, String, String, String, String, i32, Option<i64>);
    let all = "SELECT id, recipient, subject, body, CAST(status AS CHAR), attempts, retry_at FROM email ORDER BY id";
    let rows_before: Vec<Row> = db.rows(all).await;
    let sums_before: Vec<(String, Option<u64>)> =
        db.rows("CHECKSUM TABLE email, proof_outbox").await;
    let done = check(&[], &[&path], Some(&db.url)).await;
    assert_report(&done, &[], ": 0 errors, 0 warnings", 0);
    assert_eq!(db.rows::<Row>(all).await, rows_before);
    assert_eq!(
        db.rows::<(String, Option<u64>)>("CHECKSUM TABLE email, proof_outbox")
            .await,
        sums_before
    );
    db.assert_count("SELECT COUNT(*) FROM proof_outbox", 0)
        .await;
}

/// HTTP and command actions never run during check: the proof runs outcome SQL only.
#[tokio::test]
async fn command_actions_never_run() {
    let db = job_db().await;
    let files = QueueFiles::new();
    let marker = files.path().join("ran");
    let path = files.write(
        "jobs.toml",
        &GOOD.replace(
            "type = \"sql\"\nsql = \"DO :id\"",
            &format!(
                "type = \"command\"\ncommand = [\"/usr/bin/touch\", \"{}\"]",
                marker.display()
            ),
        ),
    );
    let done = check(&[], &[&path], Some(&db.url)).await;
    assert_report(&done, &[], ": 0 errors, 0 warnings", 0);
    assert!(!marker.exists(), "check ran the command");
}

/// A procedure that COMMITs is an error, and its work is not committed: the proof
/// runs inside an XA transaction, where a COMMIT fails instead.
#[tokio::test]
async fn a_procedure_that_commits() {
    let db = job_db().await;
    db.exec(
        "CREATE TABLE sent (job_id INT NOT NULL) ENGINE=InnoDB;
         CREATE PROCEDURE send_it(p INT) BEGIN INSERT INTO sent VALUES (p); COMMIT; END",
    )
    .await;
    let before: Vec<JobRow> = db.rows(ALL_JOBS).await;
    assert_one_error_online(
        &db,
        &GOOD.replace("DO :id", "CALL send_it(:id)"),
        "4: queue jobs: error: `action.sql` commits: tableq runs it inside the \
             item's transaction and commits that itself, once the outcome SQL has run (check's \
             transaction refused the commit: ERROR 1399); remove the COMMIT, or the statement \
             that commits implicitly, from what it calls",
    )
    .await;
    db.assert_count("SELECT COUNT(*) FROM sent", 0).await;
    assert_eq!(db.rows::<JobRow>(ALL_JOBS).await, before);
}

/// A connection that holds `sql`'s row locks in an open transaction until dropped
/// or rolled back: a running worker, for check to meet.
async fn hold_locks(db: &TestDb, sql: &str) -> mysql_async::Conn {
    use mysql_async::prelude::Queryable;
    let mut conn = db.conn().await;
    conn.query_drop("BEGIN").await.unwrap();
    conn.query_drop(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    conn
}
