//! `type = "amqp"` against the RabbitMQ this machine runs (127.0.0.1:5672,
//! guest/guest): every row marked sent is in the broker, through a kill -9; an
//! unroutable message fails its row; an outage opens the circuit; a nack in a
//! batch fails only its row; `check` looks at the exchange. Each test declares
//! queues and exchanges of its own (random names) and deletes them.

use std::collections::BTreeSet;
use std::time::Duration;

use lapin::types::{AMQPValue, LongString};

use crate::support::brokers::{tally, unique, Got, Rabbit, RABBITMQ, RABBITMQ_URL};
use crate::support::check::{assert_report, check_offline, check_online, job_db, GOOD};
use crate::support::daemon::{run_binary_until_empty, tableq, Daemon};
use crate::support::proxy::StallingProxy;
use crate::support::{eventually, load, logs, run_until_empty, running, Engine, QueueFile};
use crate::support::{QueueFiles, TestDb};

/// An outbox: each row a message, its outcome recorded on it.
async fn outbox(db: &TestDb, rows: usize, route: &str) {
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

/// Rows `first..first + rows` routed by `route`.
async fn add_rows(db: &TestDb, first: usize, rows: usize, route: &str) {
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

/// The queue `name` publishing the outbox to `url` by each row's `route`; a failure
/// is retried a second later, eight times at most.
fn outbox_queue(name: &str, url: &str) -> QueueFile {
    QueueFile::new(name)
        .select("SELECT id, route, payload FROM outbox WHERE state = 'waiting' AND next_at <= NOW(3) ORDER BY next_at, id")
        .poll_interval("200ms")
        .action_set("type", "amqp")
        .action_set("url", url)
        .action_set("routing_key", "{route}")
        .action_set("timeout", "3s")
        .on_success("UPDATE outbox SET state = 'sent' WHERE id = :id")
        .on_failure(
            "UPDATE outbox SET attempts = attempts + 1, error = :error, status = :status,
               next_at = NOW(3) + INTERVAL 1 SECOND,
               state = IF(attempts >= 8, 'failed', 'waiting') WHERE id = :id",
        )
}

/// A TOML table of `pairs`, for a key whose value is one.
fn table(pairs: &[(&str, toml::Value)]) -> toml::Value {
    toml::Value::Table(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    )
}

/// The ids of the rows in `state`.
async fn ids_in(db: &TestDb, state: &str) -> BTreeSet<u64> {
    db.rows::<(u64,)>(&format!(
        "SELECT id FROM outbox WHERE state = '{state}' ORDER BY id"
    ))
    .await
    .into_iter()
    .map(|(id,)| id)
    .collect()
}

/// The row ids the messages carry in their message id (`<queue>_<id>`).
fn ids_of(queue: &str, messages: &[Got]) -> BTreeSet<u64> {
    let prefix = format!("{queue}_");
    messages
        .iter()
        .filter_map(|m| m.message_id.as_deref()?.strip_prefix(&prefix)?.parse().ok())
        .collect()
}

/// tableq killed with SIGKILL while it publishes: every row it had marked sent is
/// in the broker's queue (a consumer takes them all), and a second run sends the
/// rest — the rows confirmed but not yet marked go twice, and are counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_row_marked_sent_is_in_rabbitmq_after_a_kill_9() {
    const ROWS: usize = 600;
    let db = TestDb::new().await;
    let mut rabbit = Rabbit::connect().await;
    let queue = unique("tq-kill-");
    rabbit.queue(&queue, &[]).await;
    outbox(&db, ROWS, &queue).await;
    let files = QueueFiles::new();
    // The pause after each confirm, before the row is marked, is where the kill lands.
    let file = outbox_queue("relay", RABBITMQ_URL)
        .workers(4)
        .batch(20)
        .on_success([
            "DO SLEEP(0.05)",
            "UPDATE outbox SET state = 'sent' WHERE id = :id",
        ])
        .write(&files);
    let mut cmd = tableq(&["run"]);
    cmd.arg(&file).env("TABLEQ_DATABASE_URL", &db.url);
    let mut daemon = Daemon::spawn(cmd);
    eventually(
        "100 rows are sent and a worker is between confirms and its commit",
        Duration::from_secs(60),
        || async {
            db.count("SELECT COUNT(*) FROM outbox WHERE state = 'sent'")
                .await
                >= 100
                && running(&db, "DO SLEEP").await
        },
    )
    .await;
    daemon.signal(libc::SIGKILL);
    daemon.wait(Duration::from_secs(10)).await;

    let sent = ids_in(&db, "sent").await;
    let first = rabbit.take_all(&queue).await;
    let in_broker = ids_of("relay", &first);
    let missing: Vec<&u64> = sent.difference(&in_broker).collect();
    assert!(
        missing.is_empty(),
        "rows marked sent but not in RabbitMQ: {missing:?}"
    );
    let unmarked = in_broker.len() - sent.len();
    assert!(
        unmarked > 0,
        "the kill landed between a batch's confirms and its commit: some rows are in the \
         broker but not marked"
    );

    run_binary_until_empty(&file, &db.url).await;
    let second = rabbit.take_all(&queue).await;
    let all: Vec<Got> = first.iter().chain(&second).cloned().collect();
    assert_eq!(ids_in(&db, "sent").await.len(), ROWS);
    let counts = tally(all.iter().map(|m| m.message_id.as_deref()));
    let delivered = ids_of("relay", &all);
    assert_eq!(
        delivered.len(),
        ROWS,
        "every row is in the broker at least once"
    );
    let duplicates = all.len() - ROWS;
    assert!(
        duplicates >= unmarked,
        "{duplicates} duplicates, {unmarked} unmarked"
    );
    assert!(counts.values().all(|&n| n <= 2), "{counts:?}");
    assert!(
        all.iter().all(|m| m.persistent),
        "every message is persistent"
    );
    eprintln!(
        "kill -9 after {} rows marked sent: {} in RabbitMQ then ({unmarked} confirmed, not \
         marked); after the second run {} messages for {ROWS} rows: {duplicates} duplicates",
        sent.len(),
        in_broker.len(),
        all.len()
    );
    rabbit.clean_up().await;
}

/// A row whose message no queue is bound for fails with the broker's reason in
/// `:error` and its reply code in `:status`; the routed row's message carries the
/// row as JSON, `<queue>_<key>` as its id, and is persistent.
#[tokio::test]
async fn an_unroutable_message_fails_its_row_with_the_reason() {
    let db = TestDb::new().await;
    let mut rabbit = Rabbit::connect().await;
    let queue = unique("tq-routed-");
    let nowhere = unique("tq-nowhere-");
    rabbit.queue(&queue, &[]).await;
    outbox(&db, 1, &queue).await;
    add_rows(&db, 2, 1, &nowhere).await;
    let files = QueueFiles::new();
    let file = outbox_queue("unroutable", RABBITMQ_URL)
        .action_set("headers", table(&[("x-row", "{id}".into())]))
        .write(&files);
    run_until_empty(load(&[file]), &db.url).await;

    let (state, status, error): (String, Option<i64>, Option<String>) = db
        .rows("SELECT state, status, error FROM outbox WHERE id = 2")
        .await
        .remove(0);
    assert_eq!(
        state, "waiting",
        "retried later: its attempts are being spent"
    );
    assert_eq!(status, Some(312));
    assert_eq!(
        error.as_deref(),
        Some(
            format!(
                "RabbitMQ returned the message unroutable: 312 NO_ROUTE (exchange \"\", routing \
                 key \"{nowhere}\"): no queue is bound for it"
            )
            .as_str()
        )
    );
    assert_eq!(ids_in(&db, "sent").await, BTreeSet::from([1]));
    let got = rabbit.take_all(&queue).await;
    assert_eq!(got.len(), 1, "{got:?}");
    let message = &got[0];
    assert_eq!(message.message_id.as_deref(), Some("unroutable_1"));
    assert_eq!(message.content_type.as_deref(), Some("application/json"));
    assert!(message.persistent);
    assert_eq!(message.routing_key, queue);
    let body: serde_json::Value = serde_json::from_slice(&message.body).unwrap();
    assert_eq!(
        body,
        serde_json::json!({"id": 1, "route": queue, "payload": "{\"n\": 1}"})
    );
    rabbit.clean_up().await;
}

/// RabbitMQ goes away (every connection reset, as a crashed broker or a dead path
/// does): the circuit opens, the outage costs at most `min_items` attempts plus one
/// per probe, and once it is back every row is delivered and none failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_that_goes_away_opens_the_circuit_and_spends_no_attempts() {
    const MIN_ITEMS: u64 = 5;
    let logs = logs::capture();
    let db = TestDb::new().await;
    let mut rabbit = Rabbit::connect().await;
    let queue = unique("tq-outage-");
    rabbit.queue(&queue, &[]).await;
    outbox(&db, 3, &queue).await;
    let proxy = StallingProxy::start(RABBITMQ.parse().unwrap()).await;
    let url = format!("amqp://guest:guest@{}/%2f", proxy.addr);
    let files = QueueFiles::new();
    let circuit = table(&[
        ("min_items", toml::Value::Integer(MIN_ITEMS as i64)),
        ("window", "2s".into()),
        ("cool_down", "1s".into()),
        ("max_cool_down", "2s".into()),
    ]);
    let file = outbox_queue("amqp_outage", &url)
        .workers(2)
        .batch(10)
        .set("circuit", circuit)
        .write(&files);
    let engine = Engine::start(load(&[file]), &db.url);
    eventually(
        "the first rows are sent",
        Duration::from_secs(30),
        || async { ids_in(&db, "sent").await.len() == 3 },
    )
    .await;

    proxy.reset();
    add_rows(&db, 4, 200, &queue).await;
    eventually("the circuit opens", Duration::from_secs(30), || async {
        !logs
            .lines_of("amqp_outage", "the circuit is open")
            .is_empty()
    })
    .await;
    eventually("two probes were tried", Duration::from_secs(30), || async {
        logs.lines_of("amqp_outage", "tried as a probe").len() >= 2
    })
    .await;
    let attempts: u64 = db.scalar("SELECT SUM(attempts) FROM outbox").await;
    let probes = logs.lines_of("amqp_outage", "tried as a probe").len() as u64;
    assert!(
        attempts <= MIN_ITEMS + probes,
        "the outage cost {attempts} attempts: more than {MIN_ITEMS} + {probes} probes"
    );

    proxy.resume();
    eventually(
        "every row is delivered once RabbitMQ is back",
        Duration::from_secs(60),
        || async { ids_in(&db, "sent").await.len() == 203 },
    )
    .await;
    engine.stop().await;
    assert!(ids_in(&db, "failed").await.is_empty());
    let got = rabbit.take_all(&queue).await;
    assert_eq!(ids_of("amqp_outage", &got).len(), 203);
    eprintln!("the outage cost {attempts} attempts ({probes} probes); all 203 rows delivered");
    rabbit.clean_up().await;
}

