//! The benchmark of issue 5: tableq against the hand-written worker, on one server.
//!
//! ```text
//! scripts/bench.sh [--quick] [--rows N] [--reps N] [--workers 1,4,16] [--idle-secs S]
//!                  [--backlog N] [--claims N] [--only throughput,idle,backlog,http,brokers,latency]
//! ```
//!
//! One run, on one private MariaDB (or the server of `TABLEQ_BENCH_DATABASE_URL`, in a
//! database `tableq_bench` it creates and drops), measures three things:
//!
//! 1. **Throughput.** The article's email table, freshly filled with N waiting rows
//!    for every run, is drained by (a) the raw SQL limit: K connections each running
//!    the article's per-item transaction (BEGIN; claim one id FOR UPDATE SKIP LOCKED;
//!    read the row; mark it sent; COMMIT) until a claim finds nothing, and (b) the real
//!    `tableq` binary (`run --stop-when-empty`, workers = K, an SQL action that marks
//!    the row sent) at batch 1 and batch 100, and at batch 100 in `scope = "batch"`
//!    (one UPDATE per batch, joined with `:batch` by `JSON_TABLE`). Three claim
//!    indexes: the article's `(status, retry_at)`; plus `(status, id)`; plus
//!    `(status, id)` with `FORCE INDEX (status_id)` in the claim. Runs alternate (raw,
//!    b1, b100, b100 batch scope, then rotated) and each cell is the median of the
//!    repetitions.
//! 2. **Idle economy.** 10 empty queues × 16 workers, poll_interval 1s: the server's
//!    `Com_select` and `Questions` over a window, and tableq's RSS and CPU.
//! 3. **Pickup cost vs backlog.** One claim (BEGIN; claim; ROLLBACK) timed at 1,000
//!    and at a large number of waiting rows, with the `(status, id)` index.
//!
//! Both sides use READ COMMITTED, set once per connection (the raw side's best
//! case), prepared statements, and TCP. `tableq` is the binary cargo builds next to
//! this benchmark (or `TABLEQ_BIN`); its wall time includes starting and stopping.
//!
//! # Layout
//!
//! - `options`: the command line: flags, their defaults, `--quick`, the usage text.
//! - `server`: the server under test (a private MariaDB or the given one), the
//!   benchmark's database on it, and [`server::Bench`], what every part measures with.
//! - `email`: the article's email table: created, filled with waiting rows, checked.
//! - `claim`: which index the claim can use, the claim statements, EXPLAIN's verdict.
//! - `engine`: what drains the table (the raw clients, or tableq at a batch size),
//!   and [`engine::Sample`], what one drain measured.
//! - `raw`: the hand-written worker, the article's per-item transaction.
//! - `daemon`: the real tableq binary: its queue file, its command line, one drain.
//! - `throughput`, `idle`, `backlog`: the three parts of issue 5; each measures and
//!   returns its results. `http`: webhook deliveries to a local endpoint (issue 3),
//!   measured and reported by itself; `brokers`: the same rows published to the
//!   local RabbitMQ and NATS JetStream (issue 23), at batch 1 and 100.
//! - `latency`: pickup latency and idle statements by wake-up source (issue 20), on a
//!   private MariaDB of its own writing a row-based binary log.
//! - `report`: the printed report: header, the three parts' tables, footer.
//! - `measure`: the server's counters, a process's CPU and memory, medians, tables.

// The test harness's own code, not a copy: the private MariaDB, and the choice
// between it and the server an environment variable names.
#[allow(dead_code)]
#[path = "../tests/it/support/mariadb.rs"]
mod mariadb;
#[allow(dead_code)]
#[path = "../tests/it/support/server.rs"]
mod test_server;

#[path = "throughput/backlog.rs"]
mod backlog;
#[path = "throughput/brokers.rs"]
mod brokers;
#[path = "throughput/claim.rs"]
mod claim;
#[path = "throughput/daemon.rs"]
mod daemon;
#[path = "throughput/email.rs"]
mod email;
#[path = "throughput/engine.rs"]
mod engine;
#[path = "throughput/http.rs"]
mod http;
#[path = "throughput/idle.rs"]
mod idle;
#[path = "throughput/latency.rs"]
mod latency;
#[path = "throughput/measure.rs"]
mod measure;
#[path = "throughput/options.rs"]
mod options;
#[path = "throughput/raw.rs"]
mod raw;
#[path = "throughput/report.rs"]
mod report;
#[path = "throughput/server.rs"]
mod server;
#[path = "throughput/throughput.rs"]
mod throughput;

use std::process::ExitCode;
use std::time::Instant;

use options::Options;
use server::Bench;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo test --all-targets` runs benches without `--bench`: do nothing then.
    if !args.iter().any(|a| a == "--bench") {
        println!("throughput: a benchmark; run it with scripts/bench.sh");
        return ExitCode::SUCCESS;
    }
    let options = match Options::parse(&args) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(options)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("benchmark failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Sets up the server and its database, runs the parts `options` asks for, and
/// prints the report; the private server, if any, stops when `bench` is dropped.
async fn run(options: Options) -> anyhow::Result<()> {
    let began = Instant::now();
    let mut bench = Bench::open(options.durable).await?;
    let version = bench.version().await?;
    let mut out = report::header(&version, bench.origin(), &bench.bin);
    if options.runs("throughput") {
        let results = throughput::measure(&mut bench, &options).await?;
        out.push_str(&report::throughput(&results));
    }
    if options.runs("idle") {
        out.push_str(&report::idle(&idle::measure(&mut bench, &options).await?));
    }
    if options.runs("backlog") {
        out.push_str(&report::backlog(
            &backlog::measure(&mut bench, &options).await?,
        ));
    }
    if options.runs("http") {
        out.push_str(&http::report(&http::measure(&mut bench, &options).await?));
    }
    if options.runs("brokers") {
        out.push_str(&brokers::report(
            &brokers::measure(&mut bench, &options).await?,
        ));
    }
    if options.runs("latency") {
        out.push_str(&report::latency(&latency::measure(&options).await?));
    }
    bench.drop_database().await?;
    out.push_str(&report::footer(began.elapsed()));
    println!("\n{out}");
    Ok(())
}
