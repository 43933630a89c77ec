//! Part 1, throughput: for every claim index and every K, each engine drains a
//! freshly filled `email` table, the runs alternated (raw, b1, b100, b100 in batch
//! scope, then rotated);
//! plus what a tableq run costs with nothing to do.

use crate::claim::{explain, Claim};
use crate::engine::{Engine, Sample};
use crate::measure::thousands;
use crate::options::Options;
use crate::server::Bench;
use crate::{daemon, email, raw};

/// What the part measured.
pub struct Throughput {
    /// Rows per run.
    pub rows: u64,
    pub reps: usize,
    /// One per claim index and K, in the order they ran.
    pub groups: Vec<Group>,
    /// tableq runs on an empty queue.
    pub fixed_cost: Vec<Sample>,
}

/// One claim index and one K: each engine's plan and samples, in [`Engine::ALL`]'s
/// order.
pub struct Group {
    pub claim: Claim,
    pub k: usize,
    pub plans: Vec<String>,
    pub samples: Vec<Vec<Sample>>,
}

pub async fn measure(bench: &mut Bench, options: &Options) -> anyhow::Result<Throughput> {
    let n = options.rows;
    eprintln!(
        "==> throughput: {n} rows, K in {:?}, {} repetitions",
        options.workers, options.reps
    );
    let mut groups = Vec::new();
    let mut fixed_cost = Vec::new();
    for &claim in &options.claim_indexes {
        let plans = plans(bench, claim, n).await?;
        for &k in &options.workers {
            let samples = alternate(bench, claim, k, n, options.reps).await?;
            let plans = plans.clone();
            groups.push(Group {
                claim,
                k,
                plans,
                samples,
            });
        }
        if let Claim::Forced = claim {
            fixed_cost = empty_runs(bench, claim).await?;
        }
    }
    Ok(Throughput {
        rows: n,
        reps: options.reps,
        groups,
        fixed_cost,
    })
}

/// `reps` drains of `n` rows by every engine with `k` workers, the order rotated
/// each repetition; the samples by engine.
async fn alternate(
    bench: &mut Bench,
    claim: Claim,
    k: usize,
    n: u64,
    reps: usize,
) -> anyhow::Result<Vec<Vec<Sample>>> {
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); Engine::ALL.len()];
    for rep in 0..reps {
        for i in 0..Engine::ALL.len() {
            let which = (i + rep) % Engine::ALL.len();
            let engine = Engine::ALL[which];
            email::fresh(&mut bench.admin, claim, n).await?;
            let sample = engine.drain(bench, claim, k, n).await?;
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
    Ok(samples)
}

/// Each engine's claim plan on a full table and on a half-drained one: the first
/// half worked off by one raw client just before, as in a run (no ANALYZE, purge and
/// statistics wherever they are). `status_id → PRIMARY` if it changes.
async fn plans(bench: &mut Bench, claim: Claim, n: u64) -> anyhow::Result<Vec<String>> {
    email::fresh(&mut bench.admin, claim, n).await?;
    let mut full = Vec::new();
    for engine in Engine::ALL {
        full.push(explain(&mut bench.admin, &engine.claim_sql(claim, "email")).await?);
    }
    raw::worker(bench.opts.clone(), claim.raw_sql(), n / 2).await?;
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

/// What a tableq run costs with nothing to do: start, connect, prepare, stop.
async fn empty_runs(bench: &mut Bench, claim: Claim) -> anyhow::Result<Vec<Sample>> {
    email::fresh(&mut bench.admin, claim, 0).await?;
    let mut runs = Vec::new();
    for _ in 0..3 {
        runs.push(daemon::drain(bench, claim, 16, 1, 0).await?);
    }
    Ok(runs)
}