/// In batch scope the batch's messages go out together, then every confirm is
/// awaited: a queue that holds three and rejects the rest (x-overflow =
/// reject-publish) makes the broker nack two of five, and only those two rows fail
/// — the three confirmed are sent, and nothing is published again.
#[tokio::test]
async fn batch_scope_with_one_nacked_message_fails_only_its_row() {
    let db = TestDb::new().await;
    let mut rabbit = Rabbit::connect().await;
    let queue = unique("tq-full-");
    let full = [
        ("x-max-length", AMQPValue::LongInt(3)),
        (
            "x-overflow",
            AMQPValue::LongString(LongString::from("reject-publish")),
        ),
    ];
    rabbit.queue(&queue, &full).await;
    outbox(&db, 5, &queue).await;
    let files = QueueFiles::new();
    let file = QueueFile::new("nacked")
        .select("SELECT id, route, payload FROM outbox WHERE state = 'waiting' ORDER BY id")
        .batch(5)
        .set("scope", "batch")
        .action_set("type", "amqp")
        .action_set("url", RABBITMQ_URL)
        .action_set("routing_key", "{route}")
        .on_success(
            "UPDATE outbox JOIN JSON_TABLE(:batch, '$[*]' COLUMNS (id INT PATH '$.id')) AS b
               USING (id) SET outbox.state = 'sent'",
        )
        .on_failure(
            "UPDATE outbox JOIN JSON_TABLE(:batch, '$[*]' COLUMNS (id INT PATH '$.id',
               error VARCHAR(1000) PATH '$.error')) AS b USING (id)
               SET outbox.state = 'failed', outbox.error = b.error",
        )
        .write(&files);
    run_until_empty(load(&[file]), &db.url).await;

    assert_eq!(ids_in(&db, "sent").await, BTreeSet::from([1, 2, 3]));
    assert_eq!(ids_in(&db, "failed").await, BTreeSet::from([4, 5]));
    let errors: Vec<(Option<String>,)> = db
        .rows("SELECT error FROM outbox WHERE state = 'failed'")
        .await;
    for (error,) in errors {
        assert_eq!(
            error.as_deref(),
            Some(
                "RabbitMQ refused the message (basic.nack): a queue it routes to is full and \
                 rejects publishes (x-overflow = reject-publish), or the broker could not store it"
            )
        );
    }
    let got = rabbit.take_all(&queue).await;
    assert_eq!(ids_of("nacked", &got), BTreeSet::from([1, 2, 3]));
    rabbit.clean_up().await;
}

