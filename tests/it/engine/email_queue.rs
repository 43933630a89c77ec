//! The article's email queue end to end: sending, failures recorded on the row,
//! retries at `retry_at`, giving up after five attempts, and the select's ORDER BY.

use crate::support::{email_table, load, run_until_empty, QueueFiles, TestDb};

const ROWS: usize = 20;
/// Rows whose recipient the outbox's CHECK constraint refuses: they always fail.
const BAD: [u64; 3] = [3, 7, 11];
/// Rows scheduled for an hour from now.
const LATER: [u64; 2] = [15, 16];

fn queue_file(batch: usize) -> String {
    format!(
        r#"
workers = 1
batch = {batch}
poll_interval = "100ms"
select = """
SELECT id, recipient, subject, body, attempts
FROM email
WHERE status = 'waiting' AND (retry_at IS NULL OR retry_at <= UNIX_TIMESTAMP())
ORDER BY id DESC
"""

[action]
type = "sql"
sql = "INSERT INTO mail_outbox (email_id, recipient, subject, body) VALUES (:id, :recipient, :subject, :body)"

[on_success]
sql = "UPDATE email SET status = 'sent' WHERE id = :id"

[on_failure]
sql = """
UPDATE email
SET status   = IF(attempts + 1 >= 5, 'failed', 'waiting'),
    retry_at = UNIX_TIMESTAMP() + 60 * (attempts + 1),
    attempts = attempts + 1
WHERE id = :id
"""
"#
    )
}

type RowState = (u64, String, u32);

/// The email table of [`ROWS`] rows, [`BAD`]'s recipients refused by the outbox's
/// CHECK constraint, [`LATER`] scheduled for an hour from now; and the outbox.
async fn outbox() -> TestDb {
    let db = TestDb::new().await;
    email_table(&db, ROWS).await;
    db.exec(
        "CREATE TABLE mail_outbox (seq BIGINT AUTO_INCREMENT PRIMARY KEY, email_id BIGINT NOT NULL,
         recipient VARCHAR(250) NOT NULL CHECK (recipient NOT LIKE '%@invalid.example'),
         subject VARCHAR(250) NOT NULL, body TEXT NOT NULL) DEFAULT CHARSET=utf8mb4",
    )
    .await;
    let list = |ids: &[u64]| ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    db.exec(&format!(
        "UPDATE email SET recipient = CONCAT('nobody', id, '@invalid.example') WHERE id IN ({})",
        list(&BAD)
    ))
    .await;
    db.exec(&format!(
        "UPDATE email SET retry_at = UNIX_TIMESTAMP() + 3600 WHERE id IN ({})",
        list(&LATER)
    ))
    .await;
    db
}

/// Runs the whole story with `batch`; returns every row's final state and the order
/// in which the outbox received them.
async fn story(batch: usize) -> (Vec<RowState>, Vec<u64>) {
    let db = outbox().await;
    let files = QueueFiles::new();
    let file = files.write("email.toml", &queue_file(batch));
    let run = || async { run_until_empty(load(std::slice::from_ref(&file)), &db.url).await };

    // First pass: the good rows are sent; the bad ones fail once and wait an hour.
    let first = run().await.counts("email").unwrap();
    let good = (ROWS - BAD.len() - LATER.len()) as u64;
    assert_eq!((first.done, first.failed), (good, BAD.len() as u64));
    db.assert_count("SELECT COUNT(*) FROM email WHERE status = 'sent'", good)
        .await;
    let retrying: Vec<(u64, u32, String)> = db
        .rows("SELECT id, attempts, status FROM email WHERE retry_at > UNIX_TIMESTAMP() + 30 AND attempts > 0 ORDER BY id")
        .await;
    assert_eq!(
        retrying,
        BAD.iter()
            .map(|&id| (id, 1, "waiting".to_string()))
            .collect::<Vec<_>>()
    );

    // Nothing is taken before its retry_at: a second pass finds no work.
    let idle = run().await.counts("email").unwrap();
    assert_eq!(
        (idle.done, idle.failed),
        (0, 0),
        "a row was taken before its retry_at"
    );

    // Let the clock pass each retry_at: attempts 2..=5, then given up as failed.
    for attempt in 2..=5u32 {
        db.exec("UPDATE email SET retry_at = UNIX_TIMESTAMP() - 1 WHERE status = 'waiting' AND attempts > 0")
            .await;
        let pass = run().await.counts("email").unwrap();
        assert_eq!(pass.failed, BAD.len() as u64, "attempt {attempt}");
        let attempts: Vec<(u32,)> = db
            .rows("SELECT DISTINCT attempts FROM email WHERE recipient LIKE '%invalid%'")
            .await;
        assert_eq!(attempts, vec![(attempt,)]);
    }
    let failed: Vec<(u64,)> = db
        .rows("SELECT id FROM email WHERE status = 'failed' ORDER BY id")
        .await;
    assert_eq!(
        failed,
        BAD.iter().map(|&id| (id,)).collect::<Vec<_>>(),
        "given up after 5 attempts"
    );

    // Once failed, a row is out of the query for good.
    db.exec("UPDATE email SET retry_at = UNIX_TIMESTAMP() - 1 WHERE status = 'failed'")
        .await;
    let after = run().await.counts("email").unwrap();
    assert_eq!((after.done, after.failed), (0, 0));
    db.assert_count(
        "SELECT COUNT(*) FROM email WHERE id IN (15, 16) AND status = 'waiting' AND attempts = 0",
        2,
    )
    .await;

    let rows = db
        .rows("SELECT id, CAST(status AS CHAR), attempts FROM email ORDER BY id")
        .await;
    let outbox_order: Vec<(u64,)> = db
        .rows("SELECT email_id FROM mail_outbox ORDER BY seq")
        .await;
    (rows, outbox_order.into_iter().map(|(id,)| id).collect())
}

/// With one worker the select's ORDER BY is the processing order, and batch = 1
/// and batch = 7 end with the same rows in the same states.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_give_up_after_five_attempts_and_order_by_is_honoured() {
    let (rows_one, order_one) = story(1).await;
    let (rows_batched, order_batched) = story(7).await;

    let mut expected: Vec<u64> = (1..=ROWS as u64)
        .filter(|id| !BAD.contains(id) && !LATER.contains(id))
        .collect();
    expected.reverse();
    assert_eq!(order_one, expected, "ORDER BY id DESC is the order of work");
    assert_eq!(order_batched, expected);
    assert_eq!(rows_one, rows_batched, "batch > 1 ends in the same state");
}
