//! Lease mode's configuration and its proof: the loader refuses an SQL action, a
//! `[lease]` without `mode = "lease"`, and renewal or outcome SQL that does not
//! check the lease; `check` proves on the database that the lease SQL takes the row
//! out of the select, that an expired lease is waiting again, and that only the
//! right `:lease_id` matches.

use crate::support;
use crate::support::check::{assert_one_error_online, assert_report, check_offline, check_online};
use crate::support::TestDb;

/// A lease-mode queue that keeps every rule; each test breaks it one way.
const GOOD: &str = r#"mode = "lease"
select = "SELECT id FROM video WHERE state = 'waiting' OR (state = 'rendering' AND lease_until < UTC_TIMESTAMP()) ORDER BY id"
[action]
type = "command"
command = ["true"]
[lease]
sql = "UPDATE video SET state = 'rendering', lease_until = UTC_TIMESTAMP() + INTERVAL 2 MINUTE, lease_id = :lease_id, worker = :worker WHERE id = :id"
renew_sql = "UPDATE video SET lease_until = UTC_TIMESTAMP() + INTERVAL 2 MINUTE, progress = :progress WHERE id = :id AND lease_id = :lease_id"
renew_every = "40s"
[on_success]
sql = "UPDATE video SET state = 'done' WHERE id = :id AND lease_id = :lease_id"
[on_failure]
sql = "UPDATE video SET state = 'failed', error = :error WHERE id = :id AND lease_id = :lease_id"
"#;

async fn video_db() -> TestDb {
    let db = TestDb::new().await;
    db.exec(
        "CREATE TABLE video (id INT PRIMARY KEY, state VARCHAR(12) NOT NULL DEFAULT 'waiting',
         lease_until DATETIME NULL, lease_id CHAR(32) NULL, worker VARCHAR(200) NULL,
         progress VARCHAR(200) NULL, error TEXT NULL, INDEX (state, id)) DEFAULT CHARSET=utf8mb4;
         INSERT INTO video (id) VALUES (1), (2)",
    )
    .await;
    db
}

/// The good lease-mode queue passes check, and check changes nothing.
#[tokio::test]
async fn a_good_lease_queue_is_proven() {
    let db = video_db().await;
    let (done, _) = check_online(&db, GOOD).await;
    assert_report(&done, &[], ": 0 errors, 0 warnings", 0);
    let waiting = db
        .count("SELECT COUNT(*) FROM video WHERE state = 'waiting' AND lease_id IS NULL")
        .await;
    assert_eq!(waiting, 2, "check rolled everything back");
}

/// A select that never returns an expired lease: a crashed worker's row would never
/// come back.
#[tokio::test]
async fn a_select_without_expired_leases_is_refused() {
    let db = video_db().await;
    let contents = GOOD.replace(
        " OR (state = 'rendering' AND lease_until < UTC_TIMESTAMP())",
        "",
    );
    assert_one_error_online(
        &db,
        &contents,
        "2: queue jobs: error: a day after its lease, the row is still not in the \
             select: a crashed worker's row would never come back; return expired leases too, \
             e.g. `WHERE state = 'waiting' OR (state = 'rendering' AND lease_until < UTC_TIMESTAMP())`",
    )
    .await;
}

/// Lease SQL that does not record `:lease_id`: no renewal could ever match.
#[tokio::test]
async fn lease_sql_that_forgets_the_lease_id_is_refused() {
    let db = video_db().await;
    let contents = GOOD.replace(", lease_id = :lease_id, worker", ", worker");
    let (done, shown) = check_online(&db, &contents).await;
    assert_report(
        &done,
        &[
            format!(
                "{shown}:8: queue jobs: error: `lease.renew_sql` did not match the leased row with \
                 its own :lease_id: every renewal would find the lease lost"
            ),
            format!(
                "{shown}:11: queue jobs: error: `on_success.sql` did not match the leased row \
                 with its own :lease_id: no success would ever be recorded"
            ),
        ],
        ": 2 errors, 0 warnings",
        1,
    );
}

