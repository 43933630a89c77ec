//! `type = "http"` against real HTTP servers on loopback: the body and headers, every
//! failure class with its `:status`, `:error`, `:output` and `:retry_after`, TLS,
//! signatures checked by an independent implementation, SSRF refusal, concurrency.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support;
use crate::support::web::{closed_port, silent_server, Reply, WebServer};
use crate::support::{assert_has, load, run_until_empty, Engine, QueueFile, QueueFiles, TestDb};

/// The outcome columns every test table records.
const OUTCOME_COLUMNS: &str = "state VARCHAR(10) NOT NULL DEFAULT 'waiting', http_status INT NULL,
    error VARCHAR(1000) NULL, output MEDIUMBLOB NULL, retry_after INT NULL, attempts INT NOT NULL DEFAULT 0";

/// Every waiting hook.
const WAITING: &str = "SELECT id FROM hook WHERE state = 'waiting'";

/// A queue `name` that delivers the rows of `select` to `url`, and records every
/// outcome on the row.
fn hook_queue(name: &str, select: &str, url: &str) -> QueueFile {
    QueueFile::new(name)
        .select(select)
        .action_http(url)
        .on_success("UPDATE hook SET state = 'done', http_status = :status, output = :output WHERE id = :id")
        .on_failure("UPDATE hook SET state = 'failed', http_status = :status, error = :error, output = :output, retry_after = :retry_after, attempts = attempts + 1 WHERE id = :id")
}

/// The Standard Webhooks headers of a request, as a verifier takes them.
fn signature_headers(request: &support::web::Recorded) -> axum::http::HeaderMap {
    let mut headers = axum::http::HeaderMap::new();
    for name in ["webhook-id", "webhook-timestamp", "webhook-signature"] {
        headers.insert(name, request.headers[name].clone());
    }
    headers
}

async fn hook_table(db: &TestDb, extra_columns: &str) {
    db.exec(&format!(
        "CREATE TABLE hook (id INT PRIMARY KEY, {extra_columns}{OUTCOME_COLUMNS}) DEFAULT CHARSET=utf8mb4"
    ))
    .await;
}

/// One row's recorded outcome: state, status, error, output.
async fn outcome(
    db: &TestDb,
    id: u32,
) -> (
    String,
    Option<u16>,
    Option<String>,
    Option<Vec<u8>>,
    Option<u32>,
) {
    db.rows(&format!(
        "SELECT state, http_status, error, output, retry_after FROM hook WHERE id = {id}"
    ))
    .await
    .pop()
    .expect("the row exists")
}

