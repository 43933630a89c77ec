//! The queue's backlog, counted in the background: every `stats_interval`, a
//! connection of its own (outside the workers, closed after) counts the rows the
//! queue's select returns, up to `waiting_cap`, without locking any (see
//! [`crate::db::backlog`]) — and, with `waiting_since`, how long the first of them in
//! the claim's order has waited, by the database's clock. A scrape only reads what
//! it found: it never reaches the database.

use std::sync::Arc;
use std::time::SystemTime;

use tracing::debug;

use super::backoff::pause;
use super::queue::QueueRuntime;
use crate::db::backlog::read_backlog;
use crate::db::{DbClock, DbError, ErrorKind, OpenError, Session};

/// Counts `queue`'s backlog now and every `stats_interval`, until it stops. The
/// connection lives only for the count: an idle queue keeps holding one connection,
/// its watcher's.
pub async fn refresh_stats(queue: Arc<QueueRuntime>) {
    let every = queue.config.monitoring.stats_interval;
    loop {
        tokio::select! {
            _ = queue.stop.cancelled() => break,
            () = count_once(&queue) => {}
        }
        if !pause(&queue.stop, every).await {
            break;
        }
    }
}

/// Opens a connection, counts, closes it; a failure is counted and logged quietly.
async fn count_once(queue: &QueueRuntime) {
    let Some(mut session) = open(queue).await else {
        return;
    };
    match refresh_once(&mut session, queue).await {
        Ok(()) => session.close().await,
        Err(e) => {
            queue.stats.observed.record_db_error(e.kind());
            debug!(queue = %queue.config.name, error = %e, "could not count the waiting rows; trying again later");
        }
    }
}

/// A session for the count.
async fn open(queue: &QueueRuntime) -> Option<Session> {
    let config = &queue.config;
    match Session::open(config, &queue.database).await {
        Ok(session) => Some(session),
        Err(e) => {
            if let OpenError::Unreachable(_) = e {
                queue.stats.observed.record_db_error(ErrorKind::Connect);
            }
            debug!(queue = %config.name, error = %e, "cannot open the connection that counts the waiting rows");
            None
        }
    }
}

/// Reads the backlog and the database's clock (which commits).
async fn refresh_once(session: &mut Session, queue: &QueueRuntime) -> Result<(), DbError> {
    let backlog = read_backlog(session, &queue.config).await?;
    let clock = DbClock::read(session).await?;
    let observed = &queue.stats.observed;
    observed.set_clock(clock);
    let oldest = queue.config.monitoring.waiting_since.as_ref().map(|_| {
        backlog
            .oldest_since
            .and_then(|since| clock.age(&since, SystemTime::now()))
            .unwrap_or_default()
    });
    observed.set_backlog(backlog.waiting, backlog.capped, oldest);
    Ok(())
}
