//! `type = "fastcgi"` against a real PHP-FPM (a private pool on a unix socket, from
//! `support::fpm`): every row done once, the script's failures with their message,
//! 503 with Retry-After opening the circuit, FPM down with no row lost, batch scope
//! and lease mode, and `check`'s look at the server.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use crate::support::check::{check, jobs_file, JOBS};
use crate::support::fpm::Fpm;
use crate::support::queue_file::table;
use crate::support::{
    assert_has, eventually, load, run_until_empty, Engine, QueueFile, QueueFiles, TestDb,
};

/// A PHP job that checks what it was given (the row as JSON, `TABLEQ_KEY`,
/// `TABLEQ_QUEUE`), appends the row's id to `done.log`, and answers `sent <id>`.
pub(super) const APPEND: &str = r#"
$row = $row ?? json_decode(file_get_contents('php://input'), true);
if ($row['id'] != getenv('TABLEQ_KEY') || $_SERVER['CONTENT_TYPE'] !== 'application/json') {
    header('Status: 400 Bad Request');
    exit('not the row it was told of');
}
file_put_contents(__DIR__ . '/done.log', $row['id'] . ' ' . $_SERVER['TABLEQ_QUEUE'] . "\n", FILE_APPEND | LOCK_EX);
echo 'sent ', $row['id'];
"#;

/// The job table, with the outcome's columns.
pub(super) async fn job_table(db: &TestDb, rows: usize) {
    db.exec(
        "CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting',
           status INT NULL, error VARCHAR(1000) NULL, output VARCHAR(1000) NULL,
           retry_after INT NULL, attempts INT NOT NULL DEFAULT 0,
           next_at DATETIME(3) NOT NULL DEFAULT '2000-01-01') DEFAULT CHARSET=utf8mb4",
    )
    .await;
    db.fill("job", "id", rows, |i| i.to_string()).await;
}

/// A private PHP-FPM pool of `children`, and a database with [`job_table`]'s `rows`
/// waiting; none where PHP-FPM is missing (the test is skipped, loudly).
async fn pool_and_jobs(children: u32, rows: usize) -> Option<(Fpm, TestDb)> {
    let fpm = Fpm::start(children)?;
    let db = TestDb::new().await;
    job_table(&db, rows).await;
    Some((fpm, db))
}

/// The queue `name` running `script` on the job table, every outcome recorded.
pub(super) fn jobs(name: &str, fpm: &Fpm, script: &Path) -> QueueFile {
    QueueFile::new(name)
        .select("SELECT id FROM job WHERE state = 'waiting' AND next_at <= NOW(3) ORDER BY id")
        .action_fastcgi(&fpm.address(), script)
        .on_success("UPDATE job SET state = 'done', status = :status, output = :output WHERE id = :id")
        .on_failure("UPDATE job SET state = IF(attempts >= 8, 'failed', 'waiting'), status = :status, error = :error, output = :output, retry_after = :retry_after, attempts = attempts + 1, next_at = NOW(3) + INTERVAL 200000 MICROSECOND WHERE id = :id")
}

/// The ids `done.log` lists, each as often as the script ran for it.
pub(super) fn appended(fpm: &Fpm) -> Vec<u32> {
    let log = std::fs::read_to_string(fpm.dir().join("done.log")).unwrap_or_default();
    let mut ids: Vec<u32> = log
        .lines()
        .filter_map(|line| line.split(' ').next()?.parse().ok())
        .collect();
    ids.sort_unstable();
    ids
}

/// Every row reaches the script once, as its JSON body with its key and queue as
/// params, and the script's answer reaches `[on_success]` as `:status` and `:output`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_row_reaches_the_script_once() {
    let Some((fpm, db)) = pool_and_jobs(3, 300).await else {
        return;
    };
    let script = fpm.script("append.php", APPEND);
    let files = QueueFiles::new();
    let file = jobs("fcgi_once", &fpm, &script).workers(4).write(&files);
    let summary = run_until_empty(load(&[file]), &db.url).await;
    assert_eq!(summary.counts("fcgi_once").unwrap().done, 300);
    assert_eq!(
        appended(&fpm),
        (1..=300).collect::<Vec<_>>(),
        "each row once"
    );
    let log = std::fs::read_to_string(fpm.dir().join("done.log")).unwrap();
    assert!(log.lines().all(|l| l.ends_with(" fcgi_once")), "{log}");
    let (status, output): (u16, String) = db
        .rows("SELECT status, output FROM job WHERE id = 7")
        .await
        .pop()
        .unwrap();
    assert_eq!((status, output.as_str()), (200, "sent 7"));
}

