//! Laravel's database queue (`jobs`, `failed_jobs`) run in place by tableq with the
//! bridge `php artisan tableq:work` (bridges/laravel), in a minimal Laravel 8.83 app
//! whose jobs are dispatched with Laravel's own `dispatch()`: the bridge's answers on
//! its own (done, released, failed for good; a timeout and PHP's death as Laravel's
//! daemon handles them; nothing else on stdout), `tableq check` of the file `tableq
//! new laravel` writes, and tableq running it: every job once, kills lose none,
//! tries/backoff/failed(), `tableq retry`, release(30), retryUntil, timeout, side by
//! side with `queue:work`, PHP's fatal errors.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::support::check::check;
use crate::support::daemon::{copy, run_to_end, tableq, Daemon};
use crate::support::laravel::{app, attempted, bridge_pids, job_lines, Laravel};
use crate::support::process::is_gone;
use crate::support::{assert_has, eventually, QueueFiles, TestDb};

/// A test's app instance on a database of its own; `None` where Laravel is missing
/// outside CI.
async fn laravel() -> Option<(TestDb, Laravel)> {
    let app = app()?;
    let db = TestDb::new().await;
    let laravel = app.instance(&db).await;
    Some((db, laravel))
}

/// The answer's `error`, or "".
fn error(answer: &Value) -> &str {
    answer["error"].as_str().unwrap_or_default()
}

/// What `job_runs` says of the job `key`: executions, completions, failed() calls.
async fn runs(db: &TestDb, key: &str) -> (u64, u64, u64) {
    let sql = format!(
        "SELECT executions, completions, failed_calls FROM job_runs WHERE job_key = '{key}'"
    );
    db.rows::<(u64, u64, u64)>(&sql)
        .await
        .pop()
        .unwrap_or((0, 0, 0))
}

/// Runs tableq on `tableq new laravel`'s queue file until `jobs` is empty (2 minutes at most).
async fn drain(db: &TestDb, laravel: &Laravel, files: &QueueFiles) -> Daemon {
    let mut cmd = tableq(&["run"]);
    cmd.arg(laravel.queue().write(files))
        .env("TABLEQ_DATABASE_URL", &db.url);
    let mut daemon = Daemon::spawn(cmd);
    until_empty(db, &mut daemon, 120).await;
    daemon
}

/// Dispatches one `job` (`args`) and runs tableq until its `failed_jobs` row is
/// written (within `seconds`); tableq still running, and its queue file.
async fn until_failed(
    db: &TestDb,
    laravel: &Laravel,
    (job, args): (&str, &[&str]),
    seconds: u64,
) -> (Daemon, QueueFiles, PathBuf) {
    laravel.dispatch(job, 1, args).await;
    let files = QueueFiles::new();
    let file = laravel.queue().write(&files);
    let daemon = copy(&file, &db.url);
    db.until_count("SELECT COUNT(*) FROM failed_jobs", 1, seconds)
        .await;
    (daemon, files, file)
}

