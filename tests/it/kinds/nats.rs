//! `type = "nats"` against the NATS server this machine runs (127.0.0.1:4222, with
//! JetStream): exactly one message per row in a stream through a kill -9; core NATS
//! reaches a subscriber and `check` warns that it can lose messages; a server that
//! goes away opens the circuit; a stream that refuses one message of a batch fails
//! only its row; `check` finds the stream. Each test has a stream and subjects of
//! its own (random names), deleted at the end.

use std::collections::BTreeSet;
use std::time::Duration;

use async_nats::jetstream::stream::DiscardPolicy;
use futures::StreamExt;

use crate::support::brokers::{tally, unique, Stored, Stream, NATS, NATS_URL};
use crate::support::check::{assert_report, check_offline, check_online, job_db, GOOD};
use crate::support::daemon::{run_binary_until_empty, tableq, Daemon};
use crate::support::proxy::StallingProxy;
use crate::support::{eventually, load, logs, run_until_empty, running, Engine, QueueFile};
use crate::support::{QueueFiles, TestDb};

/// An outbox of `rows` rows, each a message to `<subjects>.<kind>`.
async fn outbox(db: &TestDb, rows: usize) {
    db.exec(
        "CREATE TABLE outbox (id INT PRIMARY KEY, kind VARCHAR(20) NOT NULL DEFAULT 'created',
           state VARCHAR(10) NOT NULL DEFAULT 'waiting', error VARCHAR(1000) NULL,
           attempts INT NOT NULL DEFAULT 0, next_at DATETIME(3) NOT NULL DEFAULT '2000-01-01',
           INDEX (state, next_at, id)) DEFAULT CHARSET=utf8mb4",
    )
    .await;
    add_rows(db, 1, rows).await;
}

async fn add_rows(db: &TestDb, first: usize, rows: usize) {
    db.fill("outbox", "id", rows, |i| (first + i - 1).to_string())
        .await;
}

/// The queue `name` publishing the outbox to `<subjects>.{kind}` on `url`; a failure
/// is retried a second later, eight times at most.
fn outbox_queue(name: &str, url: &str, subjects: &str, jetstream: bool) -> QueueFile {
    QueueFile::new(name)
        .select("SELECT id, kind FROM outbox WHERE state = 'waiting' AND next_at <= NOW(3) ORDER BY next_at, id")
        .poll_interval("200ms")
        .action_set("type", "nats")
        .action_set("url", url)
        .action_set("subject", format!("{subjects}.{{kind}}"))
        .action_set("jetstream", jetstream)
        .action_set("timeout", "3s")
        .on_success("UPDATE outbox SET state = 'sent' WHERE id = :id")
        .on_failure(
            "UPDATE outbox SET attempts = attempts + 1, error = :error,
               next_at = NOW(3) + INTERVAL 1 SECOND,
               state = IF(attempts >= 8, 'failed', 'waiting') WHERE id = :id",
        )
}

async fn ids_in(db: &TestDb, state: &str) -> BTreeSet<u64> {
    db.rows::<(u64,)>(&format!(
        "SELECT id FROM outbox WHERE state = '{state}' ORDER BY id"
    ))
    .await
    .into_iter()
    .map(|(id,)| id)
    .collect()
}

/// The row ids the stored messages carry in `Nats-Msg-Id` (`<queue>_<id>`).
fn ids_of(queue: &str, messages: &[Stored]) -> BTreeSet<u64> {
    let prefix = format!("{queue}_");
    messages
        .iter()
        .filter_map(|m| m.message_id.as_deref()?.strip_prefix(&prefix)?.parse().ok())
        .collect()
}

