//! What the process tells about itself: counters, the progress line, the metrics
//! endpoint, and logging.

pub mod events;
pub mod exports;
pub mod exposition;
pub mod histograms;
pub mod in_flight;
pub mod journal;
pub mod json_lines;
pub mod listener;
pub mod logging;
pub mod metrics;
pub mod monitor;
pub mod observed;
pub mod process;
pub mod recent;
pub mod spans;
pub mod stats;
pub mod status;
pub mod traces;
