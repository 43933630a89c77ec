//! The metrics beyond the committed counts, per queue: timings as histograms, items
//! rolled back, database errors by kind, busy workers, the backlog and its age —
//! plus the build. All read from memory: a scrape never reaches the database.

use std::sync::Arc;

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

use super::histograms::Timings;
use crate::db::schedules::ScheduleRow;
use crate::telemetry::stats::monitor::QueueView;
use crate::telemetry::stats::observed::Observed;
use crate::telemetry::stats::QueueStats;

type Watched = [(QueueView, Arc<QueueStats>)];

/// Writes every family of this module.
pub fn encode(queues: &Watched, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    histograms(queues, encoder)?;
    let mut family = encoder.encode_descriptor(
        "db_errors",
        "Database errors by kind: connect, deadlock, lock_wait, certification, lost, deadline, other",
        None,
        MetricType::Counter,
    )?;
    for (view, stats) in queues {
        for (kind, count) in stats.observed.db_errors() {
            let labels = [("queue", view.name.as_str()), ("kind", kind.label())];
            ConstCounter::new(count).encode(family.encode_family(&labels)?)?;
        }
    }
    let mut family = encoder.encode_descriptor(
        "concurrency_held_back",
        "Rows claimed and handed back untouched: their [concurrency] key was at its limit",
        None,
        MetricType::Counter,
    )?;
    for (view, stats) in queues.iter().filter(|(view, _)| view.running) {
        let held_back = stats.observed.limited.held_back_total();
        let labels = [("queue", view.name.as_str())];
        ConstCounter::new(held_back).encode(family.encode_family(&labels)?)?;
    }
    by_label(queues, encoder)?;
    gauges(queues, encoder)?;
    schedules(queues, encoder)?;
    let mut family = encoder.encode_descriptor(
        "database_host",
        "The database host a queue's connections go to, when its URL lists several: 1",
        None,
        MetricType::Gauge,
    )?;
    for (view, _) in queues.iter().filter(|(view, _)| view.running) {
        if let Some(host) = &view.database_host {
            let labels = [("queue", view.name.as_str()), ("host", host.as_str())];
            ConstGauge::new(1i64).encode(family.encode_family(&labels)?)?;
        }
    }
    let mut family = encoder.encode_descriptor(
        "build_info",
        "The running tableq: its version in a label, always 1",
        None,
        MetricType::Gauge,
    )?;
    let labels = [("version", env!("CARGO_PKG_VERSION"))];
    ConstGauge::new(1i64).encode(family.encode_family(&labels)?)
}

/// A schedule queue's row of `tableq_schedules`, as the background count last read
/// it: the same numbers in every copy (take `max by (queue)`, not a sum), for the
/// running schedule queues.
fn schedules(queues: &Watched, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    type Read = fn(&ScheduleRow) -> Option<f64>;
    let families: [(&str, &str, MetricType, Read); 4] = [
        (
            "schedule_last_success_timestamp_seconds",
            "A schedule queue: when its last successful run finished, in seconds since the epoch (tableq_schedules, the same in every copy)",
            MetricType::Gauge,
            ScheduleRow::last_success_unix,
        ),
        (
            "schedule_next_due_timestamp_seconds",
            "A schedule queue: the due time it waits for (or a failed run's retry), in seconds since the epoch",
            MetricType::Gauge,
            ScheduleRow::due_unix,
        ),
        (
            "schedule_runs",
            "A schedule queue: runs that succeeded, across every copy (tableq_schedules)",
            MetricType::Counter,
            |row| Some(row.runs as f64),
        ),
        (
            "schedule_missed",
            "A schedule queue: due times that did not run (no copy ran, catch_up passed them over, a run outlasted them, or it failed past its period), across every copy (tableq_schedules)",
            MetricType::Counter,
            |row| Some(row.missed as f64),
        ),
    ];
    for (name, help, kind, read) in families {
        let mut family = encoder.encode_descriptor(name, help, None, kind)?;
        for (view, stats) in queues.iter().filter(|(view, _)| view.running) {
            let Some(row) = stats.observed.schedule() else {
                continue;
            };
            let Some(value) = read(&row) else {
                continue;
            };
            let labels = [("queue", view.name.as_str())];
            let encoding = family.encode_family(&labels)?;
            match kind {
                MetricType::Counter => ConstCounter::new(value as u64).encode(encoding)?,
                _ => ConstGauge::new(value).encode(encoding)?,
            }
        }
    }
    Ok(())
}

