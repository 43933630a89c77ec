//! The binary log wakes a queue whatever way its select reads a table: a row made
//! waiting by a commit to a *second* table — read through a JOIN, an `EXISTS`
//! subquery, `IN (SELECT …)`, a derived table or a view — is claimed within a second
//! or two, while the queue polls only every 30 s. A view whose tables the user may
//! not read is said at start, by `run` and by `check`, and polled for.

use std::time::Duration;

use mysql_async::prelude::Queryable;

use super::wake::{binlog_server, grants_for, start_following, status};
use crate::support::check::check;
use crate::support::endpoint::start_with_metrics;
use crate::support::{assert_has, eventually, QueueFile, QueueFiles, TestDb};

/// Each way a select reads the second table `{w}_ok`: its select, given the prefix.
const WAYS: &[(&str, &str)] = &[
    (
        "join",
        "SELECT j.id FROM join_job j JOIN join_ok k ON k.job_id = j.id \
         WHERE j.state = 'waiting' ORDER BY j.id",
    ),
    (
        "exists",
        "SELECT id FROM exists_job j WHERE state = 'waiting' \
         AND EXISTS (SELECT 1 FROM exists_ok k WHERE k.job_id = j.id) ORDER BY id",
    ),
    (
        "in",
        "SELECT id FROM in_job WHERE state = 'waiting' \
         AND id IN (SELECT job_id FROM in_ok) ORDER BY id",
    ),
    (
        "derived",
        "SELECT j.id FROM derived_job j JOIN (SELECT job_id FROM derived_ok GROUP BY job_id) k \
         ON k.job_id = j.id WHERE j.state = 'waiting' ORDER BY j.id",
    ),
    (
        "view",
        "SELECT id FROM view_job j WHERE state = 'waiting' \
         AND EXISTS (SELECT 1 FROM view_ready r WHERE r.job_id = j.id) ORDER BY id",
    ),
];

/// `{w}_job`, three rows none of which is waiting yet, and `{w}_ok`, whose row for a
/// job makes it waiting (`view_ready` reads `view_ok`).
async fn way_tables(db: &TestDb, way: &str) {
    db.exec(&format!(
        "CREATE TABLE {way}_job (id INT PRIMARY KEY, \
         state VARCHAR(10) NOT NULL DEFAULT 'waiting', done_at TIMESTAMP(6) NULL);
         INSERT INTO {way}_job (id) VALUES (1), (2), (3);
         CREATE TABLE {way}_ok (job_id INT PRIMARY KEY, \
         at TIMESTAMP(6) NOT NULL DEFAULT NOW(6))"
    ))
    .await;
    if way == "view" {
        db.exec("CREATE VIEW view_ready AS SELECT job_id FROM view_ok WHERE job_id > 0")
            .await;
    }
}

/// The queue of one way: polls every 30 s, marks its row done with the time.
fn way_queue(way: &str, select: &str) -> QueueFile {
    QueueFile::new(&format!("reads_{way}"))
        .select(select)
        .poll_interval("30s")
        .action_sql(format!(
            "UPDATE {way}_job SET done_at = NOW(6) WHERE id = :id"
        ))
        .on_success(format!(
            "UPDATE {way}_job SET state = 'done' WHERE id = :id"
        ))
}

/// Commits `{w}_ok`'s row for `job`; returns how long after it the job was done.
async fn woken_after(db: &TestDb, way: &str, job: u32) -> Duration {
    let mut conn = db.conn().await;
    conn.query_drop(format!("INSERT INTO {way}_ok (job_id) VALUES ({job})"))
        .await
        .unwrap();
    let query = format!(
        "SELECT TIMESTAMPDIFF(MICROSECOND, k.at, j.done_at) FROM {way}_job j \
         JOIN {way}_ok k ON k.job_id = j.id WHERE j.id = {job} AND j.state = 'done'"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(took) = conn.query_first::<i64, _>(&query).await.unwrap() {
            return Duration::from_micros(took.max(0) as u64);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{way}: job {job} not done in a minute"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A commit to the second table, whatever way the select reads it, wakes the queue
/// in well under its 30 s poll; the view's base table is named at start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_to_any_table_the_select_reads_wakes_the_queue() {
    let server = binlog_server().await;
    let db = TestDb::on(&server.base).await;
    let files = QueueFiles::new();
    for (way, select) in WAYS {
        way_tables(&db, way).await;
        way_queue(way, select).write(&files);
    }
    let (mut daemon, _base) = start_following(&files, &db).await;
    daemon
        .wait_for_log(
            "the select reads views: the queue is woken by the tables behind them",
            Duration::from_secs(30),
        )
        .await;
    assert_has(&daemon.stderr(), r#""views":"view_ready (view_ok)""#);
    for (way, _) in WAYS {
        let mut took = Vec::new();
        for job in 1..=3 {
            took.push(woken_after(&db, way, job).await);
        }
        eprintln!("{way}: done {took:?} after the second table's commit");
        assert!(
            took.iter().all(|t| *t < Duration::from_secs(5)),
            "{way}: {took:?} (the poll is 30 s)\n{}",
            daemon.stderr()
        );
    }
    daemon.terminate().await;
}

/// A view the user may not read the definition of: `run` names it and polls every
/// poll_interval for it (the row is still done, within that), and `check` says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_whose_tables_cannot_be_told_is_said_and_polled() {
    let server = binlog_server().await;
    let db = TestDb::on(&server.base).await;
    way_tables(&db, "view").await;
    let user = format!("noview_{}", db.name);
    db.exec(&format!(
        "CREATE USER `{user}`@'%'; \
         GRANT SELECT, INSERT, UPDATE, DELETE ON `{}`.* TO `{user}`@'%'",
        db.name
    ))
    .await;
    db.exec(&grants_for(&db, &user).await).await;
    let url = db.url.replacen("root@", &format!("{user}@"), 1);
    let files = QueueFiles::new();
    way_queue("view", WAYS[4].1)
        .poll_interval("1s")
        .write(&files);
    let unseen = "which tables these views read cannot be told";
    let (mut daemon, base) = start_with_metrics(&files, &url).await;
    daemon.wait_for_log(unseen, Duration::from_secs(30)).await;
    assert_has(&daemon.stderr(), r#""views":"view_ready""#);
    // The status page says it polls, and why.
    eventually(
        "the status says why it polls",
        Duration::from_secs(30),
        || async {
            let wake = &status(&base, "reads_view").await["wake"];
            wake["source"] == "poll"
                && wake["why"] == "the binary log shows no change through view view_ready"
        },
    )
    .await;
    let took = woken_after(&db, "view", 1).await;
    assert!(took < Duration::from_secs(5), "{took:?}");
    daemon.terminate().await;

    let ran = check(&[], &[&files.path()], Some(&url)).await;
    assert_has(
        &ran.stdout,
        "table view_ready: read by the select (EXISTS subquery), a view whose tables cannot be \
         told (its definition cannot be read or parsed): changes through it do not wake the \
         queue, which polls every poll_interval (1s) for them",
    );
}
