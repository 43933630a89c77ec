//! One worker: a loop that claims a batch, processes it, commits, and waits when the
//! queue is empty — reconnecting with backoff whenever the database goes away.

use std::sync::Arc;

use mysql_async::prelude::Queryable;
use mysql_async::Opts;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

use tracing::{debug, error, info, info_span, warn, Instrument};

use crate::action::Action;
use crate::config::QueueConfig;
use crate::db::connect::{describe, describe_error, is_expected_contention, kill, Kill};
use crate::db::session::{OpenError, Session};
use crate::engine::backoff::{pause, Backoff};
use crate::engine::batch::claim_and_process;
use crate::engine::idle::{Idle, Turn, Watch};
use crate::engine::stop_when_empty::Drain;
use crate::telemetry::stats::QueueStats;

/// What a queue's workers share.
pub struct QueueRuntime {
    pub config: QueueConfig,
    /// The action, ready to run (for HTTP: with its client).
    pub action: Action,
    pub opts: Opts,
    pub stats: Arc<QueueStats>,
    pub drain: Drain,
    /// Who polls while the queue is empty.
    pub idle: Idle,
    /// Stop claiming: the daemon is shutting down, or the queue is drained.
    pub stop: CancellationToken,
    /// Roll back whatever is in flight, now: the shutdown timeout has passed.
    pub abort: CancellationToken,
}

/// Runs worker `index` of `queue` until it is told to stop. `session` is a session
/// opened already (the one `run` validated the queue with), if any.
pub async fn run_worker(queue: Arc<QueueRuntime>, index: usize, session: Option<Session>) {
    let span = info_span!("worker", queue = %queue.config.name, worker = index);
    work(&queue, index, session).instrument(span).await
}

/// How long a ping or a ROLLBACK may take before the connection is given up.
const QUICK_STATEMENT_TIMEOUT: Duration = Duration::from_secs(10);

async fn work(queue: &QueueRuntime, index: usize, mut session: Option<Session>) {
    let mut backoff = Backoff::new(queue.config.error_backoff);
    let mut reconnecting = false;
    // Whether the next SQL batch runs with a savepoint per item (after a failure).
    let mut careful = false;
    // Deadlocks and lock wait timeouts in a row.
    let mut contention = 0u32;
    // Held while this worker is the one that polls the empty queue.
    let mut watch: Option<Watch> = None;
    while !queue.stop.is_cancelled() {
        let alive = match session.as_mut() {
            Some(s) => s.still_alive().await,
            None => false,
        };
        if !alive {
            if session.take().is_some() {
                debug!("the idle connection was closed; reconnecting");
            }
            match open(queue, index, &mut backoff, &mut reconnecting).await {
                Opened::Ready(s) => session = Some(s),
                Opened::Retry => continue,
                Opened::Stopped => break,
            }
        }
        let Some(mut current) = session.take() else {
            continue;
        };
        if current.counted.is_none() {
            current.counted = Some(queue.stats.connection());
        }

        let ticket = queue.drain.begin();
        queue.stats.record_claim();
        let connection_id = current.conn.id();
        let result = tokio::select! {
            biased;
            _ = queue.abort.cancelled() => None,
            result = claim_and_process(&mut current.conn, &current.prepared, queue, careful, |found| {
                if found > 0 {
                    // Busy now: hand the watch on (dropping it wakes a sleeper), so
                    // that someone keeps polling while this batch takes its time.
                    watch = None;
                }
                if found == queue.config.batch {
                    // A full claim: more rows may be waiting. Wake everyone now.
                    queue.idle.wake_all();
                }
            }) => Some(result),
        };
        match result {
            None => {
                ticket.finish(true);
                warn!("the shutdown timeout passed; rolling back the items in flight");
                if let Err(e) = kill(&queue.opts, connection_id, Kill::Connection).await {
                    warn!(error = %describe_error(&e), "could not kill the session; the server rolls it back when the connection drops");
                }
                break;
            }
            Some(Ok(report)) if report.claimed == 0 => {
                current.touch();
                session = Some(current);
                backoff.reset();
                careful = false;
                if ticket.finish_empty() {
                    info!("the queue is drained");
                    break;
                }
                if watch.is_none() {
                    match queue.idle.turn() {
                        Turn::Watch(role) => watch = Some(role),
                        Turn::Sleep(sleep) => {
                            // A sleeping worker holds no connection: an idle queue
                            // keeps one, the watcher's.
                            if let Some(idle) = session.take() {
                                idle.close().await;
                            }
                            sleep.until_woken(&queue.stop).await;
                            continue;
                        }
                    }
                }
                if !pause(&queue.stop, queue.config.poll_interval).await {
                    break;
                }
            }
            Some(Ok(report)) if report.rolled_back => {
                // An item failed in a batch run without savepoints: nothing of it was
                // kept. Claim again at once, this time with a savepoint per item.
                current.touch();
                session = Some(current);
                ticket.finish(true);
                careful = true;
            }
            Some(Ok(report)) => {
                current.touch();
                session = Some(current);
                contention = 0;
                queue.stats.record(&report);
                ticket.finish(report.returned > 0);
                careful = false;
                if report.returned > 0 {
                    // Failed items came straight back; don't spin on them.
                    if !pause(&queue.stop, backoff.next_wait()).await {
                        break;
                    }
                } else {
                    backoff.reset();
                }
            }
            Some(Err(e)) => {
                ticket.finish(true);
                if is_expected_contention(&e) {
                    debug!(error = %describe_error(&e), "the transaction was rolled back; its items are waiting again");
                    let rollback = tokio::time::timeout(
                        QUICK_STATEMENT_TIMEOUT,
                        current.conn.query_drop("ROLLBACK"),
                    );
                    if matches!(rollback.await, Ok(Ok(()))) {
                        session = Some(current);
                        // Deadlocks come in pairs: step aside for a short, random
                        // while, longer each time in a row, before claiming again.
                        contention += 1;
                        if !pause(
                            &queue.stop,
                            contention_pause(contention, queue.config.error_backoff),
                        )
                        .await
                        {
                            break;
                        }
                        continue;
                    }
                } else {
                    let wait = backoff.next_wait();
                    warn!(error = %describe_error(&e), retry_in = %humantime::format_duration(wait),
                        "database error; the transaction is rolled back and its items are waiting again");
                    reconnecting = true;
                    drop(current);
                    if !pause(&queue.stop, wait).await {
                        break;
                    }
                }
            }
        }
    }
}

