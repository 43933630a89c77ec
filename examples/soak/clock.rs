//! The one clock every log of the soak uses — the nemesis's, the receiver's, the
//! command script's `$EPOCHREALTIME` — so that their times compare.

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch.
pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
