//! The outbox every broker test publishes: each row a message addressed by its
//! `route`, carrying the row as JSON, its outcome recorded on the row.

use std::collections::BTreeSet;

use crate::support::{QueueFile, TestDb};

/// An outbox of `rows` rows (ids 1 to `rows`), each routed by `route`.
pub async fn outbox(db: &TestDb, rows: usize, route: &str) {
    db.exec(
        "CREATE TABLE outbox (id INT PRIMARY KEY, route VARCHAR(100) NOT NULL DEFAULT '',
           payload TEXT NULL, state VARCHAR(10) NOT NULL DEFAULT 'waiting', status INT NULL,
           error VARCHAR(1000) NULL, attempts INT NOT NULL DEFAULT 0,
           next_at DATETIME(3) NOT NULL DEFAULT '2000-01-01', INDEX (state, next_at, id))
         DEFAULT CHARSET=utf8mb4",
    )
    .await;
    add_rows(db, 1, rows, route).await;
}

/// Rows `first..first + rows` routed by `route`, each with the payload `{"n": id}`.
pub async fn add_rows(db: &TestDb, first: usize, rows: usize, route: &str) {
    let mut conn = db.conn().await;
    let values: Vec<String> = (first..first + rows)
        .map(|i| format!("({i}, '{route}', '{{\"n\": {i}}}')"))
        .collect();
    for chunk in values.chunks(1000) {
        let sql = format!(
            "INSERT INTO outbox (id, route, payload) VALUES {}",
            chunk.join(",")
        );
        mysql_async::prelude::Queryable::query_drop(&mut conn, sql)
            .await
            .expect("insert outbox rows");
    }
}

/// The row `id` as its message's body carries it.
pub fn row_json(id: u64, route: &str) -> serde_json::Value {
    serde_json::json!({"id": id, "route": route, "payload": format!("{{\"n\": {id}}}")})
}

/// The queue `name` publishing the outbox, item by item; a failure is retried a
/// second later, eight times at most. Its `[action]` says only the timeout: the
/// test adds the kind and where the messages go.
pub fn outbox_queue(name: &str) -> QueueFile {
    QueueFile::new(name)
        .select("SELECT id, route, payload FROM outbox WHERE state = 'waiting' AND next_at <= NOW(3) ORDER BY next_at, id")
        .poll_interval("200ms")
        .action_set("timeout", "3s")
        .on_success("UPDATE outbox SET state = 'sent' WHERE id = :id")
        .on_failure(
            "UPDATE outbox SET attempts = attempts + 1, error = :error, status = :status,
               next_at = NOW(3) + INTERVAL 1 SECOND,
               state = IF(attempts >= 8, 'failed', 'waiting') WHERE id = :id",
        )
}

/// The queue `name` publishing the outbox in batches of five (`scope = "batch"`):
/// the batch's rows are marked sent, or failed with each row's own error. Its
/// `[action]` is the test's to write.
pub fn outbox_batch_queue(name: &str) -> QueueFile {
    QueueFile::new(name)
        .select("SELECT id, route, payload FROM outbox WHERE state = 'waiting' ORDER BY id")
        .batch(5)
        .set("scope", "batch")
        .on_success(
            "UPDATE outbox JOIN JSON_TABLE(:batch, '$[*]' COLUMNS (id INT PATH '$.id')) AS b
               USING (id) SET outbox.state = 'sent'",
        )
        .on_failure(
            "UPDATE outbox JOIN JSON_TABLE(:batch, '$[*]' COLUMNS (id INT PATH '$.id',
               error VARCHAR(1000) PATH '$.error')) AS b USING (id)
               SET outbox.state = 'failed', outbox.error = b.error",
        )
}

/// The ids of the rows in `state`.
pub async fn ids_in(db: &TestDb, state: &str) -> BTreeSet<u64> {
    db.rows::<(u64,)>(&format!(
        "SELECT id FROM outbox WHERE state = '{state}' ORDER BY id"
    ))
    .await
    .into_iter()
    .map(|(id,)| id)
    .collect()
}

/// The row ids that message ids name (`<queue>_<id>`), of the queue `queue`.
pub fn ids_of<'a>(
    queue: &str,
    message_ids: impl IntoIterator<Item = Option<&'a str>>,
) -> BTreeSet<u64> {
    message_ids
        .into_iter()
        .filter_map(|id| row_of(queue, id))
        .collect()
}

/// The row id a message id names (`<queue>_<id>`), if it is one of `queue`'s.
pub fn row_of(queue: &str, message_id: Option<&str>) -> Option<u64> {
    message_id?
        .strip_prefix(queue)?
        .strip_prefix('_')?
        .parse()
        .ok()
}
