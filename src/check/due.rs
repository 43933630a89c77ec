//! How each queue's rows due by time alone would be found: asked of the database
//! when its select's time conditions can be read (a note), else polled every
//! `poll_interval` (a warning: up to that late).

use crate::config::QueueConfig;
use crate::diagnostic::{Finding, Severity};
use crate::sql::due::due_times;

/// The finding, for a queue whose select reads the clock.
pub fn due_finding(queue: &QueueConfig) -> Option<Finding> {
    let (on_time, said) = due_times(&queue.select.text).described(queue.poll_interval)?;
    let severity = match on_time {
        true => Severity::Note,
        false => Severity::Warning,
    };
    Some(queue.finding(severity, &["select"], said))
}
