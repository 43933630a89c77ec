//! Part 2, idle economy: tableq with 10 empty queues × 16 workers, poll_interval 1s,
//! watched over a window: the claims and statements the server sees, tableq's CPU
//! and memory.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::claim::Claim;
use crate::measure::{self, Delta};
use crate::options::Options;
use crate::server::Bench;
use crate::{daemon, email};

pub const QUEUES: usize = 10;
pub const WORKERS: usize = 16;

/// What the part measured.
pub struct Idle {
    /// The window, as it really was.
    pub seconds: f64,
    /// What the server did in the window.
    pub server: Delta,
    /// tableq's CPU seconds in the window.
    pub cpu: Option<f64>,
    /// tableq's RSS at the end of the window, in KiB.
    pub rss_kb: Option<u64>,
    /// tableq's peak RSS over its whole life (wait4), in KiB.
    pub peak_rss_kb: u64,
}

pub async fn measure(bench: &mut Bench, options: &Options) -> anyhow::Result<Idle> {
    let window = options.idle_window;
    eprintln!(
        "==> idle: {QUEUES} empty queues × {WORKERS} workers, poll_interval 1s, {} s window",
        window.as_secs()
    );
    let queues = empty_queues(bench).await?;
    let log = bench.dir.path().join("tableq-idle.log");
    let process = daemon::start(bench, &[&"run", &queues], &log)?;
    // Let every worker connect and settle into its polling rhythm.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = bench.probe.snapshot().await?;
    let cpu_before = measure::process_cpu(process.pid);
    let started = Instant::now();
    tokio::time::sleep(window).await;
    let seconds = started.elapsed().as_secs_f64();
    let after = bench.probe.snapshot().await?;
    let cpu_after = measure::process_cpu(process.pid);
    let rss_kb = measure::process_memory_kb(process.pid, "VmRSS");
    process.terminate();
    let exit = process.wait().await?;
    daemon::ensure_success("tableq (idle)", &exit, &log)?;
    Ok(Idle {
        seconds,
        server: bench.probe.delta(&before, &after),
        cpu: cpu_before.zip(cpu_after).map(|(b, a)| a - b),
        rss_kb,
        peak_rss_kb: exit.max_rss_kb,
    })
}

/// Creates the empty tables `idle_0` … and a folder with a queue file for each.
async fn empty_queues(bench: &mut Bench) -> anyhow::Result<PathBuf> {
    let queues = bench.dir.path().join("idle");
    std::fs::create_dir_all(&queues)?;
    for q in 0..QUEUES {
        let table = format!("idle_{q}");
        email::create(&mut bench.admin, &table, true).await?;
        // The claims alone: the background count (two SELECTs per queue every
        // stats_interval, 15 s by default) is left out of the window; docs/src/explanation/performance.md
        // gives its cost.
        let file = daemon::queue_file(&table, Claim::Forced, WORKERS, 1);
        std::fs::write(
            queues.join(format!("{table}.toml")),
            format!("stats_interval = \"1h\"\n{file}"),
        )?;
    }
    Ok(queues)
}
