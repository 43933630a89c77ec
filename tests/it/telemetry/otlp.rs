//! `run --otlp-endpoint`: a span per item reaches a real OTLP/HTTP receiver on
//! loopback (its protobuf decoded with `opentelemetry-proto`), in the row's own
//! trace when it has a `traceparent`, with the queue, key and outcome — rows handed
//! back (at shutdown, not leased) too; and a collector that never answers costs the
//! workers nothing: every row is done, and the spans are dropped and counted.

use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

use crate::support::daemon::{tableq, Daemon};
use crate::support::endpoint::{get, metrics_address};
use crate::support::scrape::sample;
use crate::support::web::{silent_server, Reply, WebServer};
use crate::support::{eventually, running, QueueFile, QueueFiles, TestDb};

const ROW_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const ROW_SPAN: &str = "00f067aa0ba902b7";

/// A receiver of OTLP/HTTP exports: answers each with an empty success.
async fn collector() -> WebServer {
    WebServer::start(|_| Reply::status(200).header("content-type", "application/x-protobuf")).await
}

/// Every span the receiver got, each with its resource's `service.name`.
fn received(collector: &WebServer) -> Vec<(String, Span)> {
    let mut spans = Vec::new();
    for request in collector.requests() {
        assert_eq!(request.uri.path(), "/v1/traces");
        assert_eq!(request.header("content-type"), "application/x-protobuf");
        let export = ExportTraceServiceRequest::decode(request.body.as_slice())
            .expect("an OTLP protobuf export");
        for resource in export.resource_spans {
            let attributes = resource.resource.map(|r| r.attributes).unwrap_or_default();
            let service = text(&attributes, "service.name").unwrap_or_default();
            for scope in resource.scope_spans {
                spans.extend(scope.spans.into_iter().map(|s| (service.clone(), s)));
            }
        }
    }
    spans
}

/// Runs the queue file `file` exporting to `endpoint` until `collector` has
/// received two spans.
async fn run_until_two_spans(
    file: &std::path::Path,
    db: &TestDb,
    endpoint: &str,
    collector: &WebServer,
) -> Daemon {
    let mut cmd = tableq(&["run", "--otlp-endpoint", endpoint]);
    cmd.arg(file).env("TABLEQ_DATABASE_URL", &db.url);
    let daemon = Daemon::spawn(cmd);
    eventually("two spans arrive", Duration::from_secs(60), || async {
        received(collector).len() >= 2
    })
    .await;
    daemon
}

