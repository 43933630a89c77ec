//! `tableq check`, through the real binary: a good queue passes, and each way of
//! breaking one gives its exact line and exit status. The proof's transaction is
//! always rolled back, and `run` refuses what `check` calls an error.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use support::daemon::{run_to_end, tableq, Finished};
use support::{MariaDb, QueueFiles, TestDb};

const JOBS: &str = "CREATE TABLE job (
    id       INT PRIMARY KEY,
    state    VARCHAR(10) NOT NULL DEFAULT 'waiting',
    attempts INT NOT NULL DEFAULT 0,
    retry_at BIGINT NULL,
    INDEX state_id (state, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
INSERT INTO job (id) VALUES (1), (2), (3)";

/// A queue that keeps every rule; the tests below break it one way at a time.
const GOOD: &str = r#"select = "SELECT id, attempts FROM job WHERE state = 'waiting' AND (retry_at IS NULL OR retry_at <= UNIX_TIMESTAMP()) ORDER BY id"
[action]
type = "sql"
sql = "DO :id"
[on_success]
sql = "UPDATE job SET state = 'done' WHERE id = :id"
[on_failure]
sql = "UPDATE job SET attempts = attempts + 1, retry_at = UNIX_TIMESTAMP() + 60 WHERE id = :id"
"#;

/// A database of its own with the job table, three rows waiting.
async fn job_db() -> TestDb {
    let db = TestDb::new().await;
    db.exec(JOBS).await;
    db
}

/// `tableq check ARGS PATHS`, against `url` when given.
async fn check(args: &[&str], paths: &[&Path], url: Option<&str>) -> Finished {
    let mut cmd = tableq(&["check"]);
    cmd.args(args).args(paths);
    if let Some(url) = url {
        cmd.env("TABLEQ_DATABASE_URL", url);
    }
    run_to_end(cmd, Duration::from_secs(120)).await
}

/// Asserts the findings (every line but the summary), the summary's counts and the
/// exit status.
fn assert_report(done: &Finished, findings: &[String], counts: &str, code: i32) {
    let lines: Vec<&str> = done.stdout.lines().collect();
    let (summary, found) = lines.split_last().expect("a summary line");
    assert_eq!(
        found, findings,
        "stdout:\n{}\nstderr:\n{}",
        done.stdout, done.stderr
    );
    assert!(
        summary.starts_with("checked ") && summary.ends_with(counts),
        "summary {summary:?} should end with {counts:?}"
    );
    assert_eq!(done.code(), Some(code), "stdout:\n{}", done.stdout);
}

/// A `stats` counter table, and a good queue whose `[on_success]` also counts the
/// item there: outcome SQL on a table other than the select's.
async fn counting_jobs(db: &TestDb) -> (QueueFiles, PathBuf, String) {
    db.exec(
        "CREATE TABLE stats (name VARCHAR(10) PRIMARY KEY, n INT NOT NULL) ENGINE=InnoDB;
         INSERT INTO stats VALUES ('done', 0)",
    )
    .await;
    jobs_file(&GOOD.replace(
        "sql = \"UPDATE job SET state = 'done' WHERE id = :id\"",
        "sql = [\"UPDATE job SET state = 'done' WHERE id = :id\", \"UPDATE stats SET n = n + 1 WHERE name = 'done'\"]",
    ))
}

/// Writes `jobs.toml` with `contents`; returns the files and the path as printed.
fn jobs_file(contents: &str) -> (QueueFiles, PathBuf, String) {
    let files = QueueFiles::new();
    let path = files.write("jobs.toml", contents);
    let shown = path.display().to_string();
    (files, path, shown)
}

/// The good queue passes, on the server it names in the summary.
#[tokio::test]
async fn a_good_queue_passes() {
    let db = job_db().await;
    let (_files, path, _) = jobs_file(GOOD);
    let done = check(&[], &[&path], Some(&db.url)).await;
    assert_report(&done, &[], ": 0 errors, 0 warnings", 0);
    assert!(
        done.stdout.starts_with("checked 1 queue on "),
        "{}",
        done.stdout
    );
}

/// [on_success] that leaves the row matching the select is an error naming it.
#[tokio::test]
async fn on_success_that_keeps_the_row_waiting() {
    let db = job_db().await;
    let (_files, path, shown) = jobs_file(&GOOD.replace(
        "SET state = 'done' WHERE id = :id",
        "SET attempts = attempts WHERE id = :id",
    ));
    let done = check(&[], &[&path], Some(&db.url)).await;
    assert_report(
        &done,
        &[format!(
            "{shown}:5: queue jobs: error: on success the row stays in the queue: after the SQL \
             action and [on_success] on row id = 1 the select still returns it, so it would be \
             processed again and again; change the row in [on_success] so the select no longer \
             returns it"
        )],
        ": 1 error, 0 warnings",
        1,
    );
}

/// [on_failure] that retries at once (the row still matches now) is an error.
#[tokio::test]
async fn on_failure_that_retries_at_once() {
    let db = job_db().await;
    let (_files, path, shown) = jobs_file(&GOOD.replace(
        "attempts = attempts + 1, retry_at = UNIX_TIMESTAMP() + 60",
        "attempts = attempts + 1",
    ));
    let done = check(&[], &[&path], Some(&db.url)).await;
    assert_report(
        &done,
        &[format!(
            "{shown}:7: queue jobs: error: on failure the row stays in the queue: after \
             [on_failure] on row id = 1 the select still returns it now, so a failing item comes \
             straight back, at the front of the queue; change the row so it no longer matches \
             now (a retry time in the future, or a final status)"
        )],
        ": 1 error, 0 warnings",
        1,
    );
}

/// [on_success] SQL that the server rejects while proving is an error naming the row.
#[tokio::test]
async fn on_success_that_fails_on_a_row() {
    let db = job_db().await;
    let (_files, path, shown) = jobs_file(&GOOD.replace(
        "UPDATE job SET state = 'done' WHERE id = :id",
        "UPDATE job SET state = 'finished' WHERE id = :id",
    ));
    db.exec("ALTER TABLE job ADD CONSTRAINT short_state CHECK (LENGTH(state) <= 7)")
        .await;
    let done = check(&[], &[&path], Some(&db.url)).await;
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

/// A queue without [on_failure] is a warning: exit 0, or 1 with --strict.
#[tokio::test]
async fn missing_on_failure_and_strict() {
    let db = job_db().await;
    let good = GOOD.split("[on_failure]").next().unwrap();
    let (_files, path, shown) = jobs_file(good);
    let warning = format!(
        "{shown}:2: queue jobs: warning: no [on_failure]: a failing item returns to the queue at \
         once and is retried forever, at the front of the queue; record the failure on the row \
         (attempts, retry_at, status) so it leaves the query"
    );
    let done = check(&[], &[&path], Some(&db.url)).await;
    assert_report(
        &done,
        std::slice::from_ref(&warning),
        ": 0 errors, 1 warning",
        0,
    );
    let strict = check(&["--strict"], &[&path], Some(&db.url)).await;
    assert_report(&strict, &[warning], ": 0 errors, 1 warning", 1);
}

/// With nothing waiting, the proof and the self-test cannot run: a warning says so.
#[tokio::test]
async fn an_empty_queue_is_not_proven() {
    let db = job_db().await;
    db.exec("UPDATE job SET state = 'done'").await;
    let (_files, path, shown) = jobs_file(GOOD);
    let done = check(&[], &[&path], Some(&db.url)).await;
    assert_report(
        &done,
        &[format!(
            "{shown}:1: queue jobs: warning: not proven: queue is empty — with no row to claim, \
             neither the leave-the-query proof nor the two-session SKIP LOCKED self-test could \
             run; check again when a row is waiting"
        )],
        ": 0 errors, 1 warning",
        0,
    );
}

/// Outcome SQL that does not touch the row by its key is a warning (offline too).
#[tokio::test]
async fn outcome_sql_without_the_key() {
    let db = job_db().await;
    let (_files, path, shown) = jobs_file(&GOOD.replace(
        "SET state = 'done' WHERE id = :id",
        "SET state = 'done' WHERE state = 'waiting' AND attempts = :attempts",
    ));
    let warning = format!(
        "{shown}:6: queue jobs: warning: `on_success.sql` does not touch the item's row by its \
         key (no `:id` in its WHERE): a range of rows here locks rows other workers hold, and \
         deadlocks against them; write `WHERE id = :id`"
    );
    let done = check(&[], &[&path], Some(&db.url)).await;
    assert_report(
        &done,
        std::slice::from_ref(&warning),
        ": 0 errors, 1 warning",
        0,
    );
    let offline = check(&["--offline"], &[&path], None).await;
    assert_report(&offline, &[warning], "offline: 0 errors, 1 warning", 0);
}

/// A `:param` that cannot be a column of a literal select list is an error offline.
#[tokio::test]
async fn unknown_parameter_offline() {
    let (_files, path, shown) = jobs_file(&GOOD.replace("DO :id", "DO :job_id"));
    let done = check(&["--offline"], &[&path], None).await;
    assert_report(
        &done,
        &[format!(
            "{shown}:4: queue jobs: error: `action.sql` uses `:job_id`, which is not a column \
             the select returns (id, attempts) nor one of :queue"
        )],
        "offline: 1 error, 0 warnings",
        1,
    );
}

/// A `{placeholder}` that cannot be a column of a literal select list is an error.
#[tokio::test]
async fn unknown_placeholder_offline() {
    let (_files, path, shown) = jobs_file(&GOOD.replace(
        "type = \"sql\"\nsql = \"DO :id\"",
        "type = \"command\"\ncommand = [\"/bin/echo\", \"{job}\"]",
    ));
    let done = check(&["--offline"], &[&path], None).await;
    assert_report(
        &done,
        &[format!(
            "{shown}:4: queue jobs: error: `action.command.1` uses `{{job}}`, which is not a \
             column the select returns (id, attempts) nor `{{queue}}`"
        )],
        "offline: 1 error, 0 warnings",
        1,
    );
}

/// A `key` that is not among a literal select list's columns is an error offline.
#[tokio::test]
async fn key_not_a_column_offline() {
    let (_files, path, shown) = jobs_file(&format!("key = \"job_id\"\n{GOOD}"));
    let done = check(&["--offline"], &[&path], None).await;
    assert_report(
        &done,
        &[format!(
            "{shown}:1: queue jobs: error: `key` = \"job_id\" is not a column the select returns \
             (id, attempts)"
        )],
        "offline: 1 error, 0 warnings",
        1,
    );
}

/// A command whose program does not exist is an error offline.
#[tokio::test]
async fn missing_program_offline() {
    let (files, path, shown) = jobs_file(&GOOD.replace(
        "type = \"sql\"\nsql = \"DO :id\"",
        "type = \"command\"\ncommand = [\"./send-it\", \"{id}\"]",
    ));
    let done = check(&["--offline"], &[&path], None).await;
    let program = files.path().canonicalize().unwrap().join("./send-it");
    assert_report(
        &done,
        &[format!(
            "{shown}:4: queue jobs: error: `action.command`: cannot run {}: No such file or \
             directory (os error 2)",
            program.display()
        )],
        "offline: 1 error, 0 warnings",
        1,
    );
}

/// A URL that does not parse, even with its placeholders filled in, is an error.
#[tokio::test]
async fn url_that_does_not_parse_offline() {
    let (_files, path, shown) = jobs_file(&GOOD.replace(
        "type = \"sql\"\nsql = \"DO :id\"",
        "type = \"http\"\nurl = \"https://hooks.example.com:99999/jobs/{id}\"",
    ));
    let done = check(&["--offline"], &[&path], None).await;
    assert_report(
        &done,
        &[format!(
            "{shown}:4: queue jobs: error: `action.url` is not a URL (with each placeholder \
             filled in): invalid port number"
        )],
        "offline: 1 error, 0 warnings",
        1,
    );
}

/// Every file's problems are reported at once, and the good files are still checked.
#[tokio::test]
async fn every_file_is_reported_at_once() {
    let db = job_db().await;
    let files = QueueFiles::new();
    let a = files.write(
        "a.toml",
        &format!(
            "workers = 0\nbatch = 5000\n{}",
            GOOD.replace("DO :id", "DO :job_id")
        ),
    );
    let b = files.write(
        "b.toml",
        &format!("database_url = \"${{TABLEQ_TEST_UNSET}}\"\n{GOOD}"),
    );
    files.write("c.toml", GOOD);
    let done = check(&[], &[&files.path()], Some(&db.url)).await;
    let (a, b) = (a.display(), b.display());
    assert_report(
        &done,
        &[
            format!("{a}:1: queue a: error: `workers` = 0 is out of range: use 1 to 1000"),
            format!("{a}:2: queue a: error: `batch` = 5000 is out of range: use 1 to 1000"),
            format!(
                "{a}:6: queue a: error: `action.sql` uses `:job_id`, which is not a column the \
                 select returns (id, attempts) nor one of :queue"
            ),
            format!(
                "{b}:1: queue b: error: `database_url`: environment variable `TABLEQ_TEST_UNSET` \
                 is not set (write `$$` for a literal `$`)"
            ),
        ],
        ": 4 errors, 0 warnings",
        1,
    );
    assert!(
        done.stdout.contains("checked 3 queues on "),
        "{}",
        done.stdout
    );
}

/// A statement the server rejects is an error, as when `run` starts.
#[tokio::test]
async fn statement_the_server_rejects() {
    let db = job_db().await;
    let (_files, path, shown) = jobs_file(&GOOD.replace("SET state = 'done'", "SET stat = 'done'"));
    let done = check(&[], &[&path], Some(&db.url)).await;
    assert_report(
        &done,
        &[format!(
            "{shown}:6: queue jobs: error: `on_success.sql`: the server rejects it: ERROR 1054 \
             (42S22): Unknown column 'stat' in 'SET'"
        )],
        ": 1 error, 0 warnings",
        1,
    );
}

/// A table that is not InnoDB is an error, and check does not run the queue's SQL on it.
#[tokio::test]
async fn a_table_that_is_not_innodb() {
    let db = job_db().await;
    db.exec("ALTER TABLE job ENGINE = MyISAM").await;
    let (_files, path, shown) = jobs_file(GOOD);
    let done = check(&[], &[&path], Some(&db.url)).await;
    assert_report(
        &done,
        &[
            format!(
                "{shown}:1: queue jobs: error: table job uses the MyISAM engine: tableq needs \
                 InnoDB, for the row locks SKIP LOCKED skips and a transaction that rolls back \
                 (ALTER TABLE job ENGINE = InnoDB)"
            ),
            format!(
                "{shown}:1: queue jobs: warning: not proven: check runs the SKIP LOCKED \
                 self-test and the leave-the-query proof only when every table is InnoDB, \
                 where its changes roll back"
            ),
        ],
        ": 1 error, 1 warning",
        1,
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM job WHERE state = 'waiting' AND attempts = 0")
            .await,
        3
    );
}

/// A claim that locks nothing (a materialized derived table) fails the two-session
/// self-test: a second session claims the same row.
#[tokio::test]
async fn a_claim_that_locks_nothing() {
    let db = job_db().await;
    let (_files, path, shown) = jobs_file(&GOOD.replace(
        "FROM job WHERE",
        "FROM (SELECT id, attempts, state, retry_at FROM job GROUP BY id) AS j WHERE",
    ));
    let done = check(&[], &[&path], Some(&db.url)).await;
    assert_report(
        &done,
        &[
            format!(
                "{shown}:1: queue jobs: error: the two-session SKIP LOCKED self-test failed: \
                 session B claimed the row session A held (id = 1), so every worker would get \
                 the same row: the claim locks nothing (a select from a derived table or a view \
                 that is not merged?) or the server ignores SKIP LOCKED"
            ),
            format!(
                "{shown}:1: queue jobs: warning: not proven: check runs the leave-the-query \
                 proof only on a claim that locks its row; one that locks nothing may read a \
                 table whose changes survive ROLLBACK"
            ),
        ],
        ": 1 error, 1 warning",
        1,
    );
}

/// A job table of `rows` rows without its (state, id) index, where all but the last
/// `waiting` are done; `indexes` are added to it.
async fn big_job_table(rows: usize, waiting: usize, indexes: &str) -> TestDb {
    let db = TestDb::new().await;
    db.exec(&format!(
        "CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting',
           attempts INT NOT NULL DEFAULT 0, retry_at BIGINT NULL {indexes}) ENGINE=InnoDB"
    ))
    .await;
    db.fill("job", "id, state", rows, |i| {
        format!(
            "{i}, '{}'",
            if i <= rows - waiting {
                "done"
            } else {
                "waiting"
            }
        )
    })
    .await;
    db.exec("ANALYZE TABLE job").await;
    db
}

/// The index warning's only line, split around the number of rows one claim read.
fn index_warning(done: &Finished, shown: &str) -> (u64, String) {
    let lines: Vec<&str> = done.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", done.stdout);
    assert_eq!(done.code(), Some(0));
    let prefix = format!(
        "{shown}:1: queue jobs: warning: the claim is not driven by an index on table job: one \
         claim read "
    );
    let rest = lines[0]
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("{:?} should start with {prefix:?}", lines[0]));
    let (reads, rest) = rest.split_once(' ').unwrap();
    (reads.parse().unwrap(), rest.to_string())
}