/// Release and outcome SQL whose lease check a clause undoes (`OR 1`): the loader
/// sees `:lease_id` in the WHERE; the proof sees each match with a wrong lease.
#[tokio::test]
async fn release_and_outcome_sql_that_ignore_the_lease_are_refused() {
    let db = video_db().await;
    let ignored = "WHERE id = :id AND (lease_id = :lease_id OR 1)";
    let release = format!("release_sql = \"UPDATE video SET state = 'waiting' {ignored}\"\n");
    let cases = [
        (
            GOOD.replace(
                "renew_every = \"40s\"\n",
                &format!("renew_every = \"40s\"\n{release}"),
            ),
            "10: queue jobs: error: `lease.release_sql` matched the row with a wrong :lease_id",
        ),
        (
            GOOD.replace(
                "state = 'done' WHERE id = :id AND lease_id = :lease_id",
                &format!("state = 'done' {ignored}"),
            ),
            "11: queue jobs: error: `on_success.sql` matched the row with a wrong :lease_id",
        ),
    ];
    for (contents, expected) in cases {
        let (done, shown) = check_online(&db, &contents).await;
        assert_report(
            &done,
            &[format!(
                "{shown}:{expected}: it must check the lease (`AND lease_id = :lease_id`)"
            )],
            ": 1 error, 0 warnings",
            1,
        );
    }
}

/// A release that cannot match its own lease, and one that leaves the row out of the
/// select: a released row would wait for its lease anyway.
#[tokio::test]
async fn a_release_that_does_not_put_the_row_back_is_refused() {
    let db = video_db().await;
    let cases = [
        (
            "UPDATE video SET state = 'waiting' WHERE id = :id AND lease_id = :lease_id AND state = 'gone'",
            "did not match the leased row with its own :lease_id: a release would never put \
             the row back",
        ),
        (
            "UPDATE video SET worker = NULL WHERE id = :id AND lease_id = :lease_id",
            "leaves the row out of the select: a released row would wait for its lease to \
             expire anyway; put it back (e.g. state = 'waiting')",
        ),
    ];
    for (release, problem) in cases {
        let contents = GOOD.replace(
            "renew_every = \"40s\"\n",
            &format!("renew_every = \"40s\"\nrelease_sql = \"{release}\"\n"),
        );
        let (done, shown) = check_online(&db, &contents).await;
        assert_report(
            &done,
            &[format!(
                "{shown}:10: queue jobs: error: `lease.release_sql` {problem}"
            )],
            ": 1 error, 0 warnings",
            1,
        );
    }
}

