//! Log output: human-readable text or one JSON object per line, to stderr, with the
//! level filter from `TABLEQ_LOG` (tracing's EnvFilter syntax; default `info`).
//!
//! Text is coloured only when stderr is a terminal and `NO_COLOR` is unset, so
//! journald, `docker logs`, pipes and files get plain lines. When stderr is the
//! journal (systemd says so in `JOURNAL_STREAM`), lines carry no timestamp of their
//! own: the journal stamps each one.

use std::io::IsTerminal;

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
        .with_env_filter(quiet(filter))
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(colour(std::env::var_os("NO_COLOR").as_deref()));
    match format {
        LogFormat::Text if stderr_is_journal() => builder.without_time().init(),
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

/// Log lines turned off whatever the filter says: lapin logs every message the
/// broker returns (unroutable) at warn level, body and all, and a row's values
/// must never reach the log — tableq says why the item failed instead.
const SILENCED: &[&str] = &["lapin::returned_messages=off"];

fn quiet(mut filter: EnvFilter) -> EnvFilter {
    for directive in SILENCED {
        if let Ok(directive) = directive.parse() {
            filter = filter.add_directive(directive);
        }
    }
    filter
}

/// Colour only for a person at a terminal who has not asked for none
/// (<https://no-color.org>: any non-empty `NO_COLOR`).
fn colour(no_color: Option<&std::ffi::OsStr>) -> bool {
    std::io::stderr().is_terminal() && no_color.is_none_or(|v| v.is_empty())
}

/// Whether stderr is the journal's stream: `JOURNAL_STREAM` holds its
/// `DEVICE:INODE`, which a redirected stderr no longer matches.
fn stderr_is_journal() -> bool {
    let Some(stream) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: fstat writes into the buffer it is given, and only reads fd 2.
    if unsafe { libc::fstat(2, stat.as_mut_ptr()) } != 0 {
        return false;
    }
    // SAFETY: fstat succeeded, so it filled the buffer.
    let stat = unsafe { stat.assume_init() };
    stream.to_string_lossy() == format!("{}:{}", stat.st_dev, stat.st_ino)
}
