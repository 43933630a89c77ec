//! `type = "amqp"` against the RabbitMQ this machine runs (127.0.0.1:5672,
//! guest/guest), what only it does: an unroutable message fails its row with the
//! broker's reason, the message's properties, and `check`'s look at the exchange.
//! What every broker does (a kill -9, an outage, a refusal in a batch) is the suite
//! `kinds::brokers`. Each test declares queues and exchanges of its own (random
//! names) and deletes them.

use std::collections::BTreeSet;

use super::brokers::outbox::{add_rows, ids_in, outbox, outbox_queue, row_json};
use crate::support::brokers::{unique, Rabbit, RABBITMQ_URL};
use crate::support::check::{assert_report, check_offline, check_online, job_db, GOOD};
use crate::support::queue_file::table;
use crate::support::{load, run_until_empty, QueueFiles, TestDb};

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
    let file = outbox_queue("unroutable")
        .action_set("type", "amqp")
        .action_set("url", RABBITMQ_URL)
        .action_set("routing_key", "{route}")
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
    assert_eq!(body, row_json(1, &queue));
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
