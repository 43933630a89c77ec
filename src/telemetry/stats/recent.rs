//! The status page's percentiles: over the last 5 and the last 15 minutes, not the
//! life of the process, so they follow a change in action time within minutes.
//!
//! Each minute has a small sketch of its durations (DDSketch: logarithmic bins 4%
//! wide, so a percentile is within 2% of the true value, not a histogram bucket's
//! bound), in a ring of 15; a window merges the minutes it covers, and a minute
//! older than 15 is overwritten. Memory is bounded per queue: at most 1024 bins (8
//! KiB) a minute, a few hundred for durations from milliseconds to seconds,
//! allocated only for the minutes that saw an action.
//! Prometheus keeps its buckets ([`crate::telemetry::metrics::histograms`]).

use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use sketches_ddsketch::DDSketch;

use crate::lock::lock;
use crate::sketch;

/// Minutes kept: the longest window.
pub const MINUTES: usize = 15;

/// The windows the status page shows, in minutes.
pub const WINDOWS: [u64; 2] = [5, 15];

/// Durations of the last [`MINUTES`] minutes, minute by minute.
#[derive(Debug, Default)]
pub struct Recent {
    /// Indexed by minute modulo [`MINUTES`]; empty until the first observation.
    minutes: Mutex<Vec<Option<Minute>>>,
}

struct Minute {
    /// Minutes since the epoch.
    at: u64,
    sketch: DDSketch,
}

impl std::fmt::Debug for Minute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Minute")
            .field("at", &self.at)
            .field("count", &self.sketch.count())
            .finish()
    }
}

/// A window's percentiles, as `/status.json` shows them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Percentiles {
    /// The window, in minutes (this one and the ones before it).
    pub minutes: u64,
    /// Actions that finished within it.
    pub items: u64,
    /// `null` when none finished.
    pub p50_seconds: Option<f64>,
    pub p99_seconds: Option<f64>,
}

fn sketch() -> DDSketch {
    sketch::new()
}

impl Recent {
    /// Counts a duration in this minute.
    pub fn observe(&self, took: Duration) {
        self.observe_at(minute_now(), took);
    }

    /// Counts a duration in minute `at` (minutes since the epoch).
    pub fn observe_at(&self, at: u64, took: Duration) {
        let mut minutes = lock(&self.minutes);
        if minutes.is_empty() {
            minutes.resize_with(MINUTES, || None);
        }
        let slot = &mut minutes[(at % MINUTES as u64) as usize];
        if slot.as_ref().is_none_or(|minute| minute.at != at) {
            *slot = Some(Minute {
                at,
                sketch: sketch(),
            });
        }
        if let Some(minute) = slot {
            minute.sketch.add(took.as_secs_f64());
        }
    }

    /// The percentiles of the last `minutes` minutes, this one included.
    pub fn window(&self, minutes: u64) -> Percentiles {
        self.window_at(minute_now(), minutes)
    }

    /// The percentiles of the `minutes` minutes up to minute `now`, included.
    pub fn window_at(&self, now: u64, minutes: u64) -> Percentiles {
        let mut merged = sketch();
        for minute in lock(&self.minutes).iter().flatten() {
            if minute.at <= now && now - minute.at < minutes {
                // Sketches of one configuration always merge.
                let _ = merged.merge(&minute.sketch);
            }
        }
        let quantile = |q| merged.quantile(q).ok().flatten();
        Percentiles {
            minutes,
            items: merged.count() as u64,
            p50_seconds: quantile(0.5),
            p99_seconds: quantile(0.99),
        }
    }

    /// Minute `at`'s sketch (minutes since the epoch), as JSON: what a copy writes
    /// to the history, for any reader to merge with other copies' (`None` when no
    /// action finished in it, or it is older than [`MINUTES`]).
    pub fn minute_json(&self, at: u64) -> Option<String> {
        let minutes = lock(&self.minutes);
        let minute = minutes.iter().flatten().find(|minute| minute.at == at)?;
        sketch::to_json(&minute.sketch)
    }

