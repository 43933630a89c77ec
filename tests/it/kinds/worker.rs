//! `type = "worker"` with real long-lived processes — PHP CLI, Python and sh: every
//! row once through few processes, failures with their message, a process that
//! crashes, hangs or writes garbage replaced (its item failed, saying why),
//! `max_items` recycling, batch scope and lease mode's progress, SIGTERM finishing
//! the item in hand, `kill -9` of tableq leaving no process and losing no row, and
//! `check` starting the command.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use crate::support;
use crate::support::check::check;
use crate::support::daemon::{run_binary_until_empty, Daemon};
use crate::support::process::is_gone;
use crate::support::{eventually, load, run_until_empty, Engine, QueueFile, QueueFiles, TestDb};

const JOB_TABLE: &str =
    "CREATE TABLE job (id INT PRIMARY KEY, arg VARCHAR(100) NOT NULL DEFAULT '',
    state VARCHAR(10) NOT NULL DEFAULT 'waiting', error VARCHAR(2000) NULL,
    output VARCHAR(2000) NULL, progress VARCHAR(200) NULL, lease_until DATETIME(3) NULL,
    lease_id CHAR(32) NULL) DEFAULT CHARSET=utf8mb4";

/// A worker in PHP, as the protocol page shows it: one JSON line in, one out.
const PHP_WORKER: &str = r#"<?php
ini_set('display_errors', 'stderr');
fwrite(STDERR, "warming up\n");
while (($line = fgets(STDIN)) !== false) {
    $row = json_decode($line, true);
    file_put_contents('handled', $row['id'] . ' ' . getmypid() . "\n", FILE_APPEND | LOCK_EX);
    if ($row['arg'] === 'bounce') {
        echo json_encode(['ok' => false, 'error' => "mailbox full for job {$row['id']}"]), "\n";
    } else {
        echo json_encode(['ok' => true, 'output' => "sent {$row['id']}"]), "\n";
    }
}
"#;

/// A worker in sh that notes its start, each item and its end in `events`, and
/// answers each item once the file `go` is there.
const WAITING_WORKER: &str = r#"echo "start $$" >> events
while IFS= read -r line; do
  echo "item $$" >> events
  while [ ! -f go ]; do sleep 0.05; done
  echo '{"ok": true, "output": "finished"}'
done
echo "bye $$" >> events"#;

/// The queue `name`: one worker loop, one item at a time, each outcome on its row.
fn queue(name: &str, command: &[&str]) -> QueueFile {
    QueueFile::new(name)
        .select("SELECT id, arg FROM job WHERE state = 'waiting' ORDER BY id")
        .batch(1)
        .poll_interval("100ms")
        .error_backoff("100ms")
        .action_set("type", "worker")
        .action_set("command", command.to_vec())
        .on_success("UPDATE job SET state = 'done', output = :output WHERE id = :id")
        .on_failure(
            "UPDATE job SET state = 'failed', error = :error, output = :output WHERE id = :id",
        )
}

async fn jobs(db: &TestDb, args: &[&str]) {
    db.exec(JOB_TABLE).await;
    for (index, arg) in args.iter().enumerate() {
        let id = index + 1;
        db.exec(&format!("INSERT INTO job (id, arg) VALUES ({id}, '{arg}')"))
            .await;
    }
}

/// Each job's state, error and output, by id.
async fn outcomes(db: &TestDb) -> Vec<(u32, String, Option<String>, Option<String>)> {
    db.rows("SELECT id, state, error, output FROM job ORDER BY id")
        .await
}