/// tableq killed with SIGKILL while it publishes to a stream: every row marked sent
/// is in the stream, and after a second run the stream holds exactly one message per
/// row — the rows acknowledged but not yet marked were sent again, and the stream
/// dropped the repeats by their `Nats-Msg-Id`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jetstream_holds_exactly_one_message_per_row_through_a_kill_9() {
    const ROWS: usize = 600;
    let db = TestDb::new().await;
    let stream = Stream::create().await;
    outbox(&db, ROWS).await;
    let files = QueueFiles::new();
    // The pause after each PubAck, before the row is marked, is where the kill lands.
    let file = outbox_queue("js_relay", NATS_URL, &stream.subjects, true)
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
        "100 rows are sent and a worker is between PubAcks and its commit",
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
    let held = stream.messages().await;
    let in_stream = ids_of("js_relay", &held);
    let missing: Vec<&u64> = sent.difference(&in_stream).collect();
    assert!(
        missing.is_empty(),
        "rows marked sent but not in the stream: {missing:?}"
    );
    let unmarked = in_stream.len() - sent.len();
    assert!(
        unmarked > 0,
        "the kill landed between PubAcks and the commit"
    );

    run_binary_until_empty(&file, &db.url).await;
    assert_eq!(ids_in(&db, "sent").await.len(), ROWS);
    let held = stream.messages().await;
    let counts = tally(held.iter().map(|m| m.message_id.as_deref()));
    assert_eq!(held.len(), ROWS, "one message per row, no more");
    assert_eq!(ids_of("js_relay", &held).len(), ROWS);
    assert!(counts.values().all(|&n| n == 1), "{counts:?}");
    let subject = format!("{}.created", stream.subjects);
    assert!(held.iter().all(|m| m.subject == subject));
    let body: serde_json::Value = serde_json::from_slice(&held[0].payload).unwrap();
    assert_eq!(body["kind"], "created");
    eprintln!(
        "kill -9 after {} rows marked sent, {} in the stream ({unmarked} acknowledged, not \
         marked, so sent again); after the second run the stream holds {} messages for {ROWS} \
         rows",
        sent.len(),
        in_stream.len(),
        held.len()
    );
    stream.delete().await;
}

/// Without JetStream the messages reach a subscriber (each with `Nats-Msg-Id`), and
/// `check` warns that core NATS can lose them.
#[tokio::test]
async fn core_nats_reaches_a_subscriber_and_check_warns_it_can_lose_messages() {
    let db = TestDb::new().await;
    outbox(&db, 20).await;
    let subjects = unique("tq.core.");
    let client = async_nats::connect(NATS_URL).await.unwrap();
    let mut subscriber = client.subscribe(format!("{subjects}.>")).await.unwrap();
    client.flush().await.unwrap();
    let files = QueueFiles::new();
    let file = outbox_queue("core", NATS_URL, &subjects, false)
        .batch(5)
        .write(&files);
    run_until_empty(load(std::slice::from_ref(&file)), &db.url).await;
    let mut ids = BTreeSet::new();
    while ids.len() < 20 {
        let message = tokio::time::timeout(Duration::from_secs(10), subscriber.next())
            .await
            .expect("every message reaches the subscriber")
            .unwrap();
        assert_eq!(message.subject.as_str(), format!("{subjects}.created"));
        let id = message.headers.as_ref().and_then(|h| h.get("Nats-Msg-Id"));
        ids.insert(id.map(|v| v.as_str().to_string()).unwrap_or_default());
    }
    assert!(ids.contains("core_1") && ids.contains("core_20"), "{ids:?}");

    let contents = std::fs::read_to_string(&file).unwrap();
    let (done, shown) = check_offline(&contents).await;
    let line = 1 + contents
        .lines()
        .position(|l| l.starts_with("jetstream"))
        .unwrap();
    assert_report(
        &done,
        &[format!(
            "{shown}:{line}: queue jobs: warning: core NATS (no `jetstream = true`) acknowledges \
             nothing: a message is lost when no subscriber is listening, or when the server \
             fails before it passes it on, and its row is marked done all the same; publish to a \
             JetStream stream with `jetstream = true` for acknowledged messages"
        )],
        "offline: 0 errors, 1 warning",
        0,
    );
}

