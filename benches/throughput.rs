//! The benchmark of issue 5: tableq against the hand-written worker, on one server.
//!
//! ```text
//! scripts/bench.sh [--quick] [--rows N] [--reps N] [--workers 1,4,16] [--idle-secs S]
//!                  [--backlog N] [--claims N] [--only throughput,idle,backlog]
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
//!    the row sent) at batch 1 and batch 100. Three claim indexes: the article's
//!    `(status, retry_at)`; plus `(status, id)`; plus `(status, id)` with
//!    `FORCE INDEX (status_id)` in the claim. Runs alternate (raw, b1, b100, then
//!    rotated) and each cell is the median of the repetitions.
//! 2. **Idle economy.** 10 empty queues × 16 workers, poll_interval 1s: the server's
//!    `Com_select` and `Questions` over a window, and tableq's RSS and CPU.
//! 3. **Pickup cost vs backlog.** One claim (BEGIN; claim; ROLLBACK) timed at 1,000
//!    and at a large number of waiting rows, with the `(status, id)` index.
//!
//! Both sides use READ COMMITTED, set once per connection (the raw side's best
//! case), prepared statements, and TCP. `tableq` is the binary cargo builds next to
//! this benchmark (or `TABLEQ_BIN`); its wall time includes starting and stopping.

#[allow(dead_code)]
#[path = "../tests/support/mariadb.rs"]
mod mariadb;
#[path = "throughput/measure.rs"]
mod measure;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, Row};

use measure::{median, percentile, table, thousands, Probe};

const USAGE: &str = "usage: scripts/bench.sh [--quick] [--rows N] [--reps N] [--workers 1,4,16] \
[--idle-secs S] [--backlog N] [--claims N] [--only throughput,idle,backlog]
  --quick      smoke test: 2,000 rows, 1 repetition, 10 s idle window, 100,000-row backlog
  --rows       rows per throughput run (default 5000)
  --reps       repetitions of every throughput configuration (default 3)
  --workers    the K values: connections / tableq workers (default 1,4,16)
  --idle-secs  the idle measurement window (default 60)
  --backlog    waiting rows of the large backlog (default 1000000)
  --claims     timed claims per backlog configuration (default 300)
  --only       which parts to run (default all)
env: TABLEQ_BENCH_DATABASE_URL (use this server, not a private one), TABLEQ_BIN";

/// The article's schema, from the file the demo and the docs use.
const EMAIL_SQL: &str = include_str!("../config/email.sql");
const DATABASE: &str = "tableq_bench";

struct Options {
    rows: u64,
    reps: usize,
    workers: Vec<usize>,
    idle_window: Duration,
    backlog: u64,
    claims: usize,
    parts: Vec<String>,
}

impl Options {
    fn parse(args: &[String]) -> Result<Options, String> {
        let quick = args.iter().any(|a| a == "--quick");
        let mut options = Options {
            rows: if quick { 2_000 } else { 5_000 },
            reps: if quick { 1 } else { 3 },
            workers: vec![1, 4, 16],
            idle_window: Duration::from_secs(if quick { 10 } else { 60 }),
            backlog: if quick { 100_000 } else { 1_000_000 },
            claims: if quick { 100 } else { 300 },
            parts: vec!["throughput".into(), "idle".into(), "backlog".into()],
        };
        let mut args = args.iter().filter(|a| *a != "--bench" && *a != "--quick");
        while let Some(arg) = args.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((flag, value)) => (flag, Some(value.to_string())),
                None => (arg.as_str(), None),
            };
            if flag == "--help" || flag == "-h" {
                return Err(USAGE.into());
            }
            const FLAGS: [&str; 7] = [
                "--rows",
                "--reps",
                "--idle-secs",
                "--backlog",
                "--claims",
                "--workers",
                "--only",
            ];
            if !FLAGS.contains(&flag) {
                return Err(format!("unknown flag {flag}\n{USAGE}"));
            }
            let value = inline
                .or_else(|| args.next().cloned())
                .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
            let number = |v: &str| {
                v.replace('_', "")
                    .parse::<u64>()
                    .map_err(|_| format!("{flag}: not a number: {v}"))
            };
            match flag {
                "--rows" => options.rows = number(&value)?.max(1),
                "--reps" => options.reps = number(&value)?.max(1) as usize,
                "--idle-secs" => options.idle_window = Duration::from_secs(number(&value)?.max(1)),
                "--backlog" => options.backlog = number(&value)?.max(1_000),
                "--claims" => options.claims = number(&value)?.max(1) as usize,
                "--workers" => {
                    options.workers = value
                        .split(',')
                        .map(|v| number(v).map(|n| n.max(1) as usize))
                        .collect::<Result<_, _>>()?
                }
                "--only" => {
                    options.parts = value.split(',').map(str::to_string).collect();
                    if let Some(part) = options
                        .parts
                        .iter()
                        .find(|p| !["throughput", "idle", "backlog"].contains(&p.as_str()))
                    {
                        return Err(format!("--only: no part named {part}\n{USAGE}"));
                    }
                }
                _ => unreachable!("checked against FLAGS"),
            }
        }
        Ok(options)
    }

    fn runs(&self, part: &str) -> bool {
        self.parts.iter().any(|p| p == part)
    }
}

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

