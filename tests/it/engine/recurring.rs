//! `[recurring]`: a table of rows that re-arm themselves, each with its own cron
//! expression. Two copies of tableq share 50 rows due every 1, 2 or 3 seconds:
//! each runs on its cadence, never twice for one due time, and coming back every
//! second is not a loop. A row whose cron or time zone cannot be read fails with
//! why, its action not run; `:next_run` without `[recurring]` is refused by the
//! loader; `check` names the rows whose expressions are bad.

use std::time::Duration;

use crate::support::check::check;
use crate::support::daemon::{copy, run_to_end, tableq, Daemon};
use crate::support::queue_file::table;
use crate::support::{assert_has, eventually, QueueFile, QueueFiles, TestDb};

/// The rows of recurring work, and the log their action writes: one row per run,
/// with the due time it ran for.
const REPORTS: &str = "CREATE TABLE reports (
    id          INT PRIMARY KEY,
    cron        VARCHAR(64) NULL,
    tz          VARCHAR(64) NULL,
    period      INT NOT NULL DEFAULT 0,
    next_run_at DATETIME(6) NOT NULL,
    failed      BOOL NOT NULL DEFAULT FALSE,
    error       VARCHAR(512) NULL,
    INDEX due (failed, next_run_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE TABLE runs (
    id     INT NOT NULL,
    due    DATETIME(6) NOT NULL,
    ran_at DATETIME(6) NOT NULL,
    copy   VARCHAR(8) NOT NULL DEFAULT ''
) ENGINE=InnoDB";

/// The queue over `reports`: due by the database's UTC clock, run by logging the
/// due time, re-armed by `:next_run`; a failure recorded on the row.
fn reports_queue() -> QueueFile {
    reports_without_action().action_sql(
        "INSERT INTO runs (id, due, ran_at) VALUES (:id, :next_run_at, UTC_TIMESTAMP(6))",
    )
}

/// The queue over `reports` with no `[action]` yet.
fn reports_without_action() -> QueueFile {
    QueueFile::new("reports")
        .poll_interval("200ms")
        .select(
            "SELECT id, cron, tz, next_run_at FROM reports \
             WHERE failed = FALSE AND next_run_at <= UTC_TIMESTAMP(6) ORDER BY next_run_at",
        )
        .set(
            "recurring",
            table(&[
                ("cron_column", "cron".into()),
                ("timezone_column", "tz".into()),
            ]),
        )
        .on_success("UPDATE reports SET next_run_at = :next_run WHERE id = :id")
        .on_failure("UPDATE reports SET failed = TRUE, error = LEFT(:error, 500) WHERE id = :id")
}

/// The queue over `reports`, its action logging which copy ran it.
fn logged_by(copy: &str) -> QueueFile {
    reports_queue().action_sql(format!(
        "INSERT INTO runs (id, due, ran_at, copy) VALUES (:id, :next_run_at, UTC_TIMESTAMP(6), '{copy}')"
    ))
}

/// 50 rows, every 1, 2 or 3 seconds (6 fields, seconds first), all due now.
async fn fifty_rows(db: &TestDb) {
    db.exec(REPORTS).await;
    let rows: Vec<String> = (1..=50)
        .map(|id| {
            let period = id % 3 + 1;
            format!("({id}, '*/{period} * * * * *', {period}, UTC_TIMESTAMP(6))")
        })
        .collect();
    db.exec(&format!(
        "INSERT INTO reports (id, cron, period, next_run_at) VALUES {}",
        rows.join(", ")
    ))
    .await;
}

/// Two copies (two workers each) run 50 rows due every 1, 2 or 3 seconds until
/// every row has run five times: no due time of a row ran twice, every re-armed due
/// time is on the row's cadence, few are skipped, and no copy calls a row that
/// comes back every second a loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_re_arm_on_their_cadence_once_per_due_time_across_two_copies() {
    let db = TestDb::new().await;
    fifty_rows(&db).await;
    // The two copies' files differ only in the name their action logs.
    let (one, two) = (QueueFiles::new(), QueueFiles::new());
    let mut daemons: Vec<Daemon> = [("one", &one), ("two", &two)]
        .into_iter()
        .map(|(name, files)| copy(&logged_by(name).workers(2).write(files), &db.url))
        .collect();
    let started = std::time::Instant::now();
    eventually(
        "every row ran five times",
        Duration::from_secs(60),
        || async {
            let behind = "SELECT COUNT(*) FROM reports r \
                      WHERE (SELECT COUNT(*) FROM runs WHERE runs.id = r.id) < 5";
            db.count(behind).await == 0
        },
    )
    .await;
    for daemon in &mut daemons {
        daemon.terminate().await;
    }
    let ran_for = started.elapsed();
    let doubles = "SELECT COUNT(*) FROM (SELECT id, due FROM runs GROUP BY id, due \
                   HAVING COUNT(*) > 1) AS twice";
    db.assert_count_because(doubles, 0, "a due time of a row ran twice")
        .await;
    // After each row's first run (due when inserted), every due time is on the
    // row's cadence: a whole second, a multiple of its period.
    let off_cadence = "SELECT COUNT(*) FROM runs JOIN reports USING (id) \
                       WHERE runs.due > (SELECT MIN(due) FROM runs AS earliest WHERE earliest.id = runs.id) \
                       AND (MICROSECOND(runs.due) <> 0 OR MOD(SECOND(runs.due), reports.period) <> 0)";
    db.assert_count_because(off_cadence, 0, "a row re-armed off its cadence")
        .await;
    let (runs, skipped) = cadence(&db).await;
    let lateness = lateness_ms(&db).await;
    eprintln!(
        "recurring: {runs} runs of 50 rows in {ran_for:?} by two copies; {skipped} due times \
         skipped; lateness after the due time min {:.1} ms, p50 {:.1} ms, p99 {:.1} ms, \
         max {:.1} ms",
        lateness[0],
        lateness[lateness.len() / 2],
        lateness[lateness.len() * 99 / 100],
        lateness[lateness.len() - 1],
    );
    assert!(
        skipped * 20 <= runs,
        "{skipped} of {runs} due times were skipped"
    );
    let copies = "SELECT COUNT(DISTINCT copy) FROM runs";
    db.assert_count_because(copies, 2, "one copy ran every row")
        .await;
    for daemon in &daemons {
        let log = daemon.stderr();
        assert!(
            !log.contains("completed again"),
            "a re-armed row called a loop:\n{log}"
        );
    }
}

