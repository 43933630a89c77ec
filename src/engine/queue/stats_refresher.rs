//! The queue's backlog, counted in the background: every `stats_interval`, a
//! connection of its own (outside the workers, closed after; in lease mode, a
//! session of the queue's pool, so the queue never holds more) counts the rows the
//! queue's select returns, up to `waiting_cap`, without locking any (see
//! [`crate::db::backlog`]) — and, with `waiting_since`, how long the first of them in
//! the claim's order has waited, by the database's clock. A scrape only reads what
//! it found: it never reaches the database. While the binary log wakes the queue,
//! the count waits for a change to its tables (or its poll on the binary log) too.

use std::sync::Arc;
use std::time::SystemTime;

use crate::db::backlog::{read_backlog, Backlog, BacklogError};
use crate::db::SessionPool;
use crate::engine::policy::retry::sleep_unless_stopped;
use crate::engine::queue::QueueRuntime;
use crate::telemetry::events::{CountFailed, Event};

/// Where the backlog is counted.
pub enum CountOn {
    /// A short connection of its own.
    OwnConnection,
    /// A session of a lease-mode queue's pool, when one is free: a count never
    /// keeps a renewal or an outcome waiting.
    Pool(Arc<SessionPool>),
}

/// Counts `queue`'s backlog now and every `stats_interval`, until it stops. The
/// connection lives only for the count: an idle queue keeps holding one connection,
/// its watcher's.
pub async fn refresh_stats(queue: Arc<QueueRuntime>, on: CountOn) {
    let every = queue.config.monitoring.stats_interval;
    loop {
        tokio::select! {
            _ = queue.stop.cancelled() => break,
            () = count_once(&queue, &on) => {}
        }
        if !sleep_unless_stopped(&queue.stop, every).await {
            break;
        }
        if queue.wake.following() && !changed_or_due(&queue).await {
            break;
        }
    }
}

/// While the binary log wakes the queue, the count follows its wake-ups: it waits
/// for a change to the queue's tables, or its poll on the binary log (rows also
/// become due by time alone). False once the queue stops.
async fn changed_or_due(queue: &QueueRuntime) -> bool {
    tokio::select! {
        _ = queue.stop.cancelled() => false,
        _ = queue.wake.changed() => true,
        _ = tokio::time::sleep(queue.config.wake.poll_on_binlog) => true,
    }
}

/// Reads the backlog; a failure is counted and logged quietly.
async fn count_once(queue: &QueueRuntime, on: &CountOn) {
    let observed = &queue.stats.observed;
    let Some(read) = read(queue, on).await else {
        return;
    };
    match read {
        Ok(backlog) => {
            observed.set_clock(backlog.clock);
            let oldest = queue.config.monitoring.waiting_since.as_ref().map(|_| {
                backlog
                    .oldest_since
                    .and_then(|since| backlog.clock.age(&since, SystemTime::now()))
                    .unwrap_or_default()
            });
            observed.set_backlog(backlog.waiting, backlog.capped, oldest);
            observed.set_gave_up(backlog.gave_up);
            observed.set_schedule(backlog.schedule);
        }
        Err(e) => {
            let _span = tracing::debug_span!("queue", queue = %queue.config.name).entered();
            let failed = CountFailed {
                error: &e,
                kind: e.kind(),
            };
            failed.emit(&queue.stats);
        }
    }
}

/// One look at the backlog; `None` when the pool had no session free. A count on
/// a connection of its own is also how a URL of several hosts finds its first host
/// taking writes again (see [`crate::db::Session::reusable`]): the pool's count
/// takes one now and then while a later host is in use, in the background, so that
/// no worker waits on a host that does not answer.
async fn read(queue: &QueueRuntime, on: &CountOn) -> Option<Result<Backlog, BacklogError>> {
    match on {
        CountOn::Pool(pool) if !queue.database.look_back_due() => pool.read_backlog().await,
        _ => Some(read_backlog(&queue.database, &queue.config).await),
    }
}
