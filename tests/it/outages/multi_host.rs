//! A database URL that lists several hosts: connections go to the first that takes
//! writes, passing over one that does not answer and one that is read-only.

use std::time::Duration;

use mysql_async::prelude::Queryable;

use crate::support;
use crate::support::endpoint::{get, start_with_metrics};
use crate::support::web::closed_port;
use crate::support::{eventually, waiting_jobs, MariaDb, QueueFiles, TestDb};

/// `host:port` of a `mysql://user@host:port[/db]` URL.
fn host_of(url: &str) -> &str {
    let rest = url.split_once('@').map_or(url, |(_, rest)| rest);
    rest.split('/').next().unwrap_or(rest)
}

/// A URL listing a host where nothing listens, a read-only server, then a writable
/// one: the queue works on the third, and `/readyz` and `/metrics` name it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_host_url_uses_the_first_host_that_takes_writes() {
    let read_only = tokio::task::spawn_blocking(MariaDb::start).await.unwrap();
    let db = TestDb::new().await;
    db.exec("CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting')")
        .await;
    db.fill("job", "id", 20, |i| i.to_string()).await;
    // The same database and table on the read-only server: only its being
    // read-only tells the two apart.
    let mut admin = support::connect(&read_only.base_url()).await;
    for sql in [
        format!("CREATE DATABASE `{}`", db.name),
        format!(
            "CREATE TABLE `{}`.job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL \
             DEFAULT 'waiting')",
            db.name
        ),
        "SET GLOBAL read_only = 1".to_string(),
    ] {
        admin.query_drop(&sql).await.expect("a read-only twin");
    }
    let twin: Option<u64> = admin
        .query_first("SELECT @@global.read_only")
        .await
        .unwrap();
    assert_eq!(twin, Some(1));
    admin.disconnect().await.ok();
    let writable = host_of(&db.url);
    let hosts = [
        closed_port().to_string(),
        host_of(&read_only.base_url()).to_string(),
        writable.to_string(),
    ];
    let url = format!("mysql://root@{}/{}", hosts.join(","), db.name);
    let files = QueueFiles::new();
    waiting_jobs("multi_host").action_sql("DO 1").write(&files);
    let (mut daemon, base) = start_with_metrics(&files, &url).await;
    let done = async {
        eventually("every row is done", Duration::from_secs(60), || async {
            db.count("SELECT COUNT(*) FROM job WHERE state = 'done'")
                .await
                == 20
        })
        .await
    };
    if tokio::time::timeout(Duration::from_secs(60), done)
        .await
        .is_err()
    {
        let (_, readyz) = get(&format!("{base}/readyz")).await;
        panic!(
            "the rows are not done ({readyz}; {hosts:?}):\n{}",
            daemon.stderr()
        );
    }
    let (_, readyz) = get(&format!("{base}/readyz")).await;
    assert!(
        readyz.contains(&format!("queue multi_host: database host {writable}")),
        "{readyz}"
    );
    let (_, metrics) = get(&format!("{base}/metrics")).await;
    let series = format!(r#"tableq_database_host{{queue="multi_host",host="{writable}"}} 1"#);
    assert!(metrics.contains(&series), "no {series} in:\n{metrics}");
    daemon.terminate().await;
}
