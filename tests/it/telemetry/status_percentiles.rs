//! The status page's action percentiles are over the last minutes, and the
//! durations themselves (within 2%), not a histogram bucket's bound.

use std::time::Duration;

use crate::support::endpoint::{get, start_with_metrics};
use crate::support::{eventually, QueueFile, QueueFiles, TestDb};

/// `(1, 0), (2, 0), …`: rows `ids` that pause `seconds`.
fn rows(ids: std::ops::RangeInclusive<u32>, seconds: &str) -> String {
    let rows: Vec<String> = ids.map(|id| format!("({id}, {seconds})")).collect();
    rows.join(", ")
}

/// The queue's windows in `/status.json`: (minutes, items, p50) for 5 and 15;
/// none while the queue has not started (the page lists it once it has).
async fn windows(base: &str) -> Vec<(u64, u64, Option<f64>)> {
    let json: serde_json::Value =
        serde_json::from_str(&get(&format!("{base}/status.json")).await.1).unwrap();
    let Some(queue) = json["queues"].as_array().and_then(|q| q.first()) else {
        return Vec::new();
    };
    queue["action_recent"]
        .as_array()
        .expect("action_recent")
        .iter()
        .map(|w| {
            (
                w["minutes"].as_u64().unwrap(),
                w["items"].as_u64().unwrap(),
                w["p50_seconds"].as_f64(),
            )
        })
        .collect()
}

/// Waits until the queue has started and both its windows counted `items` actions.
async fn counted(base: &str, items: u64, what: &str, seconds: u64) {
    eventually(what, Duration::from_secs(seconds), || async {
        let windows = windows(base).await;
        windows.len() == 2 && windows.iter().all(|w| w.1 == items)
    })
    .await;
}

/// Fast actions, then slow ones (340 ms each, outnumbering them): the status
/// page's p50 over the last 5 and 15 minutes follows, and is 340 ms — not the
/// 500 ms bucket the whole-life histogram would say.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_pages_p50_follows_a_change_in_action_time() {
    let db = TestDb::new().await;
    db.exec(&format!(
        "CREATE TABLE paced (id INT PRIMARY KEY, pause DECIMAL(4,2) NOT NULL,
           state VARCHAR(10) NOT NULL DEFAULT 'waiting');
         INSERT INTO paced (id, pause) VALUES {}",
        rows(1..=20, "0")
    ))
    .await;
    let files = QueueFiles::new();
    QueueFile::new("paced")
        .select("SELECT id, pause FROM paced WHERE state = 'waiting' ORDER BY id")
        .batch(1)
        .poll_interval("100ms")
        .action_sql("DO SLEEP(:pause)")
        .on_success("UPDATE paced SET state = 'done' WHERE id = :id")
        .write(&files);
    let (mut daemon, base) = start_with_metrics(&files, &db.url).await;
    counted(&base, 20, "20 fast actions counted", 60).await;
    let fast = windows(&base).await;
    assert_eq!(fast.iter().map(|w| w.0).collect::<Vec<_>>(), [5, 15]);
    assert!(fast.iter().all(|w| w.2 < Some(0.1)), "{fast:?}");

    db.exec(&format!(
        "INSERT INTO paced (id, pause) VALUES {}",
        rows(101..=130, "0.34")
    ))
    .await;
    counted(&base, 50, "30 slow actions counted", 90).await;
    let slow = windows(&base).await;
    for (minutes, _, p50) in &slow {
        let p50 = p50.expect("a p50");
        assert!(
            (0.33..0.40).contains(&p50),
            "the {minutes}-minute p50 is {p50} s, not the slow actions' 340 ms"
        );
    }
    daemon.terminate().await;
}
