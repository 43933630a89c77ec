//! One worker: a loop that claims a batch, processes it, commits, and waits when the
//! queue is empty — reconnecting with backoff whenever the database goes away.
//!
//! Each turn is [`Worker::claim_once`], which does the I/O and says what happened
//! ([`Claimed`]), then [`Worker::next_step`], a small decision with no I/O, then
//! [`Worker::take`], which waits as the step says.

use std::sync::Arc;
use std::time::Duration;

use tracing::{debug, error, info, info_span, warn, Instrument};

use super::backoff::{jitter, pause, Backoff};
use super::batch::claim_and_process;
use super::idle::{Turn, Watch};
use super::observe::BatchWatch;
use super::queue::QueueRuntime;
use super::refusals::is_full;
use super::report::BatchReport;
use crate::db::{DbError, ErrorKind, Item, Kill, OpenError, Session};
use crate::diagnostic::messages;
use crate::telemetry::stats::Connected;

/// Runs worker `index` of `queue` until it is told to stop. `session` is a session
/// opened already (the one `run` validated the queue with), if any.
pub async fn run_worker(queue: Arc<QueueRuntime>, index: usize, session: Option<Session>) {
    let span = info_span!("worker", queue = %queue.config.name, worker = index);
    Worker::new(&queue, index, session)
        .run()
        .instrument(span)
        .await
}

/// A session held by a worker, counted in its queue's connected workers.
struct Held {
    session: Session,
    _connected: Connected,
}

/// What one claim came to.
enum Claimed {
    /// The queue was empty; `drained` if `--stop-when-empty` says it is done.
    Empty { drained: bool },
    /// Processed and committed.
    Committed(BatchReport),
    /// An item failed in a batch run without savepoints: all of it was rolled back.
    RolledBack,
    /// A deadlock or lock wait timeout: rolled back, the session kept.
    Contention(DbError),
    /// The transaction is lost, and the session with it.
    Lost(DbError),
    /// The shutdown timeout passed mid-batch: the session was killed.
    Aborted,
}

/// What the worker does after a claim.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    ClaimAgain,
    Wait(Duration),
    /// Watch the empty queue, or sleep until woken.
    Idle,
    Stop,
}

struct Worker<'a> {
    queue: &'a QueueRuntime,
    index: usize,
    session: Option<Held>,
    backoff: Backoff,
    /// The connection was lost: say so when it is back.
    reconnecting: bool,
    /// Run the next SQL batch with a savepoint per item (after a failure).
    careful: bool,
    /// Deadlocks and lock wait timeouts in a row.
    contention: u32,
    /// Held while this worker is the one that polls the empty queue.
    watch: Option<Watch<'a>>,
}

impl<'a> Worker<'a> {
    fn new(queue: &'a QueueRuntime, index: usize, session: Option<Session>) -> Self {
        Worker {
            queue,
            index,
            session: session.map(|session| Held {
                session: session.watched_by(queue.stats.waiting(index)),
                _connected: queue.stats.connection(),
            }),
            backoff: Backoff::new(queue.config.error_backoff),
            reconnecting: false,
            careful: false,
            contention: 0,
            watch: None,
        }
    }

    async fn run(mut self) {
        let queue = self.queue;
        while !queue.stop.is_cancelled() {
            // While the circuit is open, wait here: claiming would spend attempts.
            let Some(pass) = queue.circuit.pass(&queue.stop).await else {
                break;
            };
            let Some(held) = self.ready_session().await else {
                break;
            };
            let claimed = self.claim_once(held).await;
            drop(pass);
            let step = self.next_step(claimed);
            if !self.take(step).await {
                break;
            }
        }
    }

    /// The session to claim on: the one held, if still alive, else a new one.
    /// `None` once the worker is told to stop.
    async fn ready_session(&mut self) -> Option<Held> {
        loop {
            if let Some(mut held) = self.session.take() {
                if held.session.still_alive().await {
                    return Some(held);
                }
                debug!("the idle connection was closed; reconnecting");
            }
            let session = self.open().await?;
            self.session = Some(Held {
                session,
                _connected: self.queue.stats.connection(),
            });
        }
    }

