//! What an action finds downstream (a broker, a webhook's host), asked by `check`
//! through the kind's own [`Probe::probe`]: the exchange or stream is there, what
//! a sample row's message would look like, where its request would go. The sample is the first waiting row,
//! claimed and at once rolled back; nothing is sent.

use mysql_async::prelude::Queryable;
use mysql_async::Row;

use crate::action::External;
use crate::config::QueueConfig;
use crate::db::prepared::claim_sql;
use crate::db::{Item, Session};
use crate::diagnostic::Finding;

/// The first waiting row as the action would see it, or `None` (an empty queue, a
/// claim the server refuses: the proof says why).
pub async fn sample_row(queue: &QueueConfig, session: &mut Session) -> Option<Item> {
    let (conn, prepared) = session.parts();
    let claim = claim_sql(&queue.select, 1);
    let claimed: Result<Option<Row>, _> = conn
        .exec_first(claim, prepared.claim_params(&queue.name))
        .await;
    let _ = conn.query_drop("ROLLBACK").await;
    claimed.ok().flatten().map(|row| prepared.item(row))
}

/// What `action` finds downstream, as findings on `queue`'s `[action]` keys (each
/// kind's look keeps `action::deadline::probe`'s limit).
pub async fn probe(
    queue: &QueueConfig,
    action: &dyn External,
    sample: Option<&Item>,
) -> Vec<Finding> {
    let found = action.probe(&queue.name, sample).await;
    found
        .into_iter()
        .map(|probed| queue.finding(probed.severity, &["action", probed.key], probed.message))
        .collect()
}
