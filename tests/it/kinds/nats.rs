//! `type = "nats"` against the NATS server this machine runs (127.0.0.1:4222, with
//! JetStream), what only it does: core NATS reaches a subscriber and `check` warns
//! that it can lose messages; `check` finds the stream that takes a subject. What
//! every broker does (a kill -9, an outage, a refusal in a batch) is the suite
//! `kinds::brokers`. Each test has a stream and subjects of its own (random names),
//! deleted at the end.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::StreamExt;

use super::brokers::outbox::{outbox, outbox_queue};
use crate::support::brokers::{unique, Stream, NATS_URL};
use crate::support::check::{assert_report, check_offline, check_online, job_db, GOOD};
use crate::support::{load, run_until_empty, QueueFiles, TestDb};

/// Without JetStream the messages reach a subscriber (each with `Nats-Msg-Id`), and
/// `check` warns that core NATS can lose them.
#[tokio::test]
async fn core_nats_reaches_a_subscriber_and_check_warns_it_can_lose_messages() {
    let db = TestDb::new().await;
    outbox(&db, 20, "created").await;
    let subjects = unique("tq.core.");
    let client = async_nats::connect(NATS_URL).await.unwrap();
    let mut subscriber = client.subscribe(format!("{subjects}.>")).await.unwrap();
    client.flush().await.unwrap();
    let files = QueueFiles::new();
    let file = outbox_queue("core")
        .action_set("type", "nats")
        .action_set("url", NATS_URL)
        .action_set("subject", format!("{subjects}.{{route}}"))
        .action_set("jetstream", false)
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
