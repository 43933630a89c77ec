//! The printed report: a header naming the server and the binary, one section per
//! part, each a table with its notes, and the time the whole benchmark took.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use crate::backlog::{Backlog, CLAIMS};
use crate::engine::{Engine, Sample};
use crate::idle::{Idle, QUEUES, WORKERS};
use crate::measure::{median, percentile, table, thousands};
use crate::throughput::{Group, Throughput};

pub fn header(version: &str, origin: &str, bin: &Path) -> String {
    format!(
        "server {version} ({origin}), {} CPUs, tableq {}\n",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        bin.display()
    )
}

pub fn footer(took: Duration) -> String {
    format!("\nThe whole benchmark took {:.0} s.\n", took.as_secs_f64())
}

const THROUGHPUT_HEADERS: [&str; 11] = [
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
];

const THROUGHPUT_NOTES: &str =
    "\n× raw: median over repetitions of tableq/raw within the same repetition. \
client CPU: tableq's own (wait4), or the raw clients' (this process). \
handler reads/item: f = Handler_read_first (an index walked from its start), \
k = Handler_read_key (an index lookup: a range start or a row by id), n = Handler_read_next \
(one step along an index), r = Handler_read_rnd* (table scan or sorted rows), o = other. \
statements/item: the server's Questions per item (each one a round trip). \
plan: the index EXPLAIN picks for the engine's claim on the full table, and again after \
one raw client worked off half of it; the handler reads show what really ran.\n";

pub fn throughput(results: &Throughput) -> String {
    let mut out = format!(
        "\n## Throughput: {} rows per run, median of {} alternated repetitions\n\n",
        results.rows, results.reps
    );
    let rows: Vec<Vec<String>> = results
        .groups
        .iter()
        .flat_map(|group| (0..Engine::ALL.len()).map(move |which| throughput_row(group, which)))
        .collect();
    out.push_str(&table(&THROUGHPUT_HEADERS, &rows));
    out.push_str(THROUGHPUT_NOTES);
    out.push_str(&batch_scope(results));
    let fixed_cost = &results.fixed_cost;
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
    out
}

/// Batch scope at batch 100 against the raw clients and against item scope at the
/// same batch, per claim index and K: the figures issue 14 is judged by.
fn batch_scope(results: &Throughput) -> String {
    let position = |engine: Engine| Engine::ALL.iter().position(|e| *e == engine);
    let (Some(item), Some(set)) = (
        position(Engine::Tableq { batch: 100 }),
        position(Engine::SetBased { batch: 100 }),
    ) else {
        return String::new();
    };
    let mut out = String::from("\nscope = \"batch\" at b=100:\n");
    for group in &results.groups {
        let (raw, item, set) = (&group.samples[0], &group.samples[item], &group.samples[set]);
        let ratio = |a: &[Sample], b: &[Sample]| {
            let ratios: Vec<f64> = a.iter().zip(b).map(|(x, y)| x.rate() / y.rate()).collect();
            median(&ratios)
        };
        let server = |s: &[Sample]| per_item(s, |s| s.server_cpu.unwrap_or(f64::NAN));
        let _ = writeln!(
            out,
            "  {}, K={}: {:.1}× raw, {:.2}× item scope; server CPU per item {:.1}× lower than item \
scope ({:.0} vs {:.0} µs); {:.3} statements/item",
            group.claim.label(),
            group.k,
            ratio(set, raw),
            ratio(set, item),
            server(item) / server(set),
            server(set) * 1e6,
            server(item) * 1e6,
            per_item(set, |s| s.questions as f64),
        );
    }
    out
}

/// The row of engine `which` in `group`.
fn throughput_row(group: &Group, which: usize) -> Vec<String> {
    let engine = Engine::ALL[which];
    let mine = &group.samples[which];
    let server_cpu = per_item(mine, |s| s.server_cpu.unwrap_or(f64::NAN) * 1e3);
    let rss: Vec<f64> = mine
        .iter()
        .filter_map(|s| s.max_rss_kb)
        .map(|kb| kb as f64 / 1024.0)
        .collect();
    vec![
        group.claim.label().to_string(),
        group.plans[which].clone(),
        group.k.to_string(),
        engine.label(),
        thousands(median(&mine.iter().map(Sample::rate).collect::<Vec<_>>())),
        ratio_cell(engine, mine, &group.samples[0]),
        format!("{:.3}", per_item(mine, |s| s.cpu * 1e3)),
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
        format!("{:.2}", per_item(mine, |s| s.questions as f64)),
    ]
}

/// The median over repetitions of this engine's rate / the raw clients' rate.
fn ratio_cell(engine: Engine, mine: &[Sample], raw: &[Sample]) -> String {
    match engine {
        Engine::Raw => "1.00".to_string(),
        Engine::Tableq { .. } | Engine::SetBased { .. } => {
            let ratios: Vec<f64> = mine
                .iter()
                .zip(raw)
                .map(|(t, r)| t.rate() / r.rate())
                .collect();
            format!("{:.2}", median(&ratios))
        }
    }
}