/// A string attribute's value.
fn text(attributes: &[KeyValue], key: &str) -> Option<String> {
    attributes.iter().find(|kv| kv.key == key).and_then(|kv| {
        match kv.value.as_ref()?.value.as_ref()? {
            Value::StringValue(s) => Some(s.clone()),
            _ => None,
        }
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Three rows through an HTTP action: each one's span arrives with the queue, key
/// and outcome (and the error of the one that failed), in the trace its delivery
/// sent — the row's own for the row with a `traceparent`, under the span that
/// wrote it — and as the very span the receiver's request names as its parent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_item_span_arrives_in_its_rows_trace_with_queue_key_and_outcome() {
    let receiver = WebServer::start(|request| match request.json()["id"].as_i64() {
        Some(2) => Reply::status(500),
        _ => Reply::status(200),
    })
    .await;
    let collector = collector().await;
    let db = TestDb::new().await;
    db.exec(&format!(
        "CREATE TABLE hook (id INT PRIMARY KEY, traceparent VARCHAR(55) NULL, state VARCHAR(10) NOT NULL DEFAULT 'waiting') DEFAULT CHARSET=utf8mb4;
         INSERT INTO hook (id, traceparent) VALUES (1, NULL), (2, 'not a trace'), (3, '00-{ROW_TRACE}-{ROW_SPAN}-01')"
    ))
    .await;
    let files = QueueFiles::new();
    let file = QueueFile::new("otlp_hooks")
        .select("SELECT id, traceparent FROM hook WHERE state = 'waiting' ORDER BY id")
        .batch(3)
        .poll_interval("1h")
        .action_http(&receiver.url("/hook"))
        .action_set("allow_private_networks", true)
        .on_success("UPDATE hook SET state = 'done' WHERE id = :id")
        .on_failure("UPDATE hook SET state = 'failed' WHERE id = :id")
        .write(&files);
    let mut cmd = tableq(&["run", "--otlp-endpoint", &collector.url("")]);
    cmd.arg(&file)
        .env("TABLEQ_DATABASE_URL", &db.url)
        .env("OTEL_SERVICE_NAME", "otlp-test");
    let mut daemon = Daemon::spawn(cmd);
    eventually("three spans arrive", Duration::from_secs(60), || async {
        received(&collector).len() >= 3
    })
    .await;

    let spans = received(&collector);
    assert_eq!(spans.len(), 3, "one span per item");
    let sent: Vec<(String, String, String)> = receiver
        .requests()
        .iter()
        .map(|r| {
            let header = r.header("traceparent");
            let key = r.json()["id"].to_string();
            (key, header[3..35].to_string(), header[36..52].to_string())
        })
        .collect();
    for (service, span) in &spans {
        assert_eq!(service, "otlp-test");
        the_item_span_says_what_it_sent(span, &sent);
    }
    daemon.terminate().await;
}

/// One item's span: named for its queue, with the key and outcome (and the error of
/// item 2, which failed), its five events, in the trace and as the span its delivery
/// sent (`sent`: key, trace and parent of each request) — the row's own trace for
/// item 3, under the span that wrote it.
fn the_item_span_says_what_it_sent(span: &Span, sent: &[(String, String, String)]) {
    assert_eq!(span.name, "process otlp_hooks");
    let attribute = |key| text(&span.attributes, key);
    assert_eq!(attribute("tableq.queue").as_deref(), Some("otlp_hooks"));
    let key = attribute("tableq.key").expect("the key");
    let (_, trace, parent) = sent.iter().find(|(k, ..)| *k == key).expect("delivered");
    assert_eq!(&hex(&span.trace_id), trace, "item {key}: the trace it sent");
    assert_eq!(
        &hex(&span.span_id),
        parent,
        "item {key}: the span it sent from"
    );
    assert!(span.end_time_unix_nano >= span.start_time_unix_nano);
    let events: Vec<&str> = span.events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        events,
        [
            "claimed",
            "action started",
            "action finished",
            "outcome recorded",
            "committed"
        ]
    );
    match key.as_str() {
        "2" => {
            assert_eq!(attribute("tableq.outcome").as_deref(), Some("failed"));
            let error = attribute("tableq.error").expect("the error text");
            assert!(error.contains("500"), "{error}");
        }
        _ => {
            assert_eq!(attribute("tableq.outcome").as_deref(), Some("done"));
            assert_eq!(attribute("tableq.error"), None);
        }
    }
    if key == "3" {
        assert_eq!(hex(&span.trace_id), ROW_TRACE, "the row's own trace");
        assert_eq!(hex(&span.parent_span_id), ROW_SPAN, "under the row's span");
    } else {
        assert_ne!(hex(&span.trace_id), ROW_TRACE);
        assert!(span.parent_span_id.is_empty(), "a root span");
    }
}

/// In `scope = "batch"` a batch is one span: its items are its events (key and
/// outcome), and a row's own `traceparent` is a link to its trace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_one_span_with_its_items_as_events_and_links() {
    let collector = collector().await;
    let db = TestDb::new().await;
    db.exec(&format!(
        "CREATE TABLE job (id INT PRIMARY KEY, traceparent VARCHAR(55) NULL, state VARCHAR(10) NOT NULL DEFAULT 'waiting');
         INSERT INTO job (id, traceparent) VALUES (1, NULL), (2, '00-{ROW_TRACE}-{ROW_SPAN}-01'), (3, NULL)"
    ))
    .await;
    let batch = "JSON_TABLE(:batch, '$[*]' COLUMNS (id INT PATH '$.id')) AS b";
    let files = QueueFiles::new();
    let file = QueueFile::new("otlp_batch")
        .set("scope", "batch")
        .select("SELECT id, traceparent FROM job WHERE state = 'waiting' ORDER BY id")
        .batch(3)
        .poll_interval("1h")
        .action_sql(format!(
            "UPDATE job JOIN {batch} USING (id) SET job.state = 'ran'"
        ))
        .on_success(format!(
            "UPDATE job JOIN {batch} USING (id) SET job.state = 'done'"
        ))
        .write(&files);
    let mut cmd = tableq(&["run"]);
    cmd.arg(&file).env("TABLEQ_DATABASE_URL", &db.url).env(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        collector.url("/v1/traces"),
    );
    let mut daemon = Daemon::spawn(cmd);
    // The batch is done.
    db.until_count("SELECT COUNT(*) FROM job WHERE state = 'done'", 3, 60)
        .await;
    eventually(
        "the batch's span arrives",
        Duration::from_secs(30),
        || async { !received(&collector).is_empty() },
    )
    .await;

    let spans = received(&collector);
    assert_eq!(spans.len(), 1, "one span for the batch");
    let (service, span) = &spans[0];
    assert_eq!(service, "tableq", "the default service name");
    assert_eq!(
        text(&span.attributes, "tableq.queue").as_deref(),
        Some("otlp_batch")
    );
    let mut items: Vec<(String, String)> = span
        .events
        .iter()
        .filter(|e| e.name == "item")
        .map(|e| {
            let key = text(&e.attributes, "tableq.key").unwrap_or_default();
            (
                key,
                text(&e.attributes, "tableq.outcome").unwrap_or_default(),
            )
        })
        .collect();
    items.sort();
    let done = |key: &str| (key.to_string(), "done".to_string());
    assert_eq!(items, [done("1"), done("2"), done("3")]);
    assert_eq!(span.links.len(), 1, "the one row with a trace");
    assert_eq!(hex(&span.links[0].trace_id), ROW_TRACE);
    assert_eq!(hex(&span.links[0].span_id), ROW_SPAN);
    daemon.terminate().await;
}

