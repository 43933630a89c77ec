//! What the process knows about its queues, across reloads: each queue's counters
//! (kept when a reload restarts it, so they only ever grow), how many workers it has
//! and how many are connected. The metrics endpoint reads it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::config::QueueConfig;
use crate::db::pause::Paused;
use crate::db::Database;
use crate::lock::lock;
use crate::telemetry::stats::{CircuitState, Counts, QueueStats};

#[derive(Debug, Default)]
pub struct Monitor {
    queues: Mutex<BTreeMap<String, Watched>>,
    stopping: AtomicBool,
    /// Writes to the history tables that failed, and failed attempts dropped on
    /// their way there.
    history_errors: Arc<std::sync::atomic::AtomicU64>,
}

#[derive(Debug)]
struct Watched {
    stats: Arc<QueueStats>,
    workers: usize,
    running: bool,
    /// Configured, and not started yet: `run` is opening its first connection and
    /// looking at its claim.
    starting: bool,
    /// Its file and database, for the console; `None` until the queue has started.
    setup: Option<Arc<Setup>>,
}

/// What a running queue was started with: its file's settings and its database —
/// what the console shows of it and acts on it through — and the way to its
/// workers in this copy.
#[derive(Debug)]
pub struct Setup {
    pub config: QueueConfig,
    pub database: Database,
    pub here: Arc<dyn PauseHere>,
}

/// What the console tells its own copy's queue after writing a pause or a resume,
/// before it answers: the queue's workers take it at once, not at their next read.
pub trait PauseHere: Send + Sync + std::fmt::Debug {
    /// The queue is paused (`Some`, as written) or resumed (`None`).
    fn set(&self, paused: Option<Paused>);
}

/// One queue as the metrics endpoint shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueView {
    pub name: String,
    pub counts: Counts,
    pub workers: usize,
    pub connected: usize,
    /// Holds no connection now, but claimed within its turn's window (see
    /// [`QueueStats::taking_turns`]): more queues than the budget has places.
    pub taking_turns: bool,
    pub running: bool,
    /// Not started yet (see [`Monitor::starting`]).
    pub starting: bool,
    pub circuit: CircuitState,
    /// Why the queue stopped claiming by itself, if it did (`looping`).
    pub stopped_claiming: Option<&'static str>,
    /// The queue is paused (`tableq pause`), as its workers last read it.
    pub paused: Option<Paused>,
    /// Its database refuses writes, and why (`read-only`, `not synced`, …).
    pub refusing: Option<&'static str>,
    /// The host in use, when its database URL lists several (`db2:3306`).
    pub database_host: Option<String>,
    /// How many times the circuit changed to each state, in [`CircuitState::ALL`]'s
    /// order.
    pub circuit_transitions: [u64; 3],
}

/// What a starting queue is doing, as `/readyz` and the status page say it.
pub const STARTING: &str = "opening its first connection and looking at its claim";

impl Watched {
    fn new(workers: usize, starting: bool) -> Watched {
        Watched {
            stats: Arc::new(QueueStats::default()),
            workers,
            running: !starting,
            starting,
            setup: None,
        }
    }
}

impl Monitor {
    /// Queue `name`, of `workers` workers, is configured and about to start: it is
    /// listed as starting (if it is not listed already) until it starts.
    pub fn starting(&self, name: &str, workers: usize) {
        self.lock()
            .entry(name.to_string())
            .or_insert_with(|| Watched::new(workers, true));
    }

    /// Queue `name` will not start after all (a reload that failed): no longer
    /// listed, unless it had started before.
    pub fn not_starting(&self, name: &str) {
        let mut queues = self.lock();
        if queues.get(name).is_some_and(|w| w.starting) {
            queues.remove(name);
        }
    }

    /// The counters of queue `name`, now running with `workers` workers: the ones it
    /// had before a reload, or new ones.
    pub fn start_queue(&self, name: &str, workers: usize, deadline: Duration) -> Arc<QueueStats> {
        let mut queues = self.lock();
        let watched = queues
            .entry(name.to_string())
            .or_insert_with(|| Watched::new(workers, false));
        watched.workers = workers;
        watched.running = true;
        watched.starting = false;
        watched.stats.expect_workers(workers, deadline);
        watched.stats.clone()
    }

    /// What queue `name` runs with now (after [`Monitor::start_queue`]).
    pub fn set_setup(&self, name: &str, setup: Setup) {
        if let Some(watched) = self.lock().get_mut(name) {
            watched.setup = Some(Arc::new(setup));
        }
    }