/// A claim that walks the table to find a few waiting rows is a warning that says how
/// many rows one claim read and which index would fix it.
#[tokio::test]
async fn a_claim_not_driven_by_an_index() {
    let db = big_job_table(3000, 100, "").await;
    let (_files, path, shown) = jobs_file(GOOD);
    let done = check(&[], &[&path], Some(&db.url)).await;
    let (reads, rest) = index_warning(&done, &shown);
    assert!(reads > 2900, "{}", done.stdout);
    assert!(rest.starts_with("rows to lock at most 1"), "{rest}");
    assert!(
        rest.ends_with(
            "A claim that reads past rows it does not return gets slower as the table grows, and \
             one that sorts keeps every row it sorted locked, so one worker holds the whole \
             backlog; add INDEX (state, id) to job — the WHERE's equality columns, then the \
             ORDER BY columns"
        ),
        "{rest}"
    );
}

/// When the right index exists but the optimizer walks the primary key instead (as
/// MariaDB 10.11 does for `ORDER BY id LIMIT n` beside a second index), the warning
/// says to name the index with FORCE INDEX.
#[tokio::test]
async fn an_index_the_optimizer_passes_over() {
    let db = big_job_table(
        20_000,
        5_000,
        ", INDEX state_id (state, id), INDEX state_retry (state, retry_at)",
    )
    .await;
    let (_files, path, shown) = jobs_file(GOOD);
    let done = check(&[], &[&path], Some(&db.url)).await;
    let (reads, rest) = index_warning(&done, &shown);
    assert!(reads > 15_000, "{}", done.stdout);
    assert!(
        rest.ends_with(
            "the index state_id on (state, id) exists but the optimizer walks PRIMARY instead: \
             name it in the select, `FROM job FORCE INDEX (state_id)`"
        ),
        "{rest}"
    );
    let forced = GOOD.replace("FROM job WHERE", "FROM job FORCE INDEX (state_id) WHERE");
    let (_files, path, _) = jobs_file(&forced);
    let done = check(&[], &[&path], Some(&db.url)).await;
    assert_report(&done, &[], ": 0 errors, 0 warnings", 0);
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
    assert_eq!(db.count("SELECT COUNT(*) FROM proof_outbox").await, 0);
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

/// --offline needs no database, and says it checked offline.
#[tokio::test]
async fn offline_needs_no_database() {
    let (_files, path, _) = jobs_file(GOOD);
    let done = check(&["--offline"], &[&path], None).await;
    assert_eq!(
        done.stdout,
        "checked 1 queue offline: 0 errors, 0 warnings\n"
    );
    assert_eq!(done.code(), Some(0));
}

/// A database that cannot be reached is an error for its queues.
#[tokio::test]
async fn an_unreachable_database() {
    let (_files, path, shown) = jobs_file(GOOD);
    let done = check(&[], &[&path], Some("mysql://root@127.0.0.1:1/nowhere")).await;
    let lines: Vec<&str> = done.stdout.lines().collect();
    assert!(
        lines[0].starts_with(&format!(
            "{shown}: queue jobs: error: cannot reach the database: network error: "
        )),
        "{}",
        done.stdout
    );
    assert_eq!(done.code(), Some(1));
}

/// `run` refuses a queue that `check` calls an error, with the same line, before it
/// even waits for its database.
#[tokio::test]
async fn run_refuses_what_check_calls_an_error() {
    let (_files, path, shown) = jobs_file(&GOOD.replace("DO :id", "DO :job_id"));
    let line = format!(
        "{shown}:4: queue jobs: error: `action.sql` uses `:job_id`, which is not a column the \
         select returns (id, attempts) nor one of :queue"
    );
    let checked = check(&["--offline"], &[&path], None).await;
    assert_eq!(checked.stdout.lines().next(), Some(line.as_str()));
    let mut cmd = tableq(&["run"]);
    cmd.arg(&path)
        .env("TABLEQ_DATABASE_URL", "mysql://root@127.0.0.1:1/nowhere");
    let ran = run_to_end(cmd, Duration::from_secs(30)).await;
    assert_eq!(ran.code(), Some(2), "{}", ran.stderr);
    assert!(ran.stderr.lines().any(|l| l == line), "{}", ran.stderr);
}

/// `run` logs check's warnings at start, and runs anyway.
#[tokio::test]
async fn run_logs_warnings_and_runs() {
    let db = job_db().await;
    let (_files, path, _) = jobs_file(GOOD.split("[on_failure]").next().unwrap());
    let done = support::daemon::run_binary_until_empty(&path, &db.url).await;
    assert!(done.stderr.contains("no [on_failure]"), "{}", done.stderr);
    assert_eq!(
        db.count("SELECT COUNT(*) FROM job WHERE state = 'done'")
            .await,
        3
    );
}

/// Statement-based binary logging is an error (on a private server started with it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statement_binlog_is_an_error() {
    let server = tokio::task::spawn_blocking(|| {
        MariaDb::start_with(&["--log-bin", "--binlog-format=STATEMENT", "--server-id=1"])
    })
    .await
    .unwrap();
    let db = TestDb::on(&server.base_url()).await;
    db.exec(JOBS).await;
    let (_files, path, shown) = jobs_file(GOOD);
    let done = check(&[], &[&path], Some(&db.url)).await;
    let expected = format!(
        "{shown}: queue jobs: error: binary logging is on with binlog_format = STATEMENT, which \
         cannot replicate SKIP LOCKED claims or the writes of a READ COMMITTED worker: set \
         binlog_format = ROW (or MIXED)"
    );
    assert_eq!(
        done.stdout.lines().next(),
        Some(expected.as_str()),
        "{}",
        done.stdout
    );
    assert_eq!(done.code(), Some(1));
    drop(db);
}

