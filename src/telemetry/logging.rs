//! Log output: human-readable text or one JSON object per line, to stderr, with the
//! level filter from `TABLEQ_LOG` (tracing's EnvFilter syntax; default `info`).

use clap::ValueEnum;
use tracing_subscriber::EnvFilter;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// The variable holding the log filter, e.g. `TABLEQ_LOG=tableq=debug`.
pub const LOG_ENV: &str = "TABLEQ_LOG";

/// Installs the global subscriber. A bad filter falls back to `info`, with a warning.
pub fn init(format: LogFormat) {
    let (filter, bad_filter) = match EnvFilter::try_from_env(LOG_ENV) {
        Ok(filter) => (filter, None),
        Err(e) => {
            let set = std::env::var(LOG_ENV).is_ok();
            (EnvFilter::new("info"), set.then(|| e.to_string()))
        }
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false);
    match format {
        LogFormat::Text => builder.init(),
        // Each line carries its spans: the worker's (queue, worker) and the item's (key).
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(true)
            .init(),
    }
    if let Some(error) = bad_filter {
        tracing::warn!(%error, "{LOG_ENV} is not a valid filter; logging at info");
    }
}