/// Everything a measurement needs: the database, the binary, a place for files.
struct Bench {
    /// The benchmark's database, as tableq gets it.
    url: String,
    /// The same, for the raw clients: TCP like tableq (mysql_async would otherwise
    /// switch to the Unix socket on localhost).
    opts: Opts,
    bin: PathBuf,
    dir: tempfile::TempDir,
    admin: Conn,
    probe: Probe,
    runs: usize,
}

async fn run(options: Options) -> anyhow::Result<()> {
    let began = Instant::now();
    let external = std::env::var("TABLEQ_BENCH_DATABASE_URL")
        .ok()
        .filter(|u| !u.is_empty());
    let private = match external {
        Some(_) => None,
        None => {
            eprintln!("==> starting a private MariaDB");
            Some(mariadb::MariaDb::start())
        }
    };
    let base = match (&external, &private) {
        (Some(url), _) => without_database(url),
        (None, Some(server)) => server.base_url(),
        (None, None) => unreachable!("either a URL or a private server"),
    };
    let port = Opts::from_url(&base).context("the server URL")?.tcp_port();
    let server_pid = measure::find_server_pid(port);

    let mut admin = connect(&base).await?;
    admin
        .query_drop(format!(
            "DROP DATABASE IF EXISTS {DATABASE}; CREATE DATABASE {DATABASE} DEFAULT CHARSET utf8mb4"
        ))
        .await?;
    admin.disconnect().await?;
    let url = with_database(&base, DATABASE);
    let admin = connect(&url).await?;
    let probe = Probe::new(connect(&url).await?, server_pid).await?;
    let bin = std::env::var_os("TABLEQ_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_tableq")));
    ensure!(bin.exists(), "no tableq binary at {}", bin.display());
    let opts: Opts = OptsBuilder::from_opts(Opts::from_url(&url)?)
        .prefer_socket(false)
        .into();
    let mut bench = Bench {
        url,
        opts,
        bin,
        dir: tempfile::tempdir()?,
        admin,
        probe,
        runs: 0,
    };
    let version: String = bench
        .admin
        .query_first("SELECT VERSION()")
        .await?
        .unwrap_or_default();
    let mut report = format!(
        "server {version} ({}), {} CPUs, tableq {}\n",
        if private.is_some() {
            "private: innodb_flush_log_at_trx_commit=2, buffer pool 128M"
        } else {
            "TABLEQ_BENCH_DATABASE_URL"
        },
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        bench.bin.display()
    );
    if options.runs("throughput") {
        report.push_str(&throughput(&mut bench, &options).await?);
    }
    if options.runs("idle") {
        report.push_str(&idle(&mut bench, &options).await?);
    }
    if options.runs("backlog") {
        report.push_str(&backlog(&mut bench, &options).await?);
    }
    bench
        .admin
        .query_drop(format!("DROP DATABASE IF EXISTS {DATABASE}"))
        .await?;
    let _ = writeln!(
        report,
        "\nThe whole benchmark took {:.0} s.",
        began.elapsed().as_secs_f64()
    );
    println!("\n{report}");
    drop(private);
    Ok(())
}

// ---------------------------------------------------------------------------------
// Throughput

/// Which index the claim can use.
#[derive(Debug, Clone, Copy)]
enum Claim {
    /// The article's table as it is: `INDEX (status, retry_at)`.
    Article,
    /// Plus `INDEX status_id (status, id)`, left to the optimizer.
    StatusId,
    /// Plus `INDEX status_id (status, id)`, and `FORCE INDEX (status_id)` in the claim.
    Forced,
}

impl Claim {
    const ALL: [Claim; 3] = [Claim::Article, Claim::StatusId, Claim::Forced];

