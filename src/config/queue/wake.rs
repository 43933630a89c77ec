//! `wake`: how an idle queue learns that rows may be waiting — the database's binary
//! log as it changes (`binlog`), its own polls alone (`poll`), or the binary log
//! where the server and the user allow it (`auto`). Whatever the source, a queue
//! still claims every `poll_interval`: the binary log only says when to look sooner.

use std::time::Duration;

use crate::config::load::raw::RawQueue;
use crate::config::validate::validator::Validator;

/// `poll_interval` of a queue that follows the binary log, when the file does not
/// set it: a safety net for a missed event. Rows that become due by time alone (a
/// `retry_at` passing, a lease expiring) are asked for when due (`engine::wake::due`).
pub const DEFAULT_BINLOG_POLL_INTERVAL: Duration = Duration::from_secs(60);

/// The environment variable that sets `wake` for every queue whose file does not:
/// `TABLEQ_WAKE=poll` for a process that polls on purpose, and is not to be told
/// of the binary log at all.
pub const WAKE_ENV: &str = "TABLEQ_WAKE";

/// Where a queue's wake-ups come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WakeSource {
    /// The binary log when the server writes one and the user may read it, else polls.
    Auto,
    /// The binary log; the queue does not start without it.
    Binlog,
    /// Polls alone.
    Poll,
}

impl WakeSource {
    pub fn as_str(self) -> &'static str {
        match self {
            WakeSource::Auto => "auto",
            WakeSource::Binlog => "binlog",
            WakeSource::Poll => "poll",
        }
    }
}

/// `wake`, with the poll intervals it implies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wake {
    pub source: WakeSource,
    /// How often the queue polls while it follows the binary log.
    pub poll_on_binlog: Duration,
    /// The file sets `poll_interval` (else each interval is tableq's default).
    pub poll_interval_set: bool,
}

/// Reads `wake`; `poll_interval`, when the file sets it, is the poll on the binary
/// log too.
pub(crate) fn validate<A>(v: &mut Validator, raw: &RawQueue<A>) -> Wake {
    let from_env = raw.wake.is_none().then(|| (v.env)(WAKE_ENV)).flatten();
    let written = raw.wake.as_deref().or(from_env.as_deref());
    let source = match written {
        None | Some("auto") => WakeSource::Auto,
        Some("binlog") => WakeSource::Binlog,
        Some("poll") => WakeSource::Poll,
        Some(other) => {
            let whose = match from_env {
                Some(_) => format!("{WAKE_ENV}, the `wake` of queues whose file sets none,"),
                None => "`wake`".to_string(),
            };
            v.error(
                &["wake"],
                format!(
                    "{whose} = {other:?} is not a wake-up source: use \"auto\" (the default: \
                     the binary log where the server allows it, else polls), \"binlog\" or \"poll\""
                ),
            );
            WakeSource::Auto
        }
    };
    Wake {
        source,
        poll_on_binlog: raw.poll_interval.unwrap_or(DEFAULT_BINLOG_POLL_INTERVAL),
        poll_interval_set: raw.poll_interval.is_some(),
    }
}

/// Why a queue with `wake = "binlog"` does not start: the server's or the grants'
/// `why`, and the way out.
pub fn binlog_refused(why: &impl std::fmt::Display) -> String {
    format!(
        "`wake = \"binlog\"`, but {why}; or set `wake = \"auto\"` to poll where the binary \
         log cannot be followed"
    )
}