    /// Queue `name`, if it runs: its statistics and what it runs with.
    pub fn running(&self, name: &str) -> Option<(Arc<QueueStats>, Arc<Setup>)> {
        let queues = self.lock();
        let watched = queues.get(name).filter(|w| w.running)?;
        Some((watched.stats.clone(), watched.setup.clone()?))
    }

    /// Queue `name` stopped (shutdown, or a reload about to start it again).
    pub fn stop_queue(&self, name: &str) {
        if let Some(watched) = self.lock().get_mut(name) {
            watched.running = false;
        }
    }

    /// The daemon is shutting down: no longer ready.
    /// Where the history's write errors are counted.
    pub fn history_errors(&self) -> Arc<std::sync::atomic::AtomicU64> {
        self.history_errors.clone()
    }

    pub fn set_stopping(&self) {
        self.stopping.store(true, Ordering::Release);
    }

    pub fn queues(&self) -> Vec<QueueView> {
        self.watched().into_iter().map(|(view, _)| view).collect()
    }

    /// Each queue with its statistics, for the metrics and the status page.
    pub fn watched(&self) -> Vec<(QueueView, Arc<QueueStats>)> {
        self.lock()
            .iter()
            .map(|(name, watched)| {
                let view = QueueView {
                    name: name.clone(),
                    counts: watched.stats.counts(),
                    workers: watched.workers,
                    connected: watched.stats.connected(),
                    taking_turns: watched.stats.taking_turns(),
                    running: watched.running,
                    starting: watched.starting,
                    circuit: watched.stats.circuit(),
                    stopped_claiming: watched.stats.looping().then_some("looping"),
                    paused: watched.stats.paused(),
                    refusing: watched.stats.refusing(),
                    database_host: watched.stats.database_host(),
                    circuit_transitions: CircuitState::ALL
                        .map(|state| watched.stats.circuit_transitions(state)),
                };
                (view, watched.stats.clone())
            })
            .collect()
    }

    /// Ready when not stopping and every running queue has a connected worker, or
    /// takes its turns on the budget's connections (it claimed within its window) or
    /// claims nothing on purpose as its database refuses writes — with notes worth
    /// knowing that do not make it unready (an open circuit, a read-only database) —
    /// else the reasons it is not.
    pub fn readiness(&self) -> Result<Vec<String>, Vec<String>> {
        if self.stopping.load(Ordering::Acquire) {
            return Err(vec!["shutting down".to_string()]);
        }
        let queues = self.queues();
        if !queues.iter().any(|q| q.running || q.starting) {
            return Err(vec!["no queue is running yet".to_string()]);
        }
        let looping = self.looping_queues();
        let mut waiting: Vec<String> = queues
            .iter()
            .filter(|q| q.starting)
            .map(|q| format!("queue {} is starting: {STARTING}", q.name))
            .collect();
        waiting.extend(
            looping
                .iter()
                .map(|name| format!("queue {name} stopped claiming: a row keeps coming back")),
        );
        waiting.extend(
            queues
                .iter()
                .filter(|q| {
                    q.running && q.connected == 0 && !q.taking_turns && q.refusing.is_none()
                })
                .filter(|q| !looping.contains(&q.name))
                .map(|q| format!("queue {} has no database connection", q.name)),
        );
        for (name, watched) in self.lock().iter().filter(|(_, w)| w.running) {
            let stalled = watched.stats.stalled();
            waiting.extend(stalled.iter().map(|s| format!("queue {name}: {s}")));
        }
        if waiting.is_empty() {
            let mut notes = circuit_notes(&queues);
            notes.extend(pause_notes(&queues));
            notes.extend(self.refusal_notes());
            notes.extend(host_notes(&queues));
            Ok(notes)
        } else {
            Err(waiting)
        }
    }

    /// `queue email: the database refuses writes (read-only) …` for each running
    /// queue whose database refuses writes: it claims nothing on purpose, holding
    /// no connection meanwhile, and is ready.
    fn refusal_notes(&self) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(_, w)| w.running)
            .filter_map(|(name, w)| Some((name, w.stats.refusing()?)))
            .map(|(name, why)| {
                format!(
                    "queue {name}: the database refuses writes ({why}): it claims again when \
                     writes work"
                )
            })
            .collect()
    }

    /// The queues that stopped claiming because a row kept coming back (since they
    /// last started).
    pub fn looping_queues(&self) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(_, w)| w.stats.looping())
            .map(|(name, _)| name.clone())
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Watched>> {
        lock(&self.queues)
    }
}