enum Opened {
    Ready(Session),
    Retry,
    Stopped,
}

/// Opens a session, or logs why not and waits out the backoff. Only the queue's
/// first worker logs at warning level: the others would say the same thing.
async fn open(
    queue: &QueueRuntime,
    index: usize,
    backoff: &mut Backoff,
    reconnecting: &mut bool,
) -> Opened {
    let opened = tokio::select! {
        _ = queue.stop.cancelled() => return Opened::Stopped,
        opened = Session::open(&queue.config, &queue.opts) => opened,
    };
    let wait = backoff.next_wait();
    let retry_in = humantime::format_duration(wait);
    match opened {
        Ok(session) => {
            if *reconnecting {
                info!("connected to the database again");
                *reconnecting = false;
            }
            backoff.reset();
            return Opened::Ready(session);
        }
        Err(OpenError::Unreachable(error)) if index == 0 => {
            warn!(%error, database = %describe(&queue.opts), %retry_in, "cannot connect to the database; retrying")
        }
        Err(OpenError::Unreachable(error)) => {
            debug!(%error, %retry_in, "cannot connect to the database; retrying")
        }
        Err(OpenError::Invalid(findings)) => {
            let error = findings
                .iter()
                .map(|f| f.message.clone())
                .collect::<Vec<_>>()
                .join("; ");
            if index == 0 {
                error!(%error, %retry_in, "the queue's SQL does not work on its database; retrying")
            } else {
                debug!(%error, %retry_in, "the queue's SQL does not work on its database; retrying")
            }
        }
    }
    *reconnecting = true;
    if pause(&queue.stop, wait).await {
        Opened::Retry
    } else {
        Opened::Stopped
    }
}

/// How long to wait after the `streak`-th deadlock in a row: a few milliseconds,
/// doubling, never more than `ceiling`, with jitter so two deadlocked workers do not
/// collide again in step.
fn contention_pause(streak: u32, ceiling: Duration) -> Duration {
    let base = Duration::from_millis(5u64 << streak.min(10));
    let jitter = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos()) as u64
        % (base.as_nanos() as u64 + 1);
    (base + Duration::from_nanos(jitter)).min(ceiling)
}
