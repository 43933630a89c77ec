//! The shipped examples stay true: every file under config/ and the commented
//! queues.example.toml load, and run against the schema they document.

use std::path::{Path, PathBuf};

use crate::support;
use crate::support::{run_until_empty, TestDb};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn load_with(paths: &[PathBuf], env: &dyn Fn(&str) -> Option<String>) -> Vec<tableq::QueueConfig> {
    tableq::load_paths(paths, env).unwrap_or_else(|f| panic!("{f}"))
}

fn example_env(name: &str) -> Option<String> {
    (name == "APP_DATABASE_URL").then(|| "mysql://app:secret@127.0.0.1:3306/shop".to_string())
}

/// queues.example.toml, with every key, loads; the values are the ones it documents.
#[test]
fn the_commented_example_loads() {
    let queues = load_with(&[repo("queues.example.toml")], &example_env);
    let q = &queues[0];
    assert_eq!((q.name.as_str(), q.workers, q.batch), ("email", 4, 10));
    assert_eq!(
        q.database_url.as_deref(),
        Some("mysql://app:secret@127.0.0.1:3306/shop")
    );
    assert_eq!(q.key.as_deref(), Some("id"));
    assert!(q.on_failure.is_some());
    assert_eq!(q.alerts.as_ref().map(|a| a.conditions.len()), Some(2));
}

fn config_env(name: &str) -> Option<String> {
    match name {
        "WEBHOOK_SIGNING_SECRET" => Some("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_string()),
        _ => std::env::var(name).ok(),
    }
}

/// The commented-out http and command [action] blocks of queues.example.toml load
/// when swapped in for its SQL action.
#[test]
fn the_commented_example_actions_load() {
    let text = std::fs::read_to_string(repo("queues.example.toml")).unwrap();
    let start = text.find("\n[action]").unwrap();
    let end = start + 1 + text[start + 1..].find("\n[on_success]").unwrap();
    for kind in ["http", "command", "amqp", "nats", "worker", "fastcgi"] {
        let marker = format!("#{kind}> ");
        let block: String = text
            .lines()
            .filter_map(|l| l.strip_prefix(&marker))
            .map(|l| format!("{l}\n"))
            .collect();
        let files = support::QueueFiles::new();
        std::fs::write(
            files.path().join("private-ca.pem"),
            rcgen::generate_simple_self_signed(vec!["x".into()])
                .unwrap()
                .cert
                .pem(),
        )
        .unwrap();
        // The program and directory are the deployment's; stand in for them here.
        let block = block
            .replace("/usr/local/bin/send-email", "/bin/cat")
            .replace("\"php\", \"/srv/app/bin/email-worker.php\"", "\"/bin/cat\"")
            .replace("/var/lib/mailer", &files.path().display().to_string());
        let file = files.write(
            "email.toml",
            &format!("{}\n{block}{}", &text[..start], &text[end..]),
        );
        let env = |name: &str| match name {
            "HOOK_TOKEN" => Some("secret".to_string()),
            "APP_DATABASE_URL" => Some("mysql://app:secret@127.0.0.1:3306/shop".to_string()),
            "HOOK_SECRET" => Some("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_string()),
            "RABBITMQ_PASSWORD" | "NATS_TOKEN" => Some("secret".to_string()),
            _ => None,
        };
        let queues = tableq::load_paths(&[file], &env).unwrap_or_else(|f| panic!("{kind}: {f}"));
        assert_eq!(queues[0].action.type_name(), kind);
    }
}

/// The commented lease-mode queue at the end of queues.example.toml loads, with the
/// values it documents.
#[test]
fn the_commented_lease_example_loads() {
    let text = std::fs::read_to_string(repo("queues.example.toml")).unwrap();
    let file: String = text
        .lines()
        .filter_map(|l| l.strip_prefix("#lease> "))
        .map(|l| format!("{l}\n"))
        // The program is the deployment's; stand in for it here.
        .map(|l| l.replace("/usr/local/bin/render-video", "/bin/cat"))
        .collect();
    let files = support::QueueFiles::new();
    let path = files.write("render.toml", &file);
    let queues = load_with(&[path], &example_env);
    let lease = queues[0].lease().expect("lease mode");
    assert_eq!((queues[0].workers, lease.connections), (200, 4));
    assert_eq!(lease.renew_every, Some(std::time::Duration::from_secs(40)));
    assert!(lease.release_sql.is_some());
}

/// The commented schedule queue at the end of queues.example.toml loads, with the
/// values it documents.
#[test]
fn the_commented_schedule_example_loads() {
    let text = std::fs::read_to_string(repo("queues.example.toml")).unwrap();
    let file: String = text
        .lines()
        .filter_map(|l| l.strip_prefix("#schedule> "))
        .map(|l| format!("{l}\n"))
        // The program is the deployment's; stand in for it here.
        .map(|l| l.replace("/usr/local/bin/nightly-report", "/bin/echo"))
        .collect();
    let files = support::QueueFiles::new();
    let path = files.write("nightly.toml", &file);
    let queues = load_with(&[path], &example_env);
    let schedule = queues[0].schedule.as_ref().expect("a schedule queue");
    assert_eq!(queues[0].name, "nightly-report");
    assert_eq!(schedule.text, "30 2 * * *");
    assert_eq!(
        schedule.stored(),
        "30 2 * * * (Europe/Berlin)",
        "kept with its zone"
    );
    assert_eq!(schedule.catch_up_max, 7);
    assert!(queues[0].lease().is_some(), "a command runs under a lease");
}

/// Every queue file under config/ loads.
#[test]
fn every_config_example_loads() {
    let queues = load_with(&[repo("config")], &config_env);
    let names: Vec<&str> = queues.iter().map(|q| q.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "email-fastcgi",
            "email-outbox-batch",
            "email-outbox",
            "email-worker",
            "email",
            "render",
            "webhook"
        ]
    );
}

async fn email_database(rows: usize, invalid_every: usize) -> TestDb {
    let db = TestDb::new().await;
    db.exec(&std::fs::read_to_string(repo("config/email.sql")).unwrap())
        .await;
    db.fill("email", "recipient, subject, body", rows, |i| {
        let domain = if i % invalid_every == 0 {
            "invalid.example"
        } else {
            "example.com"
        };
        format!("'user{i}@{domain}', 'Hello {i}', 'Body {i}'")
    })
    .await;
    db
}

/// The emails scheduled for a retry after one failed attempt.
const RETRYING: &str = "SELECT COUNT(*) FROM email WHERE status = 'waiting' AND attempts = 1 \
                        AND retry_at > UNIX_TIMESTAMP()";

/// The example `file` of the repository, run until its queue `queue` is drained on
/// [`email_database`]`(rows, invalid_every)`: the database, and the rows done and
/// failed.
async fn run_email_example(
    file: &str,
    queue: &str,
    rows: usize,
    invalid_every: usize,
) -> (TestDb, (u64, u64)) {
    let db = email_database(rows, invalid_every).await;
    let summary = run_until_empty(load_with(&[repo(file)], &config_env), &db.url).await;
    let counts = summary.counts(queue).unwrap();
    (db, (counts.done, counts.failed))
}

/// config/email.toml with its stand-in mailer: sendable mail is sent, the rest is
/// scheduled for a retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_email_example_runs() {
    let (db, counts) = run_email_example("config/email.toml", "email", 200, 50).await;
    assert_eq!(counts, (196, 4));
    db.assert_count("SELECT COUNT(*) FROM email WHERE status = 'sent'", 196)
        .await;
    db.assert_count(RETRYING, 4).await;
}

