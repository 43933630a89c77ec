//! How each queue's rows due by time alone would be found: asked of the database
//! when its select's time conditions can be read (told in the summary line), else
//! polled every `poll_interval` (a warning: up to that late).

use crate::config::QueueConfig;
use crate::diagnostic::{Finding, Severity};
use crate::sql::due::due_times;

/// How `queue`'s rows due by time are found: on time (for the summary line), or a
/// warning; neither when its select does not read the clock.
pub fn due_report(queue: &QueueConfig) -> Option<Result<String, Finding>> {
    let (on_time, said) = due_times(&queue.select.text).described(queue.poll_interval)?;
    Some(match on_time {
        true => Ok(format!("{} {said}", queue.name)),
        false => Err(queue.finding(Severity::Warning, &["select"], said)),
    })
}