/// Waits until `jobs` is empty; panics with tableq's log after `seconds`, or once
/// tableq has exited.
async fn until_empty(db: &TestDb, daemon: &mut Daemon, seconds: u64) {
    let within = Duration::from_secs(seconds);
    let deadline = std::time::Instant::now() + within;
    while db.count("SELECT COUNT(*) FROM jobs").await > 0 {
        let exited = daemon.try_status();
        assert!(
            exited.is_none() && std::time::Instant::now() < deadline,
            "jobs left ({exited:?}, after at most {within:?}); tableq's log:\n{}",
            daemon.stderr()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The bridge on its own: a job that finishes is done, one that releases itself is
/// released with its delay, one that throws is released with its backoff and the
/// exception, then failed for good on its last try (its failed() called, its
/// events and middleware run) — and it writes nothing to the database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bridge_answers_what_laravels_worker_decided() {
    let Some((db, laravel)) = laravel().await else {
        return;
    };
    laravel.dispatch("CountJob", 1, &[]).await;
    laravel.dispatch("ReleasingJob", 1, &[]).await;
    laravel.dispatch("FailingJob", 1, &["3"]).await;
    let rows = job_lines(&db, "TRUE").await;
    let third_try = attempted(&rows[2], 2);
    let lines = [rows.clone(), vec![third_try]].concat();
    let worked = laravel.work(&[], &lines).await;
    assert!(worked.status.success(), "{worked:?}");
    let answers = &worked.answers;
    assert_eq!(answers.len(), 4, "{worked:?}");
    assert_eq!(answers[0], serde_json::json!({"ok": true}));
    assert_eq!(answers[1]["release_after"], 30, "{worked:?}");
    assert_eq!(
        answers[2]["release_after"], 1,
        "the backoff's first step: {worked:?}"
    );
    assert_has(
        error(&answers[2]),
        "RuntimeException: FailingJob-1 fails on attempt 1",
    );
    assert_eq!(answers[3]["ok"], false);
    assert!(answers[3].get("release_after").is_none(), "{worked:?}");
    assert_has(error(&answers[3]), "FailingJob-1 fails on attempt 3");
    assert_eq!(
        answers[3]["kind"], "RuntimeException",
        "failures grouped by class"
    );
    assert_eq!(runs(&db, "FailingJob-1").await, (2, 0, 1));
    let events = "SELECT GROUP_CONCAT(event, ' ', attempts ORDER BY id) FROM job_events \
                  WHERE job_name LIKE '%FailingJob'";
    assert_eq!(
        db.scalar::<String>(events).await,
        "processing 1,middleware 1,processing 3,middleware 3,failed 3"
    );
    let untouched = "SELECT COUNT(*) FROM jobs WHERE attempts = 0 AND reserved_at IS NULL";
    db.assert_count(untouched, 3).await;
    db.assert_count_because(
        "SELECT COUNT(*) FROM failed_jobs",
        0,
        "the failer is tableq's",
    )
    .await;
}

/// The bridge on its own, where the process ends: a job past its `$timeout` kills
/// it with no answer while it has tries left, and is failed for good (answered
/// first) on its last; PHP dying in a job (memory_limit) with display_errors on
/// fails it with PHP's message. Nothing but answers ever reaches stdout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_and_phps_death_end_the_bridge_as_laravels_daemon() {
    let Some((db, laravel)) = laravel().await else {
        return;
    };
    laravel.dispatch("SlowJob", 1, &["30"]).await;
    laravel.dispatch("FatalJob", 1, &["memory", "on"]).await;
    let rows = job_lines(&db, "TRUE").await;
    let first = laravel.work(&[], &rows[..1]).await;
    assert!(first.answers.is_empty(), "{first:?}");
    assert!(!first.status.success(), "{first:?}");
    assert_has(&first.stderr, "ran past its timeout of 1 s");
    let last = laravel.work(&[], &[attempted(&rows[0], 1)]).await;
    assert_eq!(last.answers.len(), 1, "{last:?}");
    assert_has(error(&last.answers[0]), "MaxAttemptsExceededException");
    assert_eq!(runs(&db, "SlowJob-1").await, (2, 0, 1));
    let died = laravel.work(&["-d", "display_errors=on"], &rows[1..]).await;
    assert_eq!(died.answers.len(), 1, "{died:?}");
    assert_has(
        error(&died.answers[0]),
        "PHP Fatal error:  Allowed memory size",
    );
    assert_has(&died.stderr, "Allowed memory size");
    assert_eq!(runs(&db, "FatalJob-1").await, (1, 0, 1));
}

/// A job that writes on stdout every way PHP has (echo, print, STDOUT,
/// php://stdout, a ConsoleOutput): all of it goes to stderr, and stdout carries
/// its answer alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_job_writes_on_stdout_goes_to_stderr() {
    let Some((db, laravel)) = laravel().await else {
        return;
    };
    laravel.dispatch("NoisyJob", 2, &[]).await;
    let worked = laravel.work(&[], &job_lines(&db, "TRUE").await).await;
    assert!(worked.status.success(), "{worked:?}");
    assert_eq!(worked.stdout, "{\"ok\":true}\n{\"ok\":true}\n");
    for said in ["echo", "print", "STDOUT", "php://stdout", "ConsoleOutput"] {
        let noise = format!("noise: {said}\n");
        assert_eq!(worked.stderr.matches(&noise).count(), 2, "{worked:?}");
    }
    db.assert_count("SELECT COUNT(*) FROM job_runs WHERE completions = 1", 2)
        .await;
}

