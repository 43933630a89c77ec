//! One suite every message broker passes, as River's `riverdrivertest` asks the same of
//! every driver: every row marked sent is in the broker through a kill -9, a broker
//! that goes away opens the circuit and costs no attempts, and a message the
//! destination refuses in a batch fails only its row. Each behaviour is one function
//! over a [`Broker`], the small adapter that makes a destination of the test's own,
//! reads what arrived and says how to reach the broker (so that a `StallingProxy` in
//! between can break the path); `every_broker!` makes a test of each behaviour for
//! each broker, `kinds::brokers::<kind>::<behaviour>`. A new broker is an adapter
//! and a line there. What only one broker does is tested in its kind's module
//! (`kinds::amqp`, `kinds::nats`).

pub mod jetstream;
pub mod outbox;
pub mod rabbitmq;

use std::collections::BTreeSet;
use std::time::Duration;

use crate::support::brokers::tally;
use crate::support::daemon::{run_binary_until_empty, tableq, Daemon};
use crate::support::proxy::StallingProxy;
use crate::support::queue_file::table;
use crate::support::{eventually, load, logs, run_until_empty, running, Engine, QueueFile};
use crate::support::{QueueFiles, TestDb};
use outbox::{
    add_rows, ids_in, ids_of, outbox, outbox_batch_queue, outbox_queue, row_json, row_of,
};

/// What the suite asks of a broker.
pub trait Broker: Sized {
    /// The action's `type`.
    const KIND: &'static str;
    /// Where the broker listens (`host:port`).
    const SERVER: &'static str;
    /// What the broker does with a message published again under the same id.
    const AGAIN: Again;

    /// A destination of the test's own (a queue, a stream) that takes every message.
    async fn destination() -> Self;
    /// A destination that holds `messages` messages and refuses the ones after.
    async fn holding(messages: u32) -> Self;
    /// The `route` the outbox's rows carry to reach this destination.
    fn route(&self) -> String;
    /// Where a row's message arrives addressed (its routing key, its subject).
    fn to(&self) -> String;
    /// `queue`'s `[action]` publishing each row to this destination by its `route`,
    /// through the broker at `server` (`host:port`: [`Broker::SERVER`], or a proxy).
    fn aim(&self, queue: QueueFile, server: &str) -> QueueFile;
    /// Every message the destination received since it was made, as a consumer
    /// reads it.
    async fn received(&mut self) -> Vec<Message>;
    /// Whether `error`, a row's `:error`, says the destination refused the message
    /// for being full.
    fn refused_as_full(error: &str) -> bool;
    /// Deletes what the destination made.
    async fn clean_up(self);
}

/// What a broker does with a message published again under the same message id.
pub enum Again {
    /// Delivers it again: consumers de-duplicate by the message id.
    Delivered,
    /// Drops it (a JetStream stream, within its duplicate window).
    Dropped,
}

/// One message as the destination received it.
#[derive(Debug, Clone)]
pub struct Message {
    pub id: Option<String>,
    /// Its routing key, its subject.
    pub to: String,
    pub body: Vec<u8>,
}

/// The rows the messages name, by their message id `<queue>_<id>`.
fn rows_of(queue: &str, messages: &[Message]) -> BTreeSet<u64> {
    ids_of(queue, messages.iter().map(|m| m.id.as_deref()))
}

