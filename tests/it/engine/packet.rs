//! Statements larger than the server's `max_allowed_packet` are never sent: a batch
//! whose `:batch` is too big is settled item by item instead — one request, one
//! command run, not the same failed batch again and again — and every row is done;
//! a row too large to send even alone fails on its own, with an error naming the
//! limit and the size, and the queue goes on.

use std::time::Duration;

use crate::support::web::{Reply, WebServer};
use crate::support::{load, private_db, run_until_empty, MariaDb, QueueFile, QueueFiles, TestDb};

/// A private server that takes at most 1 MiB in a packet, with `rows` rows of
/// 50 KB each waiting.
async fn big_rows(rows: usize) -> (MariaDb, TestDb) {
    let (server, db) = private_db(&["--max-allowed-packet=1M"]).await;
    db.exec(
        "CREATE TABLE letter (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting',
           body MEDIUMTEXT NOT NULL) DEFAULT CHARSET=utf8mb4;
         CREATE TABLE archive (id INT PRIMARY KEY, size INT NOT NULL) DEFAULT CHARSET=utf8mb4",
    )
    .await;
    for first in (1..=rows).step_by(20) {
        let values: Vec<String> = (first..(first + 20).min(rows + 1))
            .map(|id| format!("({id}, REPEAT('x', 50000))"))
            .collect();
        db.exec(&format!(
            "INSERT INTO letter (id, body) VALUES {}",
            values.join(", ")
        ))
        .await;
    }
    (server, db)
}

/// Runs the queue in `file` until it is empty (at most two minutes).
async fn drain(file: std::path::PathBuf, url: &str) -> tableq::RunSummary {
    tokio::time::timeout(
        Duration::from_secs(120),
        run_until_empty(load(&[file]), url),
    )
    .await
    .expect("the queue drains")
}

/// Batch scope over HTTP, batches of 30 rows of 50 KB (a 1.5 MB `:batch`): each batch
/// is delivered once, its `[on_success]` — too large to send whole — is written item
/// by item, and all 90 rows are done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_too_large_to_record_whole_is_recorded_item_by_item() {
    let (_server, db) = big_rows(90).await;
    let receiver = WebServer::start(|_| Reply::status(204)).await;
    let files = QueueFiles::new();
    let file = QueueFile::new("letters")
        .batch(30)
        .set("scope", "batch")
        .select("SELECT id, body FROM letter WHERE state = 'waiting' ORDER BY id")
        .action_http(&receiver.url("/letters"))
        .action_set("allow_private_networks", true)
        .on_success(
            "UPDATE letter JOIN JSON_TABLE(:batch, '$[*]' COLUMNS (id INT PATH '$.id')) AS b \
             USING (id) SET state = 'sent'",
        )
        .write(&files);
    let summary = drain(file, &db.url).await;
    assert_eq!(summary.counts("letters").unwrap().done, 90);
    db.assert_count("SELECT COUNT(*) FROM letter WHERE state = 'sent'", 90)
        .await;
    assert_eq!(
        receiver.requests().len(),
        3,
        "each batch was delivered once"
    );
}

/// Batch scope with an SQL action whose `:batch` is too large to send: the batch is
/// run again item by item, each row's 50 KB alone, and every row is archived once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sql_batch_too_large_to_send_runs_item_by_item() {
    let (_server, db) = big_rows(100).await;
    let files = QueueFiles::new();
    let file = QueueFile::new("archiving")
        .batch(100)
        .set("scope", "batch")
        .select("SELECT id, body FROM letter WHERE state = 'waiting' ORDER BY id")
        .action_sql(
            "INSERT INTO archive (id, size) SELECT id, LENGTH(body) FROM JSON_TABLE(:batch, \
             '$[*]' COLUMNS (id INT PATH '$.id', body MEDIUMTEXT PATH '$.body')) AS b",
        )
        .on_success(
            "UPDATE letter JOIN JSON_TABLE(:batch, '$[*]' COLUMNS (id INT PATH '$.id')) AS b \
             USING (id) SET state = 'archived'",
        )
        .write(&files);
    let summary = drain(file, &db.url).await;
    assert_eq!(summary.counts("archiving").unwrap().done, 100);
    db.assert_count("SELECT COUNT(*) FROM archive WHERE size = 50000", 100)
        .await;
}

