//! A framework's own queue table worked in place, with what `tableq new` writes and a
//! stand-in bridge (a PHP worker answering as the bridges in bridges/ do): a job done
//! is deleted, a release waits its `release_after` (Laravel's columns as a release
//! leaves them), a failure for good becomes a `failed_jobs` row, a PHP process that
//! dies under a job puts it back with its attempt counted, and a lease held under the
//! table's own reservation time is renewed past its `retry_after` without being lost.
//! The real frameworks run in `tests/it/frameworks/`.

use std::path::PathBuf;
use std::time::Duration;

use crate::support::daemon::{run_to_end, tableq, Daemon};
use crate::support::endpoint::{get, metrics_address};
use crate::support::proxy::delaying_proxy;
use crate::support::scrape::sample;
use crate::support::{eventually, load, Engine, QueueFile, QueueFiles, TestDb};

/// Laravel 8's `jobs` and `failed_jobs`, as its migrations make them.
const LARAVEL_TABLES: &str = "
CREATE TABLE jobs (id BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY, queue VARCHAR(255) NOT NULL,
  payload LONGTEXT NOT NULL, attempts TINYINT UNSIGNED NOT NULL, reserved_at INT UNSIGNED NULL,
  available_at INT UNSIGNED NOT NULL, created_at INT UNSIGNED NOT NULL, KEY jobs_queue_index (queue));
CREATE TABLE failed_jobs (id BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY, uuid VARCHAR(255) NOT NULL UNIQUE,
  connection TEXT NOT NULL, queue TEXT NOT NULL, payload LONGTEXT NOT NULL, exception LONGTEXT NOT NULL,
  failed_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)";

/// Answers each job as its payload's `do` says: done, released for 30 s, failed for
/// good, PHP's death (once per job: it notes the job first), or done after a while.
const STAND_IN: &str = r#"<?php
ini_set('display_errors', 'stderr');
while (($line = fgets(STDIN)) !== false) {
    $row = json_decode($line, true);
    $job = json_decode($row['payload'], true);
    $seen = __DIR__ . '/died-' . $row['id'];
    switch ($job['do']) {
        case 'release': $answer = ['ok' => false, 'release_after' => 30, 'error' => 'busy']; break;
        case 'fail': $answer = ['ok' => false, 'error' => 'RuntimeException: boom', 'kind' => 'RuntimeException']; break;
        case 'die':
            if (!file_exists($seen)) { touch($seen); undefined_function_in_a_job(); }
            $answer = ['ok' => true]; break;
        case 'slow': sleep(4); $answer = ['ok' => true]; break;
        default: $answer = ['ok' => true];
    }
    echo json_encode($answer), "\n";
}
"#;

/// The file `tableq new laravel` prints for the stand-in, and the database with
/// Laravel's tables holding one job per `does`.
async fn laravel(files: &QueueFiles, retry_after: u64, does: &[&str]) -> (TestDb, PathBuf) {
    let db = TestDb::new().await;
    db.exec(LARAVEL_TABLES).await;
    for what in does {
        let payload = format!(
            r#"{{"uuid":"{}","displayName":"{what}","do":"{what}"}}"#,
            uuid(what)
        );
        db.exec(&format!(
            "INSERT INTO jobs (queue, payload, attempts, available_at, created_at) \
             VALUES ('default', '{payload}', 0, UNIX_TIMESTAMP(), UNIX_TIMESTAMP())"
        ))
        .await;
    }
    let worker = files.write("bridge.php", STAND_IN);
    let command = format!("php {}", worker.display());
    let retry_after = retry_after.to_string();
    let args = [
        "new",
        "laravel",
        "--retry-after",
        &retry_after,
        "--workers",
        "2",
        "--command",
        &command,
    ];
    let printed = run_to_end(tableq(&args), Duration::from_secs(30)).await;
    assert_eq!(printed.code(), Some(0), "{}", printed.stderr);
    // Polled often, so that the test does not wait for the default interval.
    let text = printed
        .stdout
        .replace("workers = 2", "workers = 2\npoll_interval = \"100ms\"");
    (db, files.write("laravel.toml", &text))
}