/// The one request of [`delivers_the_row_as_json_with_headers`]: a POST to the
/// URL with its placeholders percent-encoded, the headers (the queue's, tableq's,
/// `webhook-id` unsigned), and the row as JSON in the select's column order.
fn the_request_carries_the_row(request: &crate::support::web::Recorded) {
    assert_eq!(request.method, "POST");
    assert_eq!(
        request.uri.to_string(),
        "/in/a%20b%2Fc%3Fd?id=7",
        "placeholders are percent-encoded"
    );
    assert_eq!(request.header("content-type"), "application/json");
    assert_eq!(
        request.header("user-agent"),
        concat!("tableq/", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(request.header("x-queue"), "hooks");
    assert_eq!(request.header("x-token"), "t0ken");
    assert_eq!(
        request.header("webhook-id"),
        "hooks_7",
        "the row's identity, on an unsigned request too"
    );
    assert!(!request.headers.contains_key("webhook-signature"));
    assert_eq!(
        request.json(),
        json!({
            "id": 7, "big": 18446744073709551615u64, "price": "12.500", "ratio": 0.25, "small": 1.5,
            "note": null, "day": "2024-05-01", "moment": "2024-05-01T13:45:00.000120", "span": "-838:59:59",
            "raw": "/wA=", "text": "héllo 🎉", "mood": "meh", "who": "a b/c?d"
        })
    );
    let keys: Vec<String> = request
        .json()
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        keys[..3],
        ["id", "big", "price"],
        "the select's column order"
    );
}

/// Every column type arrives in the JSON body as the book's table says (docs/src/reference/actions.md); headers
/// (`webhook-id` unsigned too), placeholders and the response reach `[on_success]`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivers_the_row_as_json_with_headers() {
    let server = WebServer::start(|_| Reply::status(200).body("thanks")).await;
    let db = TestDb::new().await;
    hook_table(
        &db,
        "big BIGINT UNSIGNED, price DECIMAL(10,3), ratio DOUBLE, small FLOAT, note VARCHAR(20) NULL,
         day DATE, moment DATETIME(6), span TIME, raw VARBINARY(8), text TEXT, mood ENUM('ok','meh'), who VARCHAR(50),",
    )
    .await;
    db.exec(
        "INSERT INTO hook (id, big, price, ratio, small, note, day, moment, span, raw, text, mood, who) VALUES
         (7, 18446744073709551615, 12.500, 0.25, 1.5, NULL, '2024-05-01', '2024-05-01 13:45:00.000120',
          '-838:59:59', X'FF00', 'héllo 🎉', 'meh', 'a b/c?d')",
    )
    .await;
    let files = QueueFiles::new();
    let headers = toml::Table::from_iter([
        ("X-Queue".to_string(), "{queue}".into()),
        ("X-Token".to_string(), "${TABLEQ_TEST_HTTP_TOKEN}".into()),
    ]);
    let file = hook_queue(
        "hooks",
        "SELECT id, big, price, ratio, small, note, day, moment, span, raw, text, mood, who FROM hook WHERE state = 'waiting'",
        &server.url("/in/{who}?id={id}"),
    )
    .action_set("headers", headers)
    .write(&files);
    // The token comes from the environment the file is loaded with, not from the
    // process's: that one is shared by every test in the crate.
    let env = |name: &str| match name {
        "TABLEQ_TEST_HTTP_TOKEN" => Some("t0ken".to_string()),
        _ => std::env::var(name).ok(),
    };
    let queues = tableq::load_paths(&[file], &env).unwrap_or_else(|f| panic!("{f}"));
    let summary = run_until_empty(queues, &db.url).await;
    assert_eq!(summary.counts("hooks").unwrap().done, 1);

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    the_request_carries_the_row(&requests[0]);
    assert_eq!(
        outcome(&db, 7).await,
        (
            "done".into(),
            Some(200),
            None,
            Some(b"thanks".to_vec()),
            None
        )
    );
}

/// Each way a delivery fails, with what `[on_failure]` receives.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_failure_class_is_explained() {
    let server = WebServer::start(|r| match r.uri.path() {
        "/500" => Reply::status(500).body("boom"),
        "/404" => Reply::status(404),
        "/429" => Reply::status(429).header("retry-after", "120"),
        "/302" => Reply::status(302).header("location", "https://elsewhere.example/new"),
        "/big" => Reply::status(503).body(vec![b'x'; 200_000]),
        _ => Reply::status(200),
    })
    .await;
    let silent = silent_server().await;
    let closed = closed_port();
    let db = TestDb::new().await;
    hook_table(&db, "url VARCHAR(200) NOT NULL,").await;
    db.exec(&format!(
        "INSERT INTO hook (id, url) VALUES (1, '{}'), (2, '{}'), (3, '{}'), (4, '{}'), (5, 'http://{silent}/slow'),
         (6, 'http://{closed}/x'), (7, '{}')",
        server.url("/500"),
        server.url("/404"),
        server.url("/429"),
        server.url("/302"),
        server.url("/big"),
    ))
    .await;
    let files = QueueFiles::new();
    let file = hook_queue(
        "hooks",
        "SELECT id, url FROM hook WHERE state = 'waiting' ORDER BY id",
        "{url}",
    )
    .batch(10)
    .action_set("allow_private_networks", true)
    .action_set("timeout", "700ms")
    .write(&files);
    run_until_empty(load(&[file]), &db.url).await;

    let (state, status, error, output, _) = outcome(&db, 1).await;
    assert_eq!(
        (state.as_str(), status, error.as_deref()),
        ("failed", Some(500), Some("HTTP 500 Internal Server Error"))
    );
    assert_eq!(output.as_deref(), Some(&b"boom"[..]));
    assert_eq!(
        outcome(&db, 2).await.2.as_deref(),
        Some("HTTP 404 Not Found")
    );
    let (_, status, error, _, retry_after) = outcome(&db, 3).await;
    assert_eq!(
        (status, error.as_deref(), retry_after),
        (Some(429), Some("HTTP 429 Too Many Requests"), Some(120))
    );
    let (_, status, error, _, _) = outcome(&db, 4).await;
    assert_eq!(status, Some(302));
    assert_eq!(
        error.as_deref(),
        Some("HTTP 302 Found: redirect to https://elsewhere.example/new not followed (set follow_redirects = true to follow it)")
    );
    let (_, status, error, output, _) = outcome(&db, 5).await;
    assert_eq!(
        (status, error.as_deref(), output),
        (None, Some("timed out after 700ms"), None)
    );
    let (_, status, error, _, _) = outcome(&db, 6).await;
    assert_eq!(
        (status, error),
        (None, Some(format!("connection refused to {closed}")))
    );
    let (_, status, _, output, _) = outcome(&db, 7).await;
    assert_eq!(status, Some(503));
    assert_eq!(
        output.map(|o| o.len()),
        Some(64 * 1024),
        ":output is the first 64 KiB"
    );
}

