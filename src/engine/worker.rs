//! One worker, in either mode: a loop that waits for the circuit's pass, has its
//! mode claim and carry the claim to its end ([`Mode::turn`]), then decides what to
//! do next ([`Worker::next_step`]: a small decision, no I/O) and does it. What both
//! modes share is here, once: the circuit's pass, a pause, `--stop-when-empty`, the
//! idle watch, backoff, loop detection, the "database full" warning, connection errors
//! counted, and the restart of a worker that panicked.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::{debug, info, info_span, Instrument};

use crate::backoff::doubled;
use crate::db::due::DueQuery;
use crate::db::{DbError, OpenError, Refusal};
use crate::duration::rounded;
use crate::engine::policy::pausing::Read;
use crate::engine::policy::retry::{jitter, Retry};
use crate::engine::queue::restart::restart_on_panic;
use crate::engine::queue::stop_when_empty::{Attempt, Emptied};
use crate::engine::queue::QueueRuntime;
use crate::engine::turn::record::REFUSED_RETRY;
use crate::engine::turn::report::BatchReport;
use crate::engine::turn::Turn;
use crate::engine::wake::idle::{Role, Watch, Woke, SECOND_LOOKS};
use crate::engine::wake::Ask;
use crate::telemetry::events::{Event, LoopSeen, QueueLooping};
use crate::telemetry::trace::{otlp, spans};

/// How a worker claims rows and carries them to their end: transaction mode or lease
/// mode.
pub trait Mode: Send {
    /// What a panic of this worker leaves behind, for the log line.
    const LEFT_BEHIND: &'static str;

    /// One claim, carried to its end. `turn` hears what the claim found.
    fn turn(&mut self, turn: &Turn<'_>) -> impl Future<Output = Ended> + Send;

    /// The worker sleeps until woken: hold no connection meanwhile.
    fn sleep(&mut self) -> impl Future<Output = ()> + Send;

    /// Reads whether the queue is paused, leaving nothing open on the session but,
    /// when it is not paused, a transaction holding no lock for the claim to use.
    fn read_pause(&mut self) -> impl Future<Output = Read> + Send;

    /// Asks how long until the queue's next row falls due by time, leaving nothing
    /// open on the session; `None` when no session could be had.
    fn next_due(
        &mut self,
        query: &DueQuery,
    ) -> impl Future<Output = Option<Result<Option<Duration>, DbError>>> + Send;
}

/// What one turn came to.
#[derive(Debug)]
pub enum Ended {
    /// The claim found nothing.
    Empty,
    /// Every item claimed was carried to its end (some may be waiting again).
    Done(BatchReport),
    /// An item failed in a batch run without savepoints: all of it was rolled back,
    /// and is claimed again at once, with a savepoint per item.
    RolledBack,
    /// A deadlock or lock wait timeout: rolled back.
    Contention(DbError),
    /// The transaction or the connection was lost; the items are waiting again.
    Lost(DbError),
    /// No session could be opened.
    NotOpened(OpenError),
    /// The shutdown timeout passed mid-turn: what was in flight is rolled back.
    Aborted,
    /// Told to stop before anything was claimed.
    Stopped,
    /// Nothing claimed: the queue was paused since the worker looked.
    Paused,
}

/// What the worker does after a turn.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    ClaimAgain,
    Wait(Duration),
    /// Watch the empty queue, or sleep until woken.
    Idle,
    Stop,
}

/// Runs worker `index` of `queue`, in the mode `mode` makes (afresh after a panic),
/// until it is told to stop.
pub async fn run_worker<M, F>(queue: Arc<QueueRuntime>, index: usize, mut mode: F)
where
    M: Mode + 'static,
    F: FnMut() -> M,
{
    restart_on_panic(&queue, index, M::LEFT_BEHIND, || {
        let queue = queue.clone();
        let mode = mode();
        async move {
            let span = info_span!("worker", queue = %queue.config.name, worker = index);
            Worker::new(&queue, mode).run().instrument(span).await
        }
    })
    .await;
}

