//! The supervisor: validates every queue against its database, then runs `workers`
//! worker loops per queue until shutdown (or, with `stop_when_empty`, until every
//! queue is drained), and bounds how long the items in flight may take to finish by
//! the shutdown timeout.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{error, info, warn};

use super::backoff::{pause, Backoff};
use super::idle::Idle;
use super::limits::Limits;
use super::loops::Loops;
use super::queue::QueueRuntime;
use super::stop_when_empty::StopWhenEmpty;
use super::worker::run_worker;
use crate::action::Action;
use crate::config::QueueConfig;
use crate::db::{Database, OpenError, Session};
use crate::diagnostic::{Findings, Severity};
use crate::telemetry::monitor::Monitor;
use crate::telemetry::stats::{report_progress, Counts};

/// How `run` behaves, beyond the queue files.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// For queues without their own `database_url`.
    pub database_url: Option<String>,
    /// Return once every queue is drained, instead of waiting for shutdown.
    pub stop_when_empty: bool,
    /// How long items in flight may take to finish after shutdown begins.
    pub shutdown_timeout: Duration,
    /// How often each queue logs its progress.
    pub progress_every: Duration,
    /// Where the queues' counters and connections are kept, for the metrics
    /// endpoint; shared across reloads so counters only grow.
    pub monitor: Arc<Monitor>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            database_url: None,
            stop_when_empty: false,
            shutdown_timeout: Duration::from_secs(30),
            progress_every: Duration::from_secs(60),
            monitor: Arc::new(Monitor::default()),
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
/// database; a database that cannot be reached is waited for, never a failure.
pub async fn run(
    queues: Vec<QueueConfig>,
    options: RunOptions,
    shutdown: CancellationToken,
) -> Result<RunSummary, Findings> {
    let resolved = resolve_databases(queues, options.database_url.as_deref())?;
    let Some(opened) = open_first_sessions(&resolved, &shutdown).await? else {
        return Ok(RunSummary::default());
    };

    // Every action is built before any worker starts: a failure stops them all.
    let actions = build_actions(&resolved)?;
    let abort = CancellationToken::new();
    let tracker = TaskTracker::new();
    let mut runtimes = Vec::new();
    for (((config, database), session), action) in resolved.into_iter().zip(opened).zip(actions) {
        let stop = shutdown.child_token();
        let runtime = Arc::new(QueueRuntime {
            action,
            stop_when_empty: StopWhenEmpty::new(options.stop_when_empty, stop.clone()),
            idle: Idle::default(),
            loops: Loops::new(config.loop_window),
            limits: Limits::new(&config),
            stats: options.monitor.start_queue(
                &config.name,
                config.workers,
                config.database_timeout,
            ),
            config,
            database,
            stop,
            abort: abort.clone(),
            outcome_sql_failed: Default::default(),
            refusals: Default::default(),
        });
        info!(queue = %runtime.config.name, workers = runtime.config.workers, batch = runtime.config.batch,
            database = %runtime.database, "queue started");
        let mut first = session;
        for index in 0..runtime.config.workers {
            tracker.spawn(supervise_worker(runtime.clone(), index, first.take()));
        }
        tracker.spawn(report_progress(
            runtime.config.name.clone(),
            runtime.stats.clone(),
            options.progress_every,
            runtime.stop.clone(),
        ));
        runtimes.push(runtime);
    }
    tracker.close();

    tokio::select! {
        _ = tracker.wait() => {}
        _ = shutdown.cancelled() => {
            info!(timeout = %humantime::format_duration(options.shutdown_timeout),
                "stopping: no new claims; finishing the items in flight");
            if tokio::time::timeout(options.shutdown_timeout, tracker.wait()).await.is_err() {
                abort.cancel();
                if tokio::time::timeout(ABORT_GRACE, tracker.wait()).await.is_err() {
                    error!("workers did not stop after the shutdown timeout; exiting anyway (the server rolls their transactions back)");
                }
            }
        }
    }

    let mut summary = RunSummary::default();
    for runtime in runtimes {
        options.monitor.stop_queue(&runtime.config.name);
        let counts = runtime.stats.counts();
        info!(queue = %runtime.config.name, done = counts.done, failed = counts.failed,
            returned = counts.returned, "queue stopped");
        summary.queues.push((runtime.config.name.clone(), counts));
    }
    Ok(summary)
}

