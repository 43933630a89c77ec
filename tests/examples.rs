//! The shipped examples stay true: every file under config/ and the commented
//! queues.example.toml load, and run against the schema they document.

mod support;

use std::path::{Path, PathBuf};

use support::{run_until_empty, TestDb};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn load_with(paths: &[PathBuf], env: &dyn Fn(&str) -> Option<String>) -> Vec<tableq::QueueConfig> {
    tableq::load_paths(paths, env).unwrap_or_else(|f| panic!("{f}"))
}

fn example_env(name: &str) -> Option<String> {
    (name == "APP_DB_PASSWORD").then(|| "secret".to_string())
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
}

/// Every queue file under config/ loads.
#[test]
fn every_config_example_loads() {
    let queues = load_with(&[repo("config")], &|_| None);
    assert!(queues.iter().any(|q| q.name == "email"));
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

/// config/email.toml on config/email.sql: sendable mail reaches the outbox once,
/// the rest is scheduled for a retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_email_example_runs() {
    let db = email_database(500, 50).await;
    let summary =
        run_until_empty(load_with(&[repo("config/email.toml")], &|_| None), &db.url).await;
    let counts = summary.counts("email").unwrap();
    assert_eq!((counts.done, counts.failed), (490, 10));
    assert_eq!(db.count("SELECT COUNT(*) FROM outbox").await, 490);
    assert_eq!(
        db.count("SELECT COUNT(DISTINCT email_id) FROM outbox")
            .await,
        490
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM email WHERE status = 'waiting' AND attempts = 1 AND retry_at > UNIX_TIMESTAMP()")
            .await,
        10
    );
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