/// A collector that accepts connections and never answers: every row is done as
/// fast as without one, and each item's span is dropped and counted in
/// `tableq_trace_spans_dropped_total`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_never_answers_costs_the_workers_nothing() {
    const ROWS: u64 = 600;
    let silent = silent_server().await;
    let db = TestDb::new().await;
    db.exec("CREATE TABLE job (id INT PRIMARY KEY AUTO_INCREMENT, state VARCHAR(10) NOT NULL DEFAULT 'waiting')")
        .await;
    db.fill("job", "state", ROWS as usize, |_| "'waiting'".into())
        .await;
    let files = QueueFiles::new();
    QueueFile::new("otlp_dead")
        .select("SELECT id FROM job WHERE state = 'waiting' ORDER BY id")
        .workers(4)
        .batch(20)
        .action_sql("UPDATE job SET state = 'ran' WHERE id = :id")
        .on_success("UPDATE job SET state = 'done' WHERE id = :id")
        .write(&files);
    let mut cmd = tableq(&["run", "--metrics-addr", "127.0.0.1:0"]);
    cmd.arg(files.path())
        .env("TABLEQ_DATABASE_URL", &db.url)
        .env("TABLEQ_LOG_FORMAT", "json")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{silent}"));
    let started = Instant::now();
    let mut daemon = Daemon::spawn(cmd);
    let metrics = format!("http://{}/metrics", metrics_address(&daemon).await);
    // Every row done.
    db.until_count("SELECT COUNT(*) FROM job WHERE state = 'done'", ROWS, 60)
        .await;
    let drained = started.elapsed();
    let dropped = || async {
        let (_, scrape) = get(&metrics).await;
        sample(&scrape, "tableq_trace_spans_dropped_total").unwrap_or(-1.0)
    };
    eventually(
        "every span dropped and counted",
        Duration::from_secs(60),
        || async { dropped().await == ROWS as f64 },
    )
    .await;
    daemon
        .wait_for_log("cannot export trace spans", Duration::from_secs(10))
        .await;
    assert!(
        drained < Duration::from_secs(45),
        "{ROWS} rows took {drained:?} with a dead collector"
    );
    daemon.terminate().await;
}

/// In lease mode too each item has its span, sent once its outcome is written: in
/// the row's own trace when it has a `traceparent`, with its action's run as events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leased_items_span_continues_its_rows_trace() {
    let collector = collector().await;
    let db = TestDb::new().await;
    db.exec(&format!(
        "CREATE TABLE job (id INT PRIMARY KEY, traceparent VARCHAR(55) NULL, state VARCHAR(10) NOT NULL DEFAULT 'waiting', lease_id VARCHAR(32) NULL, lease_until DATETIME(3) NULL);
         INSERT INTO job (id, traceparent) VALUES (1, '00-{ROW_TRACE}-{ROW_SPAN}-01'), (2, NULL)"
    ))
    .await;
    let files = QueueFiles::new();
    let file = QueueFile::new("otlp_lease")
        .set("mode", "lease")
        .select(
            "SELECT id, traceparent FROM job WHERE state = 'waiting' \
             OR (state = 'leased' AND lease_until < NOW(3)) ORDER BY id",
        )
        .batch(2)
        .poll_interval("1h")
        .lease_set(
            "sql",
            "UPDATE job SET state = 'leased', lease_id = :lease_id, \
             lease_until = NOW(3) + INTERVAL 30 SECOND WHERE id = :id",
        )
        .action_command(&["true"])
        .on_success("UPDATE job SET state = 'done' WHERE id = :id AND lease_id = :lease_id")
        .write(&files);
    let endpoint = collector.url("/");
    let mut daemon = run_until_two_spans(&file, &db, &endpoint, &collector).await;

    let spans = received(&collector);
    assert_eq!(spans.len(), 2, "one span per item");
    for (_, span) in &spans {
        let key = text(&span.attributes, "tableq.key").expect("the key");
        assert_eq!(
            text(&span.attributes, "tableq.outcome").as_deref(),
            Some("done")
        );
        let events: Vec<&str> = span.events.iter().map(|e| e.name.as_str()).collect();
        assert!(events.contains(&"action finished"), "{events:?}");
        let in_row_trace = hex(&span.trace_id) == ROW_TRACE;
        assert_eq!(in_row_trace, key == "1", "item {key}");
    }
    daemon.terminate().await;
}

