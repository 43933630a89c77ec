//! `schedule = "…"`: a queue that runs on a schedule, once per due time across
//! every copy, over its row of `tableq_schedules`. Three copies run a schedule due
//! every second while one is killed -9: each second runs exactly once, no gap
//! longer than two seconds. An action outside the database (a command) runs under
//! the schedule's lease; a failing one is retried within its period, then counted
//! missed. After the daemon was down, `catch_up` decides what runs; `run
//! --stop-when-empty` does not wait for a future due time; `check` passes before the
//! first run; the loader refuses what does not go with a schedule.

use std::time::{Duration, Instant};

use crate::support::check::check;
use crate::support::daemon::{copy, run_binary_until_empty, Daemon};
use crate::support::{assert_has, QueueFile, QueueFiles, TestDb};

/// What the schedules' actions log: the due time each ran for, and when.
const RUNS: &str = "CREATE TABLE runs (
    id           INT AUTO_INCREMENT PRIMARY KEY,
    queue        VARCHAR(32) NOT NULL,
    scheduled_at DATETIME(6) NOT NULL,
    run_at       DATETIME(6) NOT NULL,
    copy         VARCHAR(8) NOT NULL DEFAULT ''
) ENGINE=InnoDB";

/// A schedule queue whose SQL action logs its run, naming `copy`.
fn logged(name: &str, schedule: &str, copy: &str) -> QueueFile {
    QueueFile::new(name)
        .set("schedule", schedule)
        .action_sql(format!(
            "INSERT INTO runs (queue, scheduled_at, run_at, copy) \
             VALUES (:queue, :scheduled_at, :run_at, '{copy}')"
        ))
}

/// A copy of the daemon running `file`, once its queue has started.
async fn started(file: &std::path::Path, url: &str) -> Daemon {
    let daemon = copy(file, url);
    daemon
        .wait_for_log("queue started", Duration::from_secs(30))
        .await;
    daemon
}

/// The copy that logged the latest run.
async fn latest_copy(db: &TestDb) -> String {
    db.scalar("SELECT copy FROM runs ORDER BY scheduled_at DESC, id DESC LIMIT 1")
        .await
}

/// The database's clock now, returned once `wait` has passed on it.
async fn database_time_after(db: &TestDb, wait: Duration) -> String {
    let now: String = db.scalar("SELECT CAST(UTC_TIMESTAMP(6) AS CHAR)").await;
    let passed = format!(
        "SELECT UTC_TIMESTAMP(6) >= '{now}' + INTERVAL {} MICROSECOND",
        wait.as_micros()
    );
    let what = format!("{wait:?} on the database's clock");
    crate::support::eventually(&what, wait + Duration::from_secs(10), || async {
        db.scalar::<i64>(&passed).await == 1
    })
    .await;
    now
}

/// How late each run started after its due time, in ms, sorted.
async fn lateness_ms(db: &TestDb, queue: &str) -> Vec<f64> {
    let mut late: Vec<f64> = db
        .rows(&format!(
            "SELECT TIMESTAMPDIFF(MICROSECOND, scheduled_at, run_at) / 1000 FROM runs \
             WHERE queue = '{queue}'"
        ))
        .await
        .into_iter()
        .map(|(ms,): (f64,)| ms)
        .collect();
    late.sort_by(f64::total_cmp);
    late
}