/// The shipped examples pass check against the demo schema (config/*.sql).
#[tokio::test]
async fn the_shipped_examples_pass() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let db = TestDb::new().await;
    for schema in ["config/email.sql", "config/webhook.sql"] {
        db.exec(&std::fs::read_to_string(repo.join(schema)).unwrap())
            .await;
    }
    db.fill("email", "recipient, subject, body", 20, |i| {
        format!("'user{i}@example.com', 'Hello {i}', 'Body {i}'")
    })
    .await;
    db.exec(
        "INSERT INTO webhook_delivery (endpoint_url, event_type, payload)
         VALUES ('https://hooks.example.com/in', 'order.paid', '{\"order\": 1}')",
    )
    .await;
    let mut cmd = tableq(&["check"]);
    cmd.arg(repo.join("config"))
        .env("TABLEQ_DATABASE_URL", &db.url)
        .env(
            "WEBHOOK_SIGNING_SECRET",
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        );
    let done = run_to_end(cmd, Duration::from_secs(120)).await;
    assert_report(&done, &[], ": 0 errors, 0 warnings", 0);
    // queues.example.toml takes its database from APP_DATABASE_URL.
    let mut cmd = tableq(&["check"]);
    cmd.arg(repo.join("queues.example.toml"))
        .env("APP_DATABASE_URL", &db.url);
    let done = run_to_end(cmd, Duration::from_secs(120)).await;
    assert_report(&done, &[], ": 0 errors, 0 warnings", 0);
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