/// tableq killed with SIGKILL while it publishes: every row it had marked sent is
/// at the destination, and a second run sends the rest — the rows acknowledged but
/// not yet marked go again, and the broker delivers them again or drops them by
/// their message id; every message is addressed by its row and carries it as JSON.
pub async fn every_row_marked_sent_is_in_the_broker_after_a_kill_9<B: Broker>() {
    const ROWS: usize = 600;
    let db = TestDb::new().await;
    let mut broker = B::destination().await;
    outbox(&db, ROWS, &broker.route()).await;
    let files = QueueFiles::new();
    let queue = format!("{}_relay", B::KIND);
    // The pause after each acknowledgement, before the row is marked, is where the
    // kill lands.
    let file = broker
        .aim(outbox_queue(&queue).action_set("type", B::KIND), B::SERVER)
        .workers(4)
        .batch(20)
        .on_success([
            "DO SLEEP(0.05)",
            "UPDATE outbox SET state = 'sent' WHERE id = :id",
        ])
        .write(&files);
    let unmarked = kill_while_publishing(&db, &mut broker, &queue, &file).await;

    run_binary_until_empty(&file, &db.url).await;
    assert_eq!(ids_in(&db, "sent").await.len(), ROWS);
    let all = broker.received().await;
    assert_eq!(rows_of(&queue, &all).len(), ROWS, "every row arrived");
    let counts = tally(all.iter().map(|m| m.id.as_deref()));
    match B::AGAIN {
        Again::Delivered => {
            let duplicates = all.len() - ROWS;
            assert!(
                duplicates >= unmarked,
                "{duplicates} duplicates, {unmarked} unmarked"
            );
            assert!(counts.values().all(|&n| n <= 2), "{counts:?}");
        }
        Again::Dropped => {
            assert_eq!(all.len(), ROWS, "one message per row, no more");
            assert!(counts.values().all(|&n| n == 1), "{counts:?}");
        }
    }
    for message in &all {
        assert_eq!(message.to, broker.to(), "{message:?}");
        let id = row_of(&queue, message.id.as_deref()).expect("a message id");
        let body: serde_json::Value = serde_json::from_slice(&message.body).unwrap();
        assert_eq!(body, row_json(id, &broker.route()), "{message:?}");
    }
    eprintln!(
        "{}: {unmarked} rows acknowledged but not marked at the kill; after the second \
         run {} messages for {ROWS} rows",
        B::KIND,
        all.len()
    );
    broker.clean_up().await;
}

/// Runs `file` as the real binary until 100 rows are sent and a worker is between
/// an acknowledgement and its commit, kills it with SIGKILL, and asserts every row
/// marked sent arrived; returns how many arrived but are not marked (more than none:
/// the kill landed where it should).
async fn kill_while_publishing<B: Broker>(
    db: &TestDb,
    broker: &mut B,
    queue: &str,
    file: &std::path::Path,
) -> usize {
    let mut cmd = tableq(&["run"]);
    cmd.arg(file).env("TABLEQ_DATABASE_URL", &db.url);
    let mut daemon = Daemon::spawn(cmd);
    eventually(
        "100 rows are sent and a worker is between acknowledgements and its commit",
        Duration::from_secs(60),
        || async {
            db.count("SELECT COUNT(*) FROM outbox WHERE state = 'sent'")
                .await
                >= 100
                && running(db, "DO SLEEP").await
        },
    )
    .await;
    daemon.signal(libc::SIGKILL);
    daemon.wait(Duration::from_secs(10)).await;

    let sent = ids_in(db, "sent").await;
    let arrived = rows_of(queue, &broker.received().await);
    let missing: Vec<&u64> = sent.difference(&arrived).collect();
    assert!(
        missing.is_empty(),
        "rows marked sent but not at the destination: {missing:?}"
    );
    let unmarked = arrived.len() - sent.len();
    assert!(
        unmarked > 0,
        "the kill landed between a batch's acknowledgements and its commit: some rows \
         arrived but are not marked"
    );
    unmarked
}

