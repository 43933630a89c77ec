//! Every way an item can go wrong ends with the row either done or waiting: a hung
//! action, outcome SQL that fails, a failure with no `[on_failure]`.

use std::time::{Duration, Instant};

use crate::support;
use crate::support::{load, run_until_empty, Engine, QueueFiles, TestDb};

const JOBS: &str =
    "CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting',
    error VARCHAR(500) NULL, attempts INT NOT NULL DEFAULT 0) DEFAULT CHARSET=utf8mb4;
  CREATE TABLE job_log (job_id INT NOT NULL) DEFAULT CHARSET=utf8mb4;
  INSERT INTO job (id) VALUES (1), (2), (3), (4), (5), (6)";

/// The action of job `id` (its insert into `job_log`) was undone; those of the
/// five other jobs were kept.
async fn only_the_action_of_job_was_undone(db: &TestDb, id: u32) {
    let logged = format!("SELECT COUNT(*) FROM job_log WHERE job_id = {id}");
    db.assert_count_because(&logged, 0, "the failed item's action was kept")
        .await;
    db.assert_count("SELECT COUNT(*) FROM job_log", 5).await;
}

/// An SQL action that runs past its timeout is interrupted and counts as failed,
/// with `:error` saying so; its partial work is undone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_sql_action_times_out_and_fails() {
    let db = TestDb::new().await;
    db.exec(JOBS).await;
    let files = QueueFiles::new();
    let file = files.write(
        "jobs.toml",
        r#"
select = "SELECT id FROM job WHERE state = 'waiting' ORDER BY id"
batch = 3
[action]
type = "sql"
sql = ["INSERT INTO job_log (job_id) VALUES (:id)", "DO IF(:id = 2, SLEEP(30), 0)"]
timeout = "500ms"
[on_success]
sql = "UPDATE job SET state = 'done' WHERE id = :id"
[on_failure]
sql = "UPDATE job SET state = 'failed', error = :error WHERE id = :id"
"#,
    );
    let started = Instant::now();
    let summary = run_until_empty(load(&[file]), &db.url).await;
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "the 30 s statement was not interrupted"
    );
    let counts = summary.counts("jobs").unwrap();
    assert_eq!((counts.done, counts.failed), (5, 1));
    let failed: Vec<(u32, String)> = db
        .rows("SELECT id, error FROM job WHERE state = 'failed'")
        .await;
    assert_eq!(failed, vec![(2, "timed out after 500ms".to_string())]);
    only_the_action_of_job_was_undone(&db, 2).await;
}

/// When `[on_success]` fails for one item of a batch, that item is rolled back to its
/// savepoint and stays waiting; the rest of the batch commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_outcome_sql_leaves_only_that_item_waiting() {
    let db = TestDb::new().await;
    db.exec(JOBS).await;
    // Row 4 can never be marked done: a CHECK constraint refuses it.
    db.exec("ALTER TABLE job ADD CONSTRAINT not_four CHECK (id <> 4 OR state <> 'done')")
        .await;
    let files = QueueFiles::new();
    let file = files.write(
        "jobs.toml",
        r#"
select = "SELECT id FROM job WHERE state = 'waiting' ORDER BY id"
batch = 6
poll_interval = "50ms"
error_backoff = "50ms"
[action]
type = "sql"
sql = "INSERT INTO job_log (job_id) VALUES (:id)"
[on_success]
sql = "UPDATE job SET state = 'done' WHERE id = :id"
[on_failure]
sql = "UPDATE job SET state = 'failed' WHERE id = :id"
"#,
    );
    let engine = Engine::start(load(&[file]), &db.url);
    // The other items are done.
    db.until_count("SELECT COUNT(*) FROM job WHERE state = 'done'", 5, 30)
        .await;
    let summary = engine.stop().await;
    let counts = summary.counts("jobs").unwrap();
    assert_eq!(counts.done, 5);
    assert!(
        counts.returned >= 1,
        "row 4 went back to the queue: {counts:?}"
    );
    db.assert_count(
        "SELECT COUNT(*) FROM job WHERE id = 4 AND state = 'waiting'",
        1,
    )
    .await;
    only_the_action_of_job_was_undone(&db, 4).await;
}

