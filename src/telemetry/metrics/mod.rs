//! What `GET /metrics` answers: per queue, claims and items (done, failed,
//! returned, rolled back) as counters, workers as gauges, the circuit breaker, and
//! the rest of [`exports`]; the process's own (`process_*`, [`process`]). In the
//! Prometheus text format 0.0.4, or OpenMetrics when the request's `Accept` asks
//! for it by name ([`exposition`]).

pub mod exports;
pub mod exposition;
pub mod histograms;
pub mod process;

use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::telemetry::stats::monitor::{Monitor, QueueView};
use crate::telemetry::stats::CircuitState;
use exposition::Format;
use process::ProcessCollector;

/// tableq's metrics, then the process's (`process_*`, no prefix): every queue's
/// read from the monitor at each scrape.
pub struct Metrics {
    registries: [Registry; 2],
}

impl Metrics {
    pub fn new(monitor: Arc<Monitor>) -> Metrics {
        let mut registry = Registry::with_prefix("tableq");
        registry.register_collector(Box::new(QueueCollector(monitor)));
        registry.register(
            "trace_spans_dropped",
            "Trace spans not exported: the buffer was full, or the OTLP collector did not take them",
            crate::telemetry::trace::otlp::dropped(),
        );
        let mut process = Registry::default();
        process.register_collector(Box::new(ProcessCollector));
        Metrics {
            registries: [registry, process],
        }
    }

    /// The metrics in the format `accept` asks for: its content type, and the text.
    pub fn encode(&self, accept: Option<&str>) -> Result<(&'static str, String), std::fmt::Error> {
        let format = Format::from_accept(accept);
        let mut text = String::new();
        self.registries
            .iter()
            .try_for_each(|registry| encode_registry(&mut text, registry))?;
        encode_eof(&mut text)?;
        let text = match format {
            Format::OpenMetrics => text,
            Format::Text004 => exposition::to_text_0_0_4(&text),
        };
        Ok((format.content_type(), text))
    }
}

/// Reads the queues at every scrape: queues come and go with reloads.
#[derive(Debug)]
struct QueueCollector(Arc<Monitor>);

impl Collector for QueueCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let watched = self.0.watched();
        let queues: Vec<_> = watched.iter().map(|(view, _)| view.clone()).collect();
        let counters: [(&str, &str, CountOf); 5] = [
            ("claims", "Claim queries sent", |q| q.counts.claims),
            (
                "outcome_sql_failures",
                "Outcome SQL ([on_success], [on_failure]; in lease mode also [lease] sql) that failed, leaving its item waiting",
                |q| q.counts.outcome_sql_failures,
            ),
            (
                "leases_lost",
                "Lease mode: leases lost while their item was worked on (a renewal or the outcome SQL matched no row); the outcome was not recorded",
                |q| q.counts.leases_lost,
            ),
            (
                "loops",
                "Items completed again within loop_window: rows [on_success] left in the select",
                |q| q.counts.loops,
            ),
            (
                "wake_events",
                "Wake-ups from the binary log: committed transactions that changed a table the queue's select reads",
                |q| q.counts.wake_events,
            ),
        ];
        for (name, help, value) in counters {
            encode_counter(&queues, &mut encoder, name, help, value)?;
        }
        let claims = ConstCounter::new(0u64);
        let mut family = encoder.encode_descriptor(
            "items",
            "Items claimed: done (on_success), failed (on_failure), returned (left waiting), held_back (handed back untouched: their [concurrency] key was at its limit), rolled_back (their transaction did not commit)",
            None,
            claims.metric_type(),
        )?;
        for (q, stats) in &watched {
            for (outcome, value) in [
                ("done", q.counts.done),
                ("failed", q.counts.failed),
                ("returned", q.counts.returned),
                ("held_back", stats.observed.limited.held_back_total()),
                ("rolled_back", stats.observed.rolled_back()),
            ] {
                let labels = [("queue", q.name.as_str()), ("outcome", outcome)];
                ConstCounter::new(value).encode(family.encode_family(&labels)?)?;
            }
        }
        let gauges: [(&str, &str, GaugeOf); 4] = [
            ("workers", "Worker loops the queue runs", |q| q.workers as i64),
            (
                "workers_connected",
                "Workers holding a database connection",
                |q| q.connected as i64,
            ),
            (
                "queue_claiming",
                "1 while the queue claims rows; 0 once it stopped claiming by itself (a loop) until a reload",
                |q| i64::from(q.stopped_claiming.is_none()),
            ),
            (
                "queue_paused",
                "1 while the queue is paused by `tableq pause` (it claims nothing until resumed), else 0",
                |q| i64::from(q.paused.is_some()),
            ),
        ];
        for (name, help, value) in gauges {
            encode_gauge(&queues, &mut encoder, name, help, value)?;
        }
        encode_circuits(&queues, &mut encoder)?;
        encode_history_errors(&self.0, &mut encoder)?;
        exports::encode(&watched, &mut encoder)
    }
}