struct Worker<'a, M> {
    queue: &'a QueueRuntime,
    mode: M,
    /// The waits after a lost connection, a failed turn or a slow one.
    retry: Retry<'a>,
    /// The database could not be reached: say so when it is back.
    reconnecting: bool,
    /// Deadlocks and lock wait timeouts in a row.
    contention: u32,
    /// Held while this worker is the one that polls the empty queue.
    watch: Option<Watch<'a>>,
    /// After a nudge, the next of [`SECOND_LOOKS`] to wait (none left: its length).
    second_looks: usize,
}

impl<'a, M: Mode> Worker<'a, M> {
    fn new(queue: &'a QueueRuntime, mode: M) -> Self {
        Worker {
            queue,
            mode,
            retry: Retry::new(queue.config.error_backoff, &queue.stop),
            reconnecting: false,
            contention: 0,
            watch: None,
            second_looks: SECOND_LOOKS.len(),
        }
    }

    async fn run(mut self) {
        let queue = self.queue;
        while !queue.stop.is_cancelled() {
            // While the database refuses writes, wait here: an action claimed now
            // could not have its outcome written.
            queue.stats.set_refusing(queue.gate.refusing());
            if !queue.gate.pass(&queue.stop).await {
                break;
            }
            // While the queue is paused, idle here as on an empty queue: the watcher
            // reads the pause every poll_interval, the others sleep.
            let step = match self.paused().await {
                true => Step::Idle,
                false => self.turn().await,
            };
            if !self.follow(step).await {
                break;
            }
        }
    }

    /// One turn, once the circuit lets the worker claim; what to do next.
    async fn turn(&mut self) -> Step {
        let queue = self.queue;
        // While the circuit is open, wait here: claiming would spend attempts.
        let Some(pass) = queue.circuit.pass(&queue.stop).await else {
            return Step::Stop;
        };
        // The pause again after the wait, which may be a cool-down's: a pause may
        // have come meanwhile (a probe's pass is given back unused).
        if self.paused().await {
            return Step::Idle;
        }
        let attempt = queue.stop_when_empty.begin();
        let turn = Turn::new(queue, self.watch.take());
        let ended = self.mode.turn(&turn).await;
        self.watch = turn.into_watch();
        drop(pass);
        self.next_step(ended, attempt)
    }

    /// Reads the pause when it is this worker's turn to; true while the queue is
    /// paused.
    async fn paused(&mut self) -> bool {
        let pausing = &self.queue.pausing;
        if let Some(ticket) = pausing.due() {
            let read = self.mode.read_pause().await;
            self.reconnecting |= read.lost_the_database();
            pausing.found(ticket, read, &self.queue.stats);
        }
        if pausing.take_resumed() {
            self.queue.resumed().await;
        }
        pausing.is_paused()
    }