/// Every row of the job table, to compare before and after check.
type JobRow = (i32, String, i32, Option<i64>);
const ALL_JOBS: &str = "SELECT id, state, attempts, retry_at FROM job ORDER BY id";

/// A view over a MyISAM table is an error naming the table behind the view, and check
/// runs none of the queue's SQL through it: the table is unchanged.
#[tokio::test]
async fn a_view_over_a_table_that_is_not_innodb() {
    let db = job_db().await;
    db.exec(
        "ALTER TABLE job ENGINE = MyISAM; RENAME TABLE job TO job_data;
         CREATE VIEW job AS SELECT * FROM job_data",
    )
    .await;
    let all = "SELECT id, state, attempts, retry_at FROM job_data ORDER BY id";
    let before: Vec<JobRow> = db.rows(all).await;
    let (_files, path, shown) = jobs_file(GOOD);
    let done = check(&[], &[&path], Some(&db.url)).await;
    assert_report(
        &done,
        &[
            format!(
                "{shown}:1: queue jobs: error: table job_data (behind view job) uses the MyISAM \
                 engine: tableq needs InnoDB, for the row locks SKIP LOCKED skips and a \
                 transaction that rolls back (ALTER TABLE job_data ENGINE = InnoDB)"
            ),
            format!(
                "{shown}:1: queue jobs: warning: not proven: check runs the SKIP LOCKED \
                 self-test and the leave-the-query proof only when every table is InnoDB, \
                 where its changes roll back"
            ),
        ],
        ": 1 error, 1 warning",
        1,
    );
    assert_eq!(db.rows::<JobRow>(all).await, before);
}

