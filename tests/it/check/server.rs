//! `tableq check` and the server: a good queue passes, statements the server
//! rejects, tables that are not InnoDB (behind a view too), views check cannot see
//! through, an unreachable database, statement-based binary logging, and the
//! shipped examples.

use std::path::Path;
use std::time::Duration;

use crate::support::check::{
    assert_one_error_online, assert_report, check, check_online, job_db, jobs_file,
    self_test_failed, JobRow, GOOD, JOBS,
};
use crate::support::daemon::{run_to_end, tableq};
use crate::support::{MariaDb, TestDb};

/// The good queue passes, on the server it names in the summary.
#[tokio::test]
async fn a_good_queue_passes() {
    let db = job_db().await;
    let (done, _) = check_online(&db, GOOD).await;
    assert_report(&done, &[], ": 0 errors, 0 warnings", 0);
    assert!(
        done.stdout
            .lines()
            .last()
            .unwrap()
            .starts_with("checked 1 queue on "),
        "{}",
        done.stdout
    );
}

/// A statement the server rejects is an error, as when `run` starts.
#[tokio::test]
async fn statement_the_server_rejects() {
    let db = job_db().await;
    assert_one_error_online(
        &db,
        &GOOD.replace("SET state = 'done'", "SET stat = 'done'"),
        "6: queue jobs: error: `on_success.sql`: the server rejects it: ERROR 1054 \
             (42S22): Unknown column 'stat' in 'SET'",
    )
    .await;
}

/// A table that is not InnoDB is an error, and check does not run the queue's SQL on it.
#[tokio::test]
async fn a_table_that_is_not_innodb() {
    let db = job_db().await;
    db.exec("ALTER TABLE job ENGINE = MyISAM").await;
    let (done, shown) = check_online(&db, GOOD).await;
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
    db.assert_count(
        "SELECT COUNT(*) FROM job WHERE state = 'waiting' AND attempts = 0",
        3,
    )
    .await;
}

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
    let (done, shown) = check_online(&db, GOOD).await;
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
    let (done, shown) = check_online(&db, &GOOD.replace("UPDATE job ", "UPDATE job_data ")).await;
    assert_report(
        &done,
        &[
            self_test_failed(&shown),
            format!(
                "{shown}:1: queue jobs: warning: not proven: job is a view; check cannot tell \
                 which engine it writes to, so it runs none of the queue's SQL"
            ),
        ],
        ": 1 error, 1 warning",
        1,
    );
}

/// A database that cannot be reached is an error for its queues, naming host:port.
#[tokio::test]
async fn an_unreachable_database() {
    let (_files, path, shown) = jobs_file(GOOD);
    let done = check(&[], &[&path], Some("mysql://root@127.0.0.1:1/nowhere")).await;
    let lines: Vec<&str> = done.stdout.lines().collect();
    assert!(
        lines[0].starts_with(&format!(
            "{shown}: queue jobs: error: cannot reach the database: cannot connect to 127.0.0.1:1: network error: "
        )),
        "{}",
        done.stdout
    );
    assert_eq!(done.code(), Some(1));
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
    let (done, shown) = check_online(&db, GOOD).await;
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

/// The shipped examples pass check against the demo schema (config/*.sql), with an
/// email given up so that `[failed]` retry and discard are proven too.
#[tokio::test]
async fn the_shipped_examples_pass() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let db = TestDb::new().await;
    for schema in [
        "config/email.sql",
        "config/webhook.sql",
        "config/render.sql",
    ] {
        db.exec(&std::fs::read_to_string(repo.join(schema)).unwrap())
            .await;
    }
    db.fill("email", "recipient, subject, body", 20, |i| {
        format!("'user{i}@example.com', 'Hello {i}', 'Body {i}'")
    })
    .await;
    db.exec(
        "INSERT INTO webhook_delivery (endpoint_url, event_type, payload)
         VALUES ('https://hooks.example.com/in', 'order.paid', '{\"order\": 1}');
         INSERT INTO video (title, seconds) VALUES ('intro', 3);
         UPDATE email SET status = 'failed', attempts = 5 WHERE id = 20",
    )
    .await;
    // Every queue file of config/ but the FastCGI one, whose PHP-FPM is the host's
    // (its example runs against a pool of its own: meta::examples).
    let files: Vec<_> = std::fs::read_dir(repo.join("config"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .filter(|path| !path.ends_with("email-fastcgi.toml"))
        .collect();
    let mut cmd = tableq(&["check"]);
    cmd.args(&files).env("TABLEQ_DATABASE_URL", &db.url).env(
        "WEBHOOK_SIGNING_SECRET",
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    );
    let done = run_to_end(cmd, Duration::from_secs(120)).await;
    let worker = repo.join("config/email-worker.toml");
    let note = format!(
        "{}:22: queue email-worker: note: php email-worker.php starts, and ends when its input does",
        worker.display()
    );
    assert_report(&done, &[note], ": 0 errors, 0 warnings", 0);
    // queues.example.toml takes its database from APP_DATABASE_URL.
    let mut cmd = tableq(&["check"]);
    cmd.arg(repo.join("queues.example.toml"))
        .env("APP_DATABASE_URL", &db.url);
    let done = run_to_end(cmd, Duration::from_secs(120)).await;
    assert_report(&done, &[], ": 0 errors, 0 warnings", 0);
}