    /// Decides what to do after a turn, and keeps the worker's counters.
    fn next_step(&mut self, ended: Ended, attempt: Attempt<'_>) -> Step {
        let reached = matches!(
            ended,
            Ended::Empty | Ended::Done(_) | Ended::RolledBack | Ended::Contention(_)
        );
        if reached && self.reconnecting {
            info!("connected to the database again");
            self.reconnecting = false;
        }
        match ended {
            Ended::Empty => {
                self.retry.reset();
                // With --stop-when-empty the process's drain decides when to stop:
                // meanwhile an empty queue idles, and works rows that appear.
                match attempt.finish_empty() {
                    Emptied::LookAgain => Step::ClaimAgain,
                    Emptied::Empty => {
                        debug!("the queue is empty");
                        Step::Idle
                    }
                    Emptied::NotYet => Step::Idle,
                }
            }
            Ended::Done(report) => {
                if report.done + report.failed > 0 {
                    // Outcomes were written: the database takes writes, whoever saw
                    // it refuse them.
                    self.queue.gate.writable();
                }
                // Counted before the turn ends, so that a sibling's empty claim that
                // overlapped it looks again rather than a poll later.
                self.queue.stop_when_empty.committed();
                attempt.finish(report.returned > 0);
                self.done(report)
            }
            Ended::RolledBack => Step::ClaimAgain,
            Ended::Contention(e) => {
                debug!(error = %e, "the transaction was rolled back; its items are waiting again");
                // Deadlocks come in pairs: step aside for a short, random while,
                // longer each time in a row, before claiming again.
                self.contention += 1;
                let ceiling = self.queue.config.error_backoff;
                Step::Wait(contention_wait(self.contention, ceiling))
            }
            Ended::Lost(e) => self.lost(&e),
            Ended::NotOpened(e) => {
                let wait = self.reconnect_wait(&e);
                // A Galera node that is not synced takes the connection, not the
                // session's first statements.
                let refused = e.unreachable().and_then(DbError::refuses_writes);
                if refused.is_none() {
                    self.queue.stats.unreached();
                }
                self.refused(refused, wait);
                self.queue.cannot_connect(&e, wait);
                self.reconnecting = true;
                Step::Wait(wait)
            }
            Ended::Paused => {
                debug!("the queue was paused as the claim was about to leave: nothing claimed");
                attempt.finish(false);
                Step::Idle
            }
            Ended::Aborted | Ended::Stopped => Step::Stop,
        }
    }

    /// The session was lost mid-turn: its transaction rolled back. A database that
    /// refuses writes closes the gate (the workers claim again the moment writes
    /// work); any other loss waits to reconnect.
    fn lost(&mut self, e: &DbError) -> Step {
        let refused = e.refuses_writes();
        let mut wait = self.retry.reconnect_wait();
        if refused.is_some() {
            // Looking again at least as often as a refused outcome is written again.
            wait = wait.min(REFUSED_RETRY);
        }
        self.refused(refused, wait);
        match self.queue.lost.record() {
            Some(times) => tracing::warn!(error = %e, retry_in = %rounded(wait), times,
                "database error; the transaction is rolled back and its items are waiting \
                 again (said once a minute, with the times since)"),
            None => debug!(error = %e, "database error; the transaction is rolled back"),
        }
        if refused.is_none() {
            self.queue.stats.unreached();
        }
        self.reconnecting = true;
        match refused {
            Some(_) => Step::ClaimAgain,
            None => Step::Wait(wait),
        }
    }

    /// The wait before opening a session again after `error`: prompt for a database
    /// that is down (it may be back any moment), the backoff's for a server that
    /// answers and refuses (the login, for being full) or a queue whose SQL does not
    /// work on it.
    fn reconnect_wait(&mut self, error: &OpenError) -> Duration {
        match error.unreachable() {
            Some(e) if !e.is_access_denied() && !e.is_server_full() => self.retry.reconnect_wait(),
            _ => self.retry.next_wait(),
        }
    }

    /// The database refuses writes for `why`, if it does.
    fn refused(&self, why: Option<Refusal>, retry_in: Duration) {
        if let Some(why) = why {
            self.queue.writes_refused(why, retry_in);
        }
    }

    /// After a turn that carried its items to their end: counted; a loop stops the
    /// queue; failures that recorded nothing, or that were not the items' own, slow
    /// the worker down. A recorded failure of an item is normal processing.
    fn done(&mut self, mut report: BatchReport) -> Step {
        // Rows `[concurrency]` held back are counted apart (they did not fail back).
        let returned = report.returned - report.held_back;
        self.queue
            .stats
            .record(report.done, report.failed, returned);
        if let (true, Some(began)) = (report.done > 0, report.claimed_at) {
            self.queue.wake.binlog().committed(began);
        }
        self.export_spans(&mut report);
        for attempt in report.attempts.drain(..) {
            self.queue.stats.observed.history.keep(attempt);
        }
        self.contention = 0;
        if self.loops_too_often(&report.completed) {
            return Step::Stop;
        }
        if report.slows_down() {
            Step::Wait(self.retry.next_wait())
        } else {
            self.retry.reset();
            Step::ClaimAgain
        }
    }

