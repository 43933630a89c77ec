//! Workers run at READ COMMITTED, so a held row never blocks the application's
//! INSERTs — which it does at REPEATABLE READ (rails/solid_queue#240).

use std::time::Duration;

use mysql_async::prelude::Queryable;

use crate::support::{eventually, load, running, Engine, QueueFiles, TestDb, EMAIL_SQL};

const SELECT: &str = "SELECT id, recipient FROM email WHERE status = 'waiting' AND (retry_at IS NULL OR retry_at <= UNIX_TIMESTAMP()) ORDER BY id";

/// The application's INSERT of a new waiting email, failing fast on a lock wait.
async fn application_insert(db: &TestDb) -> Result<(), mysql_async::Error> {
    let mut app = db.conn().await;
    app.query_drop("SET SESSION innodb_lock_wait_timeout = 1")
        .await?;
    let result = app
        .query_drop("INSERT INTO email (recipient, subject, body) VALUES ('new@example.com', 'New', 'Body')")
        .await;
    app.disconnect().await.ok();
    result
}

/// A table where the claim's range scan locks the gap new waiting rows go into.
async fn setup() -> TestDb {
    let db = TestDb::new().await;
    db.exec(EMAIL_SQL).await;
    // The article's own index only: its claim sorts, and at REPEATABLE READ locks the
    // gap where new waiting rows go.
    db.exec("ALTER TABLE email DROP INDEX status_id").await;
    db.fill("email", "recipient, subject, body, status", 2000, |i| {
        format!("'old{i}@example.com', 'Old', 'Body', 'sent'")
    })
    .await;
    db.fill("email", "recipient, subject, body", 7, |i| {
        format!("'user{i}@example.com', 'Hi', 'Body'")
    })
    .await;
    db.exec("ANALYZE TABLE email").await;
    db
}

/// While a worker holds a row, the application inserts into the same table without
/// waiting; the same claim at REPEATABLE READ makes that insert time out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_row_does_not_block_the_applications_inserts() {
    let db = setup().await;
    let files = QueueFiles::new();
    let file = files.write(
        "email.toml",
        &format!(
            r#"
select = "{SELECT}"
[action]
type = "sql"
sql = "DO SLEEP(2)"
[on_success]
sql = "UPDATE email SET status = 'sent' WHERE id = :id"
"#
        ),
    );
    let queues = load(&[file]);
    let claim = tableq::claim_sql(&queues[0].select, 1);
    let engine = Engine::start(queues, &db.url);

    eventually("a worker holds a row", Duration::from_secs(30), || {
        running(&db, "DO SLEEP")
    })
    .await;
    let isolation_query = format!(
        "SELECT t.trx_isolation_level FROM information_schema.INNODB_TRX t
         JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
         WHERE p.DB = '{}' AND p.INFO LIKE 'DO SLEEP%'",
        db.name
    );
    let isolation: String = crate::support::listed_transaction(&db, &isolation_query).await;
    assert_eq!(isolation, "READ COMMITTED");
    application_insert(&db)
        .await
        .expect("the application's INSERT must not wait for the worker's locks");
    engine.stop().await;

    // The control: the very same claim at REPEATABLE READ blocks the same INSERT.
    let mut worker = db.conn().await;
    worker
        .query_drop("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        .await
        .unwrap();
    worker.query_drop("BEGIN").await.unwrap();
    let claimed: Vec<(u64, String)> = worker.query(claim).await.unwrap();
    assert_eq!(claimed.len(), 1);
    let blocked = application_insert(&db).await;
    worker.query_drop("ROLLBACK").await.unwrap();
    match blocked {
        Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, 1205, "{e}"),
        other => {
            panic!("at REPEATABLE READ the insert should time out waiting for a lock: {other:?}")
        }
    }
}
