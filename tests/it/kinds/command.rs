//! `type = "command"` with real child processes: arguments arrive literally, the row
//! on stdin, exit codes and stderr in `:status`/`:error`, timeouts kill the whole
//! process group, output is capped, and a lost connection cancels the command.

use std::time::Duration;

use crate::support;
use crate::support::daemon::{run_to_end, tableq};
use crate::support::process::{is_gone, read_pid, wait_for_pid};
use crate::support::queue_file::Sql;
use crate::support::{
    assert_has, claimable, eventually, load, run_until_empty, Engine, QueueFile, QueueFiles, TestDb,
};

const JOB_TABLE: &str =
    "CREATE TABLE job (id INT PRIMARY KEY, arg VARCHAR(100) NOT NULL DEFAULT '',
    state VARCHAR(10) NOT NULL DEFAULT 'waiting', exit_code INT NULL, error VARCHAR(2000) NULL,
    output LONGBLOB NULL) DEFAULT CHARSET=utf8mb4";

/// The waiting jobs, in order.
const WAITING: &str = "SELECT id, arg FROM job WHERE state = 'waiting' ORDER BY id";
const MARK_DONE: &str = "UPDATE job SET state = 'done' WHERE id = :id";

/// The queue `jobs`: batches of ten rows, each running `command`, with every outcome
/// recorded on the row.
fn queue(command: &[&str]) -> QueueFile {
    QueueFile::new("jobs")
        .select(WAITING)
        .batch(10)
        .action_command(command)
        .on_success("UPDATE job SET state = 'done', exit_code = :status, output = :output WHERE id = :id")
        .on_failure("UPDATE job SET state = 'failed', exit_code = :status, error = :error, output = :output WHERE id = :id")
}

async fn job(db: &TestDb, id: u32) -> Job {
    db.rows(&format!(
        "SELECT state, exit_code, error, output FROM job WHERE id = {id}"
    ))
    .await
    .pop()
    .unwrap()
}

/// A job's row: its state, exit code, error and output.
type Job = (String, Option<i32>, Option<String>, Option<Vec<u8>>);

/// Job 1 run by the script `name` (`body`), with the action's `timeout` when given,
/// until the queue is empty: its database, files and row afterwards.
async fn one_job_run_by(
    name: &str,
    body: &str,
    timeout: Option<&str>,
) -> (TestDb, QueueFiles, Job) {
    let db = TestDb::new().await;
    db.exec(JOB_TABLE).await;
    db.exec("INSERT INTO job (id) VALUES (1)").await;
    let files = QueueFiles::new();
    files.script(name, body);
    let mut queue = queue(&[&format!("./{name}")]);
    if let Some(timeout) = timeout {
        queue = queue.action_set("timeout", timeout);
    }
    run_until_empty(load(&[queue.write(&files)]), &db.url).await;
    let row = job(&db, 1).await;
    (db, files, row)
}

/// Quotes, semicolons and `$(…)` reach the program as literal argv elements; the row
/// arrives as JSON on stdin, with TABLEQ_QUEUE and TABLEQ_KEY set, in the file's
/// directory; stdout becomes `:output`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_stdin_environment_and_output() {
    let db = TestDb::new().await;
    db.exec(JOB_TABLE).await;
    db.exec(r#"INSERT INTO job (id, arg) VALUES (1, 'a; rm -rf /tmp/nothing'), (2, '$(id) `id` "q" ''s'''), (3, 'two words')"#)
        .await;
    let files = QueueFiles::new();
    files.script(
        "record.sh",
        r#"for a in "$@"; do printf '[%s]\n' "$a"; done > "args_$TABLEQ_KEY"
cat > "stdin_$TABLEQ_KEY"
printf '%s %s %s' "$TABLEQ_QUEUE" "$TABLEQ_KEY" "$(pwd)"
"#,
    );
    let file = queue(&["./record.sh", "--arg={arg}", "{id}"]).write(&files);
    let summary = run_until_empty(load(&[file]), &db.url).await;
    assert_eq!(summary.counts("jobs").unwrap().done, 3);

    let args = |id: u32| std::fs::read_to_string(files.path().join(format!("args_{id}"))).unwrap();
    assert_eq!(args(1), "[--arg=a; rm -rf /tmp/nothing]\n[1]\n");
    assert_eq!(args(2), "[--arg=$(id) `id` \"q\" 's']\n[2]\n");
    assert_eq!(
        args(3),
        "[--arg=two words]\n[3]\n",
        "a placeholder never splits an argument"
    );
    let stdin: serde_json::Value =
        serde_json::from_slice(&std::fs::read(files.path().join("stdin_2")).unwrap()).unwrap();
    assert_eq!(
        stdin,
        serde_json::json!({"id": 2, "arg": "$(id) `id` \"q\" 's'"})
    );
    let dir = std::fs::canonicalize(files.path()).unwrap();
    let (state, code, _, output) = job(&db, 3).await;
    assert_eq!((state.as_str(), code), ("done", Some(0)));
    assert_eq!(
        String::from_utf8(output.unwrap()).unwrap(),
        format!("jobs 3 {}", dir.display())
    );
}

