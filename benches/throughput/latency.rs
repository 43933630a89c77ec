//! Pickup latency and idle cost by wake-up source (issue 20), side by side on one
//! private MariaDB writing a row-based binary log: three queues in one tableq, each
//! on a table of its own — polling every 5 s (the old default), polling every
//! 100 ms, and woken by the binary log (the defaults) — get single inserts spaced
//! 0.2–0.9 s apart; each row records when its action started. Then each queue alone
//! sits idle for a window while the server's `Questions` count everything it sent:
//! claims, pause reads, the background count, reconnects.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use mysql_async::prelude::Queryable;

use crate::daemon;
use crate::measure::percentile;
use crate::options::Options;
use crate::server::Bench;

/// The three ways to wake, as queue file lines.
pub const SOURCES: [(&str, &str); 3] = [
    (
        "poll every 5 s",
        "wake = \"poll\"\npoll_interval = \"5s\"\n",
    ),
    (
        "poll every 100 ms",
        "wake = \"poll\"\npoll_interval = \"100ms\"\n",
    ),
    ("binary log (defaults)", ""),
];

/// What one source measured.
pub struct Source {
    pub name: &'static str,
    /// From each insert to its action's start, sorted.
    pub pickups: Vec<Duration>,
    /// Statements per second while idle, everything included.
    pub idle_statements: f64,
    pub idle_window: Duration,
}

pub async fn measure(options: &Options) -> anyhow::Result<Vec<Source>> {
    eprintln!("==> latency: a private MariaDB with --log-bin --binlog-format=ROW");
    let mut bench = Bench::open_with(
        false,
        &["--log-bin", "--binlog-format=ROW", "--server-id=1"],
    )
    .await?;
    for (i, _) in SOURCES.iter().enumerate() {
        create_table(&mut bench, i).await?;
    }
    let pickups = pickups(&mut bench, options).await?;
    let mut sources = Vec::new();
    for (i, (name, _)) in SOURCES.iter().enumerate() {
        let window = idle_window(i, options);
        let idle_statements = idle(&mut bench, i, window).await?;
        sources.push(Source {
            name,
            pickups: pickups[i].clone(),
            idle_statements,
            idle_window: window,
        });
    }
    bench.drop_database().await?;
    Ok(sources)
}

/// The binary log queue polls once a minute: its window holds a few of its polls.
fn idle_window(source: usize, options: &Options) -> Duration {
    match source {
        2 => (options.idle_window * 3).max(Duration::from_secs(120)),
        _ => options.idle_window,
    }
}

async fn create_table(bench: &mut Bench, source: usize) -> anyhow::Result<()> {
    bench
        .admin
        .query_drop(format!(
            "DROP TABLE IF EXISTS lat_{source}; CREATE TABLE lat_{source} (\
             id INT AUTO_INCREMENT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting', \
             created_at TIMESTAMP(6) NOT NULL DEFAULT NOW(6), started_at TIMESTAMP(6) NULL, \
             KEY (state, id)) DEFAULT CHARSET=utf8mb4"
        ))
        .await
        .context("the latency tables")
}

/// A folder holding the queue file of each source in `sources`.
fn queue_files(bench: &mut Bench, sources: &[usize]) -> anyhow::Result<PathBuf> {
    bench.runs += 1;
    let dir = bench.dir.path().join(format!("latency-{}", bench.runs));
    std::fs::create_dir_all(&dir)?;
    for &i in sources {
        let file = format!(
            "{}workers = 4\nselect = \"SELECT id FROM lat_{i} WHERE state = 'waiting' ORDER BY id\"\n\
             [action]\ntype = \"sql\"\nsql = \"UPDATE lat_{i} SET started_at = NOW(6) WHERE id = :id\"\n\
             [on_success]\nsql = \"UPDATE lat_{i} SET state = 'done' WHERE id = :id\"\n",
            SOURCES[i].1
        );
        std::fs::write(dir.join(format!("lat_{i}.toml")), file)?;
    }
    Ok(dir)
}

