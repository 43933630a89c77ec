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

impl WakeReport {
    /// The summary's words for `queues` (this one, or every queue alike).
    fn said_of(&self, queues: &str) -> String {
        let every = &self.polls_every;
        match (self.source, &self.why) {
            ("binlog", _) => format!("{queues} on the binary log (polls every {every})"),
            (_, Some(why)) => format!("{queues} by polling every {every}, as {why}"),
            _ => format!("{queues} by polling every {every}"),
        }
    }

    fn alike(&self, other: &WakeReport) -> bool {
        (self.source, &self.polls_every, &self.why)
            == (other.source, &other.polls_every, &other.why)
    }
}

impl std::fmt::Display for WakeReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.said_of(&self.queue))
    }
}

/// Every queue's wake-ups in words, queues alike said together: a reason they share
/// (the binary-log grant one user lacks) is said once, not once a queue.
pub fn describe(reports: &[WakeReport]) -> String {
    let mut groups: Vec<(Vec<&str>, &WakeReport)> = Vec::new();
    for report in reports {
        match groups.iter_mut().find(|(_, first)| first.alike(report)) {
            Some((names, _)) => names.push(&report.queue),
            None => groups.push((vec![&report.queue], report)),
        }
    }
    let said: Vec<String> = groups
        .iter()
        .map(|(names, report)| report.said_of(&names.join(", ")))
        .collect();
    said.join("; ")
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

#[cfg(test)]
mod tests {
    use super::*;

    fn report(queue: &str, source: &'static str, why: Option<&str>) -> WakeReport {
        WakeReport {
            queue: queue.into(),
            source,
            polls_every: "5s".into(),
            why: why.map(String::from),
        }
    }

    /// Three queues of one user without the grant: the grant is said once.
    #[test]
    fn a_reason_queues_share_is_said_once() {
        let grant = "user `app` may not read the binary log (…): GRANT …";
        let reports = [
            report("a", "poll", Some(grant)),
            report("b", "binlog", None),
            report("c", "poll", Some(grant)),
            report("d", "poll", Some(grant)),
            report("e", "poll", None),
        ];
        assert_eq!(
            describe(&reports),
            format!(
                "a, c, d by polling every 5s, as {grant}; b on the binary log (polls every 5s); \
                 e by polling every 5s"
            )
        );
    }
}