/// When the self-test finds that the claim locks nothing, check does not run the
/// queue's SQL: a procedure writing to a MyISAM table is never called.
#[tokio::test]
async fn no_proof_after_the_self_test_failed() {
    let db = job_db().await;
    db.exec(
        "CREATE TABLE sent_log (job_id INT NOT NULL) ENGINE=MyISAM;
         CREATE PROCEDURE log_it(p INT) INSERT INTO sent_log VALUES (p)",
    )
    .await;
    let (_files, path, shown) = jobs_file(
        &GOOD
            .replace(
                "FROM job WHERE",
                "FROM (SELECT id, attempts, state, retry_at FROM job GROUP BY id) AS j WHERE",
            )
            .replace("DO :id", "CALL log_it(:id)"),
    );
    let done = check(&[], &[&path], Some(&db.url)).await;
    assert_report(
        &done,
        &[
            format!(
                "{shown}:1: queue jobs: error: the two-session SKIP LOCKED self-test failed: \
                 session B claimed the row session A held (id = 1), so every worker would get \
                 the same row: the claim locks nothing (a select from a derived table or a view \
                 that is not merged?) or the server ignores SKIP LOCKED"
            ),
            format!(
                "{shown}:1: queue jobs: warning: not proven: check runs the leave-the-query \
                 proof only on a claim that locks its row; one that locks nothing may read a \
                 table whose changes survive ROLLBACK"
            ),
        ],
        ": 1 error, 1 warning",
        1,
    );
    assert_eq!(db.count("SELECT COUNT(*) FROM sent_log").await, 0);
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
    let (_files, path, shown) = jobs_file(&GOOD.replace("DO :id", "CALL send_it(:id)"));
    let done = check(&[], &[&path], Some(&db.url)).await;
    assert_report(
        &done,
        &[format!(
            "{shown}:4: queue jobs: error: `action.sql` commits: tableq runs it inside the \
             item's transaction and commits that itself, once the outcome SQL has run (check's \
             transaction refused the commit: ERROR 1399); remove the COMMIT, or the statement \
             that commits implicitly, from what it calls"
        )],
        ": 1 error, 0 warnings",
        1,
    );
    assert_eq!(db.count("SELECT COUNT(*) FROM sent").await, 0);
    assert_eq!(db.rows::<JobRow>(ALL_JOBS).await, before);
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

/// Rows that index condition pushdown rules out inside the engine count as read: a
/// claim that passes 20,000 of them on its index is a warning.
#[tokio::test]
async fn rows_ruled_out_by_index_condition_pushdown() {
    let db = TestDb::new().await;
    db.exec(
        "CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL, ok INT NOT NULL,
           attempts INT NOT NULL DEFAULT 0, INDEX state_id_ok (state, id, ok)) ENGINE=InnoDB",
    )
    .await;
    db.fill("job", "id, state, ok", 20_010, |i| {
        format!("{i}, 'waiting', {}", i32::from(i > 20_000))
    })
    .await;
    db.exec("ANALYZE TABLE job").await;
    let (_files, path, shown) = jobs_file(
        r#"select = "SELECT id, attempts FROM job WHERE state = 'waiting' AND ok = 1 ORDER BY id"
[action]
type = "sql"
sql = "DO :id"
[on_success]
sql = "UPDATE job SET state = 'done' WHERE id = :id"
[on_failure]
sql = "UPDATE job SET state = 'failed' WHERE id = :id"
"#,
    );
    let done = check(&[], &[&path], Some(&db.url)).await;
    let (reads, rest) = index_warning(&done, &shown);
    assert!(reads >= 20_000, "{}", done.stdout);
    assert!(
        rest.ends_with(
            "add INDEX (state, ok, id) to job — the WHERE's equality columns, then the ORDER BY \
             columns"
        ),
        "{rest}"
    );
}