/// `check` scales the first waiting row by `batch` and warns when a batch scope's
/// `:batch` would pass the server's max_allowed_packet, with a batch that fits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_warns_when_a_batch_would_not_fit_in_a_packet() {
    let (_server, db) = big_rows(3).await;
    let files = QueueFiles::new();
    let file = QueueFile::new("letters")
        .batch(30)
        .set("scope", "batch")
        .select("SELECT id, body FROM letter WHERE state = 'waiting' ORDER BY id")
        .action_sql("DO JSON_LENGTH(:batch)")
        .on_success(
            "UPDATE letter JOIN JSON_TABLE(:batch, '$[*]' COLUMNS (id INT PATH '$.id')) AS b \
             USING (id) SET state = 'sent'",
        )
        .write(&files);
    let done = crate::support::check::check(&[], &[&file], Some(&db.url)).await;
    let warning = done
        .stdout
        .lines()
        .find(|l| l.contains("warning: a batch of 30 rows like the first waiting one"))
        .unwrap_or_else(|| panic!("{}", done.stdout));
    assert!(
        warning.contains("over the server's max_allowed_packet (1.0 MiB)"),
        "{warning}"
    );
    assert!(warning.contains("set batch = 20 or less"), "{warning}");
    db.assert_count("SELECT COUNT(*) FROM letter WHERE state = 'waiting'", 3)
        .await;
}

/// Item scope: one row whose statement alone would pass max_allowed_packet fails on
/// its own — `[on_failure]` records an error naming the limit and the size — and the
/// rows behind it are done: it does not block the queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_too_large_to_send_alone_fails_on_its_own_and_the_queue_goes_on() {
    let (_server, db) = big_rows(0).await;
    db.exec(
        "ALTER TABLE letter ADD last_error VARCHAR(500) NULL;
         INSERT INTO letter (id, body) VALUES (1, 'short'), (2, REPEAT('x', 700000)), (3, 'short')",
    )
    .await;
    let files = QueueFiles::new();
    let file = QueueFile::new("oversized")
        .select("SELECT id, body FROM letter WHERE state = 'waiting' ORDER BY id")
        // The body twice: 1.4 MB of values for row 2, against a 1 MiB packet.
        .action_sql("INSERT INTO archive (id, size) VALUES (:id, LENGTH(CONCAT(:body, :body)))")
        .on_success("UPDATE letter SET state = 'archived' WHERE id = :id")
        .on_failure(
            "UPDATE letter SET state = 'failed', last_error = LEFT(:error, 500) WHERE id = :id",
        )
        .write(&files);
    let summary = drain(file, &db.url).await;
    let counts = summary.counts("oversized").unwrap();
    assert_eq!((counts.done, counts.failed), (2, 1), "{counts:?}");
    let rows: Vec<(u32, String, Option<String>)> = db
        .rows("SELECT id, state, last_error FROM letter ORDER BY id")
        .await;
    assert_eq!(rows[0].1, "archived");
    assert_eq!(rows[2].1, "archived", "the row behind it was done");
    assert_eq!(rows[1].1, "failed");
    let error = rows[1].2.as_deref().unwrap();
    assert!(
        error.contains("max_allowed_packet") && error.contains("1048576"),
        "the error names the limit: {error}"
    );
    assert!(error.contains("would send 14000"), "and the size: {error}");
}

/// A private server whose `max_allowed_packet` is 1 MiB, with one 2 MB row (id 1,
/// written while the server took 4 MiB) at the front of `rows` short ones.
async fn one_oversized_row(rows: usize) -> (MariaDb, TestDb) {
    let (server, db) = private_db(&["--max-allowed-packet=4M"]).await;
    db.exec(
        "CREATE TABLE letter (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting',
           body LONGTEXT NOT NULL, last_error VARCHAR(1000) NULL, KEY (state, id))
           DEFAULT CHARSET=utf8mb4;
         INSERT INTO letter (id, body) VALUES (1, REPEAT('x', 2000000))",
    )
    .await;
    db.exec(&format!(
        "INSERT INTO letter (id, body) SELECT seq, 'short' FROM seq_2_to_{}; \
         SET GLOBAL max_allowed_packet = 1048576",
        rows + 1
    ))
    .await;
    (server, db)
}

/// What became of the letters: (state, how many), and the oversized row's error.
async fn letters(db: &TestDb) -> (Vec<(String, u64)>, String) {
    let states: Vec<(String, u64)> = db
        .rows("SELECT state, COUNT(*) FROM letter GROUP BY state ORDER BY state")
        .await;
    let error: Vec<(Option<String>,)> = db.rows("SELECT last_error FROM letter WHERE id = 1").await;
    (states, error[0].0.clone().unwrap_or_default())
}

/// The error recorded for the row too large to read names the limit and its size.
fn names_limit_and_size(error: &str) {
    assert!(
        error.contains("max_allowed_packet (1048576 bytes)"),
        "the error names the limit: {error}"
    );
    assert!(
        error.contains("the row is about 20000"),
        "and the row's size: {error}"
    );
}

