//! What the process tells about itself: counters, the progress line, the metrics
//! endpoint, and logging.

pub mod events;
pub mod http;
pub mod log;
pub mod metrics;
pub mod stats;
pub mod trace;