/// How many runs there were after each row's first, and how many due times of the
/// rows' cadences between them were skipped (the row was late past a whole period).
async fn cadence(db: &TestDb) -> (u64, u64) {
    let dues: Vec<(i64, i64, i64)> = db
        .rows(
            "SELECT id, period, TIMESTAMPDIFF(MICROSECOND, '2000-01-01', due) FROM runs \
             JOIN reports USING (id) ORDER BY id, due",
        )
        .await;
    let (mut runs, mut skipped) = (0u64, 0u64);
    for pair in dues.windows(2) {
        let ((id, period, before), (next_id, _, after)) = (pair[0], pair[1]);
        if id != next_id {
            continue;
        }
        runs += 1;
        let periods = (after - before) / (period * 1_000_000);
        skipped += (periods - 1).max(0) as u64;
    }
    (runs, skipped)
}

/// How late each run began after its due time (after each row's first), sorted.
async fn lateness_ms(db: &TestDb) -> Vec<f64> {
    let late: Vec<i64> = db
        .rows(
            "SELECT TIMESTAMPDIFF(MICROSECOND, due, ran_at) FROM runs \
             WHERE due > (SELECT MIN(due) FROM runs AS earliest WHERE earliest.id = runs.id)",
        )
        .await;
    let mut late: Vec<f64> = late.into_iter().map(|us| us as f64 / 1000.0).collect();
    late.sort_by(f64::total_cmp);
    assert!(!late.is_empty(), "no row ran a second time");
    late
}