/// One worker's requests go over one kept connection (FCGI_KEEP_CONN): PHP-FPM
/// serves them all with the one child that holds it, of the pool's three.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_keeps_its_connection() {
    let Some((fpm, db)) = pool_and_jobs(3, 30).await else {
        return;
    };
    let script = fpm.script(
        "pid.php",
        "file_put_contents(__DIR__ . '/pids.log', getmypid() . \"\\n\", FILE_APPEND | LOCK_EX);",
    );
    let files = QueueFiles::new();
    let file = jobs("fcgi_kept", &fpm, &script).write(&files);
    let summary = run_until_empty(load(&[file]), &db.url).await;
    assert_eq!(summary.counts("fcgi_kept").unwrap().done, 30);
    let pids = std::fs::read_to_string(fpm.dir().join("pids.log")).unwrap();
    let children: BTreeSet<&str> = pids.lines().collect();
    assert_eq!((pids.lines().count(), children.len()), (30, 1), "{pids}");
}

/// With `signing_secret` the script finds the Standard Webhooks headers in
/// `$_SERVER`, and they verify over the body with an independent implementation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_requests_verify_independently() {
    let Some((fpm, db)) = pool_and_jobs(1, 1).await else {
        return;
    };
    let script = fpm.script(
        "signed.php",
        "echo json_encode([$_SERVER['HTTP_WEBHOOK_ID'], $_SERVER['HTTP_WEBHOOK_TIMESTAMP'], \
         $_SERVER['HTTP_WEBHOOK_SIGNATURE'], file_get_contents('php://input')]);",
    );
    let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let files = QueueFiles::new();
    let file = jobs("fcgi_signed", &fpm, &script)
        .action_set("signing_secret", secret)
        .write(&files);
    run_until_empty(load(&[file]), &db.url).await;
    let output: String = db.scalar("SELECT output FROM job WHERE id = 1").await;
    let said: Vec<String> = serde_json::from_str(&output).unwrap();
    assert_eq!(said[0], "fcgi_signed_1");
    let mut headers = axum::http::HeaderMap::new();
    for (name, value) in ["webhook-id", "webhook-timestamp", "webhook-signature"]
        .into_iter()
        .zip(&said)
    {
        headers.insert(name, value.parse().unwrap());
    }
    standardwebhooks::Webhook::new(secret)
        .unwrap()
        .verify(said[3].as_bytes(), &headers)
        .unwrap_or_else(|e| panic!("the signature does not verify: {e:?}"));
}

/// A script's own failure (`Status: 422` and a message) is the row's, recorded with
/// the body as `:error`; a PHP fatal error without output is recorded with PHP's
/// message from stderr.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_script_is_recorded_with_its_message() {
    let Some((fpm, db)) = pool_and_jobs(2, 3).await else {
        return;
    };
    let script = fpm.script(
        "picky.php",
        r#"ini_set('display_errors', '0'); ini_set('log_errors', '1');
$row = json_decode(file_get_contents('php://input'), true);
if ($row['id'] == 2) { header('Status: 422 Unprocessable Content'); exit("no such recipient: {$row['id']}"); }
if ($row['id'] == 3) { throw new RuntimeException('mail server said no'); }
echo 'ok';"#,
    );
    let files = QueueFiles::new();
    let file = jobs("fcgi_fail", &fpm, &script)
        .on_failure(
            "UPDATE job SET state = 'failed', status = :status, error = :error WHERE id = :id",
        )
        .write(&files);
    run_until_empty(load(&[file]), &db.url).await;
    let rows: Vec<(u32, String, u16, Option<String>)> = db
        .rows("SELECT id, state, status, error FROM job ORDER BY id")
        .await;
    assert_eq!(rows[0], (1, "done".into(), 200, None));
    assert_eq!(
        rows[1],
        (2, "failed".into(), 422, Some("no such recipient: 2".into()))
    );
    let (_, state, status, error) = &rows[2];
    assert_eq!((state.as_str(), *status), ("failed", 500));
    let error = error.as_deref().unwrap();
    assert!(
        error.contains("Uncaught RuntimeException: mail server said no"),
        "{error}"
    );
}