/// Builds each queue's action (for HTTP: its client), or says which cannot be.
pub fn build_actions(queues: &[(QueueConfig, Database)]) -> Result<Vec<Action>, Findings> {
    let mut findings = Vec::new();
    let mut actions = Vec::new();
    for (config, _) in queues {
        match Action::new(&config.action) {
            Ok(action) => actions.push(action),
            Err(e) => findings.push(config.finding(Severity::Error, &["action"], e.to_string())),
        }
    }
    if findings.is_empty() {
        Ok(actions)
    } else {
        Err(Findings(findings))
    }
}

/// Pairs each queue with its database (see [`Database::for_queue`]).
pub fn resolve_databases(
    queues: Vec<QueueConfig>,
    default_url: Option<&str>,
) -> Result<Vec<(QueueConfig, Database)>, Findings> {
    let mut findings = Vec::new();
    let mut resolved = Vec::new();
    for queue in queues {
        match Database::for_queue(&queue, default_url) {
            Ok(database) => resolved.push((queue, database)),
            Err(finding) => findings.push(finding),
        }
    }
    if findings.is_empty() {
        Ok(resolved)
    } else {
        Err(Findings(findings))
    }
}

/// Tries once to open a session per queue — which prepares, and so validates, all
/// its SQL — so that a queue that is wrong for its database stops `run` before any
/// row is touched. A queue whose database cannot be reached gets `None`: its workers
/// keep trying, and the other queues start meanwhile. `Ok(None)` if shutdown came
/// first.
async fn open_first_sessions(
    queues: &[(QueueConfig, Database)],
    shutdown: &CancellationToken,
) -> Result<Option<Vec<Option<Session>>>, Findings> {
    let attempts = futures::future::join_all(queues.iter().map(|(config, database)| async move {
        let opened = Session::open(config, database).await;
        if let Err(OpenError::Unreachable(error)) = &opened {
            warn!(queue = %config.name, %error, database = %database,
                "cannot connect to the database; the queue starts once it can");
        }
        opened
    }));
    let attempts = tokio::select! {
        _ = shutdown.cancelled() => return Ok(None),
        attempts = attempts => attempts,
    };
    let mut sessions = Vec::with_capacity(queues.len());
    let mut findings = Vec::new();
    for attempt in attempts {
        match attempt {
            Ok(session) => sessions.push(Some(session)),
            Err(OpenError::Unreachable(_)) => sessions.push(None),
            Err(OpenError::Invalid(mut invalid)) => findings.append(&mut invalid),
        }
    }
    if !findings.is_empty() {
        return Err(Findings(findings));
    }
    Ok(Some(sessions))
}

/// Runs a worker, and runs it again if it panics: its connection is dropped with the
/// panic, so its transaction rolls back and nothing is lost.
async fn supervise_worker(queue: Arc<QueueRuntime>, index: usize, session: Option<Session>) {
    let mut session = session;
    let mut backoff = Backoff::new(queue.config.error_backoff);
    loop {
        let handle = tokio::spawn(run_worker(queue.clone(), index, session.take()));
        match handle.await {
            Err(e) if e.is_panic() => {
                let wait = backoff.next_wait();
                error!(queue = %queue.config.name, worker = index, retry_in = %humantime::format_duration(wait),
                    "worker crashed (a bug in tableq; please report it); its transaction is rolled back; restarting it");
                if !pause(&queue.stop, wait).await {
                    return;
                }
            }
            _ => return,
        }
    }
}