/// A join whose FOR UPDATE also locks a shared row of another table makes workers
/// take turns: the self-test's second session gets nothing, and a warning names the
/// joined table (not the key's, though it comes second in the FROM).
#[tokio::test]
async fn a_join_that_locks_a_shared_row() {
    let db = job_db().await;
    db.exec(
        "CREATE TABLE cfg (id INT PRIMARY KEY, enabled INT NOT NULL) ENGINE=InnoDB;
         INSERT INTO cfg VALUES (1, 1)",
    )
    .await;
    let (_files, path, shown) = jobs_file(&GOOD.replace(
        "SELECT id, attempts FROM job WHERE state = 'waiting' AND",
        "SELECT job.id, job.attempts FROM cfg JOIN job ON cfg.id = 1 WHERE cfg.enabled = 1 AND job.state = 'waiting' AND",
    ).replace("ORDER BY id", "ORDER BY job.id"));
    let done = check(&[], &[&path], Some(&db.url)).await;
    assert_report(
        &done,
        &[format!(
            "{shown}:1: queue jobs: warning: workers would take turns: in the two-session \
             SKIP LOCKED self-test, session B claimed nothing while session A held one row, \
             although 3 rows are waiting — the claim also locks the rows it joins from cfg, \
             so one worker's claim blocks the others; test cfg in an `EXISTS (SELECT …)` \
             subquery instead of joining it"
        )],
        ": 0 errors, 1 warning",
        0,
    );
}