/// The history's failed writes, for the process.
fn encode_history_errors(
    monitor: &Monitor,
    encoder: &mut DescriptorEncoder,
) -> Result<(), std::fmt::Error> {
    let errors = monitor
        .history_errors()
        .load(std::sync::atomic::Ordering::Relaxed);
    let family = encoder.encode_descriptor(
        "history_write_errors",
        "Writes to the history tables (tableq_history, tableq_attempts, tableq_copies) that failed, and failed attempts dropped before they were written",
        None,
        MetricType::Counter,
    )?;
    ConstCounter::new(errors).encode(family)
}

/// Reads one count of a queue.
type CountOf = fn(&QueueView) -> u64;

/// Reads one gauge of a queue.
type GaugeOf = fn(&QueueView) -> i64;

/// One gauge per running queue, `value` of each.
fn encode_gauge(
    queues: &[QueueView],
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: GaugeOf,
) -> Result<(), std::fmt::Error> {
    let metric_type = ConstGauge::new(0i64).metric_type();
    let mut family = encoder.encode_descriptor(name, help, None, metric_type)?;
    for q in queues.iter().filter(|q| q.running) {
        ConstGauge::new(value(q)).encode(family.encode_family(&[("queue", q.name.as_str())])?)?;
    }
    Ok(())
}

/// One counter per queue, `value` of each.
fn encode_counter(
    queues: &[QueueView],
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: CountOf,
) -> Result<(), std::fmt::Error> {
    let metric_type = ConstCounter::new(0u64).metric_type();
    let mut family = encoder.encode_descriptor(name, help, None, metric_type)?;
    for q in queues {
        ConstCounter::new(value(q)).encode(family.encode_family(&[("queue", q.name.as_str())])?)?;
    }
    Ok(())
}

/// Each queue's circuit breaker: its state, one series per state (1 for the one it
/// is in, else 0, so `tableq_circuit_state{state="open"} == 1` selects the open
/// circuits and a sum over copies counts them), and how often it changed.
fn encode_circuits(
    queues: &[QueueView],
    encoder: &mut DescriptorEncoder,
) -> Result<(), std::fmt::Error> {
    let gauge = ConstGauge::new(0i64);
    let counter = ConstCounter::new(0u64);
    let mut family = encoder.encode_descriptor(
        "circuit_state",
        "The circuit breaker's state, one series per state: 1 for the state it is in (closed; open: not claiming; half_open: one probe), else 0",
        None,
        gauge.metric_type(),
    )?;
    for q in queues.iter().filter(|q| q.running) {
        for state in CircuitState::ALL {
            let labels = [("queue", q.name.as_str()), ("state", state.name())];
            ConstGauge::new(i64::from(q.circuit == state))
                .encode(family.encode_family(&labels)?)?;
        }
    }
    let mut family = encoder.encode_descriptor(
        "circuit_transitions",
        "Changes of the circuit breaker's state, by the state it changed to",
        None,
        counter.metric_type(),
    )?;
    for q in queues {
        for (state, value) in CircuitState::ALL.iter().zip(q.circuit_transitions) {
            let labels = [("queue", q.name.as_str()), ("to", state.name())];
            ConstCounter::new(value).encode(family.encode_family(&labels)?)?;
        }
    }
    Ok(())
}