/// config/email-worker.toml with its plain-PHP worker: sendable mail is sent, the
/// rest is scheduled for a retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_email_worker_example_runs() {
    let Some(_) = support::tools::required(
        &["php"],
        "apt-get install php8.2-cli",
        "config/email-worker.toml",
    ) else {
        return;
    };
    let example = "config/email-worker.toml";
    let (db, counts) = run_email_example(example, "email-worker", 200, 50).await;
    assert_eq!(counts, (196, 4));
    db.assert_count("SELECT COUNT(*) FROM email WHERE status = 'sent'", 196)
        .await;
}

/// config/email-fastcgi.toml with config/php/send_email.php, run by a private
/// PHP-FPM pool: sendable mail is sent, the rest is scheduled for a retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fastcgi_email_example_runs() {
    let Some(fpm) = support::fpm::Fpm::start(2) else {
        return;
    };
    let db = email_database(200, 50).await;
    let text = std::fs::read_to_string(repo("config/email-fastcgi.toml")).unwrap();
    let script = repo("config/php/send_email.php");
    let text = text
        .replace("unix:/run/php/php8.2-fpm.sock", &fpm.address())
        .replace("/srv/app/jobs/send_email.php", script.to_str().unwrap());
    let files = support::QueueFiles::new();
    let file = files.write("email-fastcgi.toml", &text);
    let summary = run_until_empty(load_with(&[file], &config_env), &db.url).await;
    let counts = summary.counts("email-fastcgi").unwrap();
    assert_eq!((counts.done, counts.failed), (196, 4));
    db.assert_count(RETRYING, 4).await;
}