    fn label(self) -> &'static str {
        match self {
            Claim::Article => "(status, retry_at)",
            Claim::StatusId => "+ (status, id)",
            Claim::Forced => "+ (status, id) FORCE",
        }
    }

    fn hint(self) -> &'static str {
        match self {
            Claim::Forced => " FORCE INDEX (status_id)",
            _ => "",
        }
    }

    fn extra_index(self) -> bool {
        !matches!(self, Claim::Article)
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Engine {
    Raw,
    Tableq { batch: usize },
}

impl Engine {
    const ALL: [Engine; 3] = [
        Engine::Raw,
        Engine::Tableq { batch: 1 },
        Engine::Tableq { batch: 100 },
    ];

    fn label(self) -> String {
        match self {
            Engine::Raw => "raw SQL".into(),
            Engine::Tableq { batch } => format!("tableq b={batch}"),
        }
    }

    /// The claim this engine sends, as EXPLAIN sees it.
    fn claim_sql(self, claim: Claim, table: &str) -> String {
        match self {
            Engine::Raw => raw_claim_sql(claim),
            Engine::Tableq { batch } => format!(
                "{} LIMIT {batch} FOR UPDATE SKIP LOCKED",
                tableq_select(table, claim.hint())
            ),
        }
    }
}

fn raw_claim_sql(claim: Claim) -> String {
    format!(
        "SELECT id FROM email{} WHERE status = 'waiting' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED",
        claim.hint()
    )
}

/// The queue's select: the same predicate and order as the raw claim, and the
/// article's columns, so the item arrives with the claim.
fn tableq_select(table: &str, hint: &str) -> String {
    format!(
        "SELECT id, recipient, subject, body, attempts FROM {table}{hint} WHERE status = 'waiting' ORDER BY id"
    )
}

/// One drain of a freshly filled table.
#[derive(Debug, Clone, Copy)]
struct Sample {
    items: u64,
    wall: f64,
    /// The client's CPU: tableq's (wait4), or this process's for the raw clients.
    cpu: f64,
    server_cpu: Option<f64>,
    max_rss_kb: Option<u64>,
    reads: u64,
    reads_by_kind: [(char, u64); 5],
    questions: u64,
}

impl Sample {
    fn rate(&self) -> f64 {
        self.items as f64 / self.wall
    }
}

async fn throughput(bench: &mut Bench, options: &Options) -> anyhow::Result<String> {
    let n = options.rows;
    eprintln!(
        "==> throughput: {n} rows, K in {:?}, {} repetitions",
        options.workers, options.reps
    );
    let mut rows = Vec::new();
    let mut fixed_cost = Vec::new();
    for claim in Claim::ALL {
        let plans = plans(bench, claim, n).await?;
        for &k in &options.workers {
            let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); Engine::ALL.len()];
            for rep in 0..options.reps {
                for i in 0..Engine::ALL.len() {
                    let which = (i + rep) % Engine::ALL.len();
                    let engine = Engine::ALL[which];
                    fresh_email(&mut bench.admin, claim, n).await?;
                    let sample = match engine {
                        Engine::Raw => raw_run(bench, claim, k, n).await?,
                        Engine::Tableq { batch } => tableq_run(bench, claim, k, batch, n).await?,
                    };
                    eprintln!(
                        "    {:<22} K={k:<3} {:<12} {:>9} items/s  {:>8.0} reads/item",
                        claim.label(),
                        engine.label(),
                        thousands(sample.rate()),
                        sample.reads as f64 / n as f64
                    );
                    samples[which].push(sample);
                }
            }
            for (which, engine) in Engine::ALL.into_iter().enumerate() {
                rows.push(summarize(claim, k, engine, &plans[which], &samples, which));
            }
        }
        // What a tableq run costs with nothing to do: start, connect, prepare, stop.
        if let Claim::Forced = claim {
            fresh_email(&mut bench.admin, claim, 0).await?;
            for _ in 0..3 {
                fixed_cost.push(tableq_run(bench, claim, 16, 1, 0).await?);
            }
        }
    }
    let mut out = format!(
        "\n## Throughput: {n} rows per run, median of {} alternated repetitions\n\n",
        options.reps
    );
    out.push_str(&table(
        &[
            "claim index",
            "plan: full → half drained",
            "K",
            "engine",
            "items/s",
            "× raw",
            "client CPU s/1k",
            "server CPU s/1k",
            "peak RSS",
            "handler reads/item",
            "statements/item",
        ],
        &rows,
    ));
    out.push_str(
        "\n× raw: median over repetitions of tableq/raw within the same repetition. \
client CPU: tableq's own (wait4), or the raw clients' (this process). \
handler reads/item: f = Handler_read_first (an index walked from its start), \
k = Handler_read_key (an index lookup: a range start or a row by id), n = Handler_read_next \
(one step along an index), r = Handler_read_rnd* (table scan or sorted rows), o = other. \
statements/item: the server's Questions per item (each one a round trip). \
plan: the index EXPLAIN picks for the engine's claim on the full table, and again after \
one raw client worked off half of it; the handler reads show what really ran.\n",
    );
    if !fixed_cost.is_empty() {
        let wall: Vec<f64> = fixed_cost.iter().map(|s| s.wall * 1e3).collect();
        let cpu: Vec<f64> = fixed_cost.iter().map(|s| s.cpu * 1e3).collect();
        let _ = writeln!(
            out,
            "A tableq run on an empty queue (start, connect, prepare, find nothing, stop) takes \
{:.0} ms wall and {:.0} ms CPU; it is inside every tableq items/s above.",
            median(&wall),
            median(&cpu)
        );
    }
    Ok(out)
}