/// `tableq check` proves the file `tableq new laravel` writes on the framework's
/// own migrated tables, with a job waiting (its claim and SKIP LOCKED self-test),
/// and starts the bridge, which ends when its input does; the job is left as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_proves_the_generated_file_on_laravels_tables() {
    let Some((db, laravel)) = laravel().await else {
        return;
    };
    laravel.dispatch("CountJob", 1, &[]).await;
    let files = QueueFiles::new();
    let file = laravel.queue().write(&files);
    let done = check(&[], &[&file], Some(&db.url)).await;
    assert_eq!(done.code(), Some(0), "{done:?}");
    assert_has(&done.stdout, "0 errors, 0 warnings");
    assert_has(
        &done.stdout,
        "tableq:work database --queue=default starts, and ends when its input does",
    );
    assert!(
        !done.stdout.contains("not proven: queue is empty"),
        "{done:?}"
    );
    let untouched = "SELECT COUNT(*) FROM jobs WHERE attempts = 0 AND reserved_at IS NULL";
    db.assert_count(untouched, 1).await;
    db.assert_count("SELECT COUNT(*) FROM job_runs", 0).await;
}

/// 2,000 jobs dispatched with Laravel's dispatch() and run by tableq with the
/// queue file of `tableq new laravel`: each runs and completes exactly once, nothing is left in
/// `jobs` nor in `failed_jobs`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_jobs_each_run_once() {
    let Some((db, laravel)) = laravel().await else {
        return;
    };
    laravel.dispatch("CountJob", 2000, &[]).await;
    let files = QueueFiles::new();
    let mut daemon = drain(&db, &laravel, &files).await;
    daemon.terminate().await;
    let once = "SELECT COUNT(*) FROM job_runs WHERE executions = 1 AND completions = 1";
    db.assert_count(once, 2000).await;
    db.assert_count("SELECT COUNT(*) FROM job_runs", 2000).await;
    db.assert_count("SELECT COUNT(*) FROM failed_jobs", 0).await;
}

/// `kill -9` of bridge processes (until one died holding an item) and then of
/// tableq itself, mid-run: no job is lost — each completes — and only the jobs in
/// flight at a kill run again (executions − completions, and completions beyond one
/// per job, at most the in-flight count: one per bridge killed, 4 in tableq).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_a_bridge_and_of_tableq_loses_no_job() {
    let Some((db, laravel)) = laravel().await else {
        return;
    };
    laravel.dispatch("CountJob", 2000, &[]).await;
    let files = QueueFiles::new();
    let file = laravel.queue().retry_after(6).write(&files);
    let completed = "SELECT COALESCE(SUM(completions), 0) FROM job_runs";
    let first = copy(&file, &db.url);
    db.until_count_at_least(completed, 300, 60).await;
    let killed = kill_a_bridge_holding_an_item(&first).await;
    db.until_count_at_least(completed, 1000, 60).await;
    first.signal(libc::SIGKILL);
    drop(first);
    let mut second = copy(&file, &db.url);
    until_empty(&db, &mut second, 120).await;
    second.terminate().await;
    db.assert_count("SELECT COUNT(*) FROM job_runs WHERE completions >= 1", 2000)
        .await;
    let in_flight = killed + 4;
    let again = db
        .count("SELECT SUM(executions) - SUM(completions) FROM job_runs")
        .await;
    assert!(
        again <= in_flight,
        "{again} ran again, {in_flight} were in flight"
    );
    let twice = db
        .count("SELECT SUM(completions) - COUNT(*) FROM job_runs")
        .await;
    assert!(
        twice <= in_flight,
        "{twice} completed twice, {in_flight} were in flight"
    );
    db.assert_count("SELECT COUNT(*) FROM failed_jobs", 0).await;
}

/// Kills `tableq`'s bridge processes with SIGKILL, one at a time, until tableq says
/// one died while it held an item (at most 10); how many it killed.
async fn kill_a_bridge_holding_an_item(tableq: &Daemon) -> u64 {
    let held = "while handling the item, the worker process exited (killed by signal 9";
    for killed in 1..=10 {
        let bridge = *bridge_pids(tableq.pid())
            .first()
            .expect("a bridge process runs");
        unsafe { libc::kill(bridge, libc::SIGKILL) };
        eventually("the bridge is gone", Duration::from_secs(10), || async {
            is_gone(bridge)
        })
        .await;
        let died = ": worker process exited (killed by signal 9";
        eventually("tableq saw it die", Duration::from_secs(10), || async {
            tableq.stderr().matches(died).count() as u64 >= killed
        })
        .await;
        if tableq.stderr().contains(held) {
            return killed;
        }
    }
    panic!(
        "no bridge killed held an item; tableq's log:\n{}",
        tableq.stderr()
    );
}

