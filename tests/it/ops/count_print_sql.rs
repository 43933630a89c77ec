//! `tableq count --print-sql`: the statement the background count runs, printed for
//! a client that binds no parameters (KEDA's MySQL scaler), through the real binary.

use std::time::Duration;

use crate::support::daemon::{run_to_end, tableq, Finished};
use crate::support::{QueueFile, QueueFiles, TestDb};

async fn tableq_on(args: &[&str], url: Option<&str>) -> Finished {
    let mut cmd = tableq(args);
    if let Some(url) = url {
        cmd.env("TABLEQ_DATABASE_URL", url);
    }
    run_to_end(cmd, Duration::from_secs(60)).await
}

/// The printed statement, `:queue` written in, runs as it is and returns one number:
/// the rows `tableq count` finds, and `waiting_cap + 1` past the cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_printed_statement_counts_what_count_counts() {
    let db = TestDb::new().await;
    db.exec(
        "CREATE TABLE job (id INT PRIMARY KEY, queue VARCHAR(20) NOT NULL, \
         state VARCHAR(10) NOT NULL DEFAULT 'waiting', INDEX (queue, state, id))",
    )
    .await;
    db.fill("job", "id, queue", 40, |i| {
        let queue = if i % 4 == 0 { "other" } else { "mail-out" };
        format!("{i}, '{queue}'")
    })
    .await;
    let files = QueueFiles::new();
    let file = QueueFile::new("mail-out")
        .select("SELECT id FROM job WHERE queue = :queue AND state = 'waiting' ORDER BY id")
        .set("waiting_cap", 25)
        .action_sql("DO :id")
        .on_success("UPDATE job SET state = 'done' WHERE id = :id")
        .on_failure("UPDATE job SET state = 'failed' WHERE id = :id")
        .write(&files);
    let path = file.to_str().unwrap();

    let printed = tableq_on(&["count", "--print-sql", path], None).await;
    assert_eq!(printed.code(), Some(0), "{}", printed.stderr);
    let statement = printed.stdout.trim_end();
    assert_eq!(
        statement,
        "SELECT COUNT(*) FROM (SELECT id FROM job WHERE queue = 'mail-out' AND state = \
         'waiting' ORDER BY id\nLIMIT 26) AS tableq_waiting"
    );
    let counted = tableq_on(&["count", "--cap", "1000", path], Some(&db.url)).await;
    assert_eq!(counted.stdout, "mail-out\t30\n", "{}", counted.stderr);
    let rows: Vec<(u64,)> = db.rows(statement).await;
    assert_eq!(
        rows,
        [(26,)],
        "more than waiting_cap shows as the cap and one"
    );

    db.exec("UPDATE job SET state = 'done' WHERE id <= 20")
        .await;
    let counted = tableq_on(&["count", "--cap", "1000", path], Some(&db.url)).await;
    assert_eq!(counted.stdout, "mail-out\t15\n", "{}", counted.stderr);
    let rows: Vec<(u64,)> = db.rows(statement).await;
    assert_eq!(rows, [(15,)]);
}

/// With several queues, `--print-sql` asks which one instead of guessing.
#[tokio::test]
async fn several_queues_need_a_queue_name() {
    let files = QueueFiles::new();
    for name in ["a", "b"] {
        QueueFile::new(name)
            .select("SELECT id FROM job WHERE state = 'waiting'")
            .action_sql("DO :id")
            .on_failure("UPDATE job SET state = 'failed' WHERE id = :id")
            .write(&files);
    }
    let dir = files.path();
    let done = tableq_on(&["count", "--print-sql", dir.to_str().unwrap()], None).await;
    assert_eq!(done.code(), Some(2));
    assert_eq!(
        done.stderr,
        "count --print-sql prints one queue's statement: choose it with --queue NAME (the \
         files define: a, b)\n"
    );
    let one = tableq_on(
        &[
            "count",
            "--print-sql",
            "--queue",
            "b",
            dir.to_str().unwrap(),
        ],
        None,
    )
    .await;
    assert_eq!(one.code(), Some(0), "{}", one.stderr);
    assert!(one
        .stdout
        .starts_with("SELECT COUNT(*) FROM (SELECT id FROM job"));
}
