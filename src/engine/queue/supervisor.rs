//! The supervisor: keeps one running version of each queue, starts them, swaps them
//! on a reload without harm, watches that they make progress, and at shutdown bounds
//! how long their items in flight may take to finish by the shutdown timeout.
//!
//! A reload touches only what changed. A queue whose file did not change keeps
//! running as it was. A changed queue's new version starts at once, while the old
//! one stops claiming and finishes its items in flight — however long they take: the
//! shutdown timeout is for shutdown only. A removed queue finishes its items and
//! stops.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{error, info, warn};

use crate::config::QueueConfig;
use crate::db::backlog::read_backlog;
use crate::db::{Budget, Database};
use crate::diagnostic::Findings;
use crate::duration::rounded;
use crate::engine::history::{HistoryOptions, Recorder};
use crate::engine::policy::gate::WriteGate;
use crate::engine::queue::drain::Drain;
use crate::engine::queue::launch::{prepare, start_queue, FirstLook, Prepared};
use crate::engine::queue::lifecycle::{Lifecycle, Silent};
use crate::engine::queue::liveness::Progress;
use crate::engine::queue::stop_when_empty::StopWhenEmpty;
use crate::engine::queue::{Here, QueueRuntime};
use crate::engine::wake::Followers;
use crate::telemetry::stats::monitor::{Monitor, Setup};
use crate::telemetry::stats::Counts;

pub use crate::engine::queue::launch::resolve_databases;

/// How `run` behaves, beyond the queue files.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// For queues without their own `database_url`.
    pub database_url: Option<String>,
    /// Return once every queue is drained, instead of waiting for shutdown.
    pub stop_when_empty: bool,
    /// Every copy uses one node of a multi-primary cluster: its transaction-mode
    /// queues with an action outside the database may run there.
    pub allow_multi_primary: bool,
    /// How long items in flight may take to finish after shutdown begins.
    pub shutdown_timeout: Duration,
    /// How often each queue logs its progress.
    pub progress_every: Duration,
    /// Where the queues' counters and connections are kept, for the metrics
    /// endpoint; shared across reloads so counters only grow.
    pub monitor: Arc<Monitor>,
    /// Who hears that the daemon is ready, reloading, stopping, or stalled.
    pub lifecycle: Arc<dyn Lifecycle>,
    /// At most this many database connections at once, across every queue.
    pub budget: Arc<Budget>,
    /// A look at each queue's first session as it starts.
    pub first_look: Option<FirstLook>,
    /// Keep the history in the queues' databases (`None`: `--history off`).
    pub history: Option<HistoryOptions>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            database_url: None,
            stop_when_empty: false,
            allow_multi_primary: false,
            shutdown_timeout: Duration::from_secs(30),
            progress_every: Duration::from_secs(60),
            monitor: Arc::new(Monitor::default()),
            lifecycle: Arc::new(Silent),
            budget: Arc::default(),
            first_look: None,
            history: None,
        }
    }
}

/// What each queue committed while `run` ran.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunSummary {
    pub queues: Vec<(String, Counts)>,
}

impl RunSummary {
    pub fn counts(&self, queue: &str) -> Option<Counts> {
        self.queues
            .iter()
            .find(|(name, _)| name == queue)
            .map(|(_, c)| *c)
    }
}

/// How long workers get to roll back and disconnect once the shutdown timeout passed.
const ABORT_GRACE: Duration = Duration::from_secs(15);

/// Runs `queues` until `shutdown` is cancelled (or, with `stop_when_empty`, until all
/// are drained). Fails, before any row is touched, if a queue's SQL is wrong for its
/// database or its login is refused; a database that cannot be reached is waited
/// for, never a failure.
pub async fn run(
    queues: Vec<QueueConfig>,
    options: RunOptions,
    shutdown: CancellationToken,
) -> Result<RunSummary, Findings> {
    let mut supervisor = Supervisor::new(options, shutdown);
    if !supervisor.start(queues).await? {
        return Ok(RunSummary::default());
    }
    supervisor.next_event(std::future::pending()).await;
    Ok(supervisor.stop().await)
}

/// What woke the supervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Every queue stopped by itself (`stop_when_empty`).
    Finished,
    /// Shutdown began.
    Shutdown,
    /// Someone asked for a reload.
    Reload,
}

