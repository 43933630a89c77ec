//! `tableq count`: how many rows are waiting, up to a cap — the background count's
//! plain read, on a session opened as a worker's (READ COMMITTED, the queue's SQL
//! prepared). It locks no row: a count of a million holds no lock a worker would
//! skip. Rows being worked on right now are counted too, as in `tableq_waiting`.
//!
//! `tableq count --print-sql`: the statement the background count runs (the same
//! read, its cap the queue's `waiting_cap`), for an autoscaler to run itself.

use std::fmt;

use crate::config::QueueConfig;
use crate::db::backlog::count_on;
use crate::db::{Database, OpenError, Session};

pub use crate::db::backlog::printable_count_statement;

/// WaitingCount rows, up to the cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitingCount {
    pub count: usize,
    /// More than `count` rows are waiting.
    pub capped: bool,
}

impl fmt::Display for WaitingCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.count, if self.capped { "+" } else { "" })
    }
}

/// Counts the rows of `queue` waiting now, stopping at `cap`.
pub async fn count_waiting(
    queue: &QueueConfig,
    database: &Database,
    cap: usize,
) -> Result<WaitingCount, OpenError> {
    let mut session = Session::open(queue, database).await?;
    let counted = count_on(session.parts().0, queue, cap).await;
    let ended = session.rollback().await;
    session.close().await;
    let found = counted.map_err(OpenError::Unreachable)?;
    ended.map_err(OpenError::Unreachable)?;
    Ok(WaitingCount {
        count: found.min(cap),
        capped: found > cap,
    })
}
