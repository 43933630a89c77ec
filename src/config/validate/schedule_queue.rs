//! A schedule queue as a whole, once its tables are validated: `overlap = true`
//! needs an action outside the database (an SQL action runs in the claim's
//! transaction, which holds the due time until it commits).

use crate::config::QueueConfig;
use crate::diagnostic::{Finding, Severity};

/// A schedule queue with `overlap = true` and an SQL action, refused.
pub fn refusals(queue: &QueueConfig) -> Vec<Finding> {
    match &queue.schedule {
        Some(schedule) if schedule.overlap && queue.action.in_transaction() => {
            vec![queue.finding(
                Severity::Error,
                &["overlap"],
                "`overlap = true` does not go with an SQL action: it runs in the claim's \
                 transaction, which holds the due time until it commits; remove `overlap`",
            )]
        }
        _ => Vec::new(),
    }
}