/// TLS to a self-signed server fails with a TLS error, and succeeds once `ca_file`
/// trusts its certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_and_without_a_private_ca() {
    let (server, cert_pem) = WebServer::start_tls(|_| Reply::status(204)).await;
    let db = TestDb::new().await;
    hook_table(&db, "").await;
    db.exec("INSERT INTO hook (id) VALUES (1)").await;
    let files = QueueFiles::new();
    files.write("ca.pem", &cert_pem);
    let queue =
        |name: &str| hook_queue(name, WAITING, &server.url("/tls")).action_set("https_only", true);
    let untrusting = queue("untrusting").write(&files);
    run_until_empty(load(&[untrusting]), &db.url).await;
    let (state, status, error, _, _) = outcome(&db, 1).await;
    assert_eq!((state.as_str(), status), ("failed", None));
    let error = error.unwrap();
    assert!(
        error.starts_with(&format!("TLS error with {}", server.addr)),
        "{error}"
    );
    assert!(error.contains("certificate"), "{error}");
    assert!(server.requests().is_empty());

    db.exec("UPDATE hook SET state = 'waiting'").await;
    let trusting = queue("trusting")
        .action_set("ca_file", "ca.pem")
        .write(&files);
    run_until_empty(load(&[trusting]), &db.url).await;
    assert_eq!(outcome(&db, 1).await.0, "done");
    assert_eq!(server.requests().len(), 1);
}

/// Signatures verify with the `standardwebhooks` crate for every rotated secret; the
/// webhook-id stays the same across a retry and the timestamp is fresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signatures_verify_independently_across_a_retry() {
    let server = WebServer::start({
        let calls = std::sync::atomic::AtomicUsize::new(0);
        move |_| {
            if calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                Reply::status(503)
            } else {
                Reply::status(200)
            }
        }
    })
    .await;
    let db = TestDb::new().await;
    hook_table(&db, "retry_at BIGINT NULL,").await;
    db.exec("INSERT INTO hook (id) VALUES (42)").await;
    let (old, new) = (
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "whsec_dGFibGVxLXRlc3Qtc2VjcmV0LTIwMjY=",
    );
    let files = QueueFiles::new();
    let file = QueueFile::new("signed")
        .select("SELECT id FROM hook WHERE state = 'waiting' AND (retry_at IS NULL OR retry_at <= UNIX_TIMESTAMP())")
        .poll_interval("100ms")
        .action_http(&server.url("/signed"))
        .action_set("signing_secret", format!("{old} {new}"))
        .on_success("UPDATE hook SET state = 'done' WHERE id = :id")
        .on_failure("UPDATE hook SET retry_at = UNIX_TIMESTAMP() + 1, attempts = attempts + 1 WHERE id = :id")
        .write(&files);
    let engine = Engine::start(load(&[file]), &db.url);
    // The retry succeeded.
    db.until_count("SELECT COUNT(*) FROM hook WHERE state = 'done'", 1, 30)
        .await;
    engine.stop().await;

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        let headers = signature_headers(request);
        for secret in [old, new] {
            standardwebhooks::Webhook::new(secret)
                .unwrap()
                .verify(&request.body, &headers)
                .unwrap_or_else(|e| panic!("signature with {secret} does not verify: {e:?}"));
        }
        assert_eq!(request.header("webhook-signature").split(' ').count(), 2);
    }
    assert_eq!(requests[0].header("webhook-id"), "signed_42");
    assert_eq!(
        requests[0].header("webhook-id"),
        requests[1].header("webhook-id")
    );
    let stamp = |i: usize| {
        requests[i]
            .header("webhook-timestamp")
            .parse::<u64>()
            .unwrap()
    };
    assert!(stamp(1) > stamp(0), "the retry carries a fresh timestamp");
}

