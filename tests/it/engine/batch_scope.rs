//! `scope = "batch"`: each statement runs once per batch with the items in `:batch`,
//! and failure still stays per item.

use std::time::Duration;

use crate::support::daemon::{run_to_end, tableq, Daemon};
use crate::support::queue_file::table;
use crate::support::{
    assert_has, claimable, email_table, eventually, load, run_until_empty, running, QueueFile,
    QueueFiles, TestDb,
};

const ROWS: usize = 5_000;

/// The items of `:batch` as rows, by the email's id.
const EMAIL_IDS: &str = "JSON_TABLE(:batch, '$[*]' COLUMNS (id BIGINT PATH '$.id')) AS b";

/// The email queue in batch scope: the action logs every item of the batch with the
/// recipient it saw, `[on_success]` marks them sent, both joined by id.
fn email_queue(batch: u32, workers: u32) -> QueueFile {
    QueueFile::new("email")
        .set("scope", "batch")
        .workers(workers)
        .batch(batch)
        .poll_interval("100ms")
        .select("SELECT id, recipient FROM email WHERE status = 'waiting' ORDER BY id")
        .action_sql([
            "INSERT INTO sent_log (email_id, recipient, by_connection)
             SELECT b.id, b.recipient, CONNECTION_ID()
             FROM JSON_TABLE(:batch, '$[*]' COLUMNS (id BIGINT PATH '$.id',
                  recipient VARCHAR(250) PATH '$.recipient')) AS b",
            "INSERT INTO batch_log (items) VALUES (JSON_LENGTH(:batch))",
        ])
        .on_success(format!(
            "UPDATE email JOIN {EMAIL_IDS} USING (id) SET email.status = 'sent'"
        ))
}

async fn email_db() -> TestDb {
    let db = TestDb::new().await;
    email_table(&db, ROWS).await;
    db.exec(
        "CREATE TABLE sent_log (seq BIGINT AUTO_INCREMENT PRIMARY KEY, email_id BIGINT NOT NULL,
         recipient VARCHAR(250) NOT NULL, by_connection BIGINT NOT NULL) DEFAULT CHARSET=utf8mb4;
         CREATE TABLE batch_log (items INT NOT NULL) DEFAULT CHARSET=utf8mb4",
    )
    .await;
    db
}

/// 5,000 rows, two daemons of 8 workers each in batch scope: every row done, none
/// twice, each with its own values.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_engines_of_eight_workers_do_every_row_exactly_once_in_batch_scope() {
    let db = email_db().await;
    let files = QueueFiles::new();
    let file = email_queue(100, 8).write(&files);
    let (a, b) = tokio::join!(
        run_until_empty(load(std::slice::from_ref(&file)), &db.url),
        run_until_empty(load(std::slice::from_ref(&file)), &db.url)
    );
    let sent = db
        .count("SELECT COUNT(*) FROM email WHERE status = 'sent'")
        .await;
    assert_eq!(sent, ROWS as u64);
    db.assert_count("SELECT COUNT(*) FROM sent_log", ROWS as u64)
        .await;
    db.assert_count_because(
        "SELECT COUNT(DISTINCT email_id) FROM sent_log",
        ROWS as u64,
        "some item was done twice",
    )
    .await;
    let mismatched = db
        .count("SELECT COUNT(*) FROM sent_log l JOIN email e ON e.id = l.email_id WHERE e.recipient <> l.recipient")
        .await;
    assert_eq!(mismatched, 0, "an item carried another row's values");
    // The action ran once per batch, not once per item.
    let runs = db.count("SELECT COUNT(*) FROM batch_log").await;
    let items = db.count("SELECT SUM(items) FROM batch_log").await;
    assert_eq!(items, ROWS as u64);
    assert!(
        runs <= ROWS as u64 / 20,
        "{runs} action runs for {ROWS} items"
    );
    let (done_a, done_b) = (
        a.counts("email").unwrap().done,
        b.counts("email").unwrap().done,
    );
    assert_eq!(done_a + done_b, ROWS as u64);
    assert!(
        done_a > 0 && done_b > 0,
        "both daemons took part: {done_a} + {done_b}"
    );
}

