//! systemd's notify protocol over a real unix datagram socket handed to the real
//! binary in `NOTIFY_SOCKET`: READY once the queues have prepared, RELOADING and
//! READY around a reload (ERRNO when it is refused), STOPPING at shutdown, and
//! WATCHDOG only while the queues make progress, and at once after a reload.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mysql_async::prelude::Queryable;
use tokio::net::UnixDatagram;

use crate::support::daemon::{tableq, Daemon};
use crate::support::{assert_has, eventually, job_table, waiting_jobs, QueueFiles, TestDb};

/// What tableq sent to the socket, one datagram per entry.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<String>>>);

impl Received {
    /// Listens on a fresh socket in `dir`; returns its path.
    fn listen(dir: &std::path::Path) -> (Received, std::path::PathBuf) {
        let path = dir.join("notify.sock");
        let socket = UnixDatagram::bind(&path).expect("bind the notify socket");
        let received = Received::default();
        let sink = received.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            while let Ok(n) = socket.recv(&mut buf).await {
                let message = String::from_utf8_lossy(&buf[..n]).into_owned();
                sink.0.lock().unwrap().push(message);
            }
        });
        (received, path)
    }

    fn all(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    /// How many datagrams held the line `field` (e.g. `READY=1`).
    fn count(&self, field: &str) -> usize {
        self.all()
            .iter()
            .filter(|m| m.lines().any(|l| l == field))
            .count()
    }

    async fn wait_for(&self, field: &str, times: usize) {
        let what = format!("{times} datagram(s) with {field}");
        eventually(&what, Duration::from_secs(60), || async {
            self.count(field) >= times
        })
        .await;
    }
}

/// A tableq running one polling queue, with `NOTIFY_SOCKET` (and `env`) set: the
/// test's database, queue files, what the socket received, and the daemon.
async fn notifying(env: &[(&str, &str)]) -> (TestDb, QueueFiles, PathBuf, Received, Daemon) {
    let db = TestDb::new().await;
    job_table(&db, &[]).await;
    let files = QueueFiles::new();
    let file = waiting_jobs("jobs")
        .poll_interval("100ms")
        .error_backoff("100ms")
        .action_sql("DO 1")
        .action_set("timeout", "1s")
        .write(&files);
    let (received, socket) = Received::listen(&files.path());
    let mut cmd = tableq(&["run"]);
    cmd.arg(&file)
        .env("TABLEQ_DATABASE_URL", &db.url)
        .env("NOTIFY_SOCKET", &socket)
        .envs(env.iter().copied());
    let daemon = Daemon::spawn(cmd);
    (db, files, file, received, daemon)
}

/// Waits for the first READY=1, and for the queue to have started.
async fn ready_and_started(received: &Received, daemon: &Daemon) {
    received.wait_for("READY=1", 1).await;
    daemon
        .wait_for_log("queue started", Duration::from_secs(10))
        .await;
}

/// READY after start, RELOADING with MONOTONIC_USEC then READY around a reload,
/// ERRNO and a STATUS when a reload is refused, STOPPING at SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tells_systemd_ready_reloading_and_stopping() {
    let (_db, _files, file, received, mut daemon) = notifying(&[]).await;
    ready_and_started(&received, &daemon).await;
    assert_eq!(received.count("WATCHDOG=1"), 0, "no watchdog was asked for");

    daemon.signal(libc::SIGHUP);
    received.wait_for("READY=1", 2).await;
    let reloading = received
        .all()
        .into_iter()
        .find(|m| m.lines().any(|l| l == "RELOADING=1"))
        .expect("RELOADING=1 before READY=1");
    assert!(reloading.contains("MONOTONIC_USEC="), "{reloading}");

    std::fs::write(&file, "select = \"SELECT\"\n").unwrap();
    daemon.signal(libc::SIGHUP);
    received.wait_for("READY=1", 3).await;
    let refused = received.all().pop().unwrap();
    assert!(refused.contains("ERRNO=22"), "{refused}");
    assert!(refused.contains("STATUS=reload refused: "), "{refused}");

    daemon.signal(libc::SIGTERM);
    received.wait_for("STOPPING=1", 1).await;
    assert_eq!(daemon.wait(Duration::from_secs(20)).await.code(), Some(0));
}

/// A reload, which feeds nothing while it prepares the changed queues, feeds the
/// watchdog as soon as it is done: systemd does not wait a whole period for news.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_feeds_the_watchdog_when_it_is_done() {
    // Ten minutes: the first tick would come long after the test.
    let (_db, _files, _file, received, mut daemon) =
        notifying(&[("WATCHDOG_USEC", "600000000")]).await;
    ready_and_started(&received, &daemon).await;
    assert_eq!(received.count("WATCHDOG=1"), 0, "no tick yet");

    daemon.signal(libc::SIGHUP);
    received.wait_for("READY=1", 2).await;
    received.wait_for("WATCHDOG=1", 1).await;
    let all = received.all();
    let at = |field: &str| all.iter().rposition(|m| m.lines().any(|l| l == field));
    assert!(
        at("READY=1") < at("WATCHDOG=1"),
        "WATCHDOG=1 after the reload's READY=1: {all:?}"
    );
    daemon.terminate().await;
}

/// WATCHDOG=1 keeps coming while the queue polls; none while its only worker is
/// stuck in a claim behind a table lock; it resumes once the lock is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feeds_the_watchdog_only_while_the_queue_makes_progress() {
    let (db, _files, _file, received, mut daemon) = notifying(&[("WATCHDOG_USEC", "400000")]).await;
    received.wait_for("WATCHDOG=1", 3).await;

    // Every claim now waits for the table lock: the worker is stuck.
    let mut lock = db.conn().await;
    lock.query_drop("LOCK TABLES job WRITE").await.unwrap();
    eventually(
        "tableq reports the stall",
        Duration::from_secs(60),
        || async {
            received
                .all()
                .iter()
                .any(|m| m.contains("STATUS=stalled: jobs"))
        },
    )
    .await;
    let fed = received.count("WATCHDOG=1");
    // Watch the stuck claim wait two more seconds, on the server's clock: ten
    // watchdog periods in which a fed watchdog would have heard of it.
    let waited = || async {
        db.scalar::<Option<i64>>(&format!(
            "SELECT MAX(TIME) FROM information_schema.PROCESSLIST WHERE DB = '{}' AND STATE LIKE 'Waiting for table%'",
            db.name
        ))
        .await
        .unwrap_or(0)
    };
    let since = waited().await;
    eventually(
        "the claim waits two more seconds",
        Duration::from_secs(30),
        || async { waited().await >= since + 2 },
    )
    .await;
    assert_eq!(received.count("WATCHDOG=1"), fed, "no WATCHDOG while stuck");
    assert_has(&daemon.stderr(), "the watchdog is no longer fed");

    lock.query_drop("UNLOCK TABLES").await.unwrap();
    received.wait_for("WATCHDOG=1", fed + 2).await;
    daemon.terminate().await;
}