/// Three copies run `every 1s` for 30 s; halfway the copy that ran the latest run
/// is killed -9. Every due time in the window ran exactly once: none twice, none
/// skipped for longer than two seconds, each a whole second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_second_runs_once_across_three_copies_with_one_killed() {
    let db = TestDb::new().await;
    db.exec(RUNS).await;
    let files: Vec<QueueFiles> = (0..3).map(|_| QueueFiles::new()).collect();
    let mut daemons: Vec<(String, Daemon)> = files
        .iter()
        .enumerate()
        .map(|(i, files)| {
            let name = format!("c{i}");
            let file = logged("tick", "every 1s", &name).write(files);
            (name, copy(&file, &db.url))
        })
        .collect();
    let started = Instant::now();
    db.until_count_at_least("SELECT COUNT(*) FROM runs", 15, 40)
        .await;
    let victim = latest_copy(&db).await;
    let index = daemons
        .iter()
        .position(|(name, _)| *name == victim)
        .expect("a copy ran");
    let (_, mut killed) = daemons.remove(index);
    killed.signal(libc::SIGKILL);
    killed.wait(Duration::from_secs(10)).await;
    let ran = "SELECT COUNT(*) FROM runs";
    db.until_count_at_least(ran, 30, 40).await;
    for (_, daemon) in &mut daemons {
        daemon.terminate().await;
    }
    let doubles = "SELECT COUNT(*) FROM (SELECT scheduled_at FROM runs GROUP BY scheduled_at \
                   HAVING COUNT(*) > 1) AS twice";
    db.assert_count_because(doubles, 0, "a due time ran twice")
        .await;
    let off = "SELECT COUNT(*) FROM runs WHERE MICROSECOND(scheduled_at) <> 0";
    db.assert_count_because(off, 0, "a due time off the second")
        .await;
    let gaps: Vec<(String, String, String, String)> = db
        .rows(
            "SELECT CAST(a.scheduled_at AS CHAR), a.copy, CAST(b.scheduled_at AS CHAR), b.copy \
             FROM runs a JOIN runs b ON b.scheduled_at = \
             (SELECT MIN(scheduled_at) FROM runs c WHERE c.scheduled_at > a.scheduled_at) \
             WHERE TIMESTAMPDIFF(MICROSECOND, a.scheduled_at, b.scheduled_at) > 2000000",
        )
        .await;
    if !gaps.is_empty() {
        let all: Vec<(String, String, String)> = db
            .rows("SELECT CAST(scheduled_at AS CHAR), CAST(run_at AS CHAR), copy FROM runs ORDER BY id")
            .await;
        let logs: Vec<String> = daemons
            .iter()
            .map(|(n, d)| format!("{n}:\n{}", d.stderr()))
            .collect();
        panic!(
            "gaps longer than 2 s (from, copy, to, copy): {gaps:?}; {victim} was killed; runs {all:?}; its log:\n{}\nthe others:\n{}",
            killed.stderr(), logs.join("\n")
        );
    }
    let copies = "SELECT COUNT(DISTINCT copy) FROM runs";
    assert!(db.count(copies).await >= 2, "more than one copy ran");
    let late = lateness_ms(&db, "tick").await;
    let (runs, seconds) = (late.len(), started.elapsed().as_secs_f64());
    eprintln!(
        "schedule every 1s, three copies, one killed -9 (it ran the latest run): {runs} runs \
         in {seconds:.1} s; 0 doubles; lateness after the due time p50 {:.1} ms, p99 {:.1} ms, \
         max {:.1} ms",
        late[runs / 2],
        late[runs * 99 / 100],
        late[runs - 1],
    );
    let missed: u64 = db
        .scalar("SELECT missed FROM tableq_schedules WHERE name = 'tick'")
        .await;
    assert!(
        missed <= 2,
        "{missed} due times missed with two copies left"
    );
}