/// A row whose URL points at a private address — by name or literally — is refused
/// after DNS resolution, unless `allow_private_networks = true`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_destinations_from_rows_are_refused() {
    let server = WebServer::start(|_| Reply::status(200)).await;
    let db = TestDb::new().await;
    hook_table(&db, "url VARCHAR(200) NOT NULL,").await;
    let port = server.addr.port();
    db.exec(&format!(
        "INSERT INTO hook (id, url) VALUES (1, 'http://localhost:{port}/a'), (2, 'http://127.0.0.1:{port}/b'),
         (3, 'http://[::1]:{port}/c'), (4, 'http://2130706433:{port}/d'), (5, 'http://0x7f.1:{port}/e')"
    ))
    .await;
    let files = QueueFiles::new();
    let queue = |name: &str| {
        hook_queue(
            name,
            "SELECT id, url FROM hook WHERE state = 'waiting'",
            "{url}",
        )
        .batch(3)
    };
    run_until_empty(load(&[queue("private").write(&files)]), &db.url).await;
    assert!(server.requests().is_empty(), "a private address was called");
    let errors: Vec<(u32, String)> = db.rows("SELECT id, error FROM hook ORDER BY id").await;
    assert!(
        errors[0]
            .1
            .starts_with("refused: localhost is a private address (127.0.0.1"),
        "{errors:?}"
    );
    assert!(
        errors[0]
            .1
            .ends_with("set allow_private_networks = true to allow it"),
        "{errors:?}"
    );
    assert!(
        errors[1]
            .1
            .starts_with("refused: 127.0.0.1 is a private address"),
        "{errors:?}"
    );
    assert!(
        errors[2]
            .1
            .starts_with("refused: [::1] is a private address"),
        "{errors:?}"
    );

    db.exec("UPDATE hook SET state = 'waiting' WHERE id IN (1, 2)")
        .await;
    db.exec("DELETE FROM hook WHERE id >= 3").await;
    run_until_empty(
        load(&[queue("open")
            .action_set("allow_private_networks", true)
            .write(&files)]),
        &db.url,
    )
    .await;
    db.assert_count("SELECT COUNT(*) FROM hook WHERE state = 'done'", 2)
        .await;
    assert_eq!(server.requests().len(), 2);
}

/// A batch's requests run at once: 20 webhooks that each take a second finish in
/// about a second, not twenty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_slow_webhooks_runs_concurrently() {
    let server = WebServer::start(|_| Reply::status(200).after(Duration::from_secs(1))).await;
    let db = TestDb::new().await;
    hook_table(&db, "").await;
    db.fill("hook", "id", 20, |i| i.to_string()).await;
    let files = QueueFiles::new();
    let file = hook_queue(
        "slow",
        "SELECT id FROM hook WHERE state = 'waiting' ORDER BY id",
        &server.url("/slow/{id}"),
    )
    .batch(20)
    .write(&files);
    let started = Instant::now();
    let summary = run_until_empty(load(&[file]), &db.url).await;
    let elapsed = started.elapsed();
    assert_eq!(summary.counts("slow").unwrap().done, 20);
    assert!(
        elapsed < Duration::from_secs(6),
        "20 one-second webhooks took {elapsed:?}"
    );
    let requests = server.requests();
    let first = requests.iter().map(|r| r.at).min().unwrap();
    let last = requests.iter().map(|r| r.at).max().unwrap();
    assert!(
        last - first < Duration::from_millis(900),
        "the requests did not overlap"
    );
}