/// A queue archiving the letters in item scope, 10 at a time: a failure's error
/// recorded on its row.
fn archiving(name: &str, select: &str) -> QueueFile {
    QueueFile::new(name)
        .batch(10)
        .select(select)
        .action_sql("INSERT INTO archive (id, size) VALUES (:id, LENGTH(:body))")
        .on_success("UPDATE letter SET state = 'archived' WHERE id = :id")
        .on_failure("UPDATE letter SET state = 'failed', last_error = :error WHERE id = :id")
}

/// Drains `file`'s queue `name`: 299 rows archived, the oversized one failed with the
/// limit and its size in its error, and never archived.
async fn archived_but_the_oversized_row(file: std::path::PathBuf, name: &str, db: &TestDb) {
    done_but_the_oversized_row(file, name, db, ("archived", 299)).await;
    db.assert_count("SELECT COUNT(*) FROM archive WHERE id = 1", 0)
        .await;
}

/// Item scope, `batch = 10`: a 2 MB row under a 1 MiB `max_allowed_packet` at the
/// front of the queue is claimed by its key, never read, and fails on its own through
/// `[on_failure]` (the limit and its size in `:error`); the 299 rows behind it are done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_too_large_to_read_fails_on_its_own_and_the_rows_behind_it_are_done() {
    let (_server, db) = one_oversized_row(299).await;
    db.exec("CREATE TABLE archive (id INT PRIMARY KEY, size INT NOT NULL)")
        .await;
    let files = QueueFiles::new();
    let select = "SELECT id, body FROM letter WHERE state = 'waiting' ORDER BY id";
    let file = archiving("oversized_read", select).write(&files);
    archived_but_the_oversized_row(file, "oversized_read", &db).await;
}

/// The key-first claim under `[concurrency]` (its condition is in the key claim's
/// text): the row too large to read fails on its own and frees its customer's slot,
/// so that customer's other rows are done like everyone else's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_concurrency_a_row_too_large_to_read_fails_on_its_own() {
    let (_server, db) = one_oversized_row(299).await;
    db.exec(
        "ALTER TABLE letter ADD COLUMN customer INT NOT NULL DEFAULT 0;
         UPDATE letter SET customer = id % 3;
         CREATE TABLE archive (id INT PRIMARY KEY, size INT NOT NULL)",
    )
    .await;
    let mut key = toml::Table::new();
    key.insert("key".into(), "customer".into());
    key.insert("limit".into(), 1.into());
    let files = QueueFiles::new();
    let select = "SELECT id, customer, body FROM letter WHERE state = 'waiting' ORDER BY id";
    let file = archiving("oversized_keyed", select)
        .workers(2)
        .set("concurrency", toml::Value::Table(key))
        .write(&files);
    archived_but_the_oversized_row(file, "oversized_keyed", &db).await;
    // Customer 1, whose row could not be read, had every other row done.
    db.assert_count(
        "SELECT COUNT(*) FROM letter WHERE customer = 1 AND state = 'archived'",
        db.count("SELECT COUNT(*) FROM letter WHERE customer = 1")
            .await
            - 1,
    )
    .await;
}

/// Drains `file`'s queue `name`: `done` rows in `state`, the oversized one failed
/// with the limit and its size in its error.
async fn done_but_the_oversized_row(
    file: std::path::PathBuf,
    name: &str,
    db: &TestDb,
    (state, done): (&str, u64),
) {
    let summary = drain(file, &db.url).await;
    let counts = summary.counts(name).unwrap();
    assert_eq!((counts.done, counts.failed), (done, 1), "{counts:?}");
    let (states, error) = letters(db).await;
    let mut expected = vec![(state.to_string(), done), ("failed".to_string(), 1)];
    expected.sort();
    assert_eq!(states, expected);
    names_limit_and_size(&error);
}

/// Batch scope, `batch = 10`, over HTTP: the row too large to read is left out of
/// its batch's request and fails on its own through `[on_failure]`'s `:batch`; every
/// other row is delivered and done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_batch_scope_a_row_too_large_to_read_fails_on_its_own() {
    let (_server, db) = one_oversized_row(99).await;
    let receiver = WebServer::start(|_| Reply::status(204)).await;
    let files = QueueFiles::new();
    let file = QueueFile::new("oversized_batch")
        .batch(10)
        .set("scope", "batch")
        .select("SELECT id, body FROM letter WHERE state = 'waiting' ORDER BY id")
        .action_http(&receiver.url("/letters"))
        .action_set("allow_private_networks", true)
        .on_success(
            "UPDATE letter JOIN JSON_TABLE(:batch, '$[*]' COLUMNS (id INT PATH '$.id')) AS b \
             USING (id) SET state = 'sent'",
        )
        .on_failure(
            "UPDATE letter JOIN JSON_TABLE(:batch, '$[*]' COLUMNS (id INT PATH '$.id', \
             error VARCHAR(1000) PATH '$.error')) AS b USING (id) \
             SET state = 'failed', last_error = b.error",
        )
        .write(&files);
    done_but_the_oversized_row(file, "oversized_batch", &db, ("sent", 99)).await;
    let sent: usize = receiver
        .requests()
        .iter()
        .map(|r| {
            serde_json::from_slice::<Vec<serde_json::Value>>(&r.body)
                .unwrap()
                .len()
        })
        .sum();
    assert_eq!(sent, 99, "the row too large to read was never sent");
}