/// An action outside the database runs under the schedule's lease (a 6-field cron,
/// every second), once per due time across two copies; the outcome SQL sees
/// `:scheduled_at`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_runs_once_per_due_time_under_the_lease_across_two_copies() {
    let db = TestDb::new().await;
    db.exec(RUNS).await;
    let (one, two) = (QueueFiles::new(), QueueFiles::new());
    let queue = |files: &QueueFiles, copy: &str| {
        QueueFile::new("beat")
            .set("schedule", "* * * * * *")
            .action_command(&["sh", "-c", "test -n \"$0\"", "{scheduled_at}"])
            .on_success([
                // A statement of the file's that changes no row: the lease is judged
                // by tableq's own, which runs first.
                "UPDATE runs SET copy = copy WHERE id = -1",
                &format!(
                    "INSERT INTO runs (queue, scheduled_at, run_at, copy) \
                     VALUES (:queue, :scheduled_at, :run_at, '{copy}')"
                ),
            ])
            .write(files)
    };
    let mut daemons = [
        copy(&queue(&one, "one"), &db.url),
        copy(&queue(&two, "two"), &db.url),
    ];
    db.until_count_at_least("SELECT COUNT(*) FROM runs", 6, 40)
        .await;
    for daemon in &mut daemons {
        daemon.terminate().await;
    }
    let doubles = "SELECT COUNT(*) FROM (SELECT scheduled_at FROM runs GROUP BY scheduled_at \
                   HAVING COUNT(*) > 1) AS twice";
    db.assert_count_because(doubles, 0, "a due time ran twice")
        .await;
    let state: (u64, String, Option<String>) = db
        .rows("SELECT runs, last_outcome, lease_id FROM tableq_schedules WHERE name = 'beat'")
        .await
        .remove(0);
    assert!(state.0 >= 6, "{state:?}");
    assert_eq!((state.1.as_str(), state.2), ("done", None), "released");
    let late = lateness_ms(&db, "beat").await;
    eprintln!(
        "schedule * * * * * * (a command, lease mode), two copies: {} runs; lateness p50 \
         {:.1} ms, max {:.1} ms",
        late.len(),
        late[late.len() / 2],
        late[late.len() - 1]
    );
}

/// A run that fails is retried with the queue's backoff while a retry fits before
/// the next due time; then the due time is counted missed, and the error kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_run_is_retried_within_its_period_then_counted_missed() {
    let db = TestDb::new().await;
    db.exec(RUNS).await;
    let files = QueueFiles::new();
    let file = QueueFile::new("flaky")
        .set("schedule", "every 3s")
        .error_backoff("500ms")
        .action_command(&["sh", "-c", "echo \"disk full at $0\" >&2; exit 3", "{scheduled_at}"])
        .on_failure(
            "INSERT INTO runs (queue, scheduled_at, run_at) VALUES ('tries', :scheduled_at, :run_at)",
        )
        .write(&files);
    let mut daemon = started(&file, &db.url).await;
    let missed = "SELECT COUNT(*) FROM tableq_schedules WHERE name = 'flaky' AND missed >= 2";
    db.until_count(missed, 1, 30).await;
    daemon.terminate().await;
    // Each due time was tried more than once: 0.5 s, then 1 s, then 2 s (past the
    // next due time: missed).
    let per_due: Vec<(u64,)> = db
        .rows("SELECT COUNT(*) FROM runs GROUP BY scheduled_at ORDER BY scheduled_at")
        .await;
    assert!(
        per_due.iter().any(|(tries,)| *tries >= 2),
        "no due time was retried: {per_due:?}"
    );
    let (outcome, error): (String, String) = db
        .rows("SELECT last_outcome, last_error FROM tableq_schedules WHERE name = 'flaky'")
        .await
        .remove(0);
    assert_eq!(outcome, "failed");
    assert_has(&error, "disk full at");
}

