//! The metrics beyond the committed counts, per queue: timings as histograms, items
//! rolled back, database errors by kind, busy workers, the backlog and its age —
//! plus the build. All read from memory: a scrape never reaches the database.

use std::sync::Arc;

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

use super::histograms::Timings;
use super::monitor::QueueView;
use super::observed::Observed;
use super::stats::QueueStats;

type Watched = [(QueueView, Arc<QueueStats>)];

/// Writes every family of this module.
pub fn encode(queues: &Watched, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    histograms(queues, encoder)?;
    let mut family = encoder.encode_descriptor(
        "db_errors",
        "Database errors by kind: connect, deadlock, lock_wait, lost, deadline, other",
        None,
        MetricType::Counter,
    )?;
    for (view, stats) in queues {
        for (kind, count) in stats.observed.db_errors() {
            let labels = [("queue", view.name.as_str()), ("kind", kind.label())];
            ConstCounter::new(count).encode(family.encode_family(&labels)?)?;
        }
    }
    gauges(queues, encoder)?;
    let mut family = encoder.encode_descriptor(
        "build_info",
        "The running tableq: its version in a label, always 1",
        None,
        MetricType::Gauge,
    )?;
    let labels = [("version", env!("CARGO_PKG_VERSION"))];
    ConstGauge::new(1i64).encode(family.encode_family(&labels)?)
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
/// removed queue's last count would go stale).
fn gauges(queues: &Watched, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(
        "workers_busy",
        "Workers holding claimed rows now",
        None,
        MetricType::Gauge,
    )?;
    for (view, stats) in queues.iter().filter(|(view, _)| view.running) {
        let busy = stats.observed.busy_workers() as i64;
        ConstGauge::new(busy).encode(family.encode_family(&[("queue", view.name.as_str())])?)?;
    }
    let mut family = encoder.encode_descriptor(
        "waiting",
        "Rows waiting and not locked, counted in the background every stats_interval, up to waiting_cap",
        None,
        MetricType::Gauge,
    )?;
    for (view, stats) in queues.iter().filter(|(view, _)| view.running) {
        if let Some(waiting) = stats.observed.backlog().waiting {
            let labels = [("queue", view.name.as_str())];
            ConstGauge::new(waiting as i64).encode(family.encode_family(&labels)?)?;
        }
    }
    let mut family = encoder.encode_descriptor(
        "oldest_waiting_seconds",
        "How long the oldest waiting row has waited (waiting_since), as of the last background count",
        None,
        MetricType::Gauge,
    )?;
    for (view, stats) in queues.iter().filter(|(view, _)| view.running) {
        if let Some(oldest) = stats.observed.backlog().oldest_seconds {
            let labels = [("queue", view.name.as_str())];
            ConstGauge::new(oldest).encode(family.encode_family(&labels)?)?;
        }
    }
    Ok(())
}
