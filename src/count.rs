//! `tableq count`: how many rows are waiting, the article's way — lock up to a cap
//! of them with SKIP LOCKED in a transaction that commits at once. Rows being worked
//! on right now are not counted; a big backlog costs no more than the cap.

use std::fmt;

use mysql_async::prelude::Queryable;
use mysql_async::{Opts, Row};

use crate::config::QueueConfig;
use crate::db::connect::{connect, describe_error, prepare_worker_session, SessionError};
use crate::db::prepared::{prepare_queue, PrepareError};
use crate::db::session::OpenError;

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
    opts: &Opts,
    cap: usize,
) -> Result<Waiting, OpenError> {
    let unreachable = |e: mysql_async::Error| OpenError::Unreachable(describe_error(&e));
    let mut conn = connect(opts).await.map_err(unreachable)?;
    prepare_worker_session(&mut conn, queue.poll_interval)
        .await
        .map_err(|e| match e {
            SessionError::Database(e) => unreachable(e),
            other => OpenError::Unreachable(other.to_string()),
        })?;
    // One more than the cap tells "exactly cap" from "more than cap".
    let prepared = prepare_queue(&mut conn, queue, cap + 1)
        .await
        .map_err(|e| match e {
            PrepareError::Invalid(findings) => OpenError::Invalid(findings),
            PrepareError::Database(e) => unreachable(e),
        })?;
    let params = prepared.claim_params(&queue.name);
    let rows: Vec<Row> = conn
        .exec(&prepared.claim.statement, params)
        .await
        .map_err(unreachable)?;
    conn.query_drop("COMMIT").await.map_err(unreachable)?;
    let _ = conn.disconnect().await;
    Ok(Waiting {
        count: rows.len().min(cap),
        capped: rows.len() > cap,
    })
}