    /// The committed turn's trace spans, handed to the exporter (if any).
    fn export_spans(&self, report: &mut BatchReport) {
        let (Some(claimed), false) = (report.claimed_at, report.traced.is_empty()) else {
            return;
        };
        let items = std::mem::take(&mut report.traced);
        let (queue, batch) = (&self.queue.config.name, self.queue.batch_scope());
        let committed = std::time::SystemTime::now();
        otlp::export(spans::of_turn(queue, batch, claimed, committed, &items));
    }

    /// Says so of each key completed again within `loop_window`; true — and the
    /// queue stops claiming — once one has come back `loop_limit` times.
    fn loops_too_often(&self, completed: &[String]) -> bool {
        let queue = self.queue;
        let window = queue.config.loop_window;
        for (key, repeats) in queue.loops.completed(completed) {
            LoopSeen {
                key: &key,
                repeats,
                window,
            }
            .emit(&queue.stats);
            if repeats >= queue.config.loop_limit {
                QueueLooping { key: &key, repeats }.emit(&queue.stats);
                queue.stop_when_empty.leave();
                queue.stop.cancel();
                return true;
            }
        }
        false
    }

    /// Follows `step`; false when the worker is to stop.
    async fn follow(&mut self, step: Step) -> bool {
        match step {
            Step::ClaimAgain => true,
            Step::Wait(wait) => self.retry.sleep(wait).await,
            Step::Idle => self.idle().await,
            Step::Stop => false,
        }
    }

    /// After an empty claim: poll again after `poll_interval` as the queue's watcher,
    /// or, when another worker watches, sleep with no connection until woken.
    async fn idle(&mut self) -> bool {
        let queue = self.queue;
        if self.watch.is_none() {
            match queue.idle.role() {
                Role::Watch(watch) => self.watch = Some(watch),
                Role::Sleep(sleep) => {
                    // A sleeping worker holds no connection: an idle queue keeps
                    // one, the watcher's.
                    self.mode.sleep().await;
                    sleep.until_woken(&queue.stop).await;
                    return true;
                }
            }
        }
        let soon = SECOND_LOOKS.get(self.second_looks).copied();
        self.second_looks = (self.second_looks + 1).min(SECOND_LOOKS.len());
        let until = match queue.stats.paused() {
            // A paused queue reads its pause every poll_interval, or sooner when the
            // binary log says it changed.
            Some(_) => {
                let next_read = queue.pausing.until_next_read();
                Instant::now() + next_read.min(queue.config.poll_interval)
            }
            // A second look too ends when a row falls due by time.
            None => {
                let every = queue.wake.every(soon);
                self.until_due(every).await
            }
        };
        if queue.database.contended() {
            // Other connections wait for a place in the budget: the watcher gives its
            // up between polls.
            self.mode.sleep().await;
        }
        match queue.idle.poll_wait(&queue.stop, until).await {
            Woke::Stopped => false,
            Woke::Polled => true,
            Woke::Nudged => {
                self.second_looks = 0;
                queue.wake.nudged();
                true
            }
        }
    }
}

impl<M: Mode> Worker<'_, M> {
    /// When the watcher claims next: `every` from now, or sooner when a row falls
    /// due by time sooner (see [`crate::engine::wake::due`]).
    async fn until_due(&mut self, every: Duration) -> Instant {
        let wake = &self.queue.wake;
        match wake.ask(every) {
            Ask::Until(until) => until,
            Ask::Query(question) => {
                let answer = self.mode.next_due(question.query).await;
                wake.answered(question, answer)
            }
        }
    }
}