/// Without a database: an SQL action, batch scope, a `[lease]` without the mode, a
/// bad mode, and renewal or outcome SQL that does not check the lease are each
/// refused by name.
#[tokio::test]
async fn mistakes_are_refused_before_any_database() {
    let cases = [
        (
            GOOD.replace("type = \"command\"\ncommand = [\"true\"]", "type = \"sql\"\nsql = \"DO :id\""),
            "4: queue jobs: error: `mode = \"lease\"` runs the action with no transaction held, so \
             a `type = \"sql\"` action has nothing to protect it: use mode = \"transaction\" for \
             it, or an action that reaches outside the database",
        ),
        (
            GOOD.replace("mode = \"lease\"", "mode = \"lease\"\nscope = \"batch\""),
            "2: queue jobs: error: `mode = \"lease\"` leases, renews and records each row on its \
             own, by its key and `:lease_id`, so `scope = \"batch\"` does not apply: remove \
             `scope`, or use mode = \"transaction\" for set-based batches",
        ),
        (
            GOOD.replace("mode = \"lease\"", "mode = \"leased\""),
            "1: queue jobs: error: `mode` = \"leased\" is not a mode: use \"transaction\" (the \
             default) or \"lease\"",
        ),
        (
            GOOD.replace("mode = \"lease\"", ""),
            "6: queue jobs: error: a [lease] table is only read with `mode = \"lease\"`; add it, \
             or remove [lease]",
        ),
        (
            GOOD.replace("WHERE id = :id AND lease_id = :lease_id\"\n[on_failure]", "WHERE id = :id\"\n[on_failure]"),
            "11: queue jobs: error: `on_success.sql` does not check the lease (no `:lease_id` in \
             its WHERE): after the lease expired and another worker took the row, it would \
             overwrite that worker's work; write `WHERE id = :id AND lease_id = :lease_id`",
        ),
        (
            GOOD.replace("progress = :progress WHERE id = :id AND", "progress = :progress WHERE"),
            "8: queue jobs: error: `lease.renew_sql` does not restrict by the key (no `:id` in its \
             WHERE): in lease mode it must touch only the leased row; write `WHERE id = :id AND \
             lease_id = :lease_id`",
        ),
        (
            GOOD.replace("renew_every = \"40s\"", "renew_every = \"2m\""),
            "9: queue jobs: error: `renew_every` = 2m is not shorter than the lease `renew_sql` \
             gives (2m): the lease would expire between renewals; renew every third of it",
        ),
        (
            GOOD.replace("[on_success]\nsql = \"UPDATE video SET state = 'done' WHERE id = :id AND lease_id = :lease_id\"\n", ""),
            "1: queue jobs: error: `mode = \"lease\"` needs [on_success]: the leased row stays out \
             of the select only until its lease expires, so record the work done, e.g. sql = \
             \"UPDATE video SET state = 'done' WHERE id = :id AND lease_id = :lease_id\"",
        ),
        (
            GOOD.replace(
                "state = 'rendering', lease_until = UTC_TIMESTAMP() + INTERVAL 2 MINUTE",
                "state = 'rendering', lease_until = UTC_TIMESTAMP() + INTERVAL 30 SECOND",
            ),
            "9: queue jobs: error: `renew_every` = 40s is not shorter than the lease `sql` gives \
             (30s): the lease would expire between renewals; renew every third of it",
        ),
        (
            GOOD.replace("renew_sql = ", "# renew_sql = "),
            "9: queue jobs: error: `renew_every` without `renew_sql` renews nothing: add \
             renew_sql, the UPDATE that moves the lease on (`WHERE id = :id AND lease_id = \
             :lease_id`), or remove renew_every",
        ),
    ];
    for (contents, expected) in cases {
        let (done, shown) = check_offline(&contents).await;
        assert!(
            done.stdout.contains(&format!("{shown}:{expected}")),
            "expected {expected:?} in:\n{}",
            done.stdout
        );
        assert_eq!(done.code(), Some(1), "{}", done.stdout);
    }
}

/// Without `renew_every`, a lease renews every third of the one `INTERVAL` its
/// `renew_sql` gives — or `[lease] sql`'s, if that is shorter.
#[test]
fn renew_every_defaults_to_a_third_of_the_lease() {
    let files = support::QueueFiles::new();
    let path = files.write("jobs.toml", &GOOD.replace("renew_every = \"40s\"\n", ""));
    let queues = tableq::load_paths(&[path], &|name| std::env::var(name).ok())
        .unwrap_or_else(|f| panic!("{f}"));
    let lease = queues[0].lease().unwrap();
    assert_eq!(lease.renew_every, Some(std::time::Duration::from_secs(40)));
    // The claim's lease shorter than the renewals': a third of it.
    let shorter = GOOD.replace("renew_every = \"40s\"\n", "").replace(
        "INTERVAL 2 MINUTE, lease_id",
        "INTERVAL 30 SECOND, lease_id",
    );
    let path = files.write("short.toml", &shorter);
    let queues = tableq::load_paths(&[path], &|name| std::env::var(name).ok())
        .unwrap_or_else(|f| panic!("{f}"));
    let lease = queues[0].lease().unwrap();
    assert_eq!(lease.renew_every, Some(std::time::Duration::from_secs(10)));
}