/// A job that throws (`$tries = 3`, `$backoff = [1, 2]`): run 3 times, 1 s then 2 s
/// apart, then one `failed_jobs` row with its exception and its failed() called
/// once; `tableq retry` puts it back, and it runs (and now succeeds).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throwing_job_is_retried_per_its_backoff_then_failed_once_and_retried_by_tableq() {
    let Some((db, laravel)) = laravel().await else {
        return;
    };
    let (mut daemon, _files, file) = until_failed(&db, &laravel, ("FailingJob", &["3"]), 60).await;
    assert_eq!(runs(&db, "FailingJob-1").await, (3, 0, 1));
    let exception = "SELECT exception FROM failed_jobs";
    assert_has(
        &db.scalar::<String>(exception).await,
        "RuntimeException: FailingJob-1 fails on attempt 3",
    );
    // Whole seconds between its runs: it was available again `backoff` seconds
    // (of UNIX_TIMESTAMP()) after the run before.
    let gaps: Vec<(i64,)> = db
        .rows(
            "SELECT gap FROM (SELECT id, CAST(FLOOR(UNIX_TIMESTAMP(at)) AS SIGNED) \
               - CAST(FLOOR(UNIX_TIMESTAMP(LAG(at) OVER (ORDER BY id))) AS SIGNED) AS gap \
               FROM job_events WHERE event = 'processing') g WHERE gap IS NOT NULL ORDER BY id",
        )
        .await;
    assert!(
        gaps.len() == 2 && gaps[0].0 >= 1 && gaps[1].0 >= 2,
        "backoff [1, 2]: {gaps:?}"
    );
    db.assert_count("SELECT COUNT(*) FROM jobs", 0).await;
    let mut retry = tableq(&["retry", "--queue", "default", "--all"]);
    retry.arg(&file).env("TABLEQ_DATABASE_URL", &db.url);
    let retried = run_to_end(retry, Duration::from_secs(60)).await;
    assert_eq!(retried.code(), Some(0), "{retried:?}");
    eventually(
        "the retried job completes",
        Duration::from_secs(30),
        || async { runs(&db, "FailingJob-1").await == (4, 1, 1) },
    )
    .await;
    db.assert_count("SELECT COUNT(*) FROM failed_jobs", 0).await;
    daemon.terminate().await;
}

/// `$this->release(30)`: the row is put back, unreserved, available 30 s on, its
/// attempt counted; tableq does not take it early (a job dispatched after it runs,
/// it does not).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_released_for_30_seconds_is_not_claimed_before() {
    let Some((db, laravel)) = laravel().await else {
        return;
    };
    laravel.dispatch("ReleasingJob", 1, &[]).await;
    let files = QueueFiles::new();
    let mut daemon = copy(&laravel.queue().write(&files), &db.url);
    let released = "SELECT COUNT(*) FROM jobs WHERE reserved_at IS NULL AND attempts = 1 \
                    AND available_at BETWEEN UNIX_TIMESTAMP() + 25 AND UNIX_TIMESTAMP() + 30";
    db.until_count(released, 1, 30).await;
    laravel.dispatch("CountJob", 3, &[]).await;
    db.until_count("SELECT COUNT(*) FROM job_runs WHERE completions = 1", 3, 30)
        .await;
    assert_eq!(runs(&db, "ReleasingJob-1").await, (1, 0, 0));
    db.assert_count(released, 1).await;
    daemon.terminate().await;
}

/// `retryUntil()` (3 s from its dispatch, `$backoff = 1`) outlasts the worker's
/// `--tries=1`: the job is tried again until then, and only failed after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_until_keeps_trying_until_its_time() {
    let Some((db, laravel)) = laravel().await else {
        return;
    };
    let (mut daemon, _files, _) = until_failed(&db, &laravel, ("RetryUntilJob", &["3"]), 60).await;
    let (executions, completions, failed) = runs(&db, "RetryUntilJob-1").await;
    assert!(executions >= 2, "tried {executions} times");
    assert_eq!((completions, failed), (0, 1));
    let after = "SELECT COUNT(*) FROM job_events e JOIN failed_jobs f \
                 WHERE e.event = 'failed' AND UNIX_TIMESTAMP(e.at) >= JSON_VALUE(f.payload, '$.retryUntil')";
    db.assert_count_because(after, 1, "failed after retryUntil")
        .await;
    daemon.terminate().await;
}