/// The lines of the file `name` in `dir` (none if it is not there).
fn lines(dir: &Path, name: &str) -> Vec<String> {
    std::fs::read_to_string(dir.join(name))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// The pids of `events`' lines that start with `what`.
fn pids(dir: &Path, what: &str) -> Vec<i32> {
    lines(dir, "events")
        .iter()
        .filter_map(|line| line.strip_prefix(what)?.trim().parse().ok())
        .collect()
}

/// A PHP CLI worker does every row once, through at most as many processes as the
/// queue runs items at once; a failure is recorded with its message, output with
/// its row, and the worker's stderr reaches the log under its queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_php_worker_does_every_row_once_through_few_processes() {
    let Some(_) =
        support::tools::required(&["php"], "apt-get install php8.2-cli", "the PHP CLI worker")
    else {
        return;
    };
    let logs = support::logs::capture();
    let db = TestDb::new().await;
    let mut args = vec!["ok"; 40];
    args[6] = "bounce";
    jobs(&db, &args).await;
    let files = QueueFiles::new();
    files.write("worker.php", PHP_WORKER);
    let file = queue("php_worker", &["php", "worker.php"])
        .workers(2)
        .write(&files);
    let summary = run_until_empty(load(&[file]), &db.url).await;
    let counts = summary.counts("php_worker").unwrap();
    assert_eq!((counts.done, counts.failed), (39, 1), "{counts:?}");

    let handled = lines(&files.path(), "handled");
    let ids: BTreeSet<&str> = handled.iter().filter_map(|l| l.split(' ').next()).collect();
    assert_eq!(
        (handled.len(), ids.len()),
        (40, 40),
        "every row once: {handled:?}"
    );
    let processes: BTreeSet<&str> = handled.iter().filter_map(|l| l.split(' ').nth(1)).collect();
    assert!(
        processes.len() <= 2,
        "two workers, at most two processes: {processes:?}"
    );

    let all = outcomes(&db).await;
    assert_eq!(
        all[6],
        (
            7,
            "failed".into(),
            Some("mailbox full for job 7".into()),
            None
        )
    );
    assert_eq!(all[0], (1, "done".into(), None, Some("sent 1".into())));
    let warming = logs.lines_of("php_worker", "warming up");
    assert!(
        !warming.is_empty(),
        "stderr reaches the log under the queue's name"
    );
    assert!(warming[0].contains("process="), "{warming:?}");
}

/// A process that crashes, hangs past the timeout, or writes a line that is not the
/// protocol is killed with its process group and replaced; the item it held fails,
/// saying why, and the rows after it are done by the next process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_a_hang_and_garbage_are_replaced_and_their_items_fail() {
    let logs = support::logs::capture();
    let db = TestDb::new().await;
    jobs(&db, &["ok", "crash", "ok", "hang", "ok", "garbage", "ok"]).await;
    let files = QueueFiles::new();
    files.script(
        "faulty.sh",
        r#"echo "start $$" >> events
while IFS= read -r line; do
  case "$line" in
    *'"crash"'*) echo "boom" >&2; exit 3 ;;
    *'"hang"'*) sleep 300 & echo $! > sleeper; wait ;;
    *'"garbage"'*) echo "hello" ;;
    *) echo '{"ok": true}' ;;
  esac
done"#,
    );
    let file = queue("faulty_worker", &["./faulty.sh"])
        .action_set("timeout", "2s")
        .write(&files);
    run_until_empty(load(&[file]), &db.url).await;

    let failed: Vec<(u32, Option<String>)> = outcomes(&db)
        .await
        .into_iter()
        .filter(|(_, state, ..)| state != "done")
        .map(|(id, _, error, _)| (id, error))
        .collect();
    let said = |text: &str| Some(text.to_string());
    assert_eq!(
        failed,
        [
            (2, said("while handling the item, the worker process exited (exit status 3: boom); a new one starts")),
            (4, said("timed out after 2s waiting for the worker process (./faulty.sh) to answer; it is killed, a new one starts")),
            (6, said("while handling the item, the worker process wrote a line that is not a JSON object: hello; a new one starts")),
        ]
    );
    let dir = files.path();
    let started = pids(&dir, "start");
    assert_eq!(
        started.len(),
        4,
        "one process, and one after each fault: {started:?}"
    );
    let sleeper = support::process::read_pid(&dir.join("sleeper")).expect("the hang's child");
    eventually(
        "the hung process's group is gone",
        Duration::from_secs(10),
        || async { is_gone(sleeper) && started.iter().all(|pid| is_gone(*pid)) },
    )
    .await;
    assert!(!logs.lines_of("faulty_worker", "boom").is_empty());
}