/// After the daemon was down, three schedules due every 10 s, each 7 due times
/// behind: `catch_up = "none"` runs none of them, `"one"` the latest, once, and
/// `"all"` the latest `catch_up_max` (3), oldest first; the rest count as missed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catch_up_decides_what_runs_of_the_due_times_missed_while_down() {
    let db = TestDb::new().await;
    db.exec(RUNS).await;
    let files = QueueFiles::new();
    let paths = catch_up_files(&files);
    // A first start makes the table and the rows, due at the next 10 s.
    run_binary_until_empty(&files.path(), &db.url).await;
    db.assert_count("SELECT COUNT(*) FROM tableq_schedules", 3)
        .await;
    // As if the daemon had been down for 70 s: each row due 7 due times ago.
    db.exec(
        "UPDATE tableq_schedules SET due_at = FROM_UNIXTIME(FLOOR(UNIX_TIMESTAMP(UTC_TIMESTAMP()) \
         / 10) * 10 - 60) + INTERVAL TIMESTAMPDIFF(SECOND, NOW(), UTC_TIMESTAMP()) SECOND",
    )
    .await;
    let restarted: String = db.scalar("SELECT CAST(UTC_TIMESTAMP(6) AS CHAR)").await;
    let mut daemons: Vec<Daemon> = paths.iter().map(|path| copy(path, &db.url)).collect();
    let before = |queue: &str, what: &str| {
        format!(
            "SELECT {what} FROM runs WHERE queue = 'catch_{queue}' AND scheduled_at < '{restarted}'"
        )
    };
    db.until_count(&before("all", "COUNT(*)"), 3, 30).await;
    db.until_count(&before("one", "COUNT(*)"), 1, 30).await;
    for daemon in &mut daemons {
        daemon.terminate().await;
    }
    let counts = [("none", 0), ("one", 1), ("all", 3)];
    for (queue, runs) in counts {
        let why = format!("catch_up = {queue} ran other than {runs} missed due times");
        db.assert_count_because(&before(queue, "COUNT(*)"), runs, &why)
            .await;
    }
    // "one" ran the latest missed due time, "all" the three latest.
    let time = |queue, of| before(queue, &format!("CAST({of}(scheduled_at) AS CHAR)"));
    let latest_one: String = db.scalar(&time("one", "MAX")).await;
    let first_all: String = db.scalar(&time("all", "MIN")).await;
    let latest_all: String = db.scalar(&time("all", "MAX")).await;
    assert_eq!(latest_one, latest_all);
    let spread = format!("SELECT TIMESTAMPDIFF(SECOND, '{first_all}', '{latest_all}')");
    let spread: i64 = db.scalar(&spread).await;
    assert_eq!(spread, 20, "the three latest: {first_all} … {latest_all}");
    missed_as_caught_up(&db).await;
}

/// Three schedules due every 10 s: `catch_up = "none"`, `"one"`, and `"all"` with
/// `catch_up_max = 3`.
fn catch_up_files(files: &QueueFiles) -> Vec<std::path::PathBuf> {
    [("none", None), ("one", None), ("all", Some(3))]
        .into_iter()
        .map(|(catch_up, max)| {
            let name = format!("catch_{catch_up}");
            let file = logged(&name, "every 10s", "").set("catch_up", catch_up);
            let file = match max {
                Some(max) => file.set("catch_up_max", max),
                None => file,
            };
            file.write(files)
        })
        .collect()
}

/// The due times that did not run counted as missed: all 7 for "none", all but the
/// one that ran for "one", all but 3 for "all".
async fn missed_as_caught_up(db: &TestDb) {
    let missed: Vec<(String, u64)> = db
        .rows("SELECT name, missed FROM tableq_schedules ORDER BY name")
        .await;
    let missed_of = |name: &str| missed.iter().find(|(n, _)| n == name).map(|(_, m)| *m);
    let (none, one, all) = (
        missed_of("catch_none"),
        missed_of("catch_one"),
        missed_of("catch_all"),
    );
    // 7 behind (60 s ago … now), give or take the one falling due at the restart.
    assert!(matches!(none, Some(7 | 8)), "{missed:?}");
    assert_eq!(one.map(|m| m + 1), none, "{missed:?}");
    assert_eq!(all.map(|m| m + 3), none, "{missed:?}");
}

/// `run --stop-when-empty` does not wait for a schedule's next due time, and
/// `check` passes on a schedule queue before its first run (the table is made as
/// `run` makes it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_passes_before_the_first_run_and_stop_when_empty_does_not_wait() {
    let db = TestDb::new().await;
    db.exec(RUNS).await;
    let files = QueueFiles::new();
    let file = logged("nightly", "0 3 * * *", "")
        .set("timezone", "Europe/Berlin")
        .write(&files);
    let checked = check(&[], &[&file], Some(&db.url)).await;
    assert_eq!(
        checked.code(),
        Some(0),
        "{}{}",
        checked.stdout,
        checked.stderr
    );
    let started = Instant::now();
    run_binary_until_empty(&file, &db.url).await;
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "--stop-when-empty waited for 03:00 Berlin"
    );
    let due: String = db
        .scalar("SELECT CAST(due_at AS CHAR) FROM tableq_schedules WHERE name = 'nightly'")
        .await;
    // 03:00 in Berlin is 01:00 or 02:00 UTC.
    assert!(
        due.ends_with(" 01:00:00.000000") || due.ends_with(" 02:00:00.000000"),
        "{due}"
    );
}