/// How long to wait after the `streak`-th deadlock in a row: a few milliseconds,
/// doubling, never more than `ceiling`, with jitter so two deadlocked workers do not
/// collide again in step.
fn contention_wait(streak: u32, ceiling: Duration) -> Duration {
    let first = Duration::from_millis(10);
    jitter(doubled(first, streak.saturating_add(1), first * 1024)).min(ceiling)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::db::DbError;
    use crate::telemetry::log::capture;

    /// A mode whose turns the tests hand to `next_step` themselves.
    struct NoTurns;

    impl Mode for NoTurns {
        const LEFT_BEHIND: &'static str = "nothing";

        async fn turn(&mut self, _: &Turn<'_>) -> Ended {
            unreachable!("the tests decide what each turn came to")
        }

        async fn sleep(&mut self) {}

        async fn read_pause(&mut self) -> Read {
            Read::NoSession
        }

        async fn next_due(&mut self, _: &DueQuery) -> Option<Result<Option<Duration>, DbError>> {
            None
        }
    }

    const QUEUE: &str = r#"
        select = "SELECT id FROM job WHERE done = 0"
        error_backoff = "800ms"
        loop_limit = 3
        [action]
        type = "sql"
        sql = "DO :id"
        [on_success]
        sql = "UPDATE job SET done = 1 WHERE id = :id"
    "#;

    /// What the worker decides after a turn that came to `ended`.
    fn after(worker: &mut Worker<'_, NoTurns>, ended: Ended) -> Step {
        let attempt = worker.queue.stop_when_empty.begin();
        worker.next_step(ended, attempt)
    }

    /// A turn that did `done` items, the keys those of `completed`.
    fn done(completed: &[&str], returned: usize) -> Ended {
        let mut report = BatchReport::claimed(completed.len() + returned);
        report.done = completed.len();
        report.returned = returned;
        report.completed = completed.iter().map(|k| k.to_string()).collect();
        Ended::Done(report)
    }

    /// A wait of the backoff's first step: between half of 800ms and all of it.
    fn first_backoff(step: Step) -> bool {
        let first = Duration::from_millis(800);
        matches!(step, Step::Wait(wait) if wait >= first / 2 && wait <= first)
    }

    /// An empty queue idles; a turn that did its items claims again at once; a turn
    /// whose items came back unrecorded backs off; an abort or a stop stops.
    #[test]
    fn each_turn_leads_to_its_next_step() {
        let queue = QueueRuntime::for_tests(QUEUE);
        let mut worker = Worker::new(&queue, NoTurns);
        assert_eq!(after(&mut worker, Ended::Empty), Step::Idle);
        assert_eq!(after(&mut worker, done(&["1", "2"], 0)), Step::ClaimAgain);
        assert_eq!(after(&mut worker, Ended::RolledBack), Step::ClaimAgain);
        assert!(first_backoff(after(&mut worker, done(&["3"], 1))));
        assert_eq!(after(&mut worker, Ended::Aborted), Step::Stop);
        assert_eq!(after(&mut worker, Ended::Stopped), Step::Stop);
        assert!(
            !queue.stop.is_cancelled(),
            "the worker stops, not the queue"
        );
    }

    /// A row completed again and again within `loop_window` stops the queue once it
    /// came back `loop_limit` times, and each return is said.
    #[test]
    fn a_loop_stops_the_queue() {
        let queue = QueueRuntime::for_tests(QUEUE);
        let mut worker = Worker::new(&queue, NoTurns);
        let (log, _guard) = capture();
        let steps: Vec<Step> = (0..4)
            .map(|_| after(&mut worker, done(&["7"], 0)))
            .collect();
        let claimed_again = [Step::ClaimAgain, Step::ClaimAgain, Step::ClaimAgain];
        assert_eq!(steps[..3], claimed_again);
        assert_eq!(steps[3], Step::Stop);
        assert!(queue.stop.is_cancelled() && queue.stats.looping());
        assert_eq!(queue.stats.counts().loops, 3);
        let log = log.text();
        assert!(log.contains("an item completed again"), "{log}");
        assert!(log.contains("the queue loops"), "{log}");
    }

    /// A lost transaction backs off and says so; the next turn that reaches the
    /// database says it is back and starts the backoff afresh.
    #[test]
    fn a_lost_connection_backs_off_and_says_so() {
        let queue = QueueRuntime::for_tests(QUEUE);
        let mut worker = Worker::new(&queue, NoTurns);
        let (log, _guard) = capture();
        let lost = DbError::server(2013, "Lost connection to server during query");
        assert!(first_backoff(after(&mut worker, Ended::Lost(lost))));
        let lost = DbError::server(2013, "Lost connection to server during query");
        let second = after(&mut worker, Ended::Lost(lost));
        assert!(
            matches!(second, Step::Wait(w) if w >= Duration::from_millis(800)),
            "{second:?}"
        );
        assert!(log
            .text()
            .contains("database error; the transaction is rolled back"));
        assert_eq!(after(&mut worker, Ended::Empty), Step::Idle);
        assert!(log.text().contains("connected to the database again"));
        let lost = DbError::server(2013, "Lost connection to server during query");
        assert!(
            first_backoff(after(&mut worker, Ended::Lost(lost))),
            "afresh"
        );
    }

    /// A transaction lost to a read-only server closes the gate of its database, and
    /// the worker waits there, not in a backoff of its own: the gate lets it claim
    /// the moment writes work. A turn that wrote outcomes opens the gate.
    #[test]
    fn a_read_only_database_closes_the_gate_until_outcomes_are_written() {
        let queue = QueueRuntime::for_tests(QUEUE);
        let mut worker = Worker::new(&queue, NoTurns);
        let read_only = DbError::server(
            1290,
            "The MariaDB server is running with the --read-only option",
        );
        assert_eq!(after(&mut worker, Ended::Lost(read_only)), Step::ClaimAgain);
        assert_eq!(queue.gate.refusing(), Some("read-only"));
        let refused = BatchReport {
            refused: 1,
            ..BatchReport::claimed(1)
        };
        assert!(!refused.slows_down(), "the gate holds the worker back");
        after(&mut worker, done(&[], 1));
        assert_eq!(queue.gate.refusing(), Some("read-only"), "nothing written");
        after(&mut worker, done(&["1"], 0));
        assert_eq!(queue.gate.refusing(), None, "opened");
    }

    /// No session: a full server and a refused login are said with their advice,
    /// anything else as a database that cannot be reached; each backs off.
    #[test]
    fn a_session_that_does_not_open_is_said_with_its_advice() {
        let (log, _guard) = capture();
        for (code, said) in [
            (1040, "lower `workers`"),
            (1045, "check the user and password in the database URL"),
            (2003, "cannot connect to the database; retrying"),
        ] {
            let queue = QueueRuntime::for_tests(QUEUE);
            let mut worker = Worker::new(&queue, NoTurns);
            let error = OpenError::Unreachable(DbError::server(code, "refused"));
            assert!(first_backoff(after(&mut worker, Ended::NotOpened(error))));
            assert!(log.text().contains(said), "{code}: {}", log.text());
            assert!(worker.reconnecting);
        }
    }

    /// A deadlock steps aside a few milliseconds, longer each time in a row, never
    /// longer than `error_backoff`; a turn that goes through starts it afresh.
    #[test]
    fn contention_steps_aside_briefly() {
        let queue = QueueRuntime::for_tests(QUEUE);
        let mut worker = Worker::new(&queue, NoTurns);
        let deadlock = || Ended::Contention(DbError::server(1213, "Deadlock found"));
        let waits: Vec<Duration> = (0..12)
            .map(|_| match after(&mut worker, deadlock()) {
                Step::Wait(wait) => wait,
                other => panic!("{other:?}"),
            })
            .collect();
        assert!(waits[0] <= Duration::from_millis(20), "{waits:?}");
        assert!(waits[5] >= Duration::from_millis(320), "{waits:?}");
        assert!(
            waits.iter().all(|w| *w <= Duration::from_millis(800)),
            "{waits:?}"
        );
        assert_eq!(after(&mut worker, done(&["1"], 0)), Step::ClaimAgain);
        assert_eq!(worker.contention, 0);
    }
}