/// With a join, the index advice names the main table (through its alias) and only
/// its own columns.
#[tokio::test]
async fn index_advice_for_a_join() {
    let db = big_job_table(3000, 100, "").await;
    db.exec(
        "CREATE TABLE job_detail (job_id INT PRIMARY KEY, ok INT NOT NULL) ENGINE=InnoDB;
         INSERT INTO job_detail SELECT id, 1 FROM job",
    )
    .await;
    let (_files, path, shown) = jobs_file(
        &GOOD
            .replace(
                "SELECT id, attempts FROM job WHERE state = 'waiting' AND (retry_at",
                "SELECT j.id, j.attempts FROM job AS j JOIN job_detail d ON d.job_id = j.id WHERE j.state = 'waiting' AND d.ok = 1 AND (j.retry_at",
            )
            .replace("retry_at <= UNIX", "j.retry_at <= UNIX")
            .replace("ORDER BY id", "ORDER BY j.id"),
    );
    let done = check(&[], &[&path], Some(&db.url)).await;
    let (reads, rest) = index_warning(&done, &shown);
    assert!(reads > 2900, "{}", done.stdout);
    assert!(
        rest.ends_with(
            "add INDEX (state, id) to job — the WHERE's equality columns, then the ORDER BY \
             columns"
        ),
        "{rest}"
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
                 rolled back and come straight back",
                error.display()
            ),
            format!(
                "{}:6: queue output: error: `on_success.sql` fails on row id = 1: ERROR 1406 \
                 (22001): Data too long for column 'output' at row 1; the item would be rolled \
                 back and come straight back",
                output.display()
            ),
        ],
        ": 2 errors, 0 warnings",
        1,
    );
}