/// config/email-outbox.toml on config/email.sql: sendable mail reaches the outbox
/// once, the rest is scheduled for a retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_email_outbox_example_runs() {
    let example = "config/email-outbox.toml";
    let (db, counts) = run_email_example(example, "email-outbox", 500, 50).await;
    assert_eq!(counts, (490, 10));
    db.assert_count("SELECT COUNT(*) FROM outbox", 490).await;
    db.assert_count("SELECT COUNT(DISTINCT email_id) FROM outbox", 490)
        .await;
    db.assert_count(RETRYING, 10).await;
}

/// config/render.toml, the lease-mode sibling: every video is rendered once, its
/// progress reached the row, and no lease is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_render_example_runs() {
    let db = TestDb::new().await;
    db.exec(&std::fs::read_to_string(repo("config/render.sql")).unwrap())
        .await;
    db.fill("video", "title, seconds", 6, |i| format!("'video {i}', 2"))
        .await;
    let counts = run_until_empty(
        load_with(&[repo("config/render.toml")], &config_env),
        &db.url,
    )
    .await
    .counts("render")
    .unwrap();
    assert_eq!((counts.done, counts.failed, counts.leases_lost), (6, 0, 0));
    let done = "SELECT COUNT(*) FROM video WHERE state = 'done' AND attempts = 1 AND progress = '100%' AND lease_id IS NULL";
    db.assert_count(done, 6).await;
}

/// config/email-outbox-batch.toml: each batch reaches the outbox in one statement;
/// the two undeliverable emails fail alone and are scheduled for a retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_batch_scope_outbox_example_runs() {
    let example = "config/email-outbox-batch.toml";
    let (db, counts) = run_email_example(example, "email-outbox-batch", 500, 250).await;
    assert_eq!(counts, (498, 2));
    db.assert_count("SELECT COUNT(DISTINCT email_id) FROM outbox", 498)
        .await;
    db.assert_count("SELECT COUNT(*) FROM outbox", 498).await;
    db.assert_count(RETRYING, 2).await;
}

/// The commented example runs too, pointed at a test database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_commented_example_runs() {
    let db = email_database(100, 25).await;
    let mut queues = load_with(&[repo("queues.example.toml")], &example_env);
    queues[0].database_url = None;
    let counts = run_until_empty(queues, &db.url)
        .await
        .counts("email")
        .unwrap();
    assert_eq!((counts.done, counts.failed), (96, 4));
}

/// config/webhook.toml delivers signed events to the endpoint in each row (here a
/// local server, so private addresses are allowed for the test).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_example_runs() {
    use support::web::{Reply, WebServer};
    let server = WebServer::start(|r| match r.uri.path() {
        "/gone" => Reply::status(410),
        _ => Reply::status(200),
    })
    .await;
    let db = TestDb::new().await;
    db.exec(&std::fs::read_to_string(repo("config/webhook.sql")).unwrap())
        .await;
    db.exec(&format!(
        "INSERT INTO webhook_delivery (endpoint_url, event_type, payload) VALUES
         ('{}', 'order.paid', '{{\"order\": 1}}'), ('{}', 'order.paid', '{{\"order\": 2}}')",
        server.url("/hooks"),
        server.url("/gone")
    ))
    .await;
    let files = support::QueueFiles::new();
    let text = std::fs::read_to_string(repo("config/webhook.toml")).unwrap();
    let text = text.replacen("[action]\n", "[action]\nallow_private_networks = true\n", 1);
    let file = files.write("webhook.toml", &text);
    let queues = load_with(&[file], &config_env);
    let counts = run_until_empty(queues, &db.url)
        .await
        .counts("webhook")
        .unwrap();
    assert_eq!((counts.done, counts.failed), (1, 1));
    let requests = server.requests();
    assert!(requests
        .iter()
        .all(|r| r.header("webhook-signature").starts_with("v1,")));
    assert_eq!(requests[0].header("x-event-type"), "order.paid");
    let failed: Vec<(String, u32, String)> =
        db.rows("SELECT CAST(status AS CHAR), last_status, last_error FROM webhook_delivery WHERE id = 2").await;
    assert_eq!(
        failed,
        vec![("pending".to_string(), 410, "HTTP 410 Gone".to_string())]
    );
}