/// A worker that dies at start is reported as a program that cannot run (trouble
/// downstream: it may have read the item), with what it said on stderr.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_dies_at_start_cannot_run() {
    let db = TestDb::new().await;
    jobs(&db, &["ok"]).await;
    let files = QueueFiles::new();
    files.script(
        "broken.sh",
        "echo 'syntax error, unexpected end of file' >&2\nexit 255",
    );
    let file = queue("broken_worker", &["./broken.sh"]).write(&files);
    run_until_empty(load(&[file]), &db.url).await;
    let (_, state, error, _) = outcomes(&db).await.remove(0);
    assert_eq!(state, "failed");
    assert_eq!(
        error.as_deref(),
        Some("cannot run ./broken.sh: the worker process exited (exit status 255: syntax error, unexpected end of file) before its first answer")
    );
}

/// A worker program that no longer starts (made unexecutable while tableq runs)
/// cannot have handled an item: the rows wait with no outcome recorded, one warning
/// names the program, and once it can start again every row is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_cannot_start_is_waited_for() {
    use std::os::unix::fs::PermissionsExt;
    let db = TestDb::new().await;
    jobs(&db, &[]).await;
    let files = QueueFiles::new();
    let program = files.script(
        "worker.sh",
        "while IFS= read -r line; do echo '{\"ok\": true}'; done",
    );
    let file = queue("unstartable_worker", &["./worker.sh"]).write(&files);
    let logs = support::logs::capture();
    let engine = Engine::start(load(&[file]), &db.url);
    let mode = |bits| std::fs::set_permissions(&program, std::fs::Permissions::from_mode(bits));
    mode(0o644).unwrap();
    db.exec("INSERT INTO job (id, arg) VALUES (1, 'ok'), (2, 'ok')")
        .await;
    let warned = logs
        .wait_for("unstartable_worker", "the handler cannot be reached")
        .await;
    assert!(
        warned[0].contains("cannot run ./worker.sh: Permission denied"),
        "{warned:?}"
    );
    let waiting = db.count("SELECT COUNT(*) FROM job WHERE state = 'waiting' AND error IS NULL");
    assert_eq!(
        waiting.await,
        2,
        "no outcome recorded while it cannot start"
    );
    mode(0o755).unwrap();
    support::jobs_done(&db, 2).await;
    engine.stop().await;
    let warned = logs.lines_of("unstartable_worker", "the handler cannot be reached");
    assert_eq!(warned.len(), 1, "said once: {warned:?}");
}

/// A PHP worker that dies on an item — a fatal error, displayed on stdout as the
/// PHP CLI does, or only logged on stderr — fails that item with PHP's own message,
/// never done; the next item gets a new process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_php_worker_that_dies_on_an_item_fails_it_with_phps_message() {
    let db = TestDb::new().await;
    jobs(&db, &["ok", "fatal", "throw", "ok"]).await;
    let files = QueueFiles::new();
    files.write(
        "worker.php",
        r#"<?php
while (($line = fgets(STDIN)) !== false) {
    $row = json_decode($line, true);
    if ($row['arg'] === 'fatal') { ini_set('display_errors', '1'); ini_set('log_errors', '0'); nope(); }
    if ($row['arg'] === 'throw') { ini_set('display_errors', '0'); ini_set('log_errors', '1'); throw new RuntimeException("no mailbox for {$row['id']}"); }
    echo json_encode(['ok' => true]), "
";
}
"#,
    );
    let file = queue("php_deaths", &["php", "-n", "worker.php"]).write(&files);
    run_until_empty(load(&[file]), &db.url).await;
    let rows = outcomes(&db).await;
    assert_eq!((rows[0].1.as_str(), rows[3].1.as_str()), ("done", "done"));
    assert_eq!(rows[1].1, "failed");
    let fatal = rows[1].2.as_deref().unwrap();
    assert!(
        fatal.starts_with("PHP Fatal error: Uncaught Error: Call to undefined function nope()")
            && fatal.contains("worker.php:4"),
        "{fatal}"
    );
    let thrown = rows[2].2.as_deref().unwrap();
    assert_eq!(rows[2].1, "failed");
    assert!(
        thrown.starts_with("PHP Fatal error: Uncaught RuntimeException: no mailbox for 3"),
        "{thrown}"
    );
}