/// A script PHP-FPM cannot find is the queue's fault, not the rows': they wait,
/// no attempt spent, and the log says what to fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_script_leaves_the_rows_waiting() {
    let Some((fpm, db)) = pool_and_jobs(1, 3).await else {
        return;
    };
    let files = QueueFiles::new();
    let file = jobs("fcgi_missing", &fpm, &fpm.dir().join("nope.php")).write(&files);
    let logs = crate::support::logs::capture();
    let engine = Engine::start(load(&[file]), &db.url);
    eventually(
        "the queue's fault is said",
        Duration::from_secs(30),
        || async { !logs.lines_of("fcgi_missing", "finds no script").is_empty() },
    )
    .await;
    engine.stop().await;
    let line = &logs.lines_of("fcgi_missing", "finds no script")[0];
    assert!(
        line.contains(
            "(Primary script unknown): `action.script` must be the script's path on the FPM host"
        ),
        "{line}"
    );
    db.assert_count(
        "SELECT COUNT(*) FROM job WHERE state = 'waiting' AND attempts = 0",
        3,
    )
    .await;
}

/// A script that answers 503 with Retry-After is trouble downstream: the circuit
/// opens after `min_items`, `:retry_after` is recorded, and no row fails for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_503_with_retry_after_opens_the_circuit() {
    let Some((fpm, db)) = pool_and_jobs(2, 50).await else {
        return;
    };
    let script = fpm.script(
        "busy.php",
        "header('Status: 503 Service Unavailable'); header('Retry-After: 30'); echo 'try later';",
    );
    let files = QueueFiles::new();
    let circuit = table(&[
        ("min_items", toml::Value::Integer(3)),
        ("cool_down", "10m".into()),
        ("max_cool_down", "10m".into()),
    ]);
    let file = jobs("fcgi_busy", &fpm, &script)
        .set("circuit", circuit)
        .write(&files);
    let logs = crate::support::logs::capture();
    let engine = Engine::start(load(&[file]), &db.url);
    eventually("the circuit opens", Duration::from_secs(30), || async {
        !logs.lines_of("fcgi_busy", "the circuit is open").is_empty()
    })
    .await;
    engine.stop().await;
    let tried = db
        .count("SELECT COUNT(*) FROM job WHERE attempts > 0")
        .await;
    assert!((1..=6).contains(&tried), "{tried} rows spent an attempt");
    let (retry_after, error): (u32, String) = db
        .rows("SELECT retry_after, error FROM job WHERE attempts > 0 LIMIT 1")
        .await
        .pop()
        .unwrap();
    assert_eq!((retry_after, error.as_str()), (30, "try later"));
    db.assert_count("SELECT COUNT(*) FROM job WHERE state <> 'waiting'", 0)
        .await;
}

/// PHP-FPM stopped under a backlog, with `[circuit]` off: the queue stops claiming
/// at the first refused connection, with one warning naming the pool; no row spends
/// an attempt or gives up while it is down; once it is back every row is done, each
/// once, within seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_fpm_outage_spends_no_attempt_and_gives_no_row_up() {
    let Some((fpm, db)) = pool_and_jobs(2, 40).await else {
        return;
    };
    let script = fpm.script("append.php", APPEND);
    let files = QueueFiles::new();
    let file = jobs("fcgi_down", &fpm, &script)
        .workers(2)
        .poll_interval("200ms")
        .set("circuit", table(&[("enabled", false.into())]))
        .write(&files);
    let logs = crate::support::logs::capture();
    let engine = Engine::start(load(&[file]), &db.url);
    crate::support::jobs_done(&db, 40).await;
    fpm.stop();
    let values: Vec<String> = (41..=100).map(|id| format!("({id})")).collect();
    db.exec(&format!(
        "INSERT INTO job (id) VALUES {}",
        values.join(", ")
    ))
    .await;
    let went = std::time::Instant::now();
    logs.wait_for("fcgi_down", "the handler cannot be reached")
        .await;
    let said_in = went.elapsed();
    tokio::time::sleep(OUTAGE).await;
    let spent = "SELECT COUNT(*) FROM job WHERE attempts > 0 OR state NOT IN ('waiting', 'done')";
    db.assert_count_because(spent, 0, "an attempt spent while FPM was down")
        .await;
    fpm.start_again();
    let back = std::time::Instant::now();
    crate::support::jobs_done(&db, 100).await;
    let drained_in = back.elapsed();
    engine.stop().await;
    db.assert_count(spent, 0).await;
    assert_eq!(
        appended(&fpm),
        (1..=100).collect::<Vec<_>>(),
        "each row once"
    );
    let warned = logs.lines_of("fcgi_down", "the handler cannot be reached");
    assert_eq!(warned.len(), 1, "said once: {warned:?}");
    assert!(
        warned[0].contains("cannot connect to PHP-FPM at unix:"),
        "{warned:?}"
    );
    assert_eq!(
        logs.lines_of("fcgi_down", "the handler answers again")
            .len(),
        1
    );
    eprintln!("FPM down: said in {said_in:.2?}; back: every row done {drained_in:.2?} after");
    assert!(
        drained_in < Duration::from_secs(10),
        "{drained_in:?} to drain after FPM's return"
    );
}