    /// Claims and processes one batch; keeps the session unless it is lost.
    async fn claim_once(&mut self, mut held: Held) -> Claimed {
        let queue = self.queue;
        let ticket = queue.stop_when_empty.begin();
        queue.stats.record_claim();
        let connection_id = held.session.id();
        let batch = BatchWatch::new(queue);
        let watch = &mut self.watch;
        let found = |items: &[Item]| {
            batch.claimed(items);
            let found = items.len();
            if found > 0 {
                // Busy now: hand the watch on (dropping it wakes a sleeper), so
                // that someone keeps polling while this batch takes its time.
                *watch = None;
            }
            if found == queue.config.batch {
                // A full claim: more rows may be waiting. Wake everyone now.
                queue.idle.wake_all();
            }
        };
        let result = tokio::select! {
            biased;
            _ = queue.abort.cancelled() => None,
            result = claim_and_process(&mut held.session, queue, self.careful, found) => Some(result),
        };
        let Some(result) = result else {
            ticket.finish(true);
            batch.rolled_back();
            warn!("the shutdown timeout passed; rolling back the items in flight");
            if let Err(e) = queue.database.kill(connection_id, Kill::Connection).await {
                warn!(error = %e, "could not kill the session; the server rolls it back when the connection drops");
            }
            return Claimed::Aborted;
        };
        let claimed = match result {
            Ok(report) if report.claimed == 0 => {
                return self.keep(
                    held,
                    Claimed::Empty {
                        drained: ticket.finish_empty(),
                    },
                );
            }
            Ok(report) if report.rolled_back => {
                batch.rolled_back();
                Claimed::RolledBack
            }
            Ok(report) => {
                batch.committed();
                queue
                    .stats
                    .record(report.done, report.failed, report.returned);
                ticket.finish(report.returned > 0);
                return self.keep(held, Claimed::Committed(report));
            }
            Err(e) if e.is_contention() && held.session.rollback_quickly().await => {
                batch.failed(&e);
                Claimed::Contention(e)
            }
            Err(e) => {
                batch.failed(&e);
                ticket.finish(true);
                return Claimed::Lost(e);
            }
        };
        ticket.finish(true);
        self.keep(held, claimed)
    }

    fn keep(&mut self, mut held: Held, claimed: Claimed) -> Claimed {
        held.session.touch();
        self.session = Some(held);
        claimed
    }

    /// Decides what to do after a claim, and keeps the worker's counters.
    fn next_step(&mut self, claimed: Claimed) -> Step {
        match claimed {
            Claimed::Empty { drained: true } => {
                info!("the queue is drained");
                Step::Stop
            }
            Claimed::Empty { drained: false } => {
                self.backoff.reset();
                self.careful = false;
                Step::Idle
            }
            Claimed::Committed(report) => {
                self.contention = 0;
                self.careful = false;
                if self.loops_too_often(&report.completed) {
                    return Step::Stop;
                }
                if report.returned > 0 || report.failed == report.claimed {
                    // Failed items came straight back, or the whole batch failed
                    // (a broken queue, an outage): don't spin on them.
                    Step::Wait(self.backoff.next_wait())
                } else {
                    self.backoff.reset();
                    Step::ClaimAgain
                }
            }
            Claimed::RolledBack => {
                // Claim again at once, this time with a savepoint per item.
                self.careful = true;
                Step::ClaimAgain
            }
            Claimed::Contention(e) => {
                debug!(error = %e, "the transaction was rolled back; its items are waiting again");
                // Deadlocks come in pairs: step aside for a short, random while,
                // longer each time in a row, before claiming again.
                self.contention += 1;
                Step::Wait(contention_pause(
                    self.contention,
                    self.queue.config.error_backoff,
                ))
            }
            Claimed::Lost(e) => {
                let wait = self.backoff.next_wait();
                warn!(error = %e, retry_in = %humantime::format_duration(wait),
                    "database error; the transaction is rolled back and its items are waiting again");
                self.reconnecting = true;
                Step::Wait(wait)
            }
            Claimed::Aborted => Step::Stop,
        }
    }