/// A non-zero exit is a failure with its code and the last lines of stderr.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_command_reports_its_exit_code_and_stderr() {
    let script = "echo partial\necho 'warming up' >&2\necho 'mailbox full' >&2\nexit 3";
    let (_db, _files, (state, code, error, output)) = one_job_run_by("fail.sh", script, None).await;
    assert_eq!((state.as_str(), code), ("failed", Some(3)));
    assert_eq!(
        error.as_deref(),
        Some("exit status 3: warming up | mailbox full")
    );
    assert_eq!(output.as_deref(), Some(&b"partial\n"[..]));
}

/// At the timeout the whole process group is killed — the grandchild too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_kills_the_grandchildren_too() {
    let script = "sleep 300 &\necho $! > grandchild.pid\nsleep 300";
    let (_db, files, (state, code, error, _)) = one_job_run_by("hang.sh", script, Some("1s")).await;
    assert_eq!(
        (state.as_str(), code, error.as_deref()),
        ("failed", None, Some("timed out after 1s"))
    );
    let grandchild =
        read_pid(&files.path().join("grandchild.pid")).expect("the script started a grandchild");
    eventually(
        "the grandchild is gone",
        Duration::from_secs(10),
        || async move { is_gone(grandchild) },
    )
    .await;
}

/// A command cut off at its deadline keeps what it printed before in `:output`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_command_keeps_its_partial_output() {
    let script = "echo 'sent 3 of 10'\nexec sleep 300";
    let (_db, _files, (state, _, error, output)) =
        one_job_run_by("slow.sh", script, Some("1s")).await;
    assert_eq!(
        (state.as_str(), error.as_deref()),
        ("failed", Some("timed out after 1s"))
    );
    assert_eq!(output.as_deref(), Some(&b"sent 3 of 10\n"[..]));
}

/// 10 MB of output neither blocks the child nor the worker; `:output` keeps 64 KiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_megabytes_of_output_are_capped() {
    let script = "head -c 10485760 /dev/zero | tr '\\0' 'x'\nhead -c 10485760 /dev/zero >&2";
    let (db, _files, (state, ..)) = one_job_run_by("loud.sh", script, None).await;
    assert_eq!(state, "done");
    db.assert_count("SELECT LENGTH(output) FROM job WHERE id = 1", 64 * 1024)
        .await;
}

/// A program that does not exist: `run` refuses to start, naming the queue and path;
/// one named by the row fails that item with a clear error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_program() {
    let db = TestDb::new().await;
    db.exec(JOB_TABLE).await;
    db.exec("INSERT INTO job (id, arg) VALUES (1, '/nonexistent/mailer')")
        .await;
    let files = QueueFiles::new();
    let file = queue(&["/nonexistent/mailer", "{id}"]).write(&files);
    let mut cmd = tableq(&["run"]);
    cmd.arg(&file).env("TABLEQ_DATABASE_URL", &db.url);
    let done = run_to_end(cmd, Duration::from_secs(30)).await;
    assert_eq!(done.code(), Some(2), "{}", done.stderr);
    assert_has(&done.stderr, "queue jobs: error: `action.command`: cannot run /nonexistent/mailer: No such file or directory");
    let file = queue(&["{arg}"]).write(&files);
    run_until_empty(load(&[file]), &db.url).await;
    let (state, _, error, _) = job(&db, 1).await;
    assert_eq!(state, "failed");
    assert_eq!(
        error.as_deref(),
        Some("cannot run /nonexistent/mailer: No such file or directory (os error 2)")
    );
}