/// What does not go with a schedule is refused, naming the key and why; the keys
/// that only go with one are refused without it.
#[tokio::test]
async fn the_loader_refuses_what_does_not_go_with_a_schedule() {
    let files = QueueFiles::new();
    let cases = [
        (
            logged("both", "every 1s", "").select("SELECT id FROM runs"),
            "`select` does not go with `schedule`",
        ),
        (
            logged("bad", "61 * * * *", ""),
            "`schedule`: cron expression \"61 * * * *\"",
        ),
        (
            logged("never", "0 0 30 2 *", ""),
            "cron expression \"0 0 30 2 *\": no time matches it",
        ),
        (
            logged("zone", "0 3 * * *", "").set("timezone", "Mars/Olympus"),
            "unknown time zone \"Mars/Olympus\"",
        ),
        (
            logged("catch", "every 1s", "").set("catch_up", "some"),
            "`catch_up` = \"some\": use \"none\", \"one\" (the default) or \"all\"",
        ),
        (
            logged("overlap", "every 1s", "").set("overlap", true),
            "`overlap = true` does not go with an SQL action",
        ),
        (
            QueueFile::new("plain")
                .select("SELECT id FROM runs")
                .set("catch_up", "all")
                .action_sql("DO :id"),
            "`catch_up` goes with `schedule = \"…\"` only",
        ),
    ];
    for (file, expected) in cases {
        let path = file.write(&files);
        let checked = check(&["--offline"], &[&path], None).await;
        assert_ne!(checked.code(), Some(0), "{}", checked.stdout);
        assert_has(&format!("{}{}", checked.stdout, checked.stderr), expected);
    }
}

/// `tableq pause` / `resume` on the command line for the queue of `file`.
async fn operate(file: &std::path::Path, url: &str, what: &str) {
    let mut cmd = crate::support::daemon::tableq(&[what, "--queue", "paused"]);
    cmd.arg(file).env("TABLEQ_DATABASE_URL", url);
    let done = crate::support::daemon::run_to_end(cmd, Duration::from_secs(60)).await;
    assert_eq!(done.code(), Some(0), "{what}: {}", done.stderr);
}

/// A paused schedule runs nothing; at the resume, the due times that passed while
/// it was paused are counted missed, none of them run, and the schedule goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_due_times_of_a_pause_are_missed_not_run() {
    let db = TestDb::new().await;
    db.exec(RUNS).await;
    let files = QueueFiles::new();
    let file = logged("paused", "every 1s", "").write(&files);
    let mut daemon = copy(&file, &db.url);
    db.until_count_at_least("SELECT COUNT(*) FROM runs", 2, 30)
        .await;
    operate(&file, &db.url, "pause").await;
    daemon
        .wait_for_log("the queue is paused", Duration::from_secs(10))
        .await;
    // Three due times pass while it is paused.
    let paused_at = database_time_after(&db, Duration::from_millis(3500)).await;
    let resumed_at: String = db.scalar("SELECT CAST(UTC_TIMESTAMP(6) AS CHAR)").await;
    operate(&file, &db.url, "resume").await;
    let after = format!("SELECT COUNT(*) FROM runs WHERE run_at > '{resumed_at}'");
    db.until_count_at_least(&after, 2, 30).await;
    daemon.terminate().await;
    let late = format!(
        "SELECT COUNT(*) FROM runs WHERE scheduled_at > '{paused_at}' \
         AND scheduled_at < '{resumed_at}' - INTERVAL 1 SECOND"
    );
    db.assert_count_because(&late, 0, "a due time of the pause ran at the resume")
        .await;
    let missed: u64 = db
        .scalar("SELECT missed FROM tableq_schedules WHERE name = 'paused'")
        .await;
    assert!(missed >= 3, "{missed} due times missed in 3.5 s paused");
}