/// How long the outage above lasts: long enough for many tries.
const OUTAGE: Duration = Duration::from_secs(6);

/// `workers = 4`, `batch = 10` (40 actions at once) against a pool of 4 children,
/// `max_connections = 4`: the requests past 4 wait in tableq, not in FPM's backlog,
/// and their wait is not charged to their 2 s timeout — every row done once, none
/// timed out, though the last of a turn waits ~3 s; the time beside `batch = 1`'s is
/// printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_actions_than_children_wait_in_tableq_not_in_fpm() {
    let Some((fpm, db)) = pool_and_jobs(4, 120).await else {
        return;
    };
    let script = fpm.script("slow.php", &format!("usleep(300000);\n{APPEND}"));
    let files = QueueFiles::new();
    let file = jobs("fcgi_crowd", &fpm, &script)
        .workers(4)
        .batch(10)
        .action_set("timeout", "2s")
        .action_set("max_connections", 4)
        .write(&files);
    let started = std::time::Instant::now();
    let summary = run_until_empty(load(&[file]), &db.url).await;
    let took = started.elapsed();
    assert_eq!(summary.counts("fcgi_crowd").unwrap().done, 120);
    db.assert_count("SELECT COUNT(*) FROM job WHERE attempts > 0", 0)
        .await;
    assert_eq!(
        appended(&fpm),
        (1..=120).collect::<Vec<_>>(),
        "each row once"
    );
    // Side by side, the same rows one action per worker (batch = 1): the figure
    // to compare with, not a bound (machines are shared).
    db.exec("UPDATE job SET state = 'waiting'").await;
    std::fs::remove_file(fpm.dir().join("done.log")).unwrap();
    let one_by_one = jobs("fcgi_one_by_one", &fpm, &script)
        .workers(4)
        .action_set("max_connections", 4)
        .write(&files);
    let started = std::time::Instant::now();
    run_until_empty(load(&[one_by_one]), &db.url).await;
    let alone = started.elapsed();
    assert_eq!(
        appended(&fpm),
        (1..=120).collect::<Vec<_>>(),
        "each row once"
    );
    eprintln!(
        "120 rows of 300 ms through 4 children: {took:.2?} at 40 in flight (batch 10), \
         {alone:.2?} at 4 (batch 1); ideal 9 s"
    );
}

/// With every child of the pool busy, requests wait in FPM's backlog past their
/// timeout: trouble downstream, so the circuit opens and the rows wait; once the
/// child is free every row is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_wait_while_every_child_is_busy() {
    let Some((fpm, db)) = pool_and_jobs(1, 20).await else {
        return;
    };
    // Row 1's first run holds the only child until the test says go, and is
    // abandoned at its timeout (it appends nothing); its second run appends.
    let go = fpm.dir().join("go");
    let script = fpm.script(
        "hog.php",
        &format!(
            r#"$row = json_decode(file_get_contents('php://input'), true);
if ($row['id'] == 1 && !file_exists(__DIR__ . '/hogged')) {{
    touch(__DIR__ . '/hogged');
    while (!file_exists('{}')) {{ usleep(20000); }}
    exit;
}}
{APPEND}"#,
            go.display()
        ),
    );
    let files = QueueFiles::new();
    let circuit = table(&[
        ("min_items", toml::Value::Integer(3)),
        ("cool_down", "1s".into()),
        ("max_cool_down", "2s".into()),
    ]);
    let file = jobs("fcgi_busy_children", &fpm, &script)
        .workers(2)
        .action_set("timeout", "1s")
        .set("circuit", circuit)
        .write(&files);
    let logs = crate::support::logs::capture();
    let engine = Engine::start(load(&[file]), &db.url);
    eventually("the circuit opens", Duration::from_secs(30), || async {
        !logs
            .lines_of("fcgi_busy_children", "the circuit is open")
            .is_empty()
    })
    .await;
    let error: String = db
        .scalar("SELECT error FROM job WHERE attempts > 0 LIMIT 1")
        .await;
    assert!(error.contains("waiting for PHP-FPM at unix:"), "{error}");
    db.assert_count("SELECT COUNT(*) FROM job WHERE state = 'failed'", 0)
        .await;
    std::fs::write(&go, "").unwrap();
    // Every row done.
    db.until_count("SELECT COUNT(*) FROM job WHERE state = 'done'", 20, 60)
        .await;
    engine.stop().await;
    // A request abandoned in FPM's backlog still runs once a child takes it (FPM
    // reads it whole from the socket): at least once, as the docs say.
    let ran: BTreeSet<u32> = appended(&fpm).into_iter().collect();
    assert_eq!(ran, (1..=20).collect(), "no row lost");
}