/// The worker's connection killed while a command runs: the command is cancelled
/// (killed), the row was never marked, and the next claim does it once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_the_connection_cancels_the_command() {
    let db = TestDb::new().await;
    db.exec(JOB_TABLE).await;
    db.exec("CREATE TABLE done_log (job_id INT NOT NULL) DEFAULT CHARSET=utf8mb4; INSERT INTO job (id) VALUES (1)")
        .await;
    let files = QueueFiles::new();
    files.script(
        "once.sh",
        "if [ -e started ]; then exit 0; fi\ntouch started\necho $$ > first.pid\nsleep 300",
    );
    let file = QueueFile::new("jobs")
        .select("SELECT id FROM job WHERE state = 'waiting'")
        .error_backoff("100ms")
        .poll_interval("100ms")
        .action_command(&["./once.sh"])
        .on_success([MARK_DONE, "INSERT INTO done_log VALUES (:id)"])
        .write(&files);
    let engine = Engine::start(load(&[file]), &db.url);
    let first = wait_for_pid(&files.path().join("first.pid")).await;
    // Kill the session that holds the row's lock, as a failover or a DBA would.
    let holder_query = format!(
        "SELECT t.trx_mysql_thread_id FROM information_schema.INNODB_TRX t
         JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id WHERE p.DB = '{}'",
        db.name
    );
    let holder: u64 = support::listed_transaction(&db, &holder_query).await;
    db.exec(&format!("KILL CONNECTION {holder}")).await;

    eventually(
        "the first command was killed",
        Duration::from_secs(30),
        || async move { is_gone(first) },
    )
    .await;
    // The job is done by the next claim.
    db.until_count("SELECT COUNT(*) FROM job WHERE state = 'done'", 1, 30)
        .await;
    engine.stop().await;
    db.assert_count_because("SELECT COUNT(*) FROM done_log", 1, "done exactly once")
        .await;
}

/// A burst reaches every worker within one claim, even when a batch takes seconds:
/// the watcher wakes the others as soon as its claim comes back full, not after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_slow_commands_starts_on_every_worker_at_once() {
    let db = TestDb::new().await;
    db.exec(JOB_TABLE).await;
    let files = QueueFiles::new();
    files.script("slow.sh", "date +%s%N > \"started_$TABLEQ_KEY\"\nsleep 2");
    let file = QueueFile::new("jobs")
        .select(WAITING)
        .workers(4)
        .batch(5)
        .poll_interval("100ms")
        .action_command(&["./slow.sh"])
        .on_success(MARK_DONE)
        .write(&files);
    let engine = Engine::start(load(&[file]), &db.url);
    support::burst_after_idle(&db, 20).await;
    engine.stop().await;
    let starts: Vec<u128> = (1..=20)
        .map(|id| {
            std::fs::read_to_string(files.path().join(format!("started_{id}")))
                .unwrap()
                .trim()
                .parse()
                .unwrap()
        })
        .collect();
    let spread =
        Duration::from_nanos((starts.iter().max().unwrap() - starts.iter().min().unwrap()) as u64);
    assert!(
        spread < Duration::from_millis(1500),
        "the last command started {spread:?} after the first"
    );
}

/// In a batch of commands, an item whose `[on_success]` fails stays waiting while
/// the others commit — with one-statement outcome SQL, which undoes itself, and with
/// several statements, which need a savepoint each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_outcome_leaves_only_its_item_waiting() {
    for on_success in [
        Sql::from(MARK_DONE),
        Sql::from(["UPDATE job SET exit_code = 0 WHERE id = :id", MARK_DONE]),
    ] {
        let db = TestDb::new().await;
        db.exec(JOB_TABLE).await;
        db.exec("ALTER TABLE job ADD CONSTRAINT not_two CHECK (id <> 2 OR state <> 'done'); INSERT INTO job (id) VALUES (1), (2), (3)")
            .await;
        let files = QueueFiles::new();
        files.script("ok.sh", "exit 0");
        let file = QueueFile::new("jobs")
            .select("SELECT id FROM job WHERE state = 'waiting' ORDER BY id")
            .batch(3)
            .error_backoff("100ms")
            .action_command(&["./ok.sh"])
            .on_success(on_success.clone())
            .write(&files);
        let engine = Engine::start(load(&[file]), &db.url);
        // Jobs 1 and 3 are done.
        db.until_count("SELECT COUNT(*) FROM job WHERE state = 'done'", 2, 30)
            .await;
        let counts = engine.stop().await.counts("jobs").unwrap();
        assert!(counts.returned >= 1, "{counts:?}");
        let states: Vec<(u32, String, Option<i32>)> = db
            .rows("SELECT id, state, exit_code FROM job ORDER BY id")
            .await;
        assert_eq!(
            states[1],
            (2, "waiting".to_string(), None),
            "job 2 was changed: {on_success}"
        );
        assert_eq!(
            (states[0].1.as_str(), states[2].1.as_str()),
            ("done", "done")
        );
    }
}

