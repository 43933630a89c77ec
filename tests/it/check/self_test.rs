//! The two-session SKIP LOCKED self-test of `tableq check`: a claim that locks
//! nothing fails it (and the proof does not run after it), a join that locks a
//! shared row makes workers take turns, and rows the select cannot tell apart.

use crate::support::check::{assert_report, check_online, job_db, self_test_failed, GOOD};
use crate::support::daemon::Finished;

/// A FROM that locks nothing: the job table through a derived table that is
/// materialized, not merged.
const FROM_A_DERIVED_TABLE: &str =
    "FROM (SELECT id, attempts, state, retry_at FROM job GROUP BY id) AS j WHERE";

/// Asserts check's report on a claim that locks nothing: the self-test failed, and the
/// proof did not run.
fn assert_locks_nothing(done: &Finished, shown: &str) {
    assert_report(
        done,
        &[
            self_test_failed(shown),
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

/// A claim that locks nothing (a materialized derived table) fails the two-session
/// self-test: a second session claims the same row.
#[tokio::test]
async fn a_claim_that_locks_nothing() {
    let db = job_db().await;
    let (done, shown) =
        check_online(&db, &GOOD.replace("FROM job WHERE", FROM_A_DERIVED_TABLE)).await;
    assert_locks_nothing(&done, &shown);
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
    let (done, shown) = check_online(
        &db,
        &GOOD
            .replace("FROM job WHERE", FROM_A_DERIVED_TABLE)
            .replace("DO :id", "CALL log_it(:id)"),
    )
    .await;
    assert_locks_nothing(&done, &shown);
    db.assert_count("SELECT COUNT(*) FROM sent_log", 0).await;
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
    let (done, shown) = check_online(&db, &GOOD.replace(
        "SELECT id, attempts FROM job WHERE state = 'waiting' AND",
        "SELECT job.id, job.attempts FROM cfg JOIN job ON cfg.id = 1 WHERE cfg.enabled = 1 AND job.state = 'waiting' AND",
    ).replace("ORDER BY id", "ORDER BY job.id")).await;
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

/// A select whose columns do not tell rows apart gets a warning that the self-test
/// cannot tell session B's row from session A's — not a false SKIP LOCKED failure.
#[tokio::test]
async fn rows_the_select_cannot_tell_apart() {
    let db = job_db().await;
    let by_values = "WHERE state = :state AND attempts = :attempts ORDER BY id LIMIT 1";
    let (done, shown) = check_online(
        &db,
        &GOOD
            .replace("SELECT id, attempts FROM", "SELECT state, attempts FROM")
            .replace("DO :id", "DO :state")
            .replace("WHERE id = :id", by_values),
    )
    .await;
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
