//! tableq reaps what its commands leave behind: a grandchild orphaned by a timeout
//! kill is reparented to tableq (a child subreaper, as PID 1 would be in a container)
//! and reaped when it exits, so no zombie remains.

use std::time::Duration;

use crate::support::daemon::{tableq, Daemon};
use crate::support::process::wait_for_pid;
use crate::support::{eventually, job_table, waiting_jobs, QueueFiles, TestDb};

/// The parent pid of `pid`, while it exists.
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// A grandchild that left the command's process group outlives the timeout kill:
/// it is reparented to tableq, and once it exits tableq reaps it — not even a
/// zombie remains.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_zombie_remains_after_a_timeout_kill_with_tableq_as_the_reaper() {
    let db = TestDb::new().await;
    job_table(&db, &[1]).await;
    let files = QueueFiles::new();
    let ends = files.path().join("ends");
    files.script(
        "orphans.sh",
        &format!(
            "setsid sh -c 'until [ -e {} ]; do sleep 0.05; done' &\necho $! > grandchild.pid\nsleep 300",
            ends.display()
        ),
    );
    let file = waiting_jobs("jobs")
        .action_command(&["./orphans.sh"])
        .action_set("timeout", "1s")
        .on_failure("UPDATE job SET state = 'failed' WHERE id = :id")
        .write(&files);
    let mut cmd = tableq(&["run"]);
    cmd.arg(&file)
        .current_dir(files.path())
        .env("TABLEQ_DATABASE_URL", &db.url);
    let mut daemon = Daemon::spawn(cmd);
    let grandchild = wait_for_pid(&files.path().join("grandchild.pid")).await;

    eventually(
        "the timeout kills the command and its grandchild is reparented to tableq",
        Duration::from_secs(30),
        || async { parent_of(grandchild) == Some(daemon.pid()) },
    )
    .await;
    eventually("the item failed", Duration::from_secs(30), || async {
        db.scalar::<String>("SELECT state FROM job WHERE id = 1")
            .await
            == "failed"
    })
    .await;
    std::fs::write(&ends, "").unwrap();
    eventually(
        "the grandchild exits and is reaped",
        Duration::from_secs(30),
        || async { !std::path::Path::new(&format!("/proc/{grandchild}")).exists() },
    )
    .await;
    daemon.terminate().await;
}
