//! `tableq count`: how many rows are waiting, the article's way — lock up to a cap
//! of them with SKIP LOCKED in a transaction that commits at once. Rows being worked
//! on right now are not counted; a big backlog costs no more than the cap.
//!
//! `tableq count --print-sql`: the statement the background count runs (a plain read,
//! rows in flight counted too), for an autoscaler to run itself.

use std::fmt;

use crate::config::QueueConfig;
use crate::db::{Database, OpenError, Session};

pub use crate::db::backlog::printable_count_statement;

/// Waiting rows, up to the cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waiting {
    pub count: usize,
    /// More than `count` rows are waiting.
    pub capped: bool,
}

impl fmt::Display for Waiting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.count, if self.capped { "+" } else { "" })
    }
}

/// Counts the rows of `queue` waiting now, stopping at `cap`.
pub async fn count_waiting(
    queue: &QueueConfig,
    database: &Database,
    cap: usize,
) -> Result<Waiting, OpenError> {
    // One more than the cap tells "exactly cap" from "more than cap".
    let mut session =
        Session::open_with_limit(queue, database, cap + 1, Default::default()).await?;
    let claimed = session.claim(&queue.name).await;
    let committed = session.commit().await;
    session.close().await;
    let found = claimed.map_err(OpenError::Unreachable)?.len();
    committed.map_err(OpenError::Unreachable)?;
    Ok(Waiting {
        count: found.min(cap),
        capped: found > cap,
    })
}