/// `queue webhook: circuit open …` for each running queue whose circuit is not
/// closed: it claims nothing (or one probe) on purpose, and is ready all the same.
fn circuit_notes(queues: &[QueueView]) -> Vec<String> {
    queues
        .iter()
        .filter(|q| q.running && q.circuit != CircuitState::Closed)
        .map(|q| {
            format!(
                "queue {}: circuit {} (failures downstream: it claims again after a probe succeeds)",
                q.name,
                q.circuit.name()
            )
        })
        .collect()
}

/// `queue email: database host db2:3306` for each running queue whose database URL
/// lists several hosts: the one its connections go to now.
fn host_notes(queues: &[QueueView]) -> Vec<String> {
    queues
        .iter()
        .filter(|q| q.running)
        .filter_map(|q| {
            Some(format!(
                "queue {}: database host {}",
                q.name,
                q.database_host.as_ref()?
            ))
        })
        .collect()
}

/// `queue email: paused (…)` for each running queue paused by `tableq pause`: it
/// claims nothing on purpose, and is ready.
fn pause_notes(queues: &[QueueView]) -> Vec<String> {
    queues
        .iter()
        .filter(|q| q.running)
        .filter_map(|q| Some((q, q.paused.as_ref()?)))
        .map(|(q, paused)| {
            let reason = match paused.reason.as_str() {
                "" => String::new(),
                reason => format!(": {reason}"),
            };
            format!(
                "queue {}: paused by {}{reason} (it claims again after `tableq resume`{})",
                q.name,
                paused.by,
                if paused.until.is_some() {
                    " or when the pause runs out"
                } else {
                    ""
                }
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_survive_a_restart_and_readiness_needs_connections() {
        let monitor = Monitor::default();
        assert!(monitor.readiness().is_err(), "nothing runs yet");
        let stats = monitor.start_queue("email", 4, Duration::from_secs(30));
        stats.record_claim();
        assert_eq!(
            monitor.readiness(),
            Err(vec!["queue email has no database connection".to_string()])
        );
        let connected = stats.connection();
        assert_eq!(monitor.readiness(), Ok(vec![]));
        drop(connected);
        monitor.stop_queue("email");
        let again = monitor.start_queue("email", 8, Duration::from_secs(30));
        assert_eq!(again.counts().claims, 1, "the same counters after a reload");
        assert_eq!(monitor.queues()[0].workers, 8);
        monitor.set_stopping();
        assert!(monitor.readiness().is_err());
    }

    /// A queue whose workers wait, unconnected, for a read-only database to take
    /// writes says so — not that it has no connection.
    #[test]
    fn a_refusing_database_is_said_as_such() {
        let monitor = Monitor::default();
        let stats = monitor.start_queue("email", 2, Duration::from_secs(30));
        stats.set_refusing(Some("read-only"));
        let notes = monitor.readiness().expect("ready: it waits on purpose");
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("(read-only)"), "{notes:?}");
        stats.set_refusing(None);
        assert_eq!(
            monitor.readiness(),
            Err(vec!["queue email has no database connection".to_string()])
        );
    }

    /// A configured queue is listed as starting, and not ready, until it starts; one
    /// whose start was given up (a failed reload) is no longer listed, while one that
    /// had started stays.
    #[test]
    fn a_queue_is_listed_as_starting_until_it_starts() {
        let monitor = Monitor::default();
        monitor.starting("email", 2);
        monitor.starting("sms", 1);
        let views = monitor.queues();
        assert!(views.iter().all(|q| q.starting && !q.running), "{views:?}");
        let not_ready = monitor.readiness().expect_err("starting");
        assert_eq!(
            not_ready,
            [
                format!("queue email is starting: {STARTING}"),
                format!("queue sms is starting: {STARTING}")
            ]
        );
        let stats = monitor.start_queue("email", 2, Duration::from_secs(30));
        let _connected = stats.connection();
        monitor.not_starting("sms");
        monitor.not_starting("email");
        let views = monitor.queues();
        assert_eq!(views.len(), 1, "{views:?}");
        assert!(views[0].running && !views[0].starting);
        assert_eq!(monitor.readiness(), Ok(vec![]));
    }
}