/// Median handler reads per item, and how they split by kind: `1003 = 1 f + 2 k +
/// 1000 n` (kinds under 0.05 per item left out).
fn reads_cell(samples: &[Sample]) -> String {
    let parts: Vec<String> = (0..5)
        .filter_map(|i| {
            let value = per_item(samples, |s| s.reads_by_kind[i].1 as f64);
            let letter = samples.first()?.reads_by_kind[i].0;
            (value >= 0.05).then(|| format!("{} {letter}", short(value)))
        })
        .collect();
    let total = per_item(samples, |s| s.reads as f64);
    format!("{} = {}", short(total), parts.join(" + "))
}

/// The median over `samples` of `value` per item.
fn per_item(samples: &[Sample], value: impl Fn(&Sample) -> f64) -> f64 {
    let values: Vec<f64> = samples
        .iter()
        .map(|s| value(s) / s.items.max(1) as f64)
        .collect();
    median(&values)
}

/// `1003.4` → `1003`, `2.04` → `2.0`.
fn short(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

pub fn idle(results: &Idle) -> String {
    let seconds = results.seconds;
    let counters = &results.server.counters;
    let polls = QUEUES as f64 * seconds; // poll intervals of 1 s, summed over queues
    let selects = counters.get("Com_select") as f64;
    let percent =
        |cpu: Option<f64>| cpu.map_or("-".into(), |c| format!("{:.1}%", c / seconds * 100.0));
    let megabytes = |kb: u64| format!("{:.1} MB", kb as f64 / 1024.0);
    let rows = [
        ("Com_select", thousands(selects)),
        (
            "SELECTs per queue per poll_interval (the claim and the pause read: target ≤ 2)",
            format!("{:.1}", selects / polls),
        ),
        (
            "Questions (statements) per second",
            format!("{:.0}", counters.get("Questions") as f64 / seconds),
        ),
        (
            "handler reads per second",
            format!("{:.0}", counters.handler_reads() as f64 / seconds),
        ),
        ("tableq CPU (of one core)", percent(results.cpu)),
        (
            "server CPU (of one core)",
            percent(results.server.server_cpu),
        ),
        (
            "tableq RSS at the end of the window",
            results.rss_kb.map_or("-".into(), megabytes),
        ),
        ("tableq peak RSS (wait4)", megabytes(results.peak_rss_kb)),
    ];
    let rows: Vec<Vec<String>> = rows
        .into_iter()
        .map(|(measure, value)| vec![measure.to_string(), value])
        .collect();
    let mut out = format!(
        "\n## Idle: {QUEUES} empty queues × {WORKERS} workers, poll_interval 1s, {seconds:.0} s window\n\n"
    );
    out.push_str(&table(&["measure", "value"], &rows));
    out
}

pub fn backlog(results: &Backlog) -> String {
    let rows: Vec<Vec<String>> = results
        .configs
        .iter()
        .map(|config| {
            vec![
                thousands(config.rows as f64),
                config.claim.label().to_string(),
                config.plan.clone(),
                format!("{:.0}", median(&config.micros)),
                format!("{:.0}", percentile(&config.micros, 90.0)),
                format!("{:.1}", config.reads),
            ]
        })
        .collect();
    let mut out = format!(
        "\n## Pickup cost vs backlog: BEGIN; claim LIMIT 1 FOR UPDATE SKIP LOCKED; ROLLBACK \
(median of {} alternated claims)\n\n",
        results.claims
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
    for claim in CLAIMS {
        let medians: Vec<f64> = results
            .configs
            .iter()
            .filter(|config| config.claim == claim)
            .map(|config| median(&config.micros))
            .collect();
        let _ = writeln!(
            out,
            "{}: large/small = {:.2} (target ≤ 2)",
            claim.label(),
            medians[medians.len() - 1] / medians[0]
        );
    }
    out
}

/// Pickup latency and idle statements per wake-up source (issue 20).
pub fn latency(sources: &[crate::latency::Source]) -> String {
    use crate::latency::millis;
    let rows: Vec<Vec<String>> = sources
        .iter()
        .map(|s| {
            vec![
                s.name.to_string(),
                s.pickups.len().to_string(),
                format!("{:.1}", millis(&s.pickups, 50.0)),
                format!("{:.1}", millis(&s.pickups, 99.0)),
                format!("{:.3}", s.idle_statements),
                format!("{:.0}", s.idle_window.as_secs_f64()),
            ]
        })
        .collect();
    let mut out = String::from(
        "\n## Pickup latency: single inserts 0.2–0.9 s apart, 4 workers per queue, one private MariaDB with a row-based binary log\n\n",
    );
    out.push_str(&table(
        &[
            "wake-up",
            "rows",
            "p50 ms",
            "p99 ms",
            "idle statements/s",
            "idle window s",
        ],
        &rows,
    ));
    out.push_str(
        "\np50/p99: from the INSERT (its NOW(6)) to the action's start (its NOW(6)). \
idle statements/s: the server's Questions while the queue alone sat empty, everything \
included (claims, pause reads, the background count and its connection). Targets \
(issue 20): on the binary log, p50 ≤ 10 ms, p99 ≤ 50 ms, ≤ 0.1 statements/s per idle queue.\n",
    );
    out
}