/// In lease mode too (the claim pushes `next_run_at` out as the lease; the action, a
/// command, logs the due time to a file; the outcome writes `:next_run` under the
/// lease's guard): rows due every 1 or 2 seconds run once per due time, and are not
/// called a loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_re_arm_in_lease_mode_too() {
    let db = TestDb::new().await;
    db.exec(REPORTS).await;
    db.exec(
        "ALTER TABLE reports ADD COLUMN lease_id VARCHAR(32) NULL;
         INSERT INTO reports (id, cron, next_run_at) VALUES
         (1, '* * * * * *', UTC_TIMESTAMP(6)), (2, '*/2 * * * * *', UTC_TIMESTAMP(6))",
    )
    .await;
    let files = QueueFiles::new();
    let log = files.path().join("runs.txt");
    let append = format!("echo \"$1 $2\" >> '{}'", log.display());
    let guarded = "WHERE id = :id AND lease_id = :lease_id";
    let file = reports_without_action()
        .set("mode", "lease")
        .lease_set(
            "sql",
            "UPDATE reports SET lease_id = :lease_id, \
             next_run_at = UTC_TIMESTAMP(6) + INTERVAL 30 SECOND WHERE id = :id",
        )
        .action_command(&["sh", "-c", &append, "sh", "{id}", "{next_run_at}"])
        .on_success(format!(
            "UPDATE reports SET next_run_at = :next_run, lease_id = NULL {guarded}"
        ))
        .on_failure(format!(
            "UPDATE reports SET failed = TRUE, error = LEFT(:error, 500) {guarded}"
        ))
        .write(&files);
    let mut daemon = copy(&file, &db.url);
    let runs = || std::fs::read_to_string(&log).unwrap_or_default();
    eventually("row 2 ran four times", Duration::from_secs(60), || async {
        runs().lines().filter(|line| line.starts_with("2 ")).count() >= 4
    })
    .await;
    daemon.terminate().await;
    let runs = runs();
    let mut lines: Vec<&str> = runs.lines().collect();
    let all = lines.len();
    lines.sort();
    lines.dedup();
    assert_eq!(lines.len(), all, "a due time of a row ran twice:\n{runs}");
    assert!(
        lines.iter().filter(|l| l.starts_with("1 ")).count() >= 6,
        "{runs}"
    );
    let said = daemon.stderr();
    assert!(
        !said.contains("completed again"),
        "a re-armed row called a loop:\n{said}"
    );
}

/// A row whose cron expression or time zone cannot be read fails with why, its
/// action not run, and `[on_failure]` records it; a good row beside it runs once and
/// is re-armed in its own time zone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_whose_cron_cannot_be_read_fails_with_why() {
    let db = TestDb::new().await;
    db.exec(REPORTS).await;
    db.exec(
        "INSERT INTO reports (id, cron, tz, next_run_at) VALUES
         (1, '0 12 1 1 *', 'Europe/Berlin', UTC_TIMESTAMP(6)),
         (2, 'every 5s', NULL, UTC_TIMESTAMP(6)),
         (3, '*/5 * * * *', 'Mars/Olympus', UTC_TIMESTAMP(6)),
         (4, '61 * * * *', NULL, UTC_TIMESTAMP(6))",
    )
    .await;
    let files = QueueFiles::new();
    let file = reports_queue().write(&files);
    let mut cmd = tableq(&["run", "--stop-when-empty"]);
    cmd.arg(&file).env("TABLEQ_DATABASE_URL", &db.url);
    let done = run_to_end(cmd, Duration::from_secs(60)).await;
    assert_eq!(done.code(), Some(0), "{}", done.stderr);
    db.assert_count_because(
        "SELECT COUNT(*) FROM runs WHERE id <> 1",
        0,
        "a bad row's action ran",
    )
    .await;
    db.assert_count("SELECT COUNT(*) FROM runs WHERE id = 1", 1)
        .await;
    // Noon in Berlin on New Year's Day is 11:00 UTC.
    let next: String = db
        .scalar("SELECT CAST(next_run_at AS CHAR) FROM reports WHERE id = 1")
        .await;
    assert!(next.ends_with("-01-01 11:00:00.000000"), "{next}");
    assert_eq!(
        error_of(&db, 2).await,
        "cron expression \"every 5s\" in column cron: it has 2 fields: write 5 (minute hour \
         day-of-month month day-of-week), or 6 with seconds first"
    );
    let zone = error_of(&db, 3).await;
    assert_has(
        &zone,
        "time zone \"Mars/Olympus\" in column tz: unknown time zone",
    );
    let minute = error_of(&db, 4).await;
    assert_has(&minute, "cron expression \"61 * * * *\" in column cron: ");
}

