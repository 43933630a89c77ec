//! The queue's backlog, counted in the background: every `stats_interval`, a
//! connection of its own (outside the workers, closed after) counts the waiting rows the way
//! `tableq count` does — the claim, capped at `waiting_cap`, committed at once — and,
//! with `waiting_since`, how long the oldest of them has waited, by the database's
//! clock. A scrape only reads what it found: it never reaches the database.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tracing::debug;

use super::backoff::pause;
use super::queue::QueueRuntime;
use crate::db::{DbClock, DbError, ErrorKind, Item, OpenError, Session};

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

/// A session claiming one row more than the cap, to tell "exactly the cap" from
/// "more".
async fn open(queue: &QueueRuntime) -> Option<Session> {
    let config = &queue.config;
    let limit = config.monitoring.waiting_cap + 1;
    match Session::open_with_limit(config, &queue.database, limit, Arc::default()).await {
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

/// Counts the waiting rows, reads the database's clock, commits.
async fn refresh_once(session: &mut Session, queue: &QueueRuntime) -> Result<(), DbError> {
    let monitoring = &queue.config.monitoring;
    let rows = session.claim(&queue.config.name).await?;
    let clock = DbClock::read(session).await?;
    let observed = &queue.stats.observed;
    observed.set_clock(clock);
    let oldest = monitoring
        .waiting_since
        .as_deref()
        .map(|since| oldest_age(&rows, since, &clock));
    let cap = monitoring.waiting_cap;
    observed.set_backlog(rows.len().min(cap), rows.len() > cap, oldest);
    Ok(())
}

/// The longest any of `rows` has waited since its `since` column; zero for none.
fn oldest_age(rows: &[Item], since: &str, clock: &DbClock) -> Duration {
    let now = SystemTime::now();
    rows.iter()
        .filter_map(|row| {
            let index = row.columns.find(since)?;
            clock.age(&row.values[index], now)
        })
        .max()
        .unwrap_or_default()
}
