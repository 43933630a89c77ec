//! A worker's session: one connection, set up for queue work, with the queue's SQL
//! prepared on it. Opening one is also how `run` validates a queue at start.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};
use tokio::time::Instant;

use crate::config::QueueConfig;
use crate::db::connect::{connect, describe_error, prepare_worker_session, SessionError};
use crate::db::prepared::{prepare_queue, PrepareError, PreparedQueue};
use crate::diagnostic::Finding;

/// How long a ping may take before the connection counts as gone.
const PING_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

pub struct Session {
    pub conn: Conn,
    /// Counts this session in its queue's connected workers, once a worker owns it.
    pub counted: Option<crate::telemetry::stats::Connected>,
    pub prepared: PreparedQueue,
    last_used: Instant,
    longest_silence: Duration,
}

/// Why a session could not be opened.
#[derive(Debug)]
pub enum OpenError {
    /// The database could not be reached or the connection failed; try again later.
    Unreachable(String),
    /// The queue's SQL is wrong for this database.
    Invalid(Vec<Finding>),
}

impl Session {
    /// Connects to `opts` and prepares `queue` on the new connection.
    pub async fn open(queue: &QueueConfig, opts: &Opts) -> Result<Session, OpenError> {
        let unreachable = |e: mysql_async::Error| OpenError::Unreachable(describe_error(&e));
        let mut conn = connect(opts).await.map_err(unreachable)?;
        let longest_silence = queue.action.timeout().max(queue.poll_interval);
        match prepare_worker_session(&mut conn, longest_silence).await {
            Ok(()) => {}
            Err(SessionError::Database(e)) => return Err(unreachable(e)),
            Err(e @ SessionError::Isolation(_)) => {
                return Err(OpenError::Invalid(vec![queue.finding(
                    crate::diagnostic::Severity::Error,
                    &["database_url"],
                    e.to_string(),
                )]))
            }
        }
        let prepared = match prepare_queue(&mut conn, queue, queue.batch).await {
            Ok(prepared) => prepared,
            Err(PrepareError::Invalid(findings)) => return Err(OpenError::Invalid(findings)),
            Err(PrepareError::Database(e)) => return Err(unreachable(e)),
        };
        Ok(Session {
            conn,
            counted: None,
            prepared,
            last_used: Instant::now(),
            longest_silence,
        })
    }

    /// True if the server may have closed this connection for being idle too long;
    /// checked with a ping before the next claim.
    pub async fn still_alive(&mut self) -> bool {
        if self.last_used.elapsed() < self.longest_silence {
            return true;
        }
        matches!(
            tokio::time::timeout(PING_TIMEOUT, self.conn.ping()).await,
            Ok(Ok(()))
        )
    }

    /// Closes the connection politely (COM_QUIT), without waiting long for it.
    pub async fn close(self) {
        let _ = tokio::time::timeout(PING_TIMEOUT, self.conn.disconnect()).await;
    }

    pub fn touch(&mut self) {
        self.last_used = Instant::now();
    }
}