/// Each engine's claim plan on a full table and on a half-drained one: the first
/// half worked off by one raw client just before, as in a run (no ANALYZE, purge and
/// statistics wherever they are). `status_id → PRIMARY` if it changes.
async fn plans(bench: &mut Bench, claim: Claim, n: u64) -> anyhow::Result<Vec<String>> {
    fresh_email(&mut bench.admin, claim, n).await?;
    let mut full = Vec::new();
    for engine in Engine::ALL {
        full.push(explain(&mut bench.admin, &engine.claim_sql(claim, "email")).await?);
    }
    raw_worker(bench.opts.clone(), raw_claim_sql(claim), n / 2).await?;
    let mut plans = Vec::new();
    for (engine, at_start) in Engine::ALL.into_iter().zip(full) {
        let half = explain(&mut bench.admin, &engine.claim_sql(claim, "email")).await?;
        plans.push(if half == at_start {
            at_start
        } else {
            format!("{at_start} → {half}")
        });
    }
    Ok(plans)
}

fn summarize(
    claim: Claim,
    k: usize,
    engine: Engine,
    plan: &str,
    samples: &[Vec<Sample>],
    which: usize,
) -> Vec<String> {
    let mine = &samples[which];
    let per_item = |f: &dyn Fn(&Sample) -> f64| {
        median(
            &mine
                .iter()
                .map(|s| f(s) / s.items.max(1) as f64)
                .collect::<Vec<_>>(),
        )
    };
    let ratio = match engine {
        Engine::Raw => "1.00".to_string(),
        Engine::Tableq { .. } => {
            let ratios: Vec<f64> = mine
                .iter()
                .zip(&samples[0])
                .map(|(t, r)| t.rate() / r.rate())
                .collect();
            format!("{:.2}", median(&ratios))
        }
    };
    let server_cpu = per_item(&|s| s.server_cpu.unwrap_or(f64::NAN) * 1e3);
    let rss: Vec<f64> = mine
        .iter()
        .filter_map(|s| s.max_rss_kb)
        .map(|kb| kb as f64 / 1024.0)
        .collect();
    vec![
        claim.label().to_string(),
        plan.to_string(),
        k.to_string(),
        engine.label(),
        thousands(median(&mine.iter().map(Sample::rate).collect::<Vec<_>>())),
        ratio,
        format!("{:.3}", per_item(&|s| s.cpu * 1e3)),
        if server_cpu.is_finite() {
            format!("{server_cpu:.3}")
        } else {
            "-".into()
        },
        if rss.is_empty() {
            "-".into()
        } else {
            format!("{:.1} MB", median(&rss))
        },
        reads_cell(mine),
        format!("{:.2}", per_item(&|s| s.questions as f64)),
    ]
}

/// Median handler reads per item, and how they split by kind: `1003 = 1 f + 2 k +
/// 1000 n` (kinds under 0.05 per item left out).
fn reads_cell(samples: &[Sample]) -> String {
    let per_item = |f: &dyn Fn(&Sample) -> u64| {
        median(
            &samples
                .iter()
                .map(|s| f(s) as f64 / s.items.max(1) as f64)
                .collect::<Vec<_>>(),
        )
    };
    let parts: Vec<String> = (0..5)
        .filter_map(|i| {
            let value = per_item(&|s| s.reads_by_kind[i].1);
            let letter = samples.first()?.reads_by_kind[i].0;
            (value >= 0.05).then(|| format!("{} {letter}", short(value)))
        })
        .collect();
    format!("{} = {}", short(per_item(&|s| s.reads)), parts.join(" + "))
}