const JOBS: &str =
    "CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting',
    payload VARCHAR(20) NOT NULL DEFAULT 'fine', error TEXT NULL) DEFAULT CHARSET=utf8mb4;
  CREATE TABLE job_log (job_id INT NOT NULL, payload VARCHAR(20) NOT NULL,
    CONSTRAINT no_poison CHECK (payload <> 'poison')) DEFAULT CHARSET=utf8mb4";

/// The items of `:batch` as rows of the job table, with the error of a failed one.
const JOB_ITEMS: &str = "JSON_TABLE(:batch, '$[*]' COLUMNS (id INT PATH '$.id',
    payload VARCHAR(20) PATH '$.payload', error TEXT PATH '$.error')) AS b";

/// A hundred jobs in one batch: the action logs them, `[on_success]` marks them done,
/// `[on_failure]` records the error.
async fn hundred_jobs(action: &[&str]) -> (TestDb, QueueFiles, std::path::PathBuf) {
    let db = TestDb::new().await;
    db.exec(JOBS).await;
    db.fill("job", "id", 100, |i| i.to_string()).await;
    let files = QueueFiles::new();
    let mut statements = vec![format!(
        "INSERT INTO job_log (job_id, payload) SELECT id, payload FROM {JOB_ITEMS}"
    )];
    statements.extend(action.iter().map(|s| s.to_string()));
    let file = QueueFile::new("jobs")
        .set("scope", "batch")
        .batch(100)
        .poll_interval("100ms")
        .error_backoff("100ms")
        .select("SELECT id, payload FROM job WHERE state = 'waiting' ORDER BY id")
        .action_set("type", "sql")
        .action_set("sql", statements)
        .on_success(format!(
            "UPDATE job JOIN {JOB_ITEMS} USING (id) SET job.state = 'done'"
        ))
        .on_failure(format!(
            "UPDATE job JOIN {JOB_ITEMS} USING (id) SET job.state = 'failed', job.error = b.error"
        ))
        .write(&files);
    (db, files, file)
}

/// One poisoned row in a batch of 100: the batch statement fails, the batch is
/// redone item by item, 99 commit and the bad one is recorded by `[on_failure]`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_poisoned_row_fails_alone_and_the_other_ninety_nine_commit() {
    let (db, _files, file) = hundred_jobs(&[]).await;
    db.exec("UPDATE job SET payload = 'poison' WHERE id = 37")
        .await;
    let summary = run_until_empty(load(&[file]), &db.url).await;
    let counts = summary.counts("jobs").unwrap();
    assert_eq!((counts.done, counts.failed), (99, 1));
    let failed: Vec<(u32, String)> = db
        .rows("SELECT id, error FROM job WHERE state = 'failed'")
        .await;
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].0, 37);
    assert!(
        failed[0].1.contains("no_poison"),
        "the error names the constraint: {}",
        failed[0].1
    );
    db.assert_count("SELECT COUNT(*) FROM job WHERE state = 'done'", 99)
        .await;
    db.assert_count("SELECT COUNT(*) FROM job_log", 99).await;
    db.assert_count("SELECT COUNT(*) FROM job_log WHERE job_id = 37", 0)
        .await;
}

/// A daemon killed (-9) while its batch statement runs leaves all 100 rows waiting,
/// and none of the batch's work kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_killed_mid_batch_leaves_all_hundred_waiting() {
    let (db, _files, file) = hundred_jobs(&["DO SLEEP(60)"]).await;
    let mut cmd = tableq(&["run"]);
    cmd.arg(&file).env("TABLEQ_DATABASE_URL", &db.url);
    let mut daemon = Daemon::spawn(cmd);
    eventually("the batch is in flight", Duration::from_secs(30), || {
        running(&db, "DO SLEEP")
    })
    .await;
    assert!(
        !claimable(&db, "job", "id = 1").await,
        "the batch is locked"
    );
    daemon.signal(libc::SIGKILL);
    assert_eq!(daemon.wait(Duration::from_secs(10)).await.code(), None);
    eventually(
        "every row is claimable again",
        Duration::from_secs(30),
        || async {
            let mut conn = db.conn().await;
            let free: Vec<(i64,)> = mysql_async::prelude::Queryable::query(
                &mut conn,
                "SELECT id FROM job WHERE state = 'waiting' FOR UPDATE SKIP LOCKED",
            )
            .await
            .expect("probe the rows");
            free.len() == 100
        },
    )
    .await;
    db.assert_count("SELECT COUNT(*) FROM job WHERE state = 'waiting'", 100)
        .await;
    db.assert_count("SELECT COUNT(*) FROM job_log", 0).await;
}