/// `overlap = true`: runs of 2.5 s every second start on time, one per due time,
/// several at once (three workers); without it the same runs skip the due times
/// they cover.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_overlap_a_run_starts_while_the_previous_one_runs() {
    let db = TestDb::new().await;
    db.exec(RUNS).await;
    let files = QueueFiles::new();
    let slow = |name: &str, overlap: bool| {
        QueueFile::new(name)
            .set("schedule", "every 1s")
            .set("overlap", overlap)
            .workers(3)
            .action_command(&["sh", "-c", "sleep 2.5"])
            .action_set("timeout", "10s")
            .on_success(
                "INSERT INTO runs (queue, scheduled_at, run_at) VALUES (:queue, :scheduled_at, :run_at)",
            )
            .write(&files)
    };
    let mut daemons = [
        copy(&slow("overlapping", true), &db.url),
        copy(&slow("one_at_a_time", false), &db.url),
    ];
    let ran = "SELECT COUNT(*) FROM runs WHERE queue = 'overlapping'";
    db.until_count_at_least(ran, 6, 40).await;
    for daemon in &mut daemons {
        daemon.terminate().await;
    }
    let doubles = "SELECT COUNT(*) FROM (SELECT queue, scheduled_at FROM runs \
                   GROUP BY queue, scheduled_at HAVING COUNT(*) > 1) AS twice";
    db.assert_count_because(doubles, 0, "a due time ran twice")
        .await;
    // Overlapping: consecutive due times a second apart, each started on time.
    let apart = |queue: &str| {
        format!(
            "SELECT COUNT(*) FROM runs a WHERE a.queue = '{queue}' AND EXISTS (SELECT 1 FROM \
             runs b WHERE b.queue = a.queue AND b.scheduled_at = a.scheduled_at + INTERVAL 1 SECOND)"
        )
    };
    assert!(
        db.count(&apart("overlapping")).await >= 5,
        "due times a second apart ran"
    );
    // On time: the figure is printed; the bound, a second, leaves a loaded machine
    // room while a run that waited for the one before it (2.5 s) would still break it.
    let latest: i64 = db
        .scalar(
            "SELECT MAX(TIMESTAMPDIFF(MICROSECOND, scheduled_at, run_at)) FROM runs \
             WHERE queue = 'overlapping'",
        )
        .await;
    eprintln!("overlapping runs: the latest started {latest} µs after its due time");
    assert!(
        latest < 1_000_000,
        "an overlapping run started {latest} µs late"
    );
    // One at a time: each run covers the next two due times, which are missed.
    db.assert_count_because(&apart("one_at_a_time"), 0, "a run started under another")
        .await;
    let missed: u64 = db
        .scalar("SELECT missed FROM tableq_schedules WHERE name = 'one_at_a_time'")
        .await;
    assert!(missed >= 2, "{missed} missed one at a time");
}

/// `overlap = true` with a handler that cannot be reached (its connection refused):
/// every due time is counted missed, with why. None is lost between the claim that
/// moved the row on and the circuit that holds an unreached handler's items back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_overlap_a_run_the_handler_never_got_is_counted_missed() {
    let db = TestDb::new().await;
    let files = QueueFiles::new();
    let closed = crate::support::web::closed_port();
    let file = QueueFile::new("unreached")
        .set("schedule", "every 1s")
        .set("overlap", true)
        .action_http(&format!("http://{closed}/tick"))
        .action_set("allow_private_networks", true)
        .write(&files);
    let mut daemon = started(&file, &db.url).await;
    let row = "SELECT COUNT(*) FROM tableq_schedules WHERE name = 'unreached'";
    db.until_count(row, 1, 30).await;
    let first: String = db
        .scalar("SELECT CAST(due_at AS CHAR) FROM tableq_schedules WHERE name = 'unreached'")
        .await;
    let later = format!(
        "SELECT COUNT(*) FROM tableq_schedules WHERE name = 'unreached' \
         AND due_at >= '{first}' + INTERVAL 6 SECOND"
    );
    db.until_count(&later, 1, 30).await;
    daemon.terminate().await;
    let (passed, missed, runs, error): (i64, i64, i64, Option<String>) = db
        .rows(&format!(
            "SELECT TIMESTAMPDIFF(SECOND, '{first}', due_at), missed, runs, last_error \
             FROM tableq_schedules WHERE name = 'unreached'"
        ))
        .await
        .remove(0);
    assert_eq!(
        runs, 0,
        "a run whose handler refused the connection was counted done"
    );
    // One less when the stop came between a claim and its run: a run cut off at
    // shutdown is not recorded (at most once).
    assert!(
        missed >= passed - 1,
        "{missed} due times counted missed of the {passed} passed since {first}"
    );
    let error = error.unwrap_or_default();
    assert_has(&error, &closed.to_string());
    assert_has(
        &daemon.stderr(),
        "the run's due time is counted missed, and each due time tries the handler again",
    );
}