/// Outcome SQL on another table (a counter) needs no `:key`: no warning.
#[tokio::test]
async fn outcome_sql_on_another_table() {
    let db = job_db().await;
    let (_files, path, _) = counting_jobs(&db).await;
    let done = check(&[], &[&path], Some(&db.url)).await;
    assert_report(&done, &[], ": 0 errors, 0 warnings", 0);
    let offline = check(&["--offline"], &[&path], None).await;
    assert_report(&offline, &[], "offline: 0 errors, 0 warnings", 0);
}

/// When running workers hold every waiting row, check says no unlocked row is waiting
/// rather than that the queue is empty.
#[tokio::test]
async fn every_waiting_row_locked_by_workers() {
    let db = job_db().await;
    let mut worker = hold_locks(&db, "SELECT * FROM job FOR UPDATE").await;
    let (_files, path, shown) = jobs_file(GOOD);
    let done = check(&[], &[&path], Some(&db.url)).await;
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

/// A select whose columns do not tell rows apart gets a warning that the self-test
/// cannot tell session B's row from session A's — not a false SKIP LOCKED failure.
#[tokio::test]
async fn rows_the_select_cannot_tell_apart() {
    let db = job_db().await;
    let by_values = "WHERE state = :state AND attempts = :attempts ORDER BY id LIMIT 1";
    let (_files, path, shown) = jobs_file(
        &GOOD
            .replace("SELECT id, attempts FROM", "SELECT state, attempts FROM")
            .replace("DO :id", "DO :state")
            .replace("WHERE id = :id", by_values),
    );
    let done = check(&[], &[&path], Some(&db.url)).await;
    assert_report(
        &done,
        &[
            format!(
                "{shown}:1: queue jobs: warning: the two-session SKIP LOCKED self-test cannot \
                 tell session B's row from session A's: 3 waiting rows have the same value in \
                 every column the select returns; return the table's primary key too"
            ),
            format!(
                "{shown}:1: queue jobs: warning: not proven: `key` state is not unique among \
                 waiting rows (3 rows have state = waiting); set `key` to a column that \
                 identifies one row (unique, and never NULL)"
            ),
        ],
        ": 0 errors, 2 warnings",
        0,
    );
}

/// A view whose tables check cannot list surely (here, one built on a WITH) is a
/// warning, and the proof does not run through it.
#[tokio::test]
async fn a_view_check_cannot_see_through() {
    let db = job_db().await;
    db.exec(
        "RENAME TABLE job TO job_data;
         CREATE VIEW job AS WITH j AS (SELECT * FROM job_data) SELECT * FROM j",
    )
    .await;
    let (_files, path, shown) = jobs_file(&GOOD.replace("UPDATE job ", "UPDATE job_data "));
    let done = check(&[], &[&path], Some(&db.url)).await;
    assert_report(
        &done,
        &[
            format!(
                "{shown}:1: queue jobs: error: the two-session SKIP LOCKED self-test failed: \
                 session B claimed the row session A held (id = 1), so every worker would get \
                 the same row: the claim locks nothing (a select from a derived table or a view \
                 that is not merged?) or the server ignores SKIP LOCKED"
            ),
            format!(
                "{shown}:1: queue jobs: warning: not proven: job is a view; check cannot tell \
                 which engine it writes to, so it runs none of the queue's SQL"
            ),
        ],
        ": 1 error, 1 warning",
        1,
    );
}
