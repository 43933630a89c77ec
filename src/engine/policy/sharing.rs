//! Keeping a queue's limits shared with the other copies running it on its
//! database ([`crate::engine::policy::copies`]): counted among them before its first action, then
//! every [`COUNT_EVERY`] until it stops — each count shares `rate_limit` anew and
//! is shown in the queue's metrics.

use std::sync::Arc;

use tracing::{debug, info};

use crate::engine::policy::copies::{Copies, COUNT_EVERY};
use crate::engine::policy::retry::sleep_unless_stopped;
use crate::engine::queue::QueueRuntime;
use crate::telemetry::stats::limited::Share;

/// Joins the other copies before the queue's first action: counted at once, so a
/// copy starting among others starts at its share.
pub async fn join(queue: &QueueRuntime) {
    if let Some(copies) = queue.limits.shared() {
        count(queue, copies, true).await;
    }
}

/// Counts the copies (reconnecting when the link is down), and shares the rate by
/// them.
async fn count(queue: &QueueRuntime, copies: &Copies, first: bool) {
    let limits = &queue.limits;
    let before = copies.counted();
    match copies.count(&queue.database).await {
        Ok(counted) => {
            if first || counted != before {
                let share = limits.share_of(counted);
                info!(queue = %queue.config.name, copies = counted, share = share.as_deref().unwrap_or("-"),
                    "limits shared by {counted} copies of the queue on its database");
            }
            limits.share_by(counted);
        }
        Err(e) => debug!(error = %e, "could not count the copies sharing the limits"),
    }
    let share = Share {
        rate_per_second: limits.rate_share(),
        copies: limits.copies(),
    };
    queue.stats.observed.limited.set_share(share);
}

/// Keeps `queue`'s limits shared with the other copies: counts them every
/// [`COUNT_EVERY`] (reconnecting when the link is down) until the queue stops,
/// then leaves.
pub async fn share(queue: Arc<QueueRuntime>) {
    let Some(copies) = queue.limits.shared().cloned() else {
        return;
    };
    while sleep_unless_stopped(&queue.stop, COUNT_EVERY).await {
        count(&queue, &copies, false).await;
    }
    copies.leave().await;
}