/// The queues running now, and the old versions still finishing their items.
pub struct Supervisor {
    options: RunOptions,
    shutdown: CancellationToken,
    /// Roll back whatever is in flight: the shutdown timeout has passed.
    abort: CancellationToken,
    current: BTreeMap<String, Version>,
    retiring: FuturesUnordered<BoxFuture<'static, Retired>>,
    /// Each database's write gate, shared by the queues on it.
    gates: BTreeMap<String, Arc<WriteGate>>,
    /// `--stop-when-empty`: whether every queue is empty.
    drain: Arc<Drain>,
    /// Each database's binary log follower, waking the queues on it.
    followers: Followers,
    /// Stops the followers: the run is over.
    followers_stop: CancellationToken,
    /// The history being kept, if it is.
    recorder: Option<Recorder>,
}

/// One running version of a queue.
struct Version {
    runtime: Arc<QueueRuntime>,
    tracker: TaskTracker,
    progress: Progress,
}

/// An old version that has finished its last items.
struct Retired {
    runtime: Arc<QueueRuntime>,
    removed: bool,
}

impl Supervisor {
    pub fn new(options: RunOptions, shutdown: CancellationToken) -> Supervisor {
        Supervisor {
            options,
            abort: CancellationToken::new(),
            current: BTreeMap::new(),
            retiring: FuturesUnordered::new(),
            gates: BTreeMap::new(),
            drain: Arc::default(),
            followers: Followers::default(),
            followers_stop: shutdown.child_token(),
            shutdown,
            recorder: None,
        }
    }

    /// Prepares every queue, then starts them all; false if shutdown came first.
    pub async fn start(&mut self, queues: Vec<QueueConfig>) -> Result<bool, Findings> {
        // Listed at once, as starting, while each one's first connection opens.
        for queue in &queues {
            self.options.monitor.starting(&queue.name, queue.workers);
        }
        let url = self.options.database_url.clone();
        let budget = self.options.budget.clone();
        let allow = self.options.allow_multi_primary;
        let look = self.options.first_look.as_ref();
        let prepared = prepare(queues, url.as_deref(), budget, allow, look, &self.shutdown).await?;
        let Some(prepared) = prepared else {
            return Ok(false);
        };
        for queue in prepared {
            self.launch(queue);
        }
        if let Some(history) = &self.options.history {
            let monitor = self.options.monitor.clone();
            self.recorder = Some(Recorder::start(monitor, history.clone()));
        }
        self.options.lifecycle.ready(&self.status());
        Ok(true)
    }

    /// Runs the queues in `queues` from now on, touching only those that changed;
    /// if any changed queue cannot start, nothing changes and the findings say why.
    /// False if shutdown came first (nothing changed either).
    pub async fn reload(&mut self, queues: Vec<QueueConfig>) -> Result<bool, Findings> {
        let (unchanged, fresh): (Vec<_>, Vec<_>) = queues.into_iter().partition(|queue| {
            self.current
                .get(&queue.name)
                .is_some_and(|running| running.runtime.config.same_as(queue))
        });
        let keep: Vec<String> = unchanged
            .iter()
            .chain(&fresh)
            .map(|q| q.name.clone())
            .collect();
        let url = self.options.database_url.clone();
        let budget = self.options.budget.clone();
        let allow = self.options.allow_multi_primary;
        let look = self.options.first_look.as_ref();
        let added: Vec<String> = fresh
            .iter()
            .map(|q| q.name.clone())
            .filter(|name| !self.current.contains_key(name))
            .collect();
        for queue in fresh.iter().filter(|q| added.contains(&q.name)) {
            self.options.monitor.starting(&queue.name, queue.workers);
        }
        let prepared = prepare(fresh, url.as_deref(), budget, allow, look, &self.shutdown).await;
        let Ok(Some(prepared)) = prepared else {
            for name in &added {
                self.options.monitor.not_starting(name);
            }
            return prepared.map(|_| false);
        };
        for queue in &unchanged {
            info!(queue = %queue.name, "reload: queue unchanged; it keeps running");
        }
        for queue in prepared {
            let name = queue.config.name.clone();
            match self.launch(queue) {
                Some(old) => {
                    info!(queue = %name, "reload: queue changed; its new version starts, the old one finishes its items in flight");
                    self.retire(old, false);
                }
                None => info!(queue = %name, "reload: queue added"),
            }
        }
        let removed: Vec<String> = self
            .current
            .keys()
            .filter(|name| !keep.contains(name))
            .cloned()
            .collect();
        for name in removed {
            info!(queue = %name, "reload: queue removed; it finishes its items in flight and stops");
            self.drain.unregister(&name);
            if let Some(old) = self.current.remove(&name) {
                self.retire(old, true);
            }
        }
        Ok(true)
    }