/// `max_items` retires a process after that many items — its stdin closed, so it
/// ends by itself — and a new one takes the next; the last ends when the queue does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_items_recycles_the_process() {
    let db = TestDb::new().await;
    jobs(&db, &["ok"; 7]).await;
    let files = QueueFiles::new();
    files.write("go", "");
    files.script("worker.sh", WAITING_WORKER);
    let file = queue("recycled_worker", &["./worker.sh"])
        .action_set("max_items", 3)
        .write(&files);
    let summary = run_until_empty(load(&[file]), &db.url).await;
    assert_eq!(summary.counts("recycled_worker").unwrap().done, 7);
    let dir = files.path();
    let started = pids(&dir, "start");
    let mut items: BTreeMap<i32, usize> = BTreeMap::new();
    for pid in pids(&dir, "item") {
        *items.entry(pid).or_default() += 1;
    }
    let per_process: Vec<usize> = started.iter().map(|pid| items[pid]).collect();
    assert_eq!(per_process, [3, 3, 1]);
    eventually(
        "every process ended on its own",
        Duration::from_secs(10),
        || async {
            let mut ended = pids(&dir, "bye");
            ended.sort();
            let mut all = started.clone();
            all.sort();
            ended == all
        },
    )
    .await;
}

/// A worker whose answer says it is its last (`"last": true`), and which ends a
/// moment later, is handed no other item: each row is done, none failed by the
/// process's end, one process per row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_last_answer_retires_the_process_before_another_item() {
    let db = TestDb::new().await;
    jobs(&db, &["ok"; 3]).await;
    let files = QueueFiles::new();
    let leaving = r#"echo "start $$" >> events
IFS= read -r line
echo "item $$" >> events
echo '{"ok": true, "last": true}'
sleep 0.5"#;
    files.script("worker.sh", leaving);
    let file = queue("leaving_worker", &["./worker.sh"]).write(&files);
    let summary = run_until_empty(load(&[file]), &db.url).await;
    let counts = summary.counts("leaving_worker").unwrap();
    assert_eq!((counts.done, counts.failed), (3, 0), "{counts:?}");
    let dir = files.path();
    assert_eq!(
        (pids(&dir, "start").len(), pids(&dir, "item").len()),
        (3, 3)
    );
}

/// In batch scope a worker gets the batch as one JSON array per line; a batch it
/// fails goes again item by item, so only the bad row fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_worker_in_batch_scope() {
    let Some(_) =
        support::tools::required(&["python3"], "apt-get install python3", "the Python worker")
    else {
        return;
    };
    let db = TestDb::new().await;
    jobs(&db, &["ok", "ok", "ok", "ok", "bounce", "ok"]).await;
    let files = QueueFiles::new();
    files.write(
        "worker.py",
        r#"import json, sys
for line in sys.stdin:
    rows = json.loads(line)
    with open("batches", "a") as f:
        f.write(f"{len(rows)}\n")
    if any(row["arg"] == "bounce" for row in rows):
        print(json.dumps({"ok": False, "error": "bounced"}), flush=True)
    else:
        print(json.dumps({"ok": True}), flush=True)
"#,
    );
    let ids = "JSON_TABLE(:batch, '$[*]' COLUMNS (id INT PATH '$.id', error VARCHAR(2000) PATH '$.error')) AS b";
    let file = queue("batch_worker", &["python3", "worker.py"])
        .set("scope", "batch")
        .batch(3)
        .on_success(format!(
            "UPDATE job JOIN {ids} USING (id) SET job.state = 'done'"
        ))
        .on_failure(format!(
            "UPDATE job JOIN {ids} USING (id) SET job.state = 'failed', job.error = b.error"
        ))
        .write(&files);
    run_until_empty(load(&[file]), &db.url).await;
    let states: Vec<(u32, String, Option<String>)> = outcomes(&db)
        .await
        .into_iter()
        .map(|(id, state, error, _)| (id, state, error))
        .collect();
    let done = |id| (id, "done".to_string(), None);
    assert_eq!(
        states,
        [
            done(1),
            done(2),
            done(3),
            done(4),
            (5, "failed".into(), Some("bounced".into())),
            done(6)
        ]
    );
    assert_eq!(lines(&files.path(), "batches"), ["3", "3", "1", "1", "1"]);
}