/// A command action in batch scope where every item succeeds: `[on_success]` runs
/// once for all of them and the empty failure set runs no `[on_failure]`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_outcome_set_runs_no_statement() {
    let db = TestDb::new().await;
    db.exec(JOBS).await;
    db.exec("CREATE TABLE outcome_log (which VARCHAR(10) NOT NULL, items INT NOT NULL)")
        .await;
    db.fill("job", "id", 10, |i| i.to_string()).await;
    let files = QueueFiles::new();
    let file = QueueFile::new("jobs")
        .set("scope", "batch")
        .batch(10)
        .select("SELECT id FROM job WHERE state = 'waiting' ORDER BY id")
        .action_command(&["true"])
        .on_success([
            "INSERT INTO outcome_log VALUES ('success', JSON_LENGTH(:batch))",
            "UPDATE job JOIN JSON_TABLE(:batch, '$[*]' COLUMNS (id INT PATH '$.id')) AS b USING (id) SET state = 'done'",
        ])
        .on_failure("INSERT INTO outcome_log VALUES ('failure', JSON_LENGTH(:batch))")
        .write(&files);
    let summary = run_until_empty(load(&[file]), &db.url).await;
    assert_eq!(summary.counts("jobs").unwrap().done, 10);
    let log: Vec<(String, u32)> = db.rows("SELECT which, items FROM outcome_log").await;
    assert_eq!(log, vec![("success".to_string(), 10)]);
}

/// `tableq check --offline FILE`, which must find an error; what it said.
async fn refused_offline(file: &std::path::Path) -> String {
    let mut cmd = tableq(&["check", "--offline"]);
    cmd.arg(file);
    let done = run_to_end(cmd, Duration::from_secs(60)).await;
    let said = format!("{}{}", done.stdout, done.stderr);
    assert_eq!(done.code(), Some(1), "{said}");
    said
}

/// A `:column` parameter in batch scope is refused at load, with the JSON_TABLE
/// form to write instead; so are an unknown scope and a `{column}` placeholder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_column_parameter_in_batch_scope_is_refused_with_the_json_table_form() {
    let files = QueueFiles::new();
    let file = QueueFile::new("email")
        .set("scope", "batch")
        .select("SELECT id FROM email WHERE status = 'waiting' ORDER BY id")
        .action_sql("DO 0")
        .on_success("UPDATE email SET status = 'sent' WHERE id = :id")
        .write(&files);
    let said = refused_offline(&file).await;
    let expected = format!(
        "{}:9: queue email: error: `on_success.sql` uses `:id`, but with scope = \"batch\" a \
         statement runs once per batch and has only :batch, :queue",
        file.display()
    );
    assert!(said.contains(&expected), "no {expected:?} in:\n{said}");
    let json_table = "`UPDATE email JOIN JSON_TABLE(:batch, '$[*]' COLUMNS (id BIGINT PATH \
                      '$.id')) AS b USING (id) SET …`";
    assert!(said.contains(json_table), "{said}");

    let wrong = QueueFile::new("email")
        .set("scope", "rows")
        .select("SELECT id FROM email")
        .action_sql("DO 0")
        .write(&files);
    let said = refused_offline(&wrong).await;
    assert!(
        said.contains("`scope` = \"rows\" is not a scope: use \"item\""),
        "{said}"
    );

    let placeholder = QueueFile::new("hooks")
        .set("scope", "batch")
        .select("SELECT id FROM hook")
        .action_http("https://hooks.example/{id}")
        .write(&files);
    let said = refused_offline(&placeholder).await;
    assert!(
        said.contains(
            "`action.url` uses `{id}`: with scope = \"batch\" one action serves the whole batch"
        ),
        "{said}"
    );

    let released = QueueFile::new("jobs")
        .set("scope", "batch")
        .select("SELECT id FROM job")
        .action_sql("DO 0")
        .set("on_release", table(&[("sql", "DO 1".into())]))
        .write(&files);
    let said = refused_offline(&released).await;
    assert_has(&said, "`[on_release]` does not apply in scope = \"batch\"");
}
