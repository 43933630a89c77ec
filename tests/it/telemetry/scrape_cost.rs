//! Scraping costs the database nothing: the metrics and the status page are read
//! from memory, the backlog counted in the background.

use std::time::Duration;

use mysql_async::prelude::Queryable;

use crate::support::endpoint::{get, start_with_metrics_alone};
use crate::support::scrape::sample;
use crate::support::{eventually, private_db, QueueFile, QueueFiles};

const QUEUES: usize = 10;

/// The server's `Com_select`, read on `conn` (SHOW STATUS is not a SELECT).
async fn com_select(conn: &mut mysql_async::Conn) -> u64 {
    let row: Option<(String, u64)> = conn
        .query_first("SHOW GLOBAL STATUS LIKE 'Com_select'")
        .await
        .expect("SHOW GLOBAL STATUS");
    row.expect("Com_select").1
}

/// With 10 queues, 100 scrapes of /metrics at once (and the status page) change
/// the server's Com_select by 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scraping_sends_no_query() {
    // Always a server of this test's own: Com_select counts every session's SELECTs,
    // and the shared server serves every test of the crate at once.
    let (_server, db) = private_db(&[]).await;
    db.exec("CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting') DEFAULT CHARSET=utf8mb4")
        .await;
    let files = QueueFiles::new();
    for n in 0..QUEUES {
        QueueFile::new(&format!("q{n}"))
            .select("SELECT id FROM job WHERE state = 'waiting' ORDER BY id")
            // After the first claim and the first count, nothing for an hour.
            .poll_interval("1h")
            .set("stats_interval", "1h")
            .action_sql("DO :id")
            .on_success("UPDATE job SET state = 'done' WHERE id = :id")
            .write(&files);
    }
    // No history: its writes are the copy's, not the scrape's.
    let (mut daemon, base) = start_with_metrics_alone(&files, &db.url).await;
    let metrics = format!("{base}/metrics");
    eventually(
        "every queue has claimed once and counted its backlog",
        Duration::from_secs(60),
        || async {
            let text = get(&metrics).await.1;
            (0..QUEUES).all(|n| {
                sample(&text, &format!(r#"tableq_waiting{{queue="q{n}"}}"#)) == Some(0.0)
                    && sample(
                        &text,
                        &format!(r#"tableq_claim_duration_seconds_count{{queue="q{n}"}}"#),
                    ) == Some(1.0)
            })
        },
    )
    .await;

    let mut conn = db.conn().await;
    let before = com_select(&mut conn).await;
    assert_eq!(
        com_select(&mut conn).await,
        before,
        "reading Com_select is not a SELECT"
    );
    let started = std::time::Instant::now();
    // 100 scrapes at once, as ten Prometheus servers would in a busy second.
    let client = reqwest::Client::new();
    let scrapes = (0..100).map(|_| async {
        let response = client.get(&metrics).send().await.expect("a scrape");
        assert_eq!(response.status(), 200);
        response.text().await.unwrap()
    });
    for text in futures::future::join_all(scrapes).await {
        assert!(text.contains(r#"tableq_waiting{queue="q9"} 0"#), "{text}");
    }
    let took = started.elapsed();
    // (A queue's own page reads its history from the database: not a scrape.)
    for path in ["/", "/status.json"] {
        assert_eq!(get(&format!("{base}{path}")).await.0, 200);
    }
    let after = com_select(&mut conn).await;
    assert_eq!(after - before, 0, "Com_select grew while scraping");
    // And it does count a SELECT.
    conn.query_drop("SELECT 1").await.unwrap();
    assert_eq!(com_select(&mut conn).await, after + 1);
    println!("100 scrapes of {QUEUES} queues in {took:?}; Com_select {before} -> {after}");
    daemon.terminate().await;
}