/// Inserts single rows into every table, spaced 0.2–0.9 s apart, and reads back each
/// one's pickup.
async fn pickups(bench: &mut Bench, options: &Options) -> anyhow::Result<Vec<Vec<Duration>>> {
    let count = if options.idle_window < Duration::from_secs(30) {
        15
    } else {
        40
    };
    let dir = queue_files(bench, &[0, 1, 2])?;
    let log = dir.join("tableq.log");
    let process = daemon::start(bench, &[&"run", &dir], &log)?;
    following(bench).await?;
    for n in 0..count {
        eprint!("\r    insert {}/{count}", n + 1);
        for i in 0..SOURCES.len() {
            let sql = format!("INSERT INTO lat_{i} () VALUES ()");
            bench.admin.query_drop(sql).await?;
        }
        tokio::time::sleep(Duration::from_millis(fastrand::u64(200..=900))).await;
    }
    eprintln!();
    let deadline = Instant::now() + Duration::from_secs(30);
    while waiting(bench).await? > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    process.terminate();
    let exit = process.wait().await?;
    daemon::ensure_success("tableq (latency)", &exit, &log)?;
    let mut all = Vec::new();
    for i in 0..SOURCES.len() {
        all.push(read_pickups(bench, i).await?);
    }
    Ok(all)
}

async fn waiting(bench: &mut Bench) -> anyhow::Result<u64> {
    let mut total = 0;
    for i in 0..SOURCES.len() {
        let sql = format!("SELECT COUNT(*) FROM lat_{i} WHERE state <> 'done'");
        total += bench.admin.query_first::<u64, _>(sql).await?.unwrap_or(0);
    }
    Ok(total)
}

async fn read_pickups(bench: &mut Bench, source: usize) -> anyhow::Result<Vec<Duration>> {
    let sql = format!(
        "SELECT TIMESTAMPDIFF(MICROSECOND, created_at, started_at) FROM lat_{source} \
         WHERE started_at IS NOT NULL"
    );
    let micros: Vec<i64> = bench.admin.query(sql).await?;
    let mut pickups: Vec<Duration> = micros
        .into_iter()
        .map(|us| Duration::from_micros(us.max(0) as u64))
        .collect();
    pickups.sort();
    Ok(pickups)
}

/// Waits until tableq follows the binary log: the server shows its dump thread.
async fn following(bench: &mut Bench) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let sql =
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'";
    while bench.admin.query_first::<u64, _>(sql).await?.unwrap_or(0) == 0 {
        anyhow::ensure!(
            Instant::now() < deadline,
            "tableq did not follow the binary log within a minute"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// Statements per second the server sees from tableq running `source`'s queue alone
/// on its empty table, over `window`.
async fn idle(bench: &mut Bench, source: usize, window: Duration) -> anyhow::Result<f64> {
    eprintln!("    idle: {} for {} s", SOURCES[source].0, window.as_secs());
    let dir = queue_files(bench, &[source])?;
    let log = dir.join("tableq.log");
    let process = daemon::start(bench, &[&"run", &dir], &log)?;
    if SOURCES[source].1.is_empty() {
        following(bench).await?;
    }
    // Every worker connected, settled into its rhythm.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = bench.probe.snapshot().await?;
    let started = Instant::now();
    tokio::time::sleep(window).await;
    let seconds = started.elapsed().as_secs_f64();
    let after = bench.probe.snapshot().await?;
    process.terminate();
    let exit = process.wait().await?;
    daemon::ensure_success("tableq (latency, idle)", &exit, &log)?;
    let questions = bench.probe.delta(&before, &after).counters.get("Questions");
    Ok(questions as f64 / seconds)
}

/// The percentile `p` of `pickups`, in milliseconds.
pub fn millis(pickups: &[Duration], p: f64) -> f64 {
    let ms: Vec<f64> = pickups.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    percentile(&ms, p)
}