/// In lease mode a worker's `{"progress": …}` lines reach the row through
/// `:progress` while it works, and its answer records the row once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_mode_hears_a_workers_progress() {
    let db = TestDb::new().await;
    jobs(&db, &["ok"]).await;
    let files = QueueFiles::new();
    files.script(
        "worker.sh",
        r#"while IFS= read -r line; do
  echo '{"progress": "half way"}'
  while [ ! -f go ]; do sleep 0.05; done
  echo '{"ok": true, "output": "rendered"}'
done"#,
    );
    let until = "NOW(3) + INTERVAL 5 SECOND";
    let file = QueueFile::new("leased_worker")
        .set("mode", "lease")
        .select("SELECT id, arg FROM job WHERE state = 'waiting' OR (state = 'working' AND lease_until < NOW(3)) ORDER BY id")
        .poll_interval("100ms")
        .action_set("type", "worker")
        .action_set("command", vec!["./worker.sh"])
        .lease_set("sql", format!("UPDATE job SET state = 'working', lease_until = {until}, lease_id = :lease_id WHERE id = :id"))
        .lease_set("renew_sql", format!("UPDATE job SET lease_until = {until}, progress = :progress WHERE id = :id AND lease_id = :lease_id"))
        .lease_set("renew_every", "200ms")
        .on_success("UPDATE job SET state = 'done', output = :output WHERE id = :id AND lease_id = :lease_id")
        .on_failure("UPDATE job SET state = 'failed', error = :error WHERE id = :id AND lease_id = :lease_id")
        .write(&files);
    let engine = Engine::start(load(&[file]), &db.url);
    let progress = "SELECT COUNT(*) FROM job WHERE progress = 'half way' AND state = 'working'";
    // The progress reaches the row.
    db.until_count(progress, 1, 30).await;
    std::fs::write(files.path().join("go"), "").unwrap();
    // The job is done.
    db.until_count(
        "SELECT COUNT(*) FROM job WHERE state = 'done' AND output = 'rendered'",
        1,
        30,
    )
    .await;
    let counts = engine.stop().await.counts("leased_worker").unwrap();
    assert_eq!(counts.done, 1);
}

fn start(file: &Path, db: &TestDb) -> Daemon {
    crate::support::daemon::copy(file, &db.url)
}

/// Waits until a worker whose script writes its pids to `dir` holds an item.
async fn holds_an_item(dir: &Path) {
    eventually(
        "the worker holds an item",
        Duration::from_secs(30),
        || async { !pids(dir, "item").is_empty() },
    )
    .await;
}

/// SIGTERM while a worker holds an item: the item is finished and recorded, then
/// the worker's stdin is closed and it ends by itself, and tableq exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_the_item_in_hand() {
    let db = TestDb::new().await;
    jobs(&db, &["ok", "ok"]).await;
    let files = QueueFiles::new();
    files.script("worker.sh", WAITING_WORKER);
    let file = queue("stopping_worker", &["./worker.sh"]).write(&files);
    let mut daemon = start(&file, &db);
    let dir = files.path();
    holds_an_item(&dir).await;
    daemon.signal(libc::SIGTERM);
    daemon
        .wait_for_log("stop requested", Duration::from_secs(10))
        .await;
    std::fs::write(dir.join("go"), "").unwrap();
    let status = daemon.wait(Duration::from_secs(30)).await;
    assert_eq!(status.code(), Some(0), "{}", daemon.stderr());
    let all = outcomes(&db).await;
    assert_eq!(all[0], (1, "done".into(), None, Some("finished".into())));
    assert_eq!(all[1].1, "waiting", "no new item after the stop");
    let worker = pids(&dir, "start")[0];
    assert_eq!(pids(&dir, "bye"), [worker], "it ended when its input did");
    assert!(is_gone(worker));
}

