//! Limits that hold across every copy of tableq (`limits = "global"`, the default):
//! real `tableq run` processes on one database, a real HTTP receiver recording
//! each call's start.

use std::time::{Duration, Instant};

use crate::support::daemon::copies;
use crate::support::web::{Reply, WebServer};
use crate::support::{eventually, jobs_done, QueueFile, QueueFiles, TestDb};

/// `rows` jobs, and a queue of them calling `receiver`.
async fn hooks(db: &TestDb, rows: usize, receiver: &WebServer) -> QueueFile {
    db.exec("CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting') DEFAULT CHARSET=utf8mb4")
        .await;
    db.fill("job", "id", rows, |i| i.to_string()).await;
    QueueFile::new("hooks")
        .workers(2)
        .poll_interval("200ms")
        .select("SELECT id FROM job WHERE state = 'waiting' ORDER BY id")
        .action_http(&receiver.url("/hook"))
        .action_set("allow_private_networks", true)
        .on_success("UPDATE job SET state = 'done' WHERE id = :id")
}

/// The calls `receiver` saw start in the `window` after `from`, once one started
/// after it.
async fn started_within(receiver: &WebServer, from: Instant, window: Duration) -> usize {
    let end = from + window;
    eventually(
        "a call after the window",
        Duration::from_secs(30),
        || async { receiver.requests().iter().any(|r| r.at > end) },
    )
    .await;
    let requests = receiver.requests();
    requests
        .iter()
        .filter(|r| r.at >= from && r.at < end)
        .count()
}

/// Three copies at `rate_limit = "30/s"` start 30 calls a second in all (±20 %),
/// not 90; after one is killed (-9) the other two take its share within seconds,
/// and the total is 30 a second again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_holds_across_three_copies_and_a_killed_one_gives_its_share_back() {
    const WINDOW: Duration = Duration::from_secs(5);
    let db = TestDb::new().await;
    let receiver = WebServer::start(|_| Reply::status(204)).await;
    let files = QueueFiles::new();
    let file = hooks(&db, 3000, &receiver)
        .await
        .set("rate_limit", "30/s")
        .write(&files);
    let mut copies = copies(3, &file, &db.url);
    for one in &copies {
        one.wait_for_log("limits shared by 3 copies", Duration::from_secs(30))
            .await;
    }
    let three = started_within(&receiver, Instant::now(), WINDOW).await;
    let per_second = three as f64 / WINDOW.as_secs_f64();
    eprintln!("3 copies at 30/s: {per_second:.1} calls/s in all");
    assert!(
        (24.0..=36.0).contains(&per_second),
        "3 copies at 30/s started {per_second:.1} calls/s in all"
    );

    let killed = copies.pop().expect("three copies");
    let at = Instant::now();
    killed.signal(libc::SIGKILL);
    for one in &copies {
        one.wait_for_log("limits shared by 2 copies", Duration::from_secs(10))
            .await;
    }
    eprintln!("the killed copy's share taken back in {:?}", at.elapsed());
    let two = started_within(&receiver, Instant::now(), WINDOW).await;
    let per_second = two as f64 / WINDOW.as_secs_f64();
    eprintln!("2 copies left at 30/s: {per_second:.1} calls/s in all");
    assert!(
        (24.0..=36.0).contains(&per_second),
        "2 copies left at 30/s started {per_second:.1} calls/s in all"
    );
    for mut one in copies {
        one.terminate().await;
    }
}

/// `limits = "per_process"` keeps today's meaning: two copies at "20/s" start
/// about 40 calls a second in all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_process_limits_let_each_copy_its_whole_rate() {
    const WINDOW: Duration = Duration::from_secs(4);
    let db = TestDb::new().await;
    let receiver = WebServer::start(|_| Reply::status(204)).await;
    let files = QueueFiles::new();
    let file = hooks(&db, 2000, &receiver)
        .await
        .set("rate_limit", "20/s")
        .set("limits", "per_process")
        .write(&files);
    let copies = copies(2, &file, &db.url);
    for one in &copies {
        one.wait_for_log("queue started", Duration::from_secs(30))
            .await;
    }
    eventually("both copies calling", Duration::from_secs(10), || async {
        receiver.requests().len() > 20
    })
    .await;
    let both = started_within(&receiver, Instant::now(), WINDOW).await;
    let per_second = both as f64 / WINDOW.as_secs_f64();
    assert!(
        (32.0..=48.0).contains(&per_second),
        "2 copies at 20/s each started {per_second:.1} calls/s in all"
    );
    assert!(copies
        .iter()
        .all(|one| !one.stderr().contains("limits shared by")));
}

/// `max_in_flight = 2` across three copies of 3 workers each: the receiver never
/// has more than 2 calls open at once — and does have 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_in_flight_holds_across_three_copies() {
    const DELAY: Duration = Duration::from_millis(100);
    let db = TestDb::new().await;
    let receiver = WebServer::start(|_| Reply::status(204).after(DELAY)).await;
    let files = QueueFiles::new();
    let file = hooks(&db, 60, &receiver)
        .await
        .workers(3)
        .set("max_in_flight", 2)
        .write(&files);
    let mut copies = copies(3, &file, &db.url);
    jobs_done(&db, 60).await;
    let starts: Vec<Instant> = receiver.requests().iter().map(|r| r.at).collect();
    // A call holds its slot from before it starts until its reply, DELAY later.
    let open_at = |at: Instant| {
        starts
            .iter()
            .filter(|s| **s <= at && at < **s + DELAY - Duration::from_millis(5))
            .count()
    };
    let most = starts.iter().map(|s| open_at(*s)).max().unwrap_or(0);
    assert_eq!(
        most, 2,
        "at most 2 calls open at once across 3 copies, and 2 reached"
    );
    for one in &mut copies {
        one.terminate().await;
    }
}
