//! `tableq check` on a batch-scope queue: the proof runs the batch's statements once
//! for a sample of real rows in one `:batch`, shows every row of it leaves the
//! select, and catches a statement that touches rows outside the batch.

use crate::support::check::{
    assert_one_error_online, assert_report, check_online, job_db, JobRow, ALL_JOBS,
};

/// The check tests' good queue in batch scope: every statement joins `:batch`.
const GOOD_BATCH: &str = r#"scope = "batch"
batch = 10
select = "SELECT id, attempts FROM job FORCE INDEX (state_id) WHERE state = 'waiting' AND (retry_at IS NULL OR retry_at <= UNIX_TIMESTAMP()) ORDER BY id"
[action]
type = "sql"
sql = "DO JSON_LENGTH(:batch)"
[on_success]
sql = "UPDATE job JOIN JSON_TABLE(:batch, '$[*]' COLUMNS (id INT PATH '$.id')) AS b USING (id) SET job.state = 'done'"
[on_failure]
sql = "UPDATE job JOIN JSON_TABLE(:batch, '$[*]' COLUMNS (id INT PATH '$.id', attempts INT PATH '$.attempts')) AS b USING (id) SET job.attempts = b.attempts + 1, job.retry_at = UNIX_TIMESTAMP() + 60"
"#;

/// A batch-scope queue that joins `:batch` by its key proves clean, and check
/// changes no row.
#[tokio::test]
async fn a_batch_outcome_joined_by_key_is_proven() {
    let db = job_db().await;
    let before: Vec<JobRow> = db.rows(ALL_JOBS).await;
    let (done, _shown) = check_online(&db, GOOD_BATCH).await;
    assert_report(&done, &[], ": 0 errors, 0 warnings", 0);
    assert_eq!(db.rows::<JobRow>(ALL_JOBS).await, before);
}

/// A batch outcome that forgets the join (it changes every waiting row, not only the
/// batch's) is an error with the JSON_TABLE join to write.
#[tokio::test]
async fn a_batch_outcome_that_forgets_the_join_is_caught() {
    let db = job_db().await;
    let (done, shown) = check_online(
        &db,
        &GOOD_BATCH.replace(
            "UPDATE job JOIN JSON_TABLE(:batch, '$[*]' COLUMNS (id INT PATH '$.id')) AS b USING (id) SET job.state = 'done'",
            "UPDATE job SET state = 'done' WHERE state = 'waiting' AND JSON_LENGTH(:batch) > 0",
        ),
    )
    .await;
    assert_report(
        &done,
        &[format!(
            "{shown}:8: queue jobs: error: `on_success.sql` changed 3 rows of job for a batch of \
             2: it touches rows outside the batch (every waiting row, if it forgot the join); \
             join `:batch` by the key, e.g. `JOIN JSON_TABLE(:batch, '$[*]' COLUMNS (id BIGINT \
             PATH '$.id')) AS b USING (id)`"
        )],
        ": 1 error, 0 warnings",
        1,
    );
}

/// A batch outcome that leaves the sample's rows in the select is an error naming
/// a row, as in item scope.
#[tokio::test]
async fn a_batch_outcome_that_keeps_the_rows_waiting_is_caught() {
    let db = job_db().await;
    assert_one_error_online(
        &db,
        &GOOD_BATCH.replace("SET job.state = 'done'", "SET job.state = job.state"),
        "7: queue jobs: error: on success the row stays in the queue: after the SQL \
             action and [on_success] on row id = 1 the select still returns it, so it would be \
             processed again and again; change the row in [on_success] so the select no longer \
             returns it",
    )
    .await;
}
