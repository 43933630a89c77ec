//! Which wake-up source each queue would use, and why: the binary log where its
//! server writes one and its user may read it, else polls — told in the summary
//! line, and an error for `wake = "binlog"` without it (which `run` refuses too).

use crate::config::wake::binlog_refused;
use crate::config::{QueueConfig, WakeSource};
use crate::db::binlog::Verdicts;
use crate::db::Database;
use crate::diagnostic::{Finding, Severity};

/// Where a queue's wake-ups would come from, as the summary line tells it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WakeReport {
    pub queue: String,
    /// `binlog` or `poll`.
    pub source: &'static str,
    /// Every how long it polls.
    pub polls_every: String,
    /// Why it polls, when the binary log was wanted.
    pub why: Option<String>,
}

impl std::fmt::Display for WakeReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let WakeReport {
            queue, polls_every, ..
        } = self;
        match (self.source, &self.why) {
            ("binlog", _) => write!(f, "{queue} on the binary log (polls every {polls_every})"),
            (_, Some(why)) => write!(f, "{queue} by polling every {polls_every}, as {why}"),
            _ => write!(f, "{queue} by polling every {polls_every}"),
        }
    }
}

/// The queue's wake-up source; for `wake = "binlog"` refused, an error finding.
pub async fn wake_report(
    queue: &QueueConfig,
    database: &Database,
    verdicts: &mut Verdicts,
) -> Result<WakeReport, Finding> {
    let poll = |every, why| WakeReport {
        queue: queue.name.clone(),
        source: "poll",
        polls_every: humantime::format_duration(every).to_string(),
        why,
    };
    let verdict = match queue.wake.source {
        WakeSource::Poll => return Ok(poll(queue.poll_interval, None)),
        _ => verdicts.of(database).await,
    };
    match verdict {
        Ok(None) => Ok(WakeReport {
            source: "binlog",
            ..poll(queue.wake.poll_on_binlog, None)
        }),
        Ok(Some(why)) if queue.wake.source == WakeSource::Binlog => {
            let message = binlog_refused(&why);
            Err(queue.finding(Severity::Error, &["wake"], message))
        }
        Ok(Some(why)) => Ok(poll(queue.poll_interval, Some(why.to_string()))),
        Err(e) => Ok(poll(
            queue.poll_interval,
            Some(format!("the binary log could not be asked ({e})")),
        )),
    }
}