fn uuid(what: &str) -> String {
    format!("00000000-0000-4000-8000-{:012}", what.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_answer_changes_the_row_as_laravel_would() {
    let files = QueueFiles::new();
    let (db, file) = laravel(&files, 90, &["ok", "release", "fail", "die"]).await;
    let mut cmd = tableq(&["run", "--metrics-addr", "127.0.0.1:0"]);
    cmd.arg(&file)
        .env("TABLEQ_DATABASE_URL", &db.url)
        .env("TABLEQ_LOG_FORMAT", "json");
    let mut daemon = Daemon::spawn(cmd);
    let metrics = format!("http://{}/metrics", metrics_address(&daemon).await);
    let settled = || async {
        db.count("SELECT COUNT(*) FROM jobs").await == 1
            && db.count("SELECT COUNT(*) FROM failed_jobs").await == 1
    };
    eventually(
        "the done jobs deleted, the failed one recorded",
        Duration::from_secs(30),
        settled,
    )
    .await;
    // The release: waiting 30 s, unreserved, its attempt counted.
    let sql =
        "SELECT attempts, reserved_at, CAST(available_at AS SIGNED) - UNIX_TIMESTAMP() FROM jobs";
    let (attempts, reserved, wait): (u32, Option<u32>, i64) = db.rows(sql).await[0];
    assert_eq!((attempts, reserved), (1, None));
    assert!(
        (25..=30).contains(&wait),
        "released for 30 s, waits {wait} s"
    );
    // The failure for good: one failed_jobs row with the payload's uuid and the error.
    let sql = "SELECT uuid, connection, exception FROM failed_jobs";
    let failed: (String, String, String) = db.rows(sql).await.remove(0);
    let expected = (
        uuid("fail"),
        "database".to_string(),
        "RuntimeException: boom".to_string(),
    );
    assert_eq!(failed, expected);
    // Counted by the payload's displayName; the job whose PHP died ran again.
    let text = get(&metrics).await.1;
    for (label, outcome, count) in [
        ("ok", "done", 1.0),
        ("die", "failed", 1.0),
        ("die", "done", 1.0),
        ("release", "returned", 1.0),
        ("fail", "failed", 1.0),
    ] {
        let series = format!(
            r#"tableq_items_by_label_total{{queue="laravel",label="{label}",outcome="{outcome}"}}"#
        );
        assert_eq!(sample(&text, &series), Some(count), "{series} in\n{text}");
    }
    daemon.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_that_dies_under_a_job_puts_it_back_and_the_next_attempt_runs_it() {
    let files = QueueFiles::new();
    let (db, file) = laravel(&files, 90, &["die"]).await;
    let engine = Engine::start(load(&[file]), &db.url);
    eventually(
        "the job is done on its second attempt",
        Duration::from_secs(30),
        || async { db.count("SELECT COUNT(*) FROM jobs").await == 0 },
    )
    .await;
    let summary = engine.stop().await;
    let counts = summary.counts("laravel").unwrap();
    assert_eq!((counts.done, counts.failed), (1, 1), "{counts:?}");
    db.assert_count("SELECT COUNT(*) FROM failed_jobs", 0).await;
    assert!(
        files.path().join("died-1").exists(),
        "PHP died in the first attempt"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reservation_is_renewed_past_retry_after_and_queue_work_would_not_take_it() {
    let files = QueueFiles::new();
    // retry_after 3 s: renewed every second; the job takes 4 s.
    let (db, file) = laravel(&files, 3, &["slow"]).await;
    let engine = Engine::start(load(&[file]), &db.url);
    let claimed: u32 = loop {
        let reserved: Vec<Option<u32>> = db.rows("SELECT reserved_at FROM jobs").await;
        if let Some(Some(at)) = reserved.first() {
            break *at;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // What queue:work would claim, at each look while the job runs: never this one.
    let laravel_claims =
        "SELECT COUNT(*) FROM jobs WHERE queue = 'default' AND ((reserved_at IS NULL \
        AND available_at <= UNIX_TIMESTAMP()) OR reserved_at <= UNIX_TIMESTAMP() - 3)";
    while db.count("SELECT COUNT(*) FROM jobs").await > 0 {
        assert_eq!(
            db.count(laravel_claims).await,
            0,
            "a reservation lapsed while its job ran"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let summary = engine.stop().await;
    let counts = summary.counts("laravel").unwrap();
    assert_eq!((counts.done, counts.leases_lost), (1, 0), "{counts:?}");
    assert!(claimed > 0, "the claim's time is the reservation");
}

/// Renewals over a slow link (everything 0.15 s late each way): an action that ends while
/// its renewal is under way drops the renewal, which may land all the same and
/// move the row to a token tableq never heard was taken. The outcome then tries
/// that token: every row is done once, no lease is called lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_whose_end_is_not_heard_still_holds_the_lease() {
    let db = TestDb::new().await;
    db.exec(
        "CREATE TABLE job (id INT PRIMARY KEY, done INT NOT NULL DEFAULT 0, runs INT NOT NULL \
         DEFAULT 0, reserved_at INT UNSIGNED NULL) DEFAULT CHARSET=utf8mb4",
    )
    .await;
    db.exec("INSERT INTO job (id) SELECT seq FROM seq_1_to_20")
        .await;
    let files = QueueFiles::new();
    let file = QueueFile::new("renewed")
        .set("mode", "lease")
        .workers(10)
        .poll_interval("100ms")
        .set("database_timeout", "10s")
        .select("SELECT id FROM job WHERE done = 0 AND (reserved_at IS NULL OR reserved_at <= UNIX_TIMESTAMP() - 60)")
        .lease_set("token", "unix_time")
        .lease_set("connections", 20)
        .lease_set("sql", "UPDATE job SET reserved_at = :lease_id, runs = runs + 1 WHERE id = :id")
        .lease_set("renew_sql", "UPDATE job SET reserved_at = :new_lease_id WHERE id = :id AND reserved_at = :lease_id")
        .lease_set("renew_every", "1s")
        .action_set("type", "command")
        .action_set("command", vec!["sh", "-c", "sleep 1.$(( {id} % 10 ))"])
        .on_success("UPDATE job SET done = 1 WHERE id = :id AND reserved_at = :lease_id")
        .write(&files);
    let server: std::net::SocketAddr = {
        let opts = mysql_async::Opts::from_url(&db.url).unwrap();
        format!("{}:{}", opts.ip_or_hostname(), opts.tcp_port())
            .parse()
            .unwrap()
    };
    let proxy = delaying_proxy(server, Duration::from_millis(150)).await;
    let slow_url = db.url.replacen(&server.to_string(), &proxy.to_string(), 1);
    let engine = Engine::start(load(&[file]), &slow_url);
    db.until_count("SELECT COUNT(*) FROM job WHERE done = 1", 20, 120)
        .await;
    let summary = engine.stop().await;
    let counts = summary.counts("renewed").unwrap();
    assert_eq!((counts.done, counts.leases_lost), (20, 0), "{counts:?}");
    db.assert_count("SELECT COUNT(*) FROM job WHERE runs <> 1", 0)
        .await;
}

/// A time token's lease says its length (`[lease] length`, the framework's
/// retry_after, which `tableq new` writes): renewals must come well within it, and
/// a renew_sql that does not move the lease to :new_lease_id is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_time_token_lease_says_its_length_and_moves_on() {
    let files = QueueFiles::new();
    let (_db, file) = laravel(&files, 90, &[]).await;
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(written.contains("length = \"90s\""), "{written}");
    let checked = |text: String| {
        let file = files.write("changed.toml", &text);
        async move {
            let mut cmd = tableq(&["check", "--offline"]);
            cmd.arg(file);
            run_to_end(cmd, Duration::from_secs(30)).await.stdout
        }
    };
    let short = checked(written.replace("length = \"90s\"", "length = \"20s\"")).await;
    assert!(
        short.contains("`renew_every` = 30s is not shorter than the lease `length` gives (20s)"),
        "{short}"
    );
    let kept = written.replace(
        "reserved_at = :new_lease_id WHERE",
        "reserved_at = :lease_id WHERE",
    );
    let stuck = checked(kept).await;
    assert!(
        stuck.contains("`renew_sql` must move the lease to :new_lease_id"),
        "{stuck}"
    );
}