/// Items by the queue's `label` column (a job's class), for the queues that have one.
fn by_label(queues: &Watched, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(
        "items_by_label",
        "Items by the queue's label column (a job's class): done, failed, returned; the values past the first 100 count as other",
        None,
        MetricType::Counter,
    )?;
    for (view, stats) in queues {
        for (label, counts) in stats.observed.by_label.all() {
            let outcomes = [
                ("done", counts.done),
                ("failed", counts.failed),
                ("returned", counts.returned),
            ];
            for (outcome, count) in outcomes {
                let labels = [
                    ("queue", view.name.as_str()),
                    ("label", label.as_str()),
                    ("outcome", outcome),
                ];
                ConstCounter::new(count).encode(family.encode_family(&labels)?)?;
            }
        }
    }
    Ok(())
}

/// Action, transaction, claim and (with `waiting_since`) queue-wait times.
fn histograms(queues: &Watched, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    type Pick = fn(&Observed) -> Option<&Timings>;
    let families: [(&str, &str, Pick); 4] = [
        ("action_duration_seconds", "How long each action took", |o| Some(&o.action)),
        (
            "transaction_duration_seconds",
            "How long each transaction held its rows locked, from the claim's answer to COMMIT or ROLLBACK",
            |o| Some(&o.transaction),
        ),
        ("claim_duration_seconds", "How long each claim query took", |o| Some(&o.claim)),
        (
            "queue_wait_seconds",
            "How long each claimed item had waited (now - waiting_since, by the database's clock)",
            |o| o.measures_lag().then_some(&o.queue_wait),
        ),
    ];
    for (name, help, pick) in families {
        let mut family = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
        for (view, stats) in queues {
            if let Some(timings) = pick(&stats.observed) {
                timings.encode(family.encode_family(&[("queue", view.name.as_str())])?)?;
            }
        }
    }
    Ok(())
}

/// Busy workers, waiting rows and the oldest one's age, for the running queues (a
/// removed queue's last count would go stale); a queue without a value yet (no
/// count so far, no `waiting_since`) is left out of that family.
fn gauges(queues: &Watched, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    type Read = fn(&Observed) -> Option<f64>;
    let families: [(&str, &str, Read); 7] = [
        ("workers_busy", "Workers holding claimed rows now", |o| {
            Some(o.busy_workers() as f64)
        }),
        (
            "waiting",
            "Rows the select returns (waiting, and in flight), counted without locks every stats_interval, up to waiting_cap",
            |o| o.backlog().waiting.map(|n| n as f64),
        ),
        (
            "failed_rows",
            "Rows that gave up: what [failed] select returns, counted with the waiting rows, up to waiting_cap",
            |o| o.backlog().gave_up.map(|n| n as f64),
        ),
        (
            "oldest_waiting_seconds",
            "How long the first waiting row in the claim's order has waited (waiting_since), as of the last count",
            |o| o.backlog().oldest_seconds,
        ),
        (
            "rate_limit_share",
            "Items per second this copy may start: rate_limit shared by the copies on the database (limits = \"global\")",
            |o| o.limited.share().rate_per_second,
        ),
        (
            "limit_copies",
            "Copies of tableq running the queue on its database, counted by their named locks, that share its limits",
            |o| o.limited.share().copies.map(|n| n as f64),
        ),
        (
            "concurrency_keys_at_limit",
            "[concurrency] keys at their limit by this copy's rows now",
            |o| Some(o.limited.keys_at_limit() as f64),
        ),
    ];
    for (name, help, read) in families {
        let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
        for (view, stats) in queues.iter().filter(|(view, _)| view.running) {
            if let Some(value) = read(&stats.observed) {
                let labels = [("queue", view.name.as_str())];
                ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
            }
        }
    }
    Ok(())
}