    /// Waits for the next thing the caller must act on: shutdown, every queue
    /// finished, or `reload` resolving. Meanwhile it sees old versions out and feeds
    /// the watchdog.
    pub async fn next_event(&mut self, reload: impl Future<Output = ()>) -> Event {
        tokio::pin!(reload);
        let shutdown = self.shutdown.clone();
        let mut watchdog = self.options.lifecycle.watchdog_every().map(|every| {
            let every = (every / 2).max(Duration::from_millis(10));
            tokio::time::interval_at(Instant::now() + every, every)
        });
        // Only `--stop-when-empty` ends the run by itself: a queue that stops claiming
        // (a loop) keeps the process up, saying why, until a reload or a signal.
        let finished: BoxFuture<'static, ()> = match self.options.stop_when_empty {
            true => Box::pin(self.drained()),
            false => Box::pin(std::future::pending()),
        };
        tokio::pin!(finished);
        loop {
            let tick = async {
                match watchdog.as_mut() {
                    Some(ticks) => ticks.tick().await,
                    None => std::future::pending().await,
                }
            };
            let retired = tokio::select! {
                _ = shutdown.cancelled() => return Event::Shutdown,
                _ = &mut finished => return Event::Finished,
                _ = &mut reload => return Event::Reload,
                Some(retired) = self.retiring.next() => Some(retired),
                _ = tick => None,
            };
            match retired {
                Some(retired) => self.retired(retired),
                None => self.feed_watchdog(),
            }
        }
    }

    /// Stops every queue: no new claims; the items in flight get the shutdown
    /// timeout to finish, then are rolled back. Returns what each queue committed.
    pub async fn stop(mut self) -> RunSummary {
        self.options.lifecycle.stopping();
        for version in self.current.values() {
            version.runtime.stop.cancel();
        }
        let timeout = self.options.shutdown_timeout;
        if self.shutdown.is_cancelled() {
            info!(timeout = %humantime::format_duration(timeout),
                "stopping: no new claims; finishing the items in flight");
        }
        if tokio::time::timeout(timeout, self.wait_all())
            .await
            .is_err()
        {
            self.abort.cancel();
            if tokio::time::timeout(ABORT_GRACE, self.wait_all())
                .await
                .is_err()
            {
                error!("workers did not stop after the shutdown timeout; exiting anyway (the server rolls their transactions back)");
            }
        }
        self.followers_stop.cancel();
        self.followers.stopped().await;
        if let Some(recorder) = self.recorder.take() {
            recorder.finish().await;
        }
        let mut summary = RunSummary::default();
        for (name, version) in &self.current {
            self.options.monitor.stop_queue(name);
            let counts = said_stopped(&version.runtime);
            summary.queues.push((name.clone(), counts));
        }
        summary
    }

    /// One line for the service manager: what runs, and what is waiting.
    pub fn status(&self) -> String {
        let names: Vec<String> = self
            .current
            .values()
            .map(|v| {
                let queue = &v.runtime;
                let connected = queue.stats.connected();
                format!(
                    "{} ({connected}/{} connected)",
                    queue.config.name, queue.config.workers
                )
            })
            .collect();
        let finishing = match self.retiring.len() {
            0 => String::new(),
            n => format!("; {n} old version(s) finishing their items"),
        };
        format!("{} queue(s): {}{finishing}", names.len(), names.join(", "))
    }

    /// Starts `queue`; returns the version it replaces, if any.
    fn launch(&mut self, queue: Prepared) -> Option<Version> {
        let Prepared {
            config,
            database,
            action,
            session,
        } = queue;
        let stop = self.shutdown.child_token();
        let stats =
            self.options
                .monitor
                .start_queue(&config.name, config.workers, config.database_timeout);
        stats.expect_turns_within(2 * config.longest_poll() + config.database_timeout);
        stats.set_database(database.clone());
        let progress = Progress::new(&config, &stats);
        let gate = self.gates.entry(database.to_string()).or_default().clone();
        let runtime = Arc::new(QueueRuntime {
            stop_when_empty: StopWhenEmpty::new(
                self.options.stop_when_empty,
                self.drain.clone(),
                &config.name,
            ),
            gate,
            stop,
            abort: self.abort.clone(),
            ..QueueRuntime::new(config, action, database, stats)
        });
        let setup = Setup {
            config: runtime.config.clone(),
            database: runtime.database.clone(),
            here: Arc::new(Here(Arc::downgrade(&runtime))),
        };
        self.options.monitor.set_setup(&runtime.config.name, setup);
        let tracker = TaskTracker::new();
        tracker.spawn(start_queue(
            runtime.clone(),
            tracker.clone(),
            session,
            self.options.progress_every,
        ));
        tracker.close();
        self.followers.subscribe(&runtime, &self.followers_stop);
        let name = runtime.config.name.clone();
        self.drain.register(&name);
        let version = Version {
            runtime,
            tracker,
            progress,
        };
        self.current.insert(name, version)
    }

    /// Tells an old version to stop claiming; it finishes its items in flight.
    fn retire(&mut self, version: Version, removed: bool) {
        version.runtime.stop.cancel();
        let Version {
            runtime, tracker, ..
        } = version;
        self.retiring.push(Box::pin(async move {
            tracker.wait().await;
            Retired { runtime, removed }
        }));
    }

    fn retired(&mut self, retired: Retired) {
        let name = &retired.runtime.config.name;
        if retired.removed && !self.current.contains_key(name) {
            self.options.monitor.stop_queue(name);
            said_stopped(&retired.runtime);
        } else {
            info!(queue = %name, "the queue's old version finished its items in flight");
        }
        // The old version gone, its database's binary log may be wanted by no queue.
        drop(retired);
        self.followers.prune();
    }

    /// Resolves once the process is drained: every queue found itself empty after the
    /// last commit of any (see [`Drain`]), and a count that locks nothing finds no row
    /// waiting in any — an empty claim may only mean a sibling had the rows locked.
    /// A queue that stopped claiming (a loop) has left the drain and is not counted.
    fn drained(&self) -> impl Future<Output = ()> + 'static {
        let drain = self.drain.clone();
        let queues: BTreeMap<String, (QueueConfig, Database)> = self
            .current
            .iter()
            .map(|(name, v)| {
                let runtime = &v.runtime;
                (
                    name.clone(),
                    (runtime.config.clone(), runtime.database.clone()),
                )
            })
            .collect();
        async move {
            loop {
                let quiet = drain.all_empty().await;
                let mut waiting = Vec::new();
                for name in &quiet.queues {
                    let Some((config, database)) = queues.get(name) else {
                        continue;
                    };
                    let read = read_backlog(database, config).await;
                    if !matches!(read, Ok(backlog) if backlog.waiting == 0) {
                        waiting.push(name);
                    }
                }
                if waiting.is_empty() && drain.settled(quiet.at).await {
                    for name in &quiet.queues {
                        info!(queue = %name, "the queue is drained");
                    }
                    return;
                }
                for name in waiting {
                    // Rows wait that the claim did not see: it must look again.
                    drain.reopen(name);
                }
            }
        }
    }

    /// Resolves once every current queue has stopped by itself.
    fn all_finished(&self) -> impl Future<Output = ()> {
        let trackers: Vec<TaskTracker> = self.current.values().map(|v| v.tracker.clone()).collect();
        async move {
            futures::future::join_all(trackers.iter().map(TaskTracker::wait)).await;
        }
    }

    /// Waits until every version, current or old, has stopped.
    async fn wait_all(&mut self) {
        self.all_finished().await;
        while let Some(retired) = self.retiring.next().await {
            self.retired(retired);
        }
    }

    /// Tells the watchdog all is well, unless some queue has stopped making progress
    /// (or no watchdog was asked for).
    pub fn feed_watchdog(&mut self) {
        if self.options.lifecycle.watchdog_every().is_none() {
            return;
        }
        let now = Instant::now();
        let mut stalled = Vec::new();
        let mut changed = false;
        for (name, version) in self.current.iter_mut() {
            let progress = &mut version.progress;
            match progress.stalled_for(&version.runtime.stats, now) {
                Some(quiet) => {
                    let quiet = rounded(quiet);
                    if !progress.reported {
                        changed = true;
                        warn!(queue = %name, %quiet, "the queue holds a database connection but has claimed and finished nothing for longer than its slowest turn; the watchdog is no longer fed");
                        progress.reported = true;
                    }
                    stalled.push(format!("{name} (nothing claimed or finished for {quiet})"));
                }
                None => {
                    changed |= progress.reported;
                    progress.reported = false;
                }
            }
        }
        let lifecycle = &self.options.lifecycle;
        if stalled.is_empty() {
            lifecycle.alive();
            if changed {
                lifecycle.status(&self.status());
            }
        } else if changed {
            lifecycle.status(&format!("stalled: {}", stalled.join(", ")));
        }
    }
}

/// `queue stopped`, with what the queue did: its counts, returned.
fn said_stopped(runtime: &QueueRuntime) -> Counts {
    let counts = runtime.stats.counts();
    let rolled_back = runtime.stats.observed.rolled_back();
    info!(queue = %runtime.config.name, done = counts.done, failed = counts.failed,
        returned = counts.returned, rolled_back, leases_lost = counts.leases_lost,
        "queue stopped");
    counts
}