/// The broker goes away (every connection reset, as a crashed broker or a dead path
/// does): the circuit opens, the outage costs at most `min_items` attempts plus one
/// per probe — a probe that finds the broker unreachable costs none, and the queue
/// then waits for it — and once it is back every row is delivered and none failed.
pub async fn a_broker_that_goes_away_opens_the_circuit_and_spends_no_attempts<B: Broker>() {
    const MIN_ITEMS: u64 = 5;
    let logs = logs::capture();
    let db = TestDb::new().await;
    let mut broker = B::destination().await;
    outbox(&db, 3, &broker.route()).await;
    let proxy = StallingProxy::start(B::SERVER.parse().unwrap()).await;
    let files = QueueFiles::new();
    let circuit = table(&[
        ("min_items", toml::Value::Integer(MIN_ITEMS as i64)),
        ("window", "2s".into()),
        ("cool_down", "1s".into()),
        ("max_cool_down", "2s".into()),
    ]);
    // A name no other test's log lines carry.
    let queue = format!("{}_outage", B::KIND);
    let file = outbox_queue(&queue).action_set("type", B::KIND);
    let file = broker
        .aim(file, &proxy.addr.to_string())
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
    add_rows(&db, 4, 200, &broker.route()).await;
    // A reset connection fails the messages in flight downstream (the breaker counts
    // them); a new connection refused finds the broker unreachable (waited for).
    let waited = "the circuit opened and two probes were tried, or the broker was unreachable";
    eventually(waited, Duration::from_secs(30), || async {
        logs.lines_of(&queue, "tried as a probe").len() >= 2
            || !logs
                .lines_of(&queue, "the handler cannot be reached")
                .is_empty()
    })
    .await;
    let attempts: u64 = db.scalar("SELECT SUM(attempts) FROM outbox").await;
    let probes = logs.lines_of(&queue, "tried as a probe").len() as u64;
    assert!(
        attempts <= MIN_ITEMS + probes,
        "the outage cost {attempts} attempts: more than {MIN_ITEMS} + {probes} probes"
    );

    proxy.resume();
    eventually(
        "every row is delivered once the broker is back",
        Duration::from_secs(60),
        || async { ids_in(&db, "sent").await.len() == 203 },
    )
    .await;
    engine.stop().await;
    assert!(ids_in(&db, "failed").await.is_empty());
    assert_eq!(rows_of(&queue, &broker.received().await).len(), 203);
    eprintln!(
        "{}: the outage cost {attempts} attempts ({probes} probes); all 203 rows delivered",
        B::KIND
    );
    broker.clean_up().await;
}

/// In batch scope every message of the batch is published, then every
/// acknowledgement awaited: a destination that holds three and refuses more refuses
/// two of five, and only those two rows fail, with the broker's reason — the three
/// acknowledged are sent, and nothing is published again.
pub async fn batch_scope_with_one_refused_message_fails_only_its_row<B: Broker>() {
    let db = TestDb::new().await;
    let mut broker = B::holding(3).await;
    outbox(&db, 5, &broker.route()).await;
    let files = QueueFiles::new();
    let queue = format!("{}_full", B::KIND);
    let file = outbox_batch_queue(&queue).action_set("type", B::KIND);
    let file = broker.aim(file, B::SERVER).write(&files);
    run_until_empty(load(&[file]), &db.url).await;

    assert_eq!(ids_in(&db, "sent").await, BTreeSet::from([1, 2, 3]));
    assert_eq!(ids_in(&db, "failed").await, BTreeSet::from([4, 5]));
    let errors: Vec<(String,)> = db
        .rows("SELECT error FROM outbox WHERE state = 'failed'")
        .await;
    for (error,) in errors {
        assert!(B::refused_as_full(&error), "{error}");
    }
    assert_eq!(
        rows_of(&queue, &broker.received().await),
        BTreeSet::from([1, 2, 3])
    );
    broker.clean_up().await;
}

/// A test of each behaviour above for the broker `$broker`.
macro_rules! behaviours {
    ($broker:ty: $($behaviour:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $behaviour() {
            super::$behaviour::<$broker>().await
        }
    )*};
}

/// The suite for each broker, in a module named after its kind.
macro_rules! every_broker {
    ($($kind:ident: $broker:ty),* $(,)?) => {$(
        mod $kind {
            use super::*;

            behaviours!(
                $broker:
                every_row_marked_sent_is_in_the_broker_after_a_kill_9,
                a_broker_that_goes_away_opens_the_circuit_and_spends_no_attempts,
                batch_scope_with_one_refused_message_fails_only_its_row,
            );
        }
    )*};
}

every_broker!(
    amqp: rabbitmq::RabbitMq,
    nats: jetstream::JetStream,
);
