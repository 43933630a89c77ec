//! Lease SQL that depends on the session's time zone: `check` warns where a
//! lease-mode select or `[lease]` statement compares a DATETIME column with
//! `NOW()` (a change of time zone moves every lease at once), and not where the
//! lease is kept in UTC, in unix time, or in a TIMESTAMP column.

use crate::support::check::{check_offline, check_online};
use crate::support::TestDb;

/// A lease-mode queue whose lease is kept with `clock` (`NOW()`, `UTC_TIMESTAMP()`).
fn lease_queue(clock: &str) -> String {
    format!(
        r#"mode = "lease"
select = "SELECT id FROM video WHERE state = 'waiting' OR (state = 'rendering' AND lease_until < {clock}) ORDER BY id"
[action]
type = "command"
command = ["true"]
[lease]
sql = "UPDATE video SET state = 'rendering', lease_until = {clock} + INTERVAL 2 MINUTE, lease_id = :lease_id WHERE id = :id"
renew_sql = "UPDATE video SET lease_until = {clock} + INTERVAL 2 MINUTE WHERE id = :id AND lease_id = :lease_id"
[on_success]
sql = "UPDATE video SET state = 'done' WHERE id = :id AND lease_id = :lease_id"
[on_failure]
sql = "UPDATE video SET state = 'failed' WHERE id = :id AND lease_id = :lease_id"
"#
    )
}

/// The video table with its lease column of type `lease_type`, two rows waiting.
async fn video_db(lease_type: &str) -> TestDb {
    let db = TestDb::new().await;
    db.exec(&format!(
        "CREATE TABLE video (id INT PRIMARY KEY, state VARCHAR(12) NOT NULL DEFAULT 'waiting',
         lease_until {lease_type} NULL, lease_id CHAR(32) NULL, INDEX (state, id)) DEFAULT CHARSET=utf8mb4;
         INSERT INTO video (id) VALUES (1), (2)"
    ))
    .await;
    db
}

/// A DATETIME lease column with NOW(): a warning for the select and each lease
/// statement, naming the column and what to write instead; the queue still passes.
#[tokio::test]
async fn a_datetime_lease_with_now_is_warned_about() {
    let db = video_db("DATETIME").await;
    let (done, shown) = check_online(&db, &lease_queue("NOW()")).await;
    let report = &done.stdout;
    for (line, key) in [(2, "select"), (7, "lease.sql"), (8, "lease.renew_sql")] {
        let expected = format!(
            "{shown}:{line}: queue jobs: warning: `{key}` compares the DATETIME column \
             `lease_until` with NOW(), which follows the session's time zone"
        );
        assert!(report.contains(&expected), "{expected}\n{report}");
    }
    assert!(report.contains("UTC_TIMESTAMP()"), "{report}");
    assert!(report.contains(": 0 errors, 3 warnings"), "{report}");
    assert_eq!(done.code(), Some(0), "{report}");
}

/// The same lease kept in UTC (UTC_TIMESTAMP()), or in a TIMESTAMP column with
/// NOW(), draws no warning.
#[tokio::test]
async fn a_lease_in_utc_or_a_timestamp_column_is_not_warned_about() {
    let db = video_db("DATETIME").await;
    let (done, _) = check_online(&db, &lease_queue("UTC_TIMESTAMP()")).await;
    assert!(
        done.stdout.ends_with(": 0 errors, 0 warnings\n"),
        "{}",
        done.stdout
    );
    let db = video_db("TIMESTAMP").await;
    let (done, _) = check_online(&db, &lease_queue("NOW()")).await;
    assert!(
        done.stdout.ends_with(": 0 errors, 0 warnings\n"),
        "{}",
        done.stdout
    );
}

/// Offline, where the column's type is unknown, NOW() in lease SQL is a warning
/// saying when it matters; UTC_TIMESTAMP() is not.
#[tokio::test]
async fn offline_check_warns_about_now_in_lease_sql() {
    let (done, shown) = check_offline(&lease_queue("NOW()")).await;
    let expected = format!(
        "{shown}:7: queue jobs: warning: `lease.sql` uses NOW(), which follows the session's \
         time zone: with a DATETIME lease column, every lease moves when the time zone changes"
    );
    assert!(
        done.stdout.contains(&expected),
        "{expected}\n{}",
        done.stdout
    );
    let (done, _) = check_offline(&lease_queue("UTC_TIMESTAMP()")).await;
    assert!(
        done.stdout.ends_with("offline: 0 errors, 0 warnings\n"),
        "{}",
        done.stdout
    );
}