/// `kill -9` of tableq while a worker holds an item: the worker dies with it, and
/// the row, never recorded, is done by the next run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_tableq_leaves_no_worker_and_loses_no_row() {
    let db = TestDb::new().await;
    jobs(&db, &["ok", "ok", "ok"]).await;
    let files = QueueFiles::new();
    files.script("worker.sh", WAITING_WORKER);
    let file = queue("killed_worker", &["./worker.sh"]).write(&files);
    let mut daemon = start(&file, &db);
    let dir = files.path();
    holds_an_item(&dir).await;
    let worker = pids(&dir, "start")[0];
    daemon.signal(libc::SIGKILL);
    daemon.wait(Duration::from_secs(10)).await;
    eventually(
        "the worker died with tableq",
        Duration::from_secs(10),
        || async { is_gone(worker) },
    )
    .await;
    std::fs::write(dir.join("go"), "").unwrap();
    let second = run_binary_until_empty(&file, &db.url).await;
    assert_eq!(second.code(), Some(0), "{}", second.stderr);
    let done = db
        .count("SELECT COUNT(*) FROM job WHERE state = 'done'")
        .await;
    assert_eq!(done, 3, "no row lost");
}

/// `check` starts the worker's command and sees it end when its input does; a
/// command that dies at start is an error, with what it said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_starts_the_worker() {
    let db = TestDb::new().await;
    jobs(&db, &["ok"]).await;
    let files = QueueFiles::new();
    files.script("worker.sh", WAITING_WORKER);
    files.script(
        "broken.sh",
        "echo 'cannot load vendor/autoload.php' >&2\nexit 255",
    );
    let good = queue("good", &["./worker.sh"]).write(&files);
    let bad = queue("bad", &["./broken.sh"]).write(&files);
    let done = check(&[], &[&good, &bad], Some(&db.url)).await;
    let report = &done.stdout;
    assert!(
        report.contains("queue good: note: ./worker.sh starts, and ends when its input does"),
        "{report}"
    );
    assert!(
        report.contains("queue bad: error: ./broken.sh cannot run: started with no item, it exited (exit status 255: cannot load vendor/autoload.php)"),
        "{report}"
    );
    assert_eq!(done.code(), Some(1), "{report}");
}

/// A worker that keeps running after its input ended is killed once the grace
/// period is over: stopping the queue leaves nothing behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_ignores_the_end_of_its_input_is_killed_after_the_grace() {
    let db = TestDb::new().await;
    jobs(&db, &["ok"]).await;
    let files = QueueFiles::new();
    files.script(
        "stubborn.sh",
        r#"echo "start $$" >> events
while IFS= read -r line; do echo '{"ok": true}'; done
while :; do sleep 0.1; done"#,
    );
    let file = queue("stubborn_worker", &["./stubborn.sh"]).write(&files);
    let started = std::time::Instant::now();
    let summary = run_until_empty(load(&[file]), &db.url).await;
    assert_eq!(summary.counts("stubborn_worker").unwrap().done, 1);
    assert!(started.elapsed() < Duration::from_secs(30));
    let worker = pids(&files.path(), "start")[0];
    eventually(
        "the stubborn worker is gone",
        Duration::from_secs(10),
        || async { is_gone(worker) },
    )
    .await;
}

/// A `{column}` in a worker's command, or a program that is not there, is refused
/// when the file loads (by `check --offline` too): the process starts before any row.
#[test]
fn a_placeholder_in_a_workers_command_is_refused() {
    let files = QueueFiles::new();
    let file = queue("placeholder_worker", &["/bin/cat", "--to={arg}"])
        .action_set("max_items", 0)
        .write(&files);
    let findings = tableq::load_paths(&[file], &|_| None)
        .expect_err("the file is refused")
        .to_string();
    assert!(
        findings.contains("`action.command`: `{arg}` has no row to come from: a worker starts before any row and is kept for many; it reads each row as a JSON line on stdin"),
        "{findings}"
    );
    assert!(findings.contains("`action.max_items` = 0"), "{findings}");
    let missing = queue("missing_worker", &["/nonexistent/worker"]).write(&files);
    let findings = tableq::load_paths(&[missing], &|_| None)
        .expect_err("a missing program is refused")
        .to_string();
    assert!(
        findings.contains(
            "`action.command`: cannot run /nonexistent/worker: No such file or directory"
        ),
        "{findings}"
    );
}