/// With `follow_redirects = true` a 3xx is followed to where it leads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_are_followed_when_asked() {
    let server = WebServer::start(|r| match r.uri.path() {
        "/old" => Reply::status(307).header("location", "/new"),
        _ => Reply::status(200).body("moved here"),
    })
    .await;
    let db = TestDb::new().await;
    hook_table(&db, "").await;
    db.exec("INSERT INTO hook (id) VALUES (1)").await;
    let files = QueueFiles::new();
    let file = hook_queue("moved", WAITING, &server.url("/old"))
        .action_set("follow_redirects", true)
        .write(&files);
    run_until_empty(load(&[file]), &db.url).await;
    assert_eq!(outcome(&db, 1).await.3.as_deref(), Some(&b"moved here"[..]));
    let paths: Vec<String> = server
        .requests()
        .iter()
        .map(|r| r.uri.path().to_string())
        .collect();
    assert_eq!(paths, ["/old", "/new"]);
}

/// Following redirects never leads to a private address the file did not name: a
/// partner endpoint redirecting to 127.0.0.1 is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_to_private_addresses_are_refused() {
    let inside = WebServer::start(|_| Reply::status(200).body("secret")).await;
    let target = inside.url("/metadata");
    let partner =
        WebServer::start(move |_| Reply::status(302).header("location", target.clone())).await;
    let db = TestDb::new().await;
    hook_table(&db, "").await;
    db.exec("INSERT INTO hook (id) VALUES (1)").await;
    let files = QueueFiles::new();
    // The file names the partner as localhost; the redirect goes to 127.0.0.1.
    let file = hook_queue(
        "partner",
        WAITING,
        &format!("http://localhost:{}/in", partner.addr.port()),
    )
    .action_set("follow_redirects", true)
    .write(&files);
    run_until_empty(load(&[file]), &db.url).await;
    let (state, _, error, output, _) = outcome(&db, 1).await;
    assert_eq!(state, "failed");
    assert!(
        error
            .as_deref()
            .unwrap_or_default()
            .contains("refused: 127.0.0.1 is a private address"),
        "{error:?}"
    );
    assert_eq!(output, None, "the private response reached the table");
    assert!(
        inside.requests().is_empty(),
        "the private address was called"
    );
}

/// A signed GET sends no body and signs an empty one, as receivers verify it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_get_verifies() {
    let server = WebServer::start(|_| Reply::status(200)).await;
    let db = TestDb::new().await;
    hook_table(&db, "").await;
    db.exec("INSERT INTO hook (id) VALUES (1)").await;
    let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let files = QueueFiles::new();
    let file = hook_queue("get", WAITING, &server.url("/ping/{id}"))
        .action_set("method", "get")
        .action_set("signing_secret", secret)
        .write(&files);
    run_until_empty(load(&[file]), &db.url).await;
    let request = &server.requests()[0];
    assert_eq!((request.method.as_str(), request.body.len()), ("GET", 0));
    assert_eq!(request.header("content-type"), "");
    let headers = signature_headers(request);
    standardwebhooks::Webhook::new(secret)
        .unwrap()
        .verify(b"", &headers)
        .expect("the signature verifies");
}

/// Where the row chooses the host, `check` looks at the sample row's destination: a
/// host that resolves only to private addresses, or a private address written out,
/// is a warning (every such row would fail at run time), not a silent pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_warns_when_the_sample_row_sends_to_a_private_address() {
    let db = TestDb::new().await;
    hook_table(&db, "target VARCHAR(100),").await;
    let files = QueueFiles::new();
    let file = hook_queue(
        "private_hooks",
        "SELECT id, target FROM hook WHERE state = 'waiting' ORDER BY id",
        "{target}/in",
    )
    .write(&files);
    for (target, says) in [
        (
            "http://localhost:1",
            "sends to localhost, a private address (127.0.0.1",
        ),
        (
            "http://10.1.2.3",
            "cannot be sent: refused: 10.1.2.3 is a private address",
        ),
    ] {
        db.exec("DELETE FROM hook").await;
        db.exec(&format!(
            "INSERT INTO hook (id, target) VALUES (1, '{target}')"
        ))
        .await;
        let done = support::check::check(&[], &[&file], Some(&db.url)).await;
        let warned = done
            .stdout
            .lines()
            .any(|l| l.contains("warning: the sample row (1)") && l.contains(says));
        assert!(warned, "{target}: {}", done.stdout);
        assert_has(&done.stdout, "allow_private_networks");
    }
    db.assert_count("SELECT COUNT(*) FROM hook WHERE state = 'waiting'", 1)
        .await;
}