/// The outcome and error of each span, by key.
fn fates(spans: &[(String, Span)]) -> Vec<(String, String, Option<String>)> {
    let mut fates: Vec<_> = spans
        .iter()
        .map(|(_, span)| {
            let attribute = |key| text(&span.attributes, key);
            let key = attribute("tableq.key").unwrap_or_default();
            let outcome = attribute("tableq.outcome").unwrap_or_default();
            (key, outcome, attribute("tableq.error"))
        })
        .collect();
    fates.sort();
    fates
}

/// SIGTERM while the first item of a batch runs: it is done, and the two the
/// worker did not start are handed back — waiting again, each with its span
/// (returned, and why), sent before the process exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_handed_back_at_shutdown_have_their_spans() {
    let collector = collector().await;
    let db = TestDb::new().await;
    db.exec(
        "CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting');
         INSERT INTO job (id) VALUES (1), (2), (3)",
    )
    .await;
    let files = QueueFiles::new();
    let file = QueueFile::new("otlp_shutdown")
        .select("SELECT id FROM job WHERE state = 'waiting' ORDER BY id")
        .batch(3)
        .poll_interval("1h")
        .action_sql("DO SLEEP(IF(:id = 1, 2, 0))")
        .on_success("UPDATE job SET state = 'done' WHERE id = :id")
        .write(&files);
    let mut cmd = tableq(&["run", "--otlp-endpoint", &collector.url("")]);
    cmd.arg(&file).env("TABLEQ_DATABASE_URL", &db.url);
    let mut daemon = Daemon::spawn(cmd);
    eventually("the first item runs", Duration::from_secs(30), || {
        running(&db, "DO SLEEP")
    })
    .await;
    daemon.signal(libc::SIGTERM);
    assert_eq!(daemon.wait(Duration::from_secs(30)).await.code(), Some(0));
    let waiting = db.count("SELECT COUNT(*) FROM job WHERE state = 'waiting'");
    assert_eq!(waiting.await, 2, "the two not started wait again");
    let stopping = Some("not started: the worker is stopping".to_string());
    let returned = |key: &str| (key.to_string(), "returned".to_string(), stopping.clone());
    let done = ("1".to_string(), "done".to_string(), None);
    assert_eq!(
        fates(&received(&collector)),
        [done, returned("2"), returned("3")]
    );
}

/// In lease mode a claimed row whose `[lease] sql` matches nothing is left as it
/// was, and its span says so; the other row of the claim is leased and done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_not_leased_has_its_span() {
    let collector = collector().await;
    let db = TestDb::new().await;
    db.exec(
        "CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting', lease_id VARCHAR(32) NULL);
         INSERT INTO job (id) VALUES (1), (2)",
    )
    .await;
    let files = QueueFiles::new();
    let file = QueueFile::new("otlp_not_leased")
        .set("mode", "lease")
        .select("SELECT id FROM job WHERE state = 'waiting' ORDER BY id")
        .batch(2)
        .poll_interval("1h")
        .error_backoff("1m")
        .lease_set(
            "sql",
            "UPDATE job SET state = 'leased', lease_id = :lease_id WHERE id = :id AND id <> 2",
        )
        .action_command(&["true"])
        .on_success("UPDATE job SET state = 'done' WHERE id = :id AND lease_id = :lease_id")
        .write(&files);
    let endpoint = collector.url("");
    let mut daemon = run_until_two_spans(&file, &db, &endpoint, &collector).await;
    let not_leased = Some("[lease] sql matched no row: not leased".to_string());
    let expected = [
        ("1".to_string(), "done".to_string(), None),
        ("2".to_string(), "returned".to_string(), not_leased),
    ];
    assert_eq!(fates(&received(&collector)), expected);
    let waiting = db.count("SELECT COUNT(*) FROM job WHERE state = 'waiting'");
    assert_eq!(waiting.await, 1, "the row not leased waits as it was");
    daemon.terminate().await;
}