/// Without `overlap`, a handler that cannot be reached (its program gone) holds its
/// due time: tried again every second, not counted a failure; when the program is
/// back that due time runs, late, and the due times passed meanwhile are missed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_waits_for_a_handler_that_cannot_be_reached_then_runs_late() {
    let db = TestDb::new().await;
    db.exec(RUNS).await;
    let files = QueueFiles::new();
    let program = files.script("tick.sh", "exit 0");
    let file = QueueFile::new("waits")
        .set("schedule", "every 1s")
        .action_command(&[program.to_str().unwrap()])
        .on_success(
            "INSERT INTO runs (queue, scheduled_at, run_at) VALUES (:queue, :scheduled_at, :run_at)",
        )
        .write(&files);
    let mut daemon = started(&file, &db.url).await;
    let hidden = files.path().join("tick.sh.away");
    std::fs::rename(&program, &hidden).unwrap();
    daemon
        .wait_for_log("cannot be reached", Duration::from_secs(30))
        .await;
    // Three due times pass while the program is gone.
    let gone_at = database_time_after(&db, Duration::from_secs(3)).await;
    std::fs::rename(&hidden, &program).unwrap();
    // Claimed after the program was gone, run once it was back: for a due time
    // from before.
    let late = format!(
        "SELECT COUNT(*) FROM runs WHERE scheduled_at < '{gone_at}' AND run_at > '{gone_at}'"
    );
    db.until_count(&late, 1, 30).await;
    daemon.terminate().await;
    let doubles = "SELECT COUNT(*) FROM (SELECT scheduled_at FROM runs \
                   GROUP BY scheduled_at HAVING COUNT(*) > 1) AS twice";
    db.assert_count_because(doubles, 0, "a due time ran twice")
        .await;
    let missed: u64 = db
        .scalar("SELECT missed FROM tableq_schedules WHERE name = 'waits'")
        .await;
    assert!(
        missed >= 2,
        "{missed} due times missed while the program was gone"
    );
}

/// A schedule's session opens while another schedule's SQL run holds its row (a
/// long `DO SLEEP`): it waits for no lock; and a row deleted by hand is put back by
/// the background count, the schedule going on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_waits_on_no_other_and_a_row_deleted_is_put_back() {
    let db = TestDb::new().await;
    db.exec(RUNS).await;
    let (slow_files, quick_files) = (QueueFiles::new(), QueueFiles::new());
    let slow = QueueFile::new("slow")
        .set("schedule", "every 1s")
        .action_sql("DO SLEEP(8)")
        .write(&slow_files);
    let mut slow = copy(&slow, &db.url);
    let sleeping = format!(
        "SELECT COUNT(*) FROM information_schema.processlist WHERE db = '{}' \
         AND info LIKE 'DO SLEEP%'",
        db.name
    );
    db.until_count(&sleeping, 1, 30).await;
    let quick = logged("quick", "every 1s", "")
        .set("stats_interval", "1s")
        .write(&quick_files);
    let mut quick = copy(&quick, &db.url);
    let ran = "SELECT COUNT(*) FROM runs WHERE queue = 'quick'";
    db.until_count_at_least(ran, 2, 6).await;
    db.assert_count_because(&sleeping, 1, "the slow run ended first")
        .await;
    db.exec("DELETE FROM tableq_schedules WHERE name = 'quick'")
        .await;
    let before = db.count(ran).await;
    db.until_count_at_least(ran, before + 2, 20).await;
    quick
        .wait_for_log(
            "the schedule's row in tableq_schedules is gone",
            Duration::from_secs(5),
        )
        .await;
    quick.terminate().await;
    slow.terminate().await;
}