/// `$timeout = 1` with `$tries = 2` on a job that sleeps 30 s: the first run is
/// cut off and the row goes back at once, the second is failed for good
/// (MaxAttemptsExceededException, failed() once), long before 30 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_timeout_cuts_it_off_and_fails_it_on_its_last_try() {
    let Some((db, laravel)) = laravel().await else {
        return;
    };
    let (mut daemon, _files, _) = until_failed(&db, &laravel, ("SlowJob", &["30"]), 20).await;
    assert_eq!(runs(&db, "SlowJob-1").await, (2, 0, 1));
    let exception = db
        .scalar::<String>("SELECT exception FROM failed_jobs")
        .await;
    assert_has(&exception, "MaxAttemptsExceededException");
    db.assert_count("SELECT COUNT(*) FROM jobs", 0).await;
    daemon.terminate().await;
}

/// Two `php artisan queue:work` and tableq on the same table: every job runs
/// exactly once, and both kinds of worker took some.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn side_by_side_with_two_queue_workers_every_job_runs_once() {
    let Some((db, laravel)) = laravel().await else {
        return;
    };
    laravel.dispatch("CountJob", 1500, &[]).await;
    let workers = [laravel.queue_work(), laravel.queue_work()];
    let files = QueueFiles::new();
    let mut daemon = drain(&db, &laravel, &files).await;
    daemon.terminate().await;
    let mut theirs = 0;
    for mut worker in workers {
        worker.start_kill().ok();
        let out = worker
            .wait_with_output()
            .await
            .expect("queue:work's output");
        theirs += String::from_utf8_lossy(&out.stdout)
            .matches("Processed:")
            .count();
    }
    let once = "SELECT COUNT(*) FROM job_runs WHERE executions = 1 AND completions = 1";
    db.assert_count(once, 1500).await;
    db.assert_count("SELECT COUNT(*) FROM job_runs", 1500).await;
    assert!(
        theirs > 0 && theirs < 1500,
        "queue:work ran {theirs} of 1500"
    );
}

/// PHP's fatal errors in a job, under display_errors on and off: a call to an
/// undefined function (an Error Laravel's worker catches) and memory_limit (PHP
/// dies; with a try left, its process just ends and tableq puts the job back, to
/// die again): each item fails with PHP's message in `failed_jobs`, its failed()
/// once, never done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phps_fatal_errors_fail_the_item_with_phps_message() {
    let Some((db, laravel)) = laravel().await else {
        return;
    };
    for (how, display, tries) in [
        ("undefined", "on", "1"),
        ("undefined", "off", "1"),
        ("memory", "on", "1"),
        ("memory", "off", "1"),
        ("memory", "off", "2"),
    ] {
        let key = format!("--key={how}-{display}-{tries}");
        laravel
            .dispatch("FatalJob", 1, &[how, display, tries, &key])
            .await;
    }
    let files = QueueFiles::new();
    let mut daemon = drain(&db, &laravel, &files).await;
    daemon.terminate().await;
    let failed: Vec<(String,)> = db
        .rows("SELECT exception FROM failed_jobs ORDER BY id")
        .await;
    let all: String = failed.iter().map(|(e,)| format!("{e}\n")).collect();
    assert_eq!(failed.len(), 5, "{all}");
    let undefined = all.matches("Call to undefined function").count();
    let memory = all.matches("PHP Fatal error:  Allowed memory size").count();
    assert_eq!((undefined, memory), (2, 3), "{all}");
    let once = "SELECT COUNT(*) FROM job_runs WHERE completions = 0 AND failed_calls = 1";
    db.assert_count(once, 5).await;
    assert_eq!(
        runs(&db, "memory-off-2-1").await,
        (2, 0, 1),
        "run twice, died twice"
    );
    assert_has(&daemon.stderr(), "PHP Fatal error:  Allowed memory size");
}