/// What `[on_failure]` recorded on row `id`.
async fn error_of(db: &TestDb, id: u32) -> String {
    let sql = format!("SELECT error FROM reports WHERE id = {id}");
    db.scalar::<Option<String>>(&sql)
        .await
        .unwrap_or_else(|| panic!("row {id} recorded no error"))
}

/// The loader refuses `:next_run` without `[recurring]`, and a `cron_column` the
/// select does not return: each with the file, the queue, the key and the fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loader_refuses_next_run_without_recurring() {
    let files = QueueFiles::new();
    let plain = QueueFile::new("plain")
        .select("SELECT id, next_run_at FROM reports WHERE next_run_at <= UTC_TIMESTAMP(6)")
        .action_sql("DO :id")
        .on_success("UPDATE reports SET next_run_at = :next_run WHERE id = :id")
        .write(&files);
    // check says what the loader refuses, and exits 1 (`run` would exit 2).
    let done = check(&["--offline"], &[&plain], None).await;
    assert_eq!(done.code(), Some(1), "{}\n{}", done.stdout, done.stderr);
    let said = format!("{}{}", done.stdout, done.stderr);
    assert_has(&said, "plain.toml");
    assert_has(&said, "queue plain");
    assert_has(
        &said,
        "`on_success.sql` uses `:next_run`, which exists only with `[recurring]`: add \
         `[recurring] cron_column = \"…\"`",
    );
    let elsewhere = reports_queue()
        .set("recurring", table(&[("cron_column", "schedule".into())]))
        .write(&files);
    let done = check(&["--offline"], &[&elsewhere], None).await;
    assert_eq!(done.code(), Some(1), "{}\n{}", done.stdout, done.stderr);
    let said = format!("{}{}", done.stdout, done.stderr);
    assert_has(
        &said,
        "`recurring.cron_column` = \"schedule\" is not a column the select returns (id, cron, tz, next_run_at)",
    );
}

/// `check` reads the cron expressions of the waiting rows as `run` would, and names
/// each bad one by its key; the proof, claiming a bad row, still goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_names_the_rows_whose_cron_is_bad() {
    let db = TestDb::new().await;
    db.exec(REPORTS).await;
    db.exec(
        "INSERT INTO reports (id, cron, tz, next_run_at) VALUES
         (1, '@daily', NULL, UTC_TIMESTAMP(6)),
         (7, 'every 5s', NULL, UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE),
         (8, '@daily', 'Berlin', UTC_TIMESTAMP(6))",
    )
    .await;
    let files = QueueFiles::new();
    let file = reports_queue().write(&files);
    let done = check(&[], &[&file], Some(&db.url)).await;
    assert_has(
        &done.stdout,
        "2 of the 3 waiting rows read have a schedule tableq cannot use",
    );
    assert_has(
        &done.stdout,
        "id = 7: cron expression \"every 5s\" in column cron: it has 2 fields",
    );
    assert_has(&done.stdout, "id = 8: time zone \"Berlin\" in column tz");
    assert!(!done.stdout.contains("id = 1:"), "{}", done.stdout);
    // The proof claimed row 7 first: a bad row's :next_run is a sample, not NULL.
    assert!(!done.stdout.contains("on_success"), "{}", done.stdout);
}