/// The NATS server goes away (every connection reset): the circuit opens, the
/// outage costs at most `min_items` attempts plus one per probe, and once the
/// server is back every row reaches the stream, none failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_goes_away_opens_the_circuit_and_spends_no_attempts() {
    const MIN_ITEMS: u64 = 5;
    let logs = logs::capture();
    let db = TestDb::new().await;
    let stream = Stream::create().await;
    outbox(&db, 3).await;
    let proxy = StallingProxy::start(NATS.parse().unwrap()).await;
    let url = format!("nats://{}", proxy.addr);
    let files = QueueFiles::new();
    let circuit: toml::Table = [
        ("min_items", toml::Value::Integer(MIN_ITEMS as i64)),
        ("window", "2s".into()),
        ("cool_down", "1s".into()),
        ("max_cool_down", "2s".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let file = outbox_queue("nats_outage", &url, &stream.subjects, true)
        .workers(2)
        .batch(10)
        .set("circuit", toml::Value::Table(circuit))
        .write(&files);
    let engine = Engine::start(load(&[file]), &db.url);
    eventually(
        "the first rows are sent",
        Duration::from_secs(30),
        || async { ids_in(&db, "sent").await.len() == 3 },
    )
    .await;

    proxy.reset();
    add_rows(&db, 4, 200).await;
    eventually("the circuit opens", Duration::from_secs(30), || async {
        !logs
            .lines_of("nats_outage", "the circuit is open")
            .is_empty()
    })
    .await;
    eventually("two probes were tried", Duration::from_secs(30), || async {
        logs.lines_of("nats_outage", "tried as a probe").len() >= 2
    })
    .await;
    let attempts: u64 = db.scalar("SELECT SUM(attempts) FROM outbox").await;
    let probes = logs.lines_of("nats_outage", "tried as a probe").len() as u64;
    assert!(
        attempts <= MIN_ITEMS + probes,
        "the outage cost {attempts} attempts: more than {MIN_ITEMS} + {probes} probes"
    );

    proxy.resume();
    eventually(
        "every row is in the stream once the server is back",
        Duration::from_secs(60),
        || async { ids_in(&db, "sent").await.len() == 203 },
    )
    .await;
    engine.stop().await;
    assert!(ids_in(&db, "failed").await.is_empty());
    assert_eq!(ids_of("nats_outage", &stream.messages().await).len(), 203);
    eprintln!("the outage cost {attempts} attempts ({probes} probes); all 203 rows delivered");
    stream.delete().await;
}

/// In batch scope every message of the batch is published, then every PubAck
/// awaited: a stream that holds three and refuses more (`discard = new`) refuses
/// two of five, and only those two rows fail, with the stream's reason.
#[tokio::test]
async fn batch_scope_with_one_refused_message_fails_only_its_row() {
    let db = TestDb::new().await;
    let stream = Stream::create_with(|config| async_nats::jetstream::stream::Config {
        max_messages: 3,
        discard: DiscardPolicy::New,
        ..config
    })
    .await;
    outbox(&db, 5).await;
    let files = QueueFiles::new();
    let file = QueueFile::new("js_full")
        .select("SELECT id, kind FROM outbox WHERE state = 'waiting' ORDER BY id")
        .batch(5)
        .set("scope", "batch")
        .action_set("type", "nats")
        .action_set("url", NATS_URL)
        .action_set("subject", format!("{}.{{kind}}", stream.subjects))
        .action_set("jetstream", true)
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
    let errors: Vec<(String,)> = db
        .rows("SELECT error FROM outbox WHERE state = 'failed'")
        .await;
    for (error,) in errors {
        assert!(
            error.starts_with("NATS: the stream refused the message: maximum messages exceeded"),
            "{error}"
        );
    }
    assert_eq!(
        ids_of("js_full", &stream.messages().await),
        BTreeSet::from([1, 2, 3])
    );
    stream.delete().await;
}

/// `check` finds the stream that takes the sample row's subject and says what its
/// message would look like; a subject no stream takes is an error.
#[tokio::test]
async fn check_finds_the_stream_and_shows_the_message() {
    let db = job_db().await;
    let stream = Stream::create().await;
    let nats = |subjects: &str| {
        GOOD.replace(
            "type = \"sql\"\nsql = \"DO :id\"",
            &format!(
                "type = \"nats\"\nurl = \"{NATS_URL}\"\nsubject = \"{subjects}.job.{{id}}\"\n\
                 jetstream = true"
            ),
        )
    };
    let (done, shown) = check_online(&db, &nats(&stream.subjects)).await;
    assert_report(
        &done,
        &[format!(
            "{shown}:5: queue jobs: note: the message for the row id = 1 would go to NATS at \
             nats://127.0.0.1:4222, subject \"{}.job.1\", taken by the stream {} \
             (de-duplicating within 2m): message id \"jobs_1\", no headers, a 21-byte body",
            stream.subjects, stream.name
        )],
        "0 errors, 0 warnings",
        0,
    );

    let nowhere = unique("tq.nowhere.");
    let (done, shown) = check_online(&db, &nats(&nowhere)).await;
    let lines: Vec<&str> = done.stdout.lines().collect();
    let expected = format!(
        "{shown}:5: queue jobs: error: no JetStream stream takes the subject \"{nowhere}.job.1\""
    );
    assert!(lines[0].starts_with(&expected), "{}", done.stdout);
    assert!(lines[0].ends_with("create one whose subjects include it (tableq creates nothing)"));
    assert_eq!(done.code(), Some(1), "{}", done.stdout);
    stream.delete().await;
}
