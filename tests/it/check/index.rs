//! `tableq check` measures one claim: a claim that reads far more rows than it
//! returns is a warning that says which index would drive it.

use crate::support::check::{assert_report, check_online, report_lines, GOOD};
use crate::support::daemon::Finished;
use crate::support::{QueueFile, TestDb};

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
    let lines = report_lines(&done.stdout);
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
    let (done, shown) = check_online(&db, GOOD).await;
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
    let (done, shown) = check_online(&db, GOOD).await;
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
    let (done, _) = check_online(&db, &forced).await;
    assert_report(&done, &[], ": 0 errors, 0 warnings", 0);
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
    let (done, shown) = check_online(
        &db,
        &QueueFile::new("jobs")
            .select("SELECT id, attempts FROM job WHERE state = 'waiting' AND ok = 1 ORDER BY id")
            .action_sql("DO :id")
            .on_success("UPDATE job SET state = 'done' WHERE id = :id")
            .on_failure("UPDATE job SET state = 'failed' WHERE id = :id")
            .to_string(),
    )
    .await;
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
    let (done, shown) = check_online(&db,
        &GOOD
            .replace(
                "SELECT id, attempts FROM job WHERE state = 'waiting' AND (retry_at",
                "SELECT j.id, j.attempts FROM job AS j JOIN job_detail d ON d.job_id = j.id WHERE j.state = 'waiting' AND d.ok = 1 AND (j.retry_at",
            )
            .replace("retry_at <= UNIX", "j.retry_at <= UNIX")
            .replace("ORDER BY id", "ORDER BY j.id"),
    ).await;
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

/// `run` says the same once at start, naming the index to add, and still works the
/// queue; of a queue whose claim an index drives, it says nothing.
#[tokio::test]
async fn run_warns_once_at_start_of_a_claim_no_index_drives() {
    let db = big_job_table(3000, 20, "").await;
    db.exec("CREATE TABLE job_ok LIKE job").await;
    db.exec("ALTER TABLE job_ok ADD INDEX state_id (state, id)")
        .await;
    db.exec("INSERT INTO job_ok SELECT * FROM job").await;
    db.exec("ANALYZE TABLE job_ok").await;
    let files = crate::support::QueueFiles::new();
    // Looked at in the files' order: the indexed queue first.
    files.write("a_indexed.toml", &GOOD.replace(" job ", " job_ok "));
    files.write("b_unindexed.toml", GOOD);
    let mut cmd = crate::support::daemon::tableq(&["run"]);
    cmd.arg(files.path()).env("TABLEQ_DATABASE_URL", &db.url);
    let mut daemon = crate::support::daemon::Daemon::spawn(cmd);
    let minute = std::time::Duration::from_secs(60);
    daemon
        .wait_for_log("claim not driven by an index", minute)
        .await;
    crate::support::eventually("every row done", minute, || async {
        db.count("SELECT COUNT(*) FROM job WHERE state = 'waiting'")
            .await
            + db.count("SELECT COUNT(*) FROM job_ok WHERE state = 'waiting'")
                .await
            == 0
    })
    .await;
    daemon.terminate().await;
    let log = daemon.stderr();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("claim not driven by an index"))
        .collect();
    assert_eq!(lines.len(), 1, "{log}");
    assert!(lines[0].contains("queue b_unindexed"), "{log}");
    assert!(lines[0].contains("add INDEX (state, id) to job "), "{log}");
}
