//! The metrics endpoint under a flood of slow clients: what it costs is bounded, and
//! the orchestrator's health check keeps its answers.

use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use crate::support::daemon::{tableq, Daemon};
use crate::support::endpoint::{get, metrics_address};
use crate::support::{QueueFile, QueueFiles, TestDb};

const SLOW_CLIENTS: usize = 2_000;
/// The daemon's own file-descriptor limit: fewer than the clients.
const DAEMON_FDS: u64 = 1_024;

/// The daemon's resident memory, from /proc.
fn rss_bytes(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    kb * 1024
}

/// How many file descriptors the daemon has open, from /proc.
fn open_fds(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |dir| dir.count())
}

/// A client that opens a connection (trying again while the kernel drops its SYNs
/// in the burst) and sends its request headers a line at a time, never finishing
/// them, until `stop` or the server closes the connection.
async fn slow_client(addr: String, stop: CancellationToken) {
    let mut stream = None;
    for _ in 0..5 {
        let connect = tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(&addr));
        if let Ok(Ok(connected)) = connect.await {
            stream = Some(connected);
            break;
        }
    }
    let Some(mut stream) = stream else { return };
    let _ = stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: flood\r\n")
        .await;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
        if stream.write_all(b"X-Slow: 1\r\n").await.is_err() {
            return;
        }
    }
}

/// True if `url` answers 200 within 2 s, as a health probe sees it: a connection
/// the kernel dropped in a burst of SYNs is tried again within that time.
async fn answers(url: &str) -> bool {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_millis(600))
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        if matches!(client.get(url).send().await, Ok(r) if r.status() == 200) {
            return true;
        }
    }
    false
}

/// 2,000 slow clients against a daemon allowed 1,024 file descriptors: /healthz
/// answers every probe within 2 s throughout, the daemon holds fewer than 400 file
/// descriptors, and what it adds to the memory at rest stays under 30 MB.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_flood_of_slow_clients_costs_bounded_memory_and_healthz_keeps_answering() {
    let db = TestDb::new().await;
    db.exec("CREATE TABLE job (id INT PRIMARY KEY) DEFAULT CHARSET=utf8mb4")
        .await;
    let files = QueueFiles::new();
    QueueFile::new("jobs")
        .select("SELECT id FROM job ORDER BY id")
        .action_sql("DELETE FROM job WHERE id = :id")
        .write(&files);
    let mut cmd = tableq(&["run", "--metrics-addr", "127.0.0.1:0", "--history", "off"]);
    cmd.arg(files.path())
        .env("TABLEQ_DATABASE_URL", &db.url)
        .env("TABLEQ_LOG_FORMAT", "json");
    // SAFETY: setrlimit is async-signal-safe; the closure touches nothing else.
    unsafe {
        cmd.as_std_mut().pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: DAEMON_FDS,
                rlim_max: DAEMON_FDS,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut daemon = Daemon::spawn(cmd);
    let addr = metrics_address(&daemon).await;
    let healthz = format!("http://{addr}/healthz");
    assert_eq!(get(&healthz).await.0, 200);
    // The flood's cost is measured from the daemon at rest (the binary grows).
    let at_rest = rss_bytes(daemon.pid());

    let stop = CancellationToken::new();
    let mut clients = Vec::with_capacity(SLOW_CLIENTS);
    for wave in 0..SLOW_CLIENTS / 100 {
        // In waves of 100, so the burst does not only fill the kernel's queues.
        clients.extend((0..100).map(|_| tokio::spawn(slow_client(addr.clone(), stop.clone()))));
        if wave % 4 == 3 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let mut peak = 0;
    let mut most_fds = 0;
    let flood_until = Instant::now() + Duration::from_secs(12);
    let mut probes = 0;
    while Instant::now() < flood_until {
        let started = Instant::now();
        assert!(
            answers(&healthz).await,
            "/healthz did not answer 200 within 2 s during the flood (probe {probes})"
        );
        probes += 1;
        peak = peak.max(rss_bytes(daemon.pid()));
        most_fds = most_fds.max(open_fds(daemon.pid()));
        tokio::time::sleep(Duration::from_millis(250).saturating_sub(started.elapsed())).await;
    }
    stop.cancel();
    for client in clients {
        let _ = client.await;
    }
    let (rest_kb, peak_kb) = (at_rest / 1024, peak / 1024);
    eprintln!("probes {probes}, RSS at rest {rest_kb} KB, peak {peak_kb} KB, fds {most_fds}");
    assert!(
        probes >= 20 && peak > 0 && at_rest > 0,
        "{probes} probes, read no memory"
    );
    assert!(
        peak.saturating_sub(at_rest) < 30 * 1024 * 1024,
        "the flood added {} MB (peak {} MB)",
        peak.saturating_sub(at_rest) / 1024 / 1024,
        peak / 1024 / 1024
    );
    assert_eq!(
        get(&healthz).await.0,
        200,
        "still answering after the flood"
    );
    daemon.terminate().await;
}