/// In batch scope one request carries the batch: the rows as a JSON array, their
/// keys in `TABLEQ_KEYS`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_scope_sends_the_rows_as_one_array() {
    let Some((fpm, db)) = pool_and_jobs(2, 95).await else {
        return;
    };
    let script = fpm.script(
        "batch.php",
        r#"$rows = json_decode(file_get_contents('php://input'), true);
$keys = json_decode(getenv('TABLEQ_KEYS'), true);
if (array_column($rows, 'id') != $keys) { header('Status: 400'); exit('keys and rows differ'); }
$lines = '';
foreach ($rows as $row) { $lines .= $row['id'] . ' batch of ' . count($rows) . "\n"; }
file_put_contents(__DIR__ . '/done.log', $lines, FILE_APPEND | LOCK_EX);"#,
    );
    let files = QueueFiles::new();
    let batch = "JOIN JSON_TABLE(:batch, '$[*]' COLUMNS (id INT PATH '$.id')) AS b USING (id)";
    let file = jobs("fcgi_batch", &fpm, &script)
        .on_success(format!("UPDATE job {batch} SET state = 'done'"))
        .on_failure(format!("UPDATE job {batch} SET state = 'failed'"))
        .set("scope", "batch")
        .batch(10)
        .write(&files);
    let summary = run_until_empty(load(&[file]), &db.url).await;
    assert_eq!(summary.counts("fcgi_batch").unwrap().done, 95);
    assert_eq!(appended(&fpm), (1..=95).collect::<Vec<_>>());
    let log = std::fs::read_to_string(fpm.dir().join("done.log")).unwrap();
    let sizes: BTreeSet<&str> = log.lines().filter_map(|l| l.split(" of ").nth(1)).collect();
    assert!(sizes.contains("10"), "{sizes:?}");
}

/// In lease mode no transaction is open while the script runs, and its progress
/// (`error_log("progress: …"); flush();`) reaches the row through `:progress`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_mode_hears_the_scripts_progress() {
    let Some((fpm, db)) = pool_and_jobs(2, 2).await else {
        return;
    };
    db.exec("ALTER TABLE job ADD lease_until DATETIME(3) NULL, ADD lease_id CHAR(32) NULL, ADD progress VARCHAR(100) NULL")
        .await;
    let go = fpm.dir().join("go");
    let script = fpm.script(
        "slow.php",
        &format!(
            r#"error_log('progress: halfway'); flush();
while (!file_exists('{}')) {{ usleep(20000); }}
echo 'rendered';"#,
            go.display()
        ),
    );
    let files = QueueFiles::new();
    let file = QueueFile::new("fcgi_lease")
        .set("mode", "lease")
        .select("SELECT id FROM job WHERE state = 'waiting' OR (state = 'leased' AND lease_until < NOW(3)) ORDER BY id")
        .poll_interval("100ms")
        .action_fastcgi(&fpm.address(), &script)
        .lease_set("sql", "UPDATE job SET state = 'leased', lease_until = NOW(3) + INTERVAL 5 SECOND, lease_id = :lease_id WHERE id = :id")
        .lease_set("renew_sql", "UPDATE job SET lease_until = NOW(3) + INTERVAL 5 SECOND, progress = :progress WHERE id = :id AND lease_id = :lease_id")
        .lease_set("renew_every", "200ms")
        .on_success("UPDATE job SET state = 'done', output = :output WHERE id = :id AND lease_id = :lease_id")
        .on_failure("UPDATE job SET state = 'failed', error = :error WHERE id = :id AND lease_id = :lease_id")
        .write(&files);
    let engine = Engine::start(load(&[file]), &db.url);
    // The progress reaches the row.
    db.until_count_at_least("SELECT COUNT(*) FROM job WHERE progress = 'halfway'", 1, 30)
        .await;
    std::fs::write(&go, "").unwrap();
    // Both rows done.
    db.until_count(
        "SELECT COUNT(*) FROM job WHERE state = 'done' AND output = 'rendered'",
        2,
        30,
    )
    .await;
    engine.stop().await;
}

