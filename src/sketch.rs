//! Durations kept as a DDSketch: logarithmic bins 4% wide, so a percentile is
//! within 2% of the true value, and sketches of this one configuration merge —
//! across the minutes of a window, and across the copies that wrote their minutes
//! to the history.

use sketches_ddsketch::{Config, DDSketch};

/// A percentile is within 2% of the true value.
pub const RELATIVE_ACCURACY: f64 = 0.02;
/// Bins per sketch, at most: enough for 1 µs to years at 2%. A sketch's store
/// holds only the bins from its shortest duration to its longest (in steps of 128).
pub const MAX_BINS: u32 = 1024;
/// Durations under a microsecond count as zero.
const SMALLEST: f64 = 1e-6;

/// An empty sketch of durations in seconds.
pub fn new() -> DDSketch {
    DDSketch::new(Config::new(RELATIVE_ACCURACY, MAX_BINS, SMALLEST))
}

/// `sketch` as text, for the history.
pub fn to_json(sketch: &DDSketch) -> Option<String> {
    serde_json::to_string(sketch).ok()
}

/// Sketches written by [`to_json`], merged: their count, and their percentiles
/// `qs` (`None` for an empty merge). A sketch that does not read is left out.
pub fn merged_quantiles<'a>(
    sketches: impl IntoIterator<Item = &'a str>,
    qs: &[f64],
) -> (u64, Vec<Option<f64>>) {
    let mut merged = new();
    for text in sketches {
        if let Ok(one) = serde_json::from_str::<DDSketch>(text) {
            // Sketches of one configuration always merge.
            let _ = merged.merge(&one);
        }
    }
    let values = qs
        .iter()
        .map(|q| merged.quantile(*q).ok().flatten())
        .collect();
    (merged.count() as u64, values)
}