    /// Each of [`WINDOWS`].
    pub fn windows(&self) -> Vec<Percentiles> {
        WINDOWS
            .iter()
            .map(|minutes| self.window(*minutes))
            .collect()
    }
}

fn minute_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
        / 60
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sketch::{merged_quantiles, MAX_BINS, RELATIVE_ACCURACY};

    fn within(value: Option<f64>, expected: f64) -> bool {
        value.is_some_and(|v| (v - expected).abs() <= expected * RELATIVE_ACCURACY)
    }

    /// Fast actions, then slow ones: the 5-minute p50 follows the slow ones within
    /// the window, the 15-minute one once they are the most, and old minutes expire.
    #[test]
    fn the_percentiles_follow_the_recent_minutes() {
        let recent = Recent::default();
        assert_eq!(recent.window_at(1000, 5).p50_seconds, None);
        for minute in 1000..1005 {
            for _ in 0..100 {
                recent.observe_at(minute, Duration::from_millis(20));
            }
        }
        let fast = recent.window_at(1004, 5);
        assert_eq!(fast.items, 500);
        assert!(within(fast.p50_seconds, 0.020), "{fast:?}");
        assert!(within(fast.p99_seconds, 0.020), "{fast:?}");
        // Slow ones, 340 ms each: not a bucket's bound, the value itself.
        for minute in 1005..1008 {
            for _ in 0..100 {
                recent.observe_at(minute, Duration::from_millis(340));
            }
        }
        let five = recent.window_at(1007, 5);
        assert_eq!(five.items, 500, "two fast minutes, three slow");
        assert!(within(five.p50_seconds, 0.340), "{five:?}");
        let fifteen = recent.window_at(1007, 15);
        assert_eq!(fifteen.items, 800);
        assert!(within(fifteen.p50_seconds, 0.020), "{fifteen:?}");
        assert!(within(fifteen.p99_seconds, 0.340), "{fifteen:?}");
        // Ten minutes on, nothing new: the fast minutes have left both windows.
        let later = recent.window_at(1019, 15);
        assert_eq!(later.items, 300);
        assert!(within(later.p50_seconds, 0.340), "{later:?}");
        assert_eq!(recent.window_at(1019, 5).items, 0);
        // A minute's slot is reused 15 minutes on, its old durations gone.
        recent.observe_at(1020, Duration::from_secs(2));
        assert_eq!(recent.window_at(1020, 15).items, 201);
        assert!(within(recent.window_at(1020, 1).p50_seconds, 2.0));
    }

    /// Two copies' minutes, written and read back, merge into the percentiles of
    /// all their durations.
    #[test]
    fn minutes_written_by_copies_merge() {
        let (one, two) = (Recent::default(), Recent::default());
        for _ in 0..90 {
            one.observe_at(50, Duration::from_millis(10));
        }
        for _ in 0..10 {
            two.observe_at(50, Duration::from_millis(500));
        }
        let written = [one.minute_json(50).unwrap(), two.minute_json(50).unwrap()];
        assert_eq!(one.minute_json(51), None);
        let (count, qs) = merged_quantiles(written.iter().map(String::as_str), &[0.5, 0.95]);
        assert_eq!(count, 100);
        assert!(within(qs[0], 0.010), "{qs:?}");
        assert!(within(qs[1], 0.500), "{qs:?}");
    }

    /// A minute holds at most its bins, however many and however spread its values.
    #[test]
    fn memory_is_bounded() {
        let recent = Recent::default();
        for exponent in 0..2000 {
            let seconds = 1e-6 * 1.02f64.powi(exponent);
            recent.observe_at(7, Duration::from_secs_f64(seconds.min(1e7)));
        }
        let minutes = lock(&recent.minutes);
        let sketch = &minutes[7].as_ref().unwrap().sketch;
        assert!(sketch.length() <= MAX_BINS as usize, "{}", sketch.length());
    }
}
