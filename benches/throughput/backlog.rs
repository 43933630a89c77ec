//! Part 3, pickup cost vs backlog: one claim (BEGIN; claim LIMIT 1 FOR UPDATE SKIP
//! LOCKED; ROLLBACK) timed at 1,000 waiting rows and at a large backlog, with the
//! `(status, id)` index left to the optimizer and forced.

use std::time::{Duration, Instant};

use anyhow::ensure;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row, Statement};

use crate::claim::{explain, Claim};
use crate::email;
use crate::measure::thousands;
use crate::options::Options;
use crate::server::{self, Bench};

/// The claims timed, on each table.
pub const CLAIMS: [Claim; 2] = [Claim::StatusId, Claim::Forced];

/// What the part measured.
pub struct Backlog {
    /// Timed claims per configuration.
    pub claims: usize,
    /// The small table's configurations, then the large one's, in [`CLAIMS`] order.
    pub configs: Vec<Config>,
}

/// One table size and one claim.
pub struct Config {
    /// Waiting rows.
    pub rows: u64,
    pub claim: Claim,
    /// EXPLAIN's verdict on the claim.
    pub plan: String,
    /// Handler reads per claim.
    pub reads: f64,
    /// Each timed claim, in µs.
    pub micros: Vec<f64>,
}

pub async fn measure(bench: &mut Bench, options: &Options) -> anyhow::Result<Backlog> {
    let sizes = [("small", 1_000), ("large", options.backlog)];
    eprintln!(
        "==> backlog: filling 1,000 and {} waiting rows",
        thousands(options.backlog as f64)
    );
    fill_tables(bench, &sizes).await?;
    let mut conn = server::read_committed(bench.opts.clone()).await?;
    let mut configs = Vec::new();
    let mut statements = Vec::new();
    for (name, rows) in sizes {
        for claim in CLAIMS {
            let sql = claim.tableq_sql(&format!("backlog_{name}"), 1);
            let statement = conn.prep(sql.as_str()).await?;
            configs.push(Config {
                rows,
                claim,
                plan: explain(&mut bench.admin, &sql).await?,
                reads: reads_per_claim(bench, &mut conn, &statement).await?,
                micros: Vec::new(),
            });
            statements.push(statement);
        }
    }
    // Timed claims, alternating over every configuration.
    for _ in 0..options.claims {
        for (config, statement) in configs.iter_mut().zip(&statements) {
            let took = one_claim(&mut conn, statement).await?;
            config.micros.push(took.as_secs_f64() * 1e6);
        }
    }
    conn.disconnect().await?;
    Ok(Backlog {
        claims: options.claims,
        configs,
    })
}

/// Creates `backlog_NAME` with its waiting rows for each of `sizes`.
async fn fill_tables(bench: &mut Bench, sizes: &[(&str, u64)]) -> anyhow::Result<()> {
    for &(name, rows) in sizes {
        let table = format!("backlog_{name}");
        email::create(&mut bench.admin, &table, true).await?;
        let started = Instant::now();
        email::fill(&mut bench.admin, &table, rows).await?;
        eprintln!(
            "    {table}: {} rows in {:.1} s",
            thousands(rows as f64),
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

/// Handler reads per claim: a batch of claims between two snapshots.
async fn reads_per_claim(
    bench: &mut Bench,
    conn: &mut Conn,
    claim: &Statement,
) -> anyhow::Result<f64> {
    const PROBES: usize = 20;
    let before = bench.probe.snapshot().await?;
    for _ in 0..PROBES {
        one_claim(conn, claim).await?;
    }
    let after = bench.probe.snapshot().await?;
    let reads = bench.probe.delta(&before, &after).counters.handler_reads();
    Ok(reads as f64 / PROBES as f64)
}

/// BEGIN; `claim`; ROLLBACK: how long it took.
async fn one_claim(conn: &mut Conn, claim: &Statement) -> anyhow::Result<Duration> {
    let started = Instant::now();
    conn.query_drop("BEGIN").await?;
    let row: Option<Row> = conn.exec_first(claim, ()).await?;
    conn.query_drop("ROLLBACK").await?;
    let took = started.elapsed();
    ensure!(row.is_some(), "the claim found no waiting row");
    Ok(took)
}