/// `check` connects, finds the exchange (a passive declare) and says what the
/// sample row's message would look like; an exchange that is not there is an
/// error; offline, `mandatory = false` is a warning and a routing key the default
/// exchange cannot route is an error.
#[tokio::test]
async fn check_looks_at_the_exchange_and_shows_the_message() {
    let db = job_db().await;
    let mut rabbit = Rabbit::connect().await;
    let exchange = unique("tq-check-");
    rabbit.exchange(&exchange).await;
    let amqp = |exchange: &str| {
        GOOD.replace(
            "type = \"sql\"\nsql = \"DO :id\"",
            &format!(
                "type = \"amqp\"\nurl = \"{RABBITMQ_URL}\"\nexchange = \"{exchange}\"\n\
                 routing_key = \"job.{{id}}\"\nheaders = {{ x-tenant = \"7\" }}"
            ),
        )
    };
    let (done, shown) = check_online(&db, &amqp(&exchange)).await;
    assert_report(
        &done,
        &[format!(
            "{shown}:6: queue jobs: note: the message for the row id = 1 would go to RabbitMQ at \
             amqp://127.0.0.1:5672, exchange \"{exchange}\" (it is there), routing key \"job.1\": \
             message id \"jobs_1\", headers x-tenant = \"7\", a 21-byte body (application/json)"
        )],
        "0 errors, 0 warnings",
        0,
    );

    let missing = unique("tq-missing-");
    let (done, shown) = check_online(&db, &amqp(&missing)).await;
    assert_report(
        &done,
        &[format!(
            "{shown}:5: queue jobs: error: the exchange \"{missing}\" is not there on RabbitMQ at \
             amqp://127.0.0.1:5672 (NOT_FOUND - no exchange '{missing}' in vhost '/'): declare \
             it, and bind the queues that should get the messages (tableq declares nothing)"
        )],
        "1 error, 0 warnings",
        1,
    );

    let careless = amqp("").replace("routing_key = \"job.{id}\"", "mandatory = false");
    let (done, shown) = check_offline(&careless).await;
    assert_report(
        &done,
        &[format!(
            "{shown}:2: queue jobs: error: `action.routing_key` is empty, and the default \
                 exchange (`exchange = \"\"`) routes by queue name: set `routing_key` to the \
                 queue's name, or name an `exchange`"
        )],
        "offline: 1 error, 0 warnings",
        1,
    );
    let unmandatory = amqp(&exchange).replace("headers =", "mandatory = false\nheaders =");
    let (done, shown) = check_offline(&unmandatory).await;
    assert_report(
        &done,
        &[format!(
            "{shown}:7: queue jobs: warning: `action.mandatory = false`: a message no queue is \
             bound for is dropped by the broker and its row marked done all the same; leave \
             `mandatory` out (true) so that it fails its row instead"
        )],
        "offline: 0 errors, 1 warning",
        0,
    );
    rabbit.clean_up().await;
}