    /// Says so of each key completed again within `loop_window`; true — and the
    /// queue stops claiming — once one has come back `loop_limit` times.
    fn loops_too_often(&self, completed: &[String]) -> bool {
        let queue = self.queue;
        for (key, repeats) in queue.loops.completed(completed) {
            queue.stats.record_loop();
            error!(%key, repeats, window = %humantime::format_duration(queue.config.loop_window),
                "an item completed again: its row is still in the select after [on_success]; change \
                 the row so the select no longer returns it (a status, a delete), or set \
                 loop_window = \"0s\" for rows re-armed on purpose");
            if repeats >= queue.config.loop_limit {
                error!(%key, repeats, "the queue loops: it stops claiming until the files are reloaded");
                queue.stats.set_looping();
                queue.stop.cancel();
                return true;
            }
        }
        false
    }

    /// Takes `step`; false when the worker is to stop.
    async fn take(&mut self, step: Step) -> bool {
        match step {
            Step::ClaimAgain => true,
            Step::Wait(wait) => pause(&self.queue.stop, wait).await,
            Step::Idle => self.idle().await,
            Step::Stop => false,
        }
    }

    /// After an empty claim: poll again after `poll_interval` as the queue's watcher,
    /// or, when another worker watches, sleep with no connection until woken.
    async fn idle(&mut self) -> bool {
        if self.watch.is_none() {
            match self.queue.idle.turn() {
                Turn::Watch(role) => self.watch = Some(role),
                Turn::Sleep(sleep) => {
                    // A sleeping worker holds no connection: an idle queue keeps
                    // one, the watcher's.
                    if let Some(idle) = self.session.take() {
                        idle.session.close().await;
                    }
                    sleep.until_woken(&self.queue.stop).await;
                    return true;
                }
            }
        }
        pause(&self.queue.stop, self.queue.config.poll_interval).await
    }

    /// Opens a session, or logs why not and waits out the backoff; `None` once the
    /// worker is told to stop. Only the queue's first worker logs at warning level:
    /// the others would say the same thing.
    async fn open(&mut self) -> Option<Session> {
        let queue = self.queue;
        loop {
            let opened = tokio::select! {
                _ = queue.stop.cancelled() => return None,
                opened = Session::open_with_limit(&queue.config, &queue.database, queue.config.batch, queue.stats.waiting(self.index)) => opened,
            };
            let wait = self.backoff.next_wait();
            match opened {
                Ok(session) => {
                    if self.reconnecting {
                        info!("connected to the database again");
                        self.reconnecting = false;
                    }
                    self.backoff.reset();
                    return Some(session);
                }
                Err(e) => self.not_opened(&e, wait),
            }
            self.reconnecting = true;
            if !pause(&queue.stop, wait).await {
                return None;
            }
        }
    }

    fn not_opened(&self, e: &OpenError, wait: Duration) {
        if let OpenError::Unreachable(_) = e {
            self.queue
                .stats
                .observed
                .record_db_error(ErrorKind::Connect);
        }
        let retry_in = humantime::format_duration(wait);
        let first = self.index == 0;
        match e {
            OpenError::Unreachable(error) if is_full(error.server_code()) => {
                if let Some(refused) = self.queue.refusals.record() {
                    warn!(%error, refused, database = %self.queue.database,
                        "the database refused connections: it is full (max_connections or max_user_connections); \
                         lower `workers` (summed over every copy of tableq) or raise the server's limit");
                }
            }
            OpenError::Unreachable(error) if first => {
                warn!(%error, database = %self.queue.database, %retry_in, "cannot connect to the database; retrying")
            }
            OpenError::Unreachable(error) => {
                debug!(%error, %retry_in, "cannot connect to the database; retrying")
            }
            OpenError::Invalid(findings) if first => {
                error!(error = %messages(findings), %retry_in, "the queue's SQL does not work on its database; retrying")
            }
            OpenError::Invalid(findings) => {
                debug!(error = %messages(findings), %retry_in, "the queue's SQL does not work on its database; retrying")
            }
        }
    }
}

/// How long to wait after the `streak`-th deadlock in a row: a few milliseconds,
/// doubling, never more than `ceiling`, with jitter so two deadlocked workers do not
/// collide again in step.
fn contention_pause(streak: u32, ceiling: Duration) -> Duration {
    let base = Duration::from_millis(10u64 << streak.min(10));
    jitter(base).min(ceiling)
}