/// Without `[on_failure]`, a failed item is rolled back and waiting again, and the
/// worker backs off instead of spinning on it. (It also stays at the front of the
/// queue, holding up the rows behind it: why `check` warns about a missing
/// `[on_failure]`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_on_failure_a_failed_item_waits_and_the_worker_backs_off() {
    let logs = support::logs::capture();
    let db = TestDb::new().await;
    db.exec(JOBS).await;
    db.exec("CREATE TABLE attempt_log (job_id INT NOT NULL CHECK (job_id <> 3)) DEFAULT CHARSET=utf8mb4").await;
    let files = QueueFiles::new();
    let file = files.write(
        // A name no other test gives a queue: the log read below is the process's.
        "backs_off.toml",
        r#"
select = "SELECT id FROM job WHERE state = 'waiting' ORDER BY id"
error_backoff = "200ms"
[action]
type = "sql"
sql = "INSERT INTO attempt_log (job_id) VALUES (:id)"
[on_success]
sql = "UPDATE job SET state = 'done' WHERE id = :id"
"#,
    );
    let engine = Engine::start(load(&[file]), &db.url);
    // The items before the bad one are done.
    db.until_count("SELECT COUNT(*) FROM job WHERE state = 'done'", 2, 30)
        .await;
    let watched = Instant::now();
    support::eventually("row 3 came back twice", Duration::from_secs(30), || {
        let logs = logs.clone();
        async move {
            logs.lines_of(
                "backs_off",
                "item failed; with no [on_failure] it is waiting again",
            )
            .len()
                >= 2
        }
    })
    .await;
    // The rest of a 2 s window, which the retry rate below is measured over.
    tokio::time::sleep_until((watched + Duration::from_secs(2)).into()).await;
    let summary = engine.stop().await;
    let returned = summary.counts("backs_off").unwrap().returned;
    let seconds = watched.elapsed().as_secs_f64() + 1.0;
    // Doubling from 200 ms, ~2 s allows only a handful of tries; a spin would be thousands.
    assert!(returned >= 2, "row 3 was retried: {returned}");
    assert!(
        (returned as f64) < 10.0 * seconds,
        "the worker spun on the failing row: {returned} tries"
    );
    db.assert_count(
        "SELECT COUNT(*) FROM job WHERE id = 3 AND state = 'waiting'",
        1,
    )
    .await;
    db.assert_count("SELECT COUNT(*) FROM attempt_log WHERE job_id = 3", 0)
        .await;
    db.assert_count_because(
        "SELECT COUNT(*) FROM job WHERE id > 3 AND state = 'waiting'",
        3,
        "with one worker, the failing row at the front holds up the rest",
    )
    .await;
}

/// With one item per batch, a failed `CALL` — whose inner statements are not undone
/// by the statement's own failure — and a timed-out one leave no trace of their work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_items_failed_procedure_is_undone() {
    let db = TestDb::new().await;
    db.exec(JOBS).await;
    db.exec(
        "CREATE PROCEDURE work(IN j INT) BEGIN
           INSERT INTO job_log (job_id) VALUES (j);
           IF j = 2 THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'no mailbox'; END IF;
           IF j = 4 THEN DO SLEEP(30); END IF;
         END",
    )
    .await;
    let files = QueueFiles::new();
    let file = files.write(
        "jobs.toml",
        r#"
select = "SELECT id FROM job WHERE state = 'waiting' ORDER BY id"
[action]
type = "sql"
sql = "CALL work(:id)"
timeout = "500ms"
[on_success]
sql = "UPDATE job SET state = 'done' WHERE id = :id"
[on_failure]
sql = "UPDATE job SET state = 'failed', error = :error WHERE id = :id"
"#,
    );
    let summary = run_until_empty(load(&[file]), &db.url).await;
    assert_eq!(summary.counts("jobs").unwrap().failed, 2);
    let failed: Vec<(u32, String)> = db
        .rows("SELECT id, error FROM job WHERE state = 'failed' ORDER BY id")
        .await;
    assert_eq!(failed[0], (2, "ERROR 1644 (45000): no mailbox".to_string()));
    assert_eq!(failed[1], (4, "timed out after 500ms".to_string()));
    let logged: Vec<(u32,)> = db.rows("SELECT job_id FROM job_log ORDER BY job_id").await;
    assert_eq!(
        logged,
        [(1,), (3,), (5,), (6,)],
        "a failed procedure's insert was kept"
    );
}

/// An SQL action that fails for a reason that is the queue's, not the row's — here
/// a table it writes to was dropped (error 1146) — spends no row's attempt: no
/// `[on_failure]` runs, every row stays waiting, the log says it is the queue's
/// fault once; once the table is back, every row is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queues_own_sql_error_spends_no_attempt() {
    let logs = support::logs::capture();
    let db = TestDb::new().await;
    db.exec(
        "CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting',
           attempts INT NOT NULL DEFAULT 0) DEFAULT CHARSET=utf8mb4;
         CREATE TABLE audit (job_id INT NOT NULL) DEFAULT CHARSET=utf8mb4",
    )
    .await;
    let files = QueueFiles::new();
    let file = support::QueueFile::new("audited")
        .poll_interval("100ms")
        .error_backoff("100ms")
        .select("SELECT id FROM job WHERE state = 'waiting' ORDER BY id")
        .action_sql("INSERT INTO audit (job_id) VALUES (:id)")
        .on_success("UPDATE job SET state = 'done' WHERE id = :id")
        .on_failure("UPDATE job SET attempts = attempts + 1, state = 'failed' WHERE id = :id")
        .write(&files);
    let engine = Engine::start(load(&[file]), &db.url);
    support::eventually("the queue starts", Duration::from_secs(30), || async {
        !logs.lines_of("audited", "queue started").is_empty()
    })
    .await;
    db.exec("DROP TABLE audit; INSERT INTO job (id) VALUES (1), (2), (3)")
        .await;
    let fault = "a reason that is the queue's, not the row's";
    support::eventually("the fault is said", Duration::from_secs(30), || async {
        !logs.lines_of("audited", fault).is_empty()
    })
    .await;
    let spent = "SELECT COUNT(*) FROM job WHERE attempts > 0 OR state <> 'waiting'";
    db.assert_count_because(spent, 0, "no attempt was spent")
        .await;
    db.exec("CREATE TABLE audit (job_id INT NOT NULL) DEFAULT CHARSET=utf8mb4")
        .await;
    let done = "SELECT COUNT(*) FROM job WHERE state = 'done' AND attempts = 0";
    // Every row is done.
    db.until_count(done, 3, 60).await;
    let counts = engine.stop().await.counts("audited").unwrap();
    assert_eq!((counts.done, counts.failed), (3, 0), "{counts:?}");
    assert_eq!(logs.lines_of("audited", fault).len(), 1, "said once");
}