/// While one worker is busy with a slow item, another keeps watching the queue: a
/// row that arrives meanwhile is done before the slow one finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_watcher_hands_the_watch_on() {
    let db = TestDb::new().await;
    db.exec(JOB_TABLE).await;
    let files = QueueFiles::new();
    files.script("work.sh", "if [ \"$TABLEQ_KEY\" = 1 ]; then sleep 5; fi");
    let file = QueueFile::new("jobs")
        .select(WAITING)
        .workers(2)
        .batch(5)
        .poll_interval("200ms")
        .action_command(&["./work.sh"])
        .action_set("timeout", "30s")
        .on_success(MARK_DONE)
        .write(&files);
    let engine = Engine::start(load(&[file]), &db.url);
    eventually(
        "one worker watches, one sleeps",
        Duration::from_secs(30),
        || async { support::connections(&db).await == 1 },
    )
    .await;
    db.exec("INSERT INTO job (id) VALUES (1)").await; // slow, and not a full batch
    eventually(
        "job 1 is in flight (locked)",
        Duration::from_secs(30),
        || async {
            db.count("SELECT COUNT(*) FROM job WHERE id = 1").await == 1
                && !claimable(&db, "job", "id = 1").await
        },
    )
    .await;
    db.exec("INSERT INTO job (id) VALUES (2)").await;
    // Job 2 is done while job 1 still runs.
    db.until_count(
        "SELECT COUNT(*) FROM job WHERE id = 2 AND state = 'done'",
        1,
        30,
    )
    .await;
    db.assert_count_because(
        "SELECT COUNT(*) FROM job WHERE id = 1 AND state = 'done'",
        0,
        "job 2 waited for job 1",
    )
    .await;
    engine.stop().await;
}

/// Over a connection with network latency, actions that end while the worker's
/// keep-alive ping is still in flight leave the connection in step: every item is
/// done once, with all of its outcome SQL, and nothing stays locked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actions_ending_during_a_ping_keep_the_connection_in_step() {
    let logs = support::logs::capture();
    let db = TestDb::new().await;
    db.exec(JOB_TABLE).await;
    db.fill("job", "id", 6, |i| i.to_string()).await;
    let files = QueueFiles::new();
    // Just longer than the worker's 2 s ping interval: the actions end while the
    // ping's reply is on its way back through the slow link.
    files.script("slow.sh", "sleep 2.03");
    let file = QueueFile::new("in_step")
        .select(WAITING)
        .batch(3)
        .poll_interval("100ms")
        .action_command(&["./slow.sh"])
        .on_success([
            "UPDATE job SET exit_code = :status WHERE id = :id",
            MARK_DONE,
        ])
        .write(&files);
    let server: std::net::SocketAddr = {
        let opts = mysql_async::Opts::from_url(&db.url).unwrap();
        format!("{}:{}", opts.ip_or_hostname(), opts.tcp_port())
            .parse()
            .unwrap()
    };
    let proxy = support::proxy::delaying_proxy(server, Duration::from_millis(25)).await;
    let slow_url = db.url.replacen(&server.to_string(), &proxy.to_string(), 1);
    let summary = run_until_empty(load(&[file]), &slow_url).await;
    assert_eq!(summary.counts("in_step").unwrap().done, 6);
    db.assert_count(
        "SELECT COUNT(*) FROM job WHERE state = 'done' AND exit_code = 0",
        6,
    )
    .await;
    let troubles: Vec<String> = logs
        .text()
        .lines()
        .filter(|l| l.contains("queue=in_step") && (l.contains("WARN") || l.contains("ERROR")))
        .map(str::to_string)
        .collect();
    assert!(
        troubles.is_empty(),
        "the connection went out of step: {troubles:#?}"
    );
}
