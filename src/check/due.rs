//! How each queue's rows due by time alone would be found: asked of the database
//! when its select's time conditions can be read (told in the summary line), else
//! polled every `poll_interval` (a warning: up to that late).

use crate::config::QueueConfig;
use crate::diagnostic::{Finding, Severity};
use crate::sql::due::due_times;

/// How a queue finds its rows due by time on time, as the summary tells it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DueReport {
    pub queue: String,
    /// `claims rows due by time (…) when they fall due, …`.
    pub said: String,
}

/// How `queue`'s rows due by time are found: on time (for the summary), or a
/// warning; neither when its select does not read the clock.
pub fn due_report(queue: &QueueConfig) -> Option<Result<DueReport, Finding>> {
    let (on_time, said) = due_times(&queue.select.text).described(queue.poll_interval)?;
    Some(match on_time {
        true => Ok(DueReport {
            queue: queue.name.clone(),
            said,
        }),
        false => Err(queue.finding(Severity::Warning, &["select"], said)),
    })
}

/// The summary's lines: queues whose rows are found alike said on one line.
pub fn describe(reports: &[DueReport]) -> Vec<String> {
    let mut groups: Vec<(Vec<&str>, &str)> = Vec::new();
    for report in reports {
        match groups.iter_mut().find(|(_, said)| *said == report.said) {
            Some((names, _)) => names.push(&report.queue),
            None => groups.push((vec![&report.queue], &report.said)),
        }
    }
    groups
        .iter()
        .map(|(names, said)| format!("{} {said}", names.join(", ")))
        .collect()
}