/// The claims the server ran, from its general log (turned on here): whole — the
/// select's own columns, one statement — and key first (the keys, then a read).
struct ClaimsRun {
    whole: u64,
    key_first: u64,
}

async fn log_statements(db: &TestDb) {
    db.exec("SET GLOBAL log_output = 'TABLE'; SET GLOBAL general_log = 1")
        .await;
}

async fn claims_run(db: &TestDb) -> ClaimsRun {
    let executed = |like: &str| {
        format!(
            "SELECT COUNT(*) FROM mysql.general_log \
             WHERE command_type = 'Execute' AND argument LIKE '{like}'"
        )
    };
    ClaimsRun {
        whole: db
            .count(&executed("SELECT id, body FROM letter%SKIP LOCKED"))
            .await,
        key_first: db.count(&executed("SELECT q.* FROM%")).await,
    }
}

/// Without a row too large to read, every claim is one statement: the rows come
/// with their values, no key-first read after them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_row_too_large_to_read_a_claim_is_one_statement() {
    let (_server, db) = one_oversized_row(29).await;
    db.exec(
        "DELETE FROM letter WHERE id = 1;
         CREATE TABLE archive (id INT PRIMARY KEY, size INT NOT NULL)",
    )
    .await;
    log_statements(&db).await;
    let files = QueueFiles::new();
    let select = "SELECT id, body FROM letter WHERE state = 'waiting' ORDER BY id";
    let file = archiving("whole", select).write(&files);
    let summary = drain(file, &db.url).await;
    assert_eq!(summary.counts("whole").unwrap().done, 29);
    let run = claims_run(&db).await;
    assert!(run.whole >= 3, "{} whole claims", run.whole);
    assert_eq!(run.key_first, 0, "no key-first read");
}

/// A whole claim that meets a row too large to read loses its connection; the
/// claim is made again key first on a new one, and the queue claims key first
/// while the row may still wait: each row is archived once (a row claimed twice
/// would fail on the archive's key), none is left locked, the oversized one fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_refused_for_a_rows_size_is_made_again_key_first() {
    let (_server, db) = one_oversized_row(299).await;
    db.exec("CREATE TABLE archive (id INT PRIMARY KEY, size INT NOT NULL)")
        .await;
    log_statements(&db).await;
    let files = QueueFiles::new();
    let select = "SELECT id, body FROM letter WHERE state = 'waiting' ORDER BY id";
    let file = archiving("refused", select).workers(2).write(&files);
    archived_but_the_oversized_row(file, "refused", &db).await;
    let run = claims_run(&db).await;
    assert!(run.whole >= 1, "the first claim was whole");
    assert!(run.key_first >= 1, "then key first");
    assert_eq!(
        db.count("SELECT COUNT(*) FROM information_schema.innodb_trx")
            .await,
        0,
        "no transaction is left holding a row"
    );
}

/// Lease mode, `batch = 10`, over HTTP: the claim refused for the oversized row's
/// size is made again key first; that row is leased and fails on its own through
/// `[on_failure]`, and every other row is delivered once and done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_lease_mode_a_row_too_large_to_read_fails_on_its_own() {
    let (_server, db) = one_oversized_row(99).await;
    db.exec("ALTER TABLE letter ADD lease_id VARCHAR(64) NULL")
        .await;
    log_statements(&db).await;
    let receiver = WebServer::start(|_| Reply::status(204)).await;
    let files = QueueFiles::new();
    let file = QueueFile::new("oversized_lease")
        .set("mode", "lease")
        .batch(10)
        .select("SELECT id, body FROM letter WHERE state = 'waiting' ORDER BY id")
        .action_http(&receiver.url("/letters/{id}"))
        .action_set("allow_private_networks", true)
        .lease_set(
            "sql",
            "UPDATE letter SET state = 'leased', lease_id = :lease_id WHERE id = :id",
        )
        .on_success("UPDATE letter SET state = 'sent' WHERE id = :id AND lease_id = :lease_id")
        .on_failure(
            "UPDATE letter SET state = 'failed', last_error = :error \
             WHERE id = :id AND lease_id = :lease_id",
        )
        .write(&files);
    done_but_the_oversized_row(file, "oversized_lease", &db, ("sent", 99)).await;
    assert_eq!(
        receiver.requests().len(),
        99,
        "each other row delivered once"
    );
}