/// `check --offline` names a malformed address and a relative script; online, it
/// says PHP-FPM answers, what the pool does with PHP's errors (asked of PHP there,
/// the probe script removed after), and warns of a script that is not there; it
/// fails when nothing listens at the address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_looks_at_the_address_and_the_script() {
    let queue = |address: &str, script: &str| {
        format!(
            "{}\n[action]\ntype = \"fastcgi\"\naddress = \"{address}\"\nscript = \"{script}\"\n{}",
            crate::support::check::GOOD.lines().next().unwrap(),
            crate::support::check::GOOD
                .split_once("sql = \"DO :id\"\n")
                .unwrap()
                .1
        )
    };
    let (_files, path, _) = jobs_file(&queue("127.0.0.1", "jobs/send.php"));
    let offline = check(&["--offline"], &[&path], None).await;
    assert_eq!(offline.code(), Some(1), "{offline:?}");
    assert_has(
        &offline.stdout,
        "`action.address` = \"127.0.0.1\" names no port",
    );
    assert_has(
        &offline.stdout,
        "`action.script` = \"jobs/send.php\" must be the script's absolute path",
    );

    let Some(fpm) = Fpm::start(1) else { return };
    let db = TestDb::new().await;
    db.exec(JOBS).await;
    let missing = fpm.dir().join("missing.php");
    let (_files, path, _) = jobs_file(&queue(&fpm.address(), missing.to_str().unwrap()));
    let online = check(&[], &[&path], Some(&db.url)).await;
    assert!(
        online.stdout.contains("answers (FCGI_MPXS_CONNS=0"),
        "{}",
        online.stdout
    );
    assert_has(&online.stdout, "is not a file on this host");
    // PHP-FPM -n: PHP's own defaults, display_errors on; asked of PHP in the pool.
    for said in [
        "the pool displays PHP's errors (display_errors on): a fatal error answers 200",
        "a pool of its own for jobs is best",
    ] {
        assert!(online.stdout.contains(said), "{said}: {}", online.stdout);
    }
    let probes: Vec<_> = std::fs::read_dir(fpm.dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(".tableq-check"))
        .collect();
    assert!(probes.is_empty(), "the probe script is removed");
    fpm.stop();
    let down = check(&[], &[&path], Some(&db.url)).await;
    assert_ne!(down.code(), Some(0), "{down:?}");
    assert_has(&down.stdout, "cannot connect to PHP-FPM at unix:");
}

/// The new keys checked as every key is: a `done_header` that is no header's name
/// and `max_connections = 0` are refused, naming the file, the line, the queue and
/// what would be right; more requests at once than `max_connections` is a warning
/// that says how many wait in tableq.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn done_header_and_max_connections_are_checked() {
    let files = QueueFiles::new();
    let queue = |name: &str| {
        QueueFile::new(name)
            .select("SELECT id FROM job WHERE state = 'waiting' ORDER BY id")
            .action_fastcgi("unix:/run/php/fpm.sock", Path::new("/srv/app/job.php"))
            .on_success("UPDATE job SET state = 'done' WHERE id = :id")
    };
    let wrong = queue("fcgi_wrong_keys")
        .action_set("done_header", "Tableq Done!")
        .action_set("max_connections", 0)
        .write(&files);
    let refused = check(&["--offline"], &[&wrong], None).await;
    assert_eq!(refused.code(), Some(1), "{refused:?}");
    let path = wrong.display().to_string();
    for said in [
        "queue fcgi_wrong_keys: error: `action.done_header` = \"Tableq Done!\" is not a header's name",
        "queue fcgi_wrong_keys: error: `action.max_connections` = 0: at least 1",
    ] {
        let line = refused.stdout.lines().find(|l| l.contains(said));
        let line = line.unwrap_or_else(|| panic!("{said}: {}", refused.stdout));
        assert!(line.starts_with(&format!("{path}:")), "{line}");
    }
    let crowded = queue("fcgi_crowded")
        .workers(4)
        .batch(10)
        .action_set("max_connections", 4)
        .write(&files);
    let warned = check(&["--offline"], &[&crowded], None).await;
    assert_has(
        &warned.stdout,
        "warning: the queue runs up to 40 requests at once (workers × batch, within \
             max_in_flight), but `action.max_connections` = 4: 36 of them wait in tableq",
    );
}
