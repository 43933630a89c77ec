//! `--stop-when-empty` for a whole process: it exits once every queue is empty — not
//! when one queue's claim first finds nothing.

use std::time::Duration;

use crate::support::daemon::{run_to_end, tableq};
use crate::support::{QueueFile, QueueFiles, TestDb};

/// Jobs moving from state `a` to `b` to `c`, one queue a step.
const CHAIN_JOB: &str =
    "CREATE TABLE job (id INT PRIMARY KEY, state CHAR(1) NOT NULL DEFAULT 'a', KEY (state))";

/// A queue of `job` that moves each row from state `from` to state `to`.
fn mover(name: &str, from: &str, to: &str) -> QueueFile {
    QueueFile::new(name)
        .select(&format!(
            "SELECT id FROM job WHERE state = '{from}' ORDER BY id"
        ))
        .batch(5)
        .poll_interval("200ms")
        .action_command(&["true"])
        .on_success(format!("UPDATE job SET state = '{to}' WHERE id = :id"))
}

/// Queue `a` moves rows into queue `b`'s select, `b` moves them on to `c`, both in one
/// process: `b`'s first claims find nothing, yet the process exits 0 only once every
/// row is in `c` (it used to exit with `b`'s rows waiting).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_of_queues_drains_to_its_end() {
    let db = TestDb::new().await;
    db.exec(CHAIN_JOB).await;
    db.fill("job", "id", 200, |i| i.to_string()).await;
    let files = QueueFiles::new();
    mover("chain_a", "a", "b").write(&files);
    mover("chain_b", "b", "c").write(&files);
    let mut cmd = tableq(&["run", "--stop-when-empty"]);
    cmd.arg(files.path()).env("TABLEQ_DATABASE_URL", &db.url);
    let done = run_to_end(cmd, Duration::from_secs(120)).await;
    assert_eq!(done.code(), Some(0), "{}", done.stderr);
    let states: Vec<(String, u64)> = db
        .rows("SELECT state, COUNT(*) FROM job GROUP BY state ORDER BY state")
        .await;
    assert_eq!(states, [("c".to_string(), 200)], "{}", done.stderr);
    for queue in ["chain_a", "chain_b"] {
        let drained = format!("queue={queue}");
        assert!(
            done.stderr
                .lines()
                .any(|l| l.contains("the queue is drained") && l.contains(&drained)),
            "{}",
            done.stderr
        );
    }
}
