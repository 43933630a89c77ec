//! Per-queue histograms of durations, in seconds: counted lock-free as they are
//! observed, and exported as Prometheus histograms. (The status page's
//! percentiles are over the last minutes: [`crate::telemetry::stats::recent`].)

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::encoding::{MetricEncoder, NoLabelSet};

/// The buckets' upper bounds, in seconds: from a millisecond (a claim on an index)
/// to an hour (a long command, or a queue's lag), about ×2.5 apart.
pub const BOUNDS: [f64; 17] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    300.0, 3600.0,
];

/// A histogram of durations.
#[derive(Debug, Default)]
pub struct Timings {
    /// Per bucket (not cumulative); the last one is +Inf.
    buckets: [AtomicU64; BOUNDS.len() + 1],
    count: AtomicU64,
    /// The sum, in microseconds.
    sum_micros: AtomicU64,
}

impl Timings {
    pub fn observe(&self, took: Duration) {
        let seconds = took.as_secs_f64();
        let index = BOUNDS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(BOUNDS.len());
        self.buckets[index].fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// The sum of every observation, in seconds.
    pub fn sum(&self) -> f64 {
        self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6
    }

    /// Writes the histogram as the metric of one label set.
    pub fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let counts = self.counts();
        let buckets: Vec<(f64, u64)> = BOUNDS
            .iter()
            .copied()
            .chain([f64::INFINITY])
            .zip(counts)
            .collect();
        // The count as the buckets' sum, so the two always agree in one scrape.
        let count = buckets.iter().map(|(_, n)| n).sum();
        encoder.encode_histogram::<NoLabelSet>(self.sum(), count, &buckets, None)
    }

    fn counts(&self) -> Vec<u64> {
        self.buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_sums() {
        let timings = Timings::default();
        for _ in 0..98 {
            timings.observe(Duration::from_millis(20));
        }
        timings.observe(Duration::from_secs(2));
        timings.observe(Duration::from_secs(7200));
        assert_eq!(timings.count(), 100);
        assert!((timings.sum() - (98.0 * 0.02 + 2.0 + 7200.0)).abs() < 1e-6);
        assert_eq!(
            timings.counts()[BOUNDS.len()],
            1,
            "past the last bound: +Inf"
        );
    }
}
