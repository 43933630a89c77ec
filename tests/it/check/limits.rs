//! `check` on a queue's limits: it explains limits shared by every copy and
//! `[concurrency]`, and refuses a `[concurrency] key` the select does not return.

use crate::support::assert_has;
use crate::support::check::{check_online, job_db, GOOD};

/// A `rate_limit` shared by every copy and a `[concurrency]` are each explained in
/// a note; the queue passes.
#[tokio::test]
async fn check_explains_global_limits_and_concurrency() {
    let db = job_db().await;
    let contents = GOOD.replace(
        "[action]",
        "rate_limit = \"30/s\"\n[concurrency]\nkey = \"attempts\"\nlimit = 2\n[action]",
    );
    let (done, _) = check_online(&db, &contents).await;
    assert_eq!(done.code(), Some(0), "{}\n{}", done.stdout, done.stderr);
    assert_has(
        &done.stdout,
        "rate_limit = 30/s hold across every copy of tableq",
    );
    assert_has(
        &done.stdout,
        "[concurrency]: at most 2 row(s) of one `attempts` in flight across every copy",
    );
}

/// A `[concurrency] key` naming a column the select does not return is refused,
/// with the select's columns and the fix.
#[tokio::test]
async fn check_refuses_a_concurrency_key_not_in_the_select() {
    let db = job_db().await;
    let contents = GOOD.replace("[action]", "[concurrency]\nkey = \"customer\"\n[action]");
    let (done, shown) = check_online(&db, &contents).await;
    assert_eq!(done.code(), Some(1), "{}", done.stdout);
    let expected = format!(
        "{shown}:3: queue jobs: error: `[concurrency] key` = \"customer\" names `customer`, which the select does not return; its columns are id, attempts: add it to the select, or name one of them"
    );
    assert_has(&done.stdout, &expected);
}
