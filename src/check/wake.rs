//! Which wake-up source each queue would use, and why: the binary log where its
//! server writes one and its user may read it, else polls — told in the summary
//! line, and an error for `wake = "binlog"` without it (which `run` refuses too).

use crate::config::queue::wake::binlog_refused;
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
    /// The summary's words for `queues`, polling as `every` says.
    fn said_of(&self, queues: &str, every: &str) -> String {
        match (self.source, &self.why) {
            ("binlog", _) => format!("{queues} on the binary log (polls {every})"),
            (_, Some(why)) => format!("{queues} by polling {every}, as {why}"),
            _ => format!("{queues} by polling {every}"),
        }
    }

    /// Whether the summary says `other` on this one's line: the same source, for
    /// the same reason (each queue's interval is said on the line).
    fn alike(&self, other: &WakeReport) -> bool {
        (self.source, &self.why) == (other.source, &other.why)
    }
}

impl std::fmt::Display for WakeReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let every = format!("every {}", self.polls_every);
        f.write_str(&self.said_of(&self.queue, &every))
    }
}

/// Every queue's wake-ups in words, a line for each source and reason, naming its
/// queues: a reason they share (the binary-log grant one user lacks) is said once,
/// not once a queue, whatever each one's poll_interval.
pub fn describe(reports: &[WakeReport]) -> Vec<String> {
    let mut groups: Vec<Vec<&WakeReport>> = Vec::new();
    for report in reports {
        match groups.iter_mut().find(|group| group[0].alike(report)) {
            Some(group) => group.push(report),
            None => groups.push(vec![report]),
        }
    }
    groups
        .iter()
        .map(|group| {
            let names: Vec<&str> = group.iter().map(|r| r.queue.as_str()).collect();
            group[0].said_of(&names.join(", "), &intervals(group))
        })
        .collect()
}

/// `every 5s` when the queues poll alike, else `every 5s (a, c), 1m (d)`.
fn intervals(group: &[&WakeReport]) -> String {
    let mut by_interval: Vec<(&str, Vec<&str>)> = Vec::new();
    for report in group {
        match by_interval
            .iter_mut()
            .find(|(every, _)| *every == report.polls_every)
        {
            Some((_, names)) => names.push(&report.queue),
            None => by_interval.push((&report.polls_every, vec![&report.queue])),
        }
    }
    if let [(every, _)] = by_interval.as_slice() {
        return format!("every {every}");
    }
    let said: Vec<String> = by_interval
        .iter()
        .map(|(every, names)| format!("{every} ({})", names.join(", ")))
        .collect();
    format!("every {}", said.join(", "))
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
        let grant = "user 'app'@'%' may not read the binary log (…): GRANT …";
        let reports = [
            report("a", "poll", Some(grant)),
            report("b", "binlog", None),
            report("c", "poll", Some(grant)),
            report("d", "poll", Some(grant)),
            report("e", "poll", None),
        ];
        assert_eq!(
            describe(&reports),
            [
                format!("a, c, d by polling every 5s, as {grant}"),
                "b on the binary log (polls every 5s)".to_string(),
                "e by polling every 5s".to_string(),
            ]
        );
    }

    /// Queues that poll at different intervals for one reason: still one line,
    /// which says each queue's interval.
    #[test]
    fn one_reason_at_several_intervals_is_one_line() {
        let grant = "user 'app'@'%' may not read the binary log (…): GRANT …";
        let mut reports: Vec<WakeReport> = (0..30)
            .map(|i| report(&format!("q{i}"), "poll", Some(grant)))
            .collect();
        reports[7].polls_every = "1m".into();
        reports[9].polls_every = "1m".into();
        let said = describe(&reports);
        assert_eq!(said.len(), 1, "{said:?}");
        assert_eq!(said[0].matches("GRANT").count(), 1, "{}", said[0]);
        assert!(
            said[0].contains(" by polling every 5s (q0, q1, q2, q3, q4, q5, q6, q8, q10, "),
            "{}",
            said[0]
        );
        assert!(
            said[0].contains("), 1m (q7, q9), as user 'app'@'%'"),
            "{}",
            said[0]
        );
    }
}