/// `1003.4` → `1003`, `2.04` → `2.0`.
fn short(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

/// The raw SQL limit: `k` connections, each running the article's transaction per
/// item until its claim finds nothing.
async fn raw_run(bench: &mut Bench, claim: Claim, k: usize, n: u64) -> anyhow::Result<Sample> {
    let before = bench.probe.snapshot().await?;
    let cpu_before = measure::self_cpu();
    let started = Instant::now();
    let workers: Vec<_> = (0..k)
        .map(|_| {
            tokio::spawn(raw_worker(
                bench.opts.clone(),
                raw_claim_sql(claim),
                u64::MAX,
            ))
        })
        .collect();
    let mut items = 0;
    for worker in workers {
        items += worker.await??;
    }
    let wall = started.elapsed().as_secs_f64();
    let cpu = measure::self_cpu() - cpu_before;
    let after = bench.probe.snapshot().await?;
    let delta = bench.probe.delta(&before, &after);
    ensure!(items == n, "the raw clients processed {items} of {n} rows");
    verify_sent(&mut bench.admin, n).await?;
    Ok(Sample {
        items,
        wall,
        cpu,
        server_cpu: delta.server_cpu,
        max_rss_kb: None,
        reads: delta.counters.handler_reads(),
        reads_by_kind: delta.counters.handler_reads_by_kind(),
        questions: delta.counters.get("Questions"),
    })
}

/// One hand-written worker: the article's loop, with prepared statements, until a
/// claim finds nothing (or `limit` items are done).
async fn raw_worker(opts: Opts, claim_sql: String, limit: u64) -> anyhow::Result<u64> {
    let mut conn = Conn::new(opts).await?;
    conn.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        .await?;
    let claim = conn.prep(claim_sql).await?;
    let read = conn.prep("SELECT * FROM email WHERE id = ?").await?;
    let mark = conn
        .prep("UPDATE email SET status = 'sent' WHERE id = ?")
        .await?;
    let mut done = 0;
    while done < limit {
        conn.query_drop("BEGIN").await?;
        let step = async {
            let Some(id) = conn.exec_first::<u64, _, _>(&claim, ()).await? else {
                return Ok(false);
            };
            let _row: Option<Row> = conn.exec_first(&read, (id,)).await?;
            conn.exec_drop(&mark, (id,)).await?;
            Ok::<_, mysql_async::Error>(true)
        };
        match step.await {
            Ok(true) => {
                conn.query_drop("COMMIT").await?;
                done += 1;
            }
            Ok(false) => {
                conn.query_drop("COMMIT").await?;
                break;
            }
            // Deadlock or lock wait timeout: the transaction is gone; try again.
            Err(mysql_async::Error::Server(e)) if e.code == 1213 || e.code == 1205 => {
                conn.query_drop("ROLLBACK").await?;
            }
            Err(e) => return Err(e.into()),
        }
    }
    conn.disconnect().await?;
    Ok(done)
}

/// tableq drains the table: the real binary, `run --stop-when-empty`.
async fn tableq_run(
    bench: &mut Bench,
    claim: Claim,
    workers: usize,
    batch: usize,
    n: u64,
) -> anyhow::Result<Sample> {
    bench.runs += 1;
    let file = bench.dir.path().join(format!("email-{}.toml", bench.runs));
    std::fs::write(
        &file,
        queue_file("email", "email", claim.hint(), workers, batch),
    )?;
    let log = bench.dir.path().join(format!("tableq-{}.log", bench.runs));
    let before = bench.probe.snapshot().await?;
    let process = measure::spawn(tableq_command(
        bench,
        &[&"run", &"--stop-when-empty", &file],
        &log,
    )?)?;
    let exit = process.wait().await?;
    let after = bench.probe.snapshot().await?;
    let delta = bench.probe.delta(&before, &after);
    ensure!(
        exit.code == Some(0),
        "tableq exited with {:?}: {}",
        exit.code,
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    verify_sent(&mut bench.admin, n).await?;
    Ok(Sample {
        items: n,
        wall: exit.wall.as_secs_f64(),
        cpu: exit.cpu,
        server_cpu: delta.server_cpu,
        max_rss_kb: Some(exit.max_rss_kb),
        reads: delta.counters.handler_reads(),
        reads_by_kind: delta.counters.handler_reads_by_kind(),
        questions: delta.counters.get("Questions"),
    })
}

fn queue_file(name: &str, table: &str, hint: &str, workers: usize, batch: usize) -> String {
    format!(
        r#"name = "{name}"
workers = {workers}
batch = {batch}
poll_interval = "1s"
select = "{select}"
key = "id"

[action]
type = "sql"
sql = "UPDATE {table} SET status = 'sent' WHERE id = :id"
"#,
        select = tableq_select(table, hint)
    )
}

fn tableq_command(
    bench: &Bench,
    args: &[&dyn AsRef<std::ffi::OsStr>],
    log: &Path,
) -> anyhow::Result<Command> {
    let mut cmd = Command::new(&bench.bin);
    cmd.args(args.iter().map(|a| a.as_ref()))
        .env("TABLEQ_DATABASE_URL", &bench.url)
        .env("TABLEQ_LOG", "warn")
        .env_remove("DATABASE_URL")
        .env_remove("TABLEQ_LOG_FORMAT")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(log)?)
        .stderr(std::fs::File::create(log)?);
    Ok(cmd)
}

async fn verify_sent(admin: &mut Conn, n: u64) -> anyhow::Result<()> {
    let (sent, total): (u64, u64) = admin
        .query_first("SELECT COALESCE(SUM(status = 'sent'), 0), COUNT(*) FROM email")
        .await?
        .unwrap_or_default();
    ensure!(
        sent == n && total == n,
        "{sent} of {total} rows sent, expected {n}"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------
// Idle economy

async fn idle(bench: &mut Bench, options: &Options) -> anyhow::Result<String> {
    const QUEUES: usize = 10;
    const WORKERS: usize = 16;
    let window = options.idle_window;
    eprintln!(
        "==> idle: {QUEUES} empty queues × {WORKERS} workers, poll_interval 1s, {} s window",
        window.as_secs()
    );
    let queues = bench.dir.path().join("idle");
    std::fs::create_dir_all(&queues)?;
    for q in 0..QUEUES {
        let table = format!("idle_{q}");
        create_email_table(&mut bench.admin, &table, true).await?;
        std::fs::write(
            queues.join(format!("{table}.toml")),
            queue_file(&table, &table, Claim::Forced.hint(), WORKERS, 1),
        )?;
    }
    let log = bench.dir.path().join("tableq-idle.log");
    let process = measure::spawn(tableq_command(bench, &[&"run", &queues], &log)?)?;
    // Let every worker connect and settle into its polling rhythm.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = bench.probe.snapshot().await?;
    let cpu_before = measure::process_cpu(process.pid);
    let started = Instant::now();
    tokio::time::sleep(window).await;
    let seconds = started.elapsed().as_secs_f64();
    let after = bench.probe.snapshot().await?;
    let cpu_after = measure::process_cpu(process.pid);
    let rss = measure::process_memory_kb(process.pid, "VmRSS");
    process.terminate();
    let exit = process.wait().await?;
    ensure!(
        exit.code == Some(0),
        "tableq (idle) exited with {:?}: {}",
        exit.code,
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let delta = bench.probe.delta(&before, &after);
    let polls = QUEUES as f64 * seconds; // poll intervals of 1 s, summed over queues
    let selects = delta.counters.get("Com_select");
    let questions = delta.counters.get("Questions");
    let percent =
        |cpu: Option<f64>| cpu.map_or("-".into(), |c| format!("{:.1}%", c / seconds * 100.0));
    let mut out = format!(
        "\n## Idle: {QUEUES} empty queues × {WORKERS} workers, poll_interval 1s, {seconds:.0} s window\n\n"
    );
    out.push_str(&table(
        &["measure", "value"],
        &[
            vec!["Com_select".into(), thousands(selects as f64)],
            vec![
                "claims per queue per poll_interval (target ≤ 1)".into(),
                format!("{:.1}", selects as f64 / polls),
            ],
            vec![
                "Questions (statements) per second".into(),
                format!("{:.0}", questions as f64 / seconds),
            ],
            vec![
                "handler reads per second".into(),
                format!("{:.0}", delta.counters.handler_reads() as f64 / seconds),
            ],
            vec![
                "tableq CPU (of one core)".into(),
                percent(cpu_before.zip(cpu_after).map(|(b, a)| a - b)),
            ],
            vec!["server CPU (of one core)".into(), percent(delta.server_cpu)],
            vec![
                "tableq RSS at the end of the window".into(),
                rss.map_or("-".into(), |kb| format!("{:.1} MB", kb as f64 / 1024.0)),
            ],
            vec![
                "tableq peak RSS (wait4)".into(),
                format!("{:.1} MB", exit.max_rss_kb as f64 / 1024.0),
            ],
        ],
    ));
    Ok(out)
}

// ---------------------------------------------------------------------------------
// Pickup cost vs backlog

async fn backlog(bench: &mut Bench, options: &Options) -> anyhow::Result<String> {
    let sizes = [("small", 1_000), ("large", options.backlog)];
    eprintln!(
        "==> backlog: filling 1,000 and {} waiting rows",
        thousands(options.backlog as f64)
    );
    for (name, rows) in sizes {
        let table = format!("backlog_{name}");
        create_email_table(&mut bench.admin, &table, true).await?;
        let started = Instant::now();
        fill(&mut bench.admin, &table, rows).await?;
        bench
            .admin
            .query_drop(format!("ANALYZE TABLE {table}"))
            .await?;
        eprintln!(
            "    {table}: {} rows in {:.1} s",
            thousands(rows as f64),
            started.elapsed().as_secs_f64()
        );
    }
    let mut conn = Conn::new(bench.opts.clone()).await?;
    conn.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        .await?;
    // (size, rows, hint, claim text)
    let mut combos = Vec::new();
    for (name, rows) in sizes {
        for claim in [Claim::StatusId, Claim::Forced] {
            let sql = format!(
                "{} LIMIT 1 FOR UPDATE SKIP LOCKED",
                tableq_select(&format!("backlog_{name}"), claim.hint())
            );
            combos.push((rows, claim, sql));
        }
    }
    let mut statements = Vec::new();
    let mut plans = Vec::new();
    let mut reads = Vec::new();
    for (_, _, sql) in &combos {
        statements.push(conn.prep(sql.as_str()).await?);
        plans.push(explain(&mut bench.admin, sql).await?);
        // Handler reads per claim: a batch of claims between two snapshots.
        const PROBES: usize = 20;
        let before = bench.probe.snapshot().await?;
        for _ in 0..PROBES {
            one_claim(&mut conn, statements.last().expect("just pushed")).await?;
        }
        let after = bench.probe.snapshot().await?;
        reads.push(
            bench.probe.delta(&before, &after).counters.handler_reads() as f64 / PROBES as f64,
        );
    }
    // Timed claims, alternating over every configuration.
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); combos.len()];
    for _ in 0..options.claims {
        for (i, statement) in statements.iter().enumerate() {
            times[i].push(one_claim(&mut conn, statement).await?.as_secs_f64() * 1e6);
        }
    }
    conn.disconnect().await?;
    let medians: Vec<f64> = times.iter().map(|t| median(t)).collect();
    let rows: Vec<Vec<String>> = combos
        .iter()
        .enumerate()
        .map(|(i, (rows, claim, _))| {
            vec![
                thousands(*rows as f64),
                claim.label().to_string(),
                plans[i].clone(),
                format!("{:.0}", medians[i]),
                format!("{:.0}", percentile(&times[i], 90.0)),
                format!("{:.1}", reads[i]),
            ]
        })
        .collect();
    let mut out = format!(
        "\n## Pickup cost vs backlog: BEGIN; claim LIMIT 1 FOR UPDATE SKIP LOCKED; ROLLBACK \
(median of {} alternated claims)\n\n",
        options.claims
    );
    out.push_str(&table(
        &[
            "waiting rows",
            "claim index",
            "plan (EXPLAIN)",
            "median µs",
            "p90 µs",
            "handler reads/claim",
        ],
        &rows,
    ));
    for (i, claim) in [Claim::StatusId, Claim::Forced].iter().enumerate() {
        let _ = writeln!(
            out,
            "{}: large/small = {:.2} (target ≤ 2)",
            claim.label(),
            medians[i + 2] / medians[i]
        );
    }
    Ok(out)
}

async fn one_claim(conn: &mut Conn, claim: &mysql_async::Statement) -> anyhow::Result<Duration> {
    let started = Instant::now();
    conn.query_drop("BEGIN").await?;
    let row: Option<Row> = conn.exec_first(claim, ()).await?;
    conn.query_drop("ROLLBACK").await?;
    let took = started.elapsed();
    ensure!(row.is_some(), "the claim found no waiting row");
    Ok(took)
}

// ---------------------------------------------------------------------------------
// Tables

/// Drops and recreates `email` with `rows` waiting emails and the claim's indexes.
async fn fresh_email(admin: &mut Conn, claim: Claim, rows: u64) -> anyhow::Result<()> {
    create_email_table(admin, "email", claim.extra_index()).await?;
    fill(admin, "email", rows).await?;
    admin.query_drop("ANALYZE TABLE email").await?;
    Ok(())
}

/// The article's email table, as `config/email.sql` has it, named `table`; with
/// `status_id` = `INDEX (status, id)` added if asked.
async fn create_email_table(admin: &mut Conn, table: &str, status_id: bool) -> anyhow::Result<()> {
    let start = EMAIL_SQL
        .find("CREATE TABLE email (")
        .context("config/email.sql has no CREATE TABLE email")?;
    let end = start
        + EMAIL_SQL[start..]
            .find(';')
            .context("config/email.sql: no `;`")?;
    let ddl = EMAIL_SQL[start..end].replacen("TABLE email", &format!("TABLE {table}"), 1);
    admin
        .query_drop(format!("DROP TABLE IF EXISTS {table}"))
        .await?;
    admin.query_drop(ddl).await?;
    if status_id {
        admin
            .query_drop(format!(
                "ALTER TABLE {table} ADD INDEX status_id (status, id)"
            ))
            .await?;
    }
    Ok(())
}

/// Inserts `rows` waiting emails: MariaDB's SEQUENCE engine in chunks, or, on a
/// server without it, doubling the table with INSERT … SELECT.
async fn fill(admin: &mut Conn, table: &str, rows: u64) -> anyhow::Result<()> {
    const CHUNK: u64 = 100_000;
    let columns = "recipient, subject, body";
    let mut first = 1;
    while first <= rows {
        let last = (first + CHUNK - 1).min(rows);
        let sequence = format!(
            "INSERT INTO {table} ({columns}) SELECT CONCAT('user', seq, '@example.com'), \
             CONCAT('Hello #', seq), 'This is the body of the email.' FROM seq_{first}_to_{last}"
        );
        match admin.query_drop(sequence).await {
            Ok(()) => first = last + 1,
            Err(mysql_async::Error::Server(_)) if first == 1 => {
                return fill_by_doubling(admin, table, rows).await
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

async fn fill_by_doubling(admin: &mut Conn, table: &str, rows: u64) -> anyhow::Result<()> {
    let columns = "recipient, subject, body";
    admin
        .query_drop(format!(
            "INSERT INTO {table} ({columns}) VALUES ('user1@example.com', 'Hello #1', 'This is the body of the email.')"
        ))
        .await?;
    let mut have = 1;
    while have < rows {
        let more = have.min(rows - have);
        admin
            .query_drop(format!(
                "INSERT INTO {table} ({columns}) SELECT {columns} FROM {table} LIMIT {more}"
            ))
            .await?;
        have += more;
    }
    Ok(())
}

/// EXPLAIN's verdict on a claim: the index it walks, and a filesort if it sorts.
async fn explain(admin: &mut Conn, sql: &str) -> anyhow::Result<String> {
    let rows: Vec<Row> = admin.query(format!("EXPLAIN {sql}")).await?;
    let Some(row) = rows.first() else {
        bail!("EXPLAIN returned nothing for {sql}");
    };
    let key: Option<String> = row.get_opt("key").and_then(Result::ok).flatten();
    let extra: Option<String> = row.get_opt("Extra").and_then(Result::ok).flatten();
    let mut plan = key.unwrap_or_else(|| "none (full scan)".into());
    if extra.is_some_and(|e| e.contains("filesort")) {
        plan.push_str(" + filesort");
    }
    Ok(plan)
}

// ---------------------------------------------------------------------------------
// Connections

async fn connect(url: &str) -> anyhow::Result<Conn> {
    let opts = OptsBuilder::from_opts(Opts::from_url(url)?).prefer_socket(false);
    Conn::new(opts)
        .await
        .with_context(|| format!("cannot connect to {}", without_password(url)))
}

fn without_password(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            let user = credentials.split(':').next().unwrap_or("");
            format!("{}{user}@{}", &url[..scheme + 3], &url[at + 1..])
        }
        _ => url.to_string(),
    }
}

/// `mysql://u:p@h:1/db?x=1` → `mysql://u:p@h:1?x=1`.
fn without_database(url: &str) -> String {
    let (url, query) = url.split_once('?').unwrap_or((url, ""));
    let scheme_end = url.find("://").map_or(0, |i| i + 3);
    let host_end = url[scheme_end..]
        .find('/')
        .map_or(url.len(), |i| scheme_end + i);
    let base = &url[..host_end];
    if query.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{query}")
    }
}

fn with_database(base: &str, name: &str) -> String {
    match base.split_once('?') {
        Some((url, query)) => format!("{url}/{name}?{query}"),
        None => format!("{base}/{name}"),
    }
}
