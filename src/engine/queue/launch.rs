//! Getting queues ready and started: each paired with its database and its action
//! built, one session opened per queue before any starts (which prepares, and so
//! validates, all its SQL), then — once a queue has a session — its workers.

use std::sync::Arc;
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, error, info, warn};

use crate::action::Action;
use crate::config::QueueConfig;
use crate::db::cluster::{self, MultiPrimary};
use crate::db::{Budget, Database, DbClock, OpenError, Session};
use crate::diagnostic::{Finding, Findings, Severity};
use crate::engine::modes::transaction::TransactionMode;
use crate::engine::policy::retry::{Next, Retry};
use crate::engine::queue::stats_refresher::{refresh_stats, CountOn};
use crate::engine::queue::QueueRuntime;
use crate::engine::worker::run_worker;
use crate::telemetry::stats::report_progress;

/// How many queues open their first session at once.
const OPENING_AT_ONCE: usize = 16;

/// A look at a queue's first session before a worker takes it (`run`'s look at
/// whether an index drives the claim): it may run statements, and leaves no
/// transaction open. One slower than the queue's `database_timeout` is stopped.
#[derive(Clone)]
pub struct FirstLook(Arc<LookFn>);

type LookFn = dyn for<'a> Fn(&'a mut Session, &'a QueueConfig) -> BoxFuture<'a, ()> + Send + Sync;

impl FirstLook {
    pub fn new(
        look: impl for<'a> Fn(&'a mut Session, &'a QueueConfig) -> BoxFuture<'a, ()>
            + Send
            + Sync
            + 'static,
    ) -> FirstLook {
        FirstLook(Arc::new(look))
    }
}

impl std::fmt::Debug for FirstLook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FirstLook")
    }
}

/// A queue ready to start: its database, its action, and a session if one opened.
pub struct Prepared {
    pub config: QueueConfig,
    pub database: Database,
    pub action: Action,
    pub session: Option<Session>,
}

/// Pairs each queue with its database and builds its action, then opens a session
/// per queue. Fails, before any row is touched, if a queue's SQL is wrong for its
/// database, the server refuses its login, or it would deliver rows twice on a
/// multi-primary cluster (unless `allow_multi_primary`); a database that cannot be
/// reached is not a failure (the queue starts once it can). `Ok(None)` if
/// `shutdown` came first.
pub async fn prepare(
    queues: Vec<QueueConfig>,
    default_url: Option<&str>,
    budget: Arc<Budget>,
    allow_multi_primary: bool,
    look: Option<&FirstLook>,
    shutdown: &CancellationToken,
) -> Result<Option<Vec<Prepared>>, Findings> {
    let resolved: Vec<(QueueConfig, Database)> = resolve_databases(queues, default_url)?
        .into_iter()
        .map(|(queue, database)| (queue, database.within(budget.clone())))
        .collect();
    let actions = build_actions(&resolved)?;
    let mut refused = crate::engine::wake::refused_binlog(&resolved).await;
    refused.extend(on_multi_primary(&resolved, allow_multi_primary).await);
    if !refused.is_empty() {
        return Err(Findings(refused));
    }
    // Sessions kept for the queues' first workers hold places in the budget until the
    // queues start: keep as many as half the budget, and validate the rest alone.
    let keep = budget.size() / 2;
    let Some(sessions) = open_first_sessions(&resolved, keep, look, shutdown).await? else {
        return Ok(None);
    };
    let prepared = resolved
        .into_iter()
        .zip(actions)
        .zip(sessions)
        .map(|(((config, database), action), session)| Prepared {
            config,
            database,
            action,
            session,
        })
        .collect();
    Ok(Some(prepared))
}

/// The queues that would deliver rows twice from copies on two nodes of a
/// multi-primary cluster (see [`cluster::delivers_twice_across_nodes`]), each a
/// finding that says why and the two ways out — none when `allowed` (every copy
/// uses one node: said once per queue). A database that cannot be reached is no
/// finding, as for the binary log.
async fn on_multi_primary(queues: &[(QueueConfig, Database)], allowed: bool) -> Vec<Finding> {
    let mut known: Vec<(&Database, Option<MultiPrimary>)> = Vec::new();
    let mut findings = Vec::new();
    for (config, database) in queues {
        if !cluster::delivers_twice_across_nodes(config) {
            continue;
        }
        let found = match known.iter().find(|(known, _)| *known == database) {
            Some((_, found)) => *found,
            None => {
                let found = cluster::multi_primary_at(database).await.ok().flatten();
                known.push((database, found));
                found
            }
        };
        match found {
            None => {}
            Some(cluster) if allowed => info!(
                queue = %config.name,
                "{}; --allow-multi-primary says every copy of tableq uses this one node",
                cluster.describe()
            ),
            Some(cluster) => findings.push(config.finding(
                Severity::Error,
                &["mode"],
                cluster::refusal(config, cluster),
            )),
        }
    }
    findings
}

/// Builds each queue's action (for HTTP: its client), or says which cannot be.
pub fn build_actions(queues: &[(QueueConfig, Database)]) -> Result<Vec<Action>, Findings> {
    let mut findings = Vec::new();
    let mut actions = Vec::new();
    for (config, _) in queues {
        match Action::new(&config.action) {
            // Refused by the loader already: lease mode holds no transaction.
            Ok(Action::InTransaction(_)) if config.is_lease() => findings.push(config.finding(
                Severity::Error,
                &["mode"],
                "lease mode needs an action that reaches outside the database",
            )),
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

/// Tries once to open a session per queue, and has `look` look at it. A queue whose
/// database cannot be reached gets `None`; a login the server refuses is a finding,
/// as is SQL it rejects.
async fn open_first_sessions(
    queues: &[(QueueConfig, Database)],
    keep: usize,
    look: Option<&FirstLook>,
    shutdown: &CancellationToken,
) -> Result<Option<Vec<Option<Session>>>, Findings> {
    // A few at a time: thousands of queues do not open thousands of connections at
    // once (and each waits for its place in the connection budget).
    let attempts: Vec<BoxFuture<'_, Result<Option<Session>, OpenError>>> = queues
        .iter()
        .enumerate()
        .map(|(index, (config, database))| open_first(config, database, index < keep, look).boxed())
        .collect();
    let attempts = futures::stream::iter(attempts)
        .buffered(OPENING_AT_ONCE)
        .collect::<Vec<_>>();
    let attempts = tokio::select! {
        _ = shutdown.cancelled() => return Ok(None),
        attempts = attempts => attempts,
    };
    let mut sessions = Vec::with_capacity(queues.len());
    let mut findings = Vec::new();
    for ((config, database), attempt) in queues.iter().zip(attempts) {
        match attempt {
            Ok(session) => sessions.push(session),
            Err(OpenError::Unreachable(e)) if e.is_access_denied() => {
                let message = database.refused_login(&e);
                findings.push(config.finding(Severity::Error, &["database_url"], message));
            }
            Err(OpenError::Unreachable(_)) => sessions.push(None),
            Err(OpenError::Invalid(mut invalid)) => findings.append(&mut invalid),
        }
    }
    if !findings.is_empty() {
        return Err(Findings(findings));
    }
    Ok(Some(sessions))
}

/// Opens a queue's first session, validating its SQL, and has `look` look at it;
/// keeps it if `keep` (the queue's first worker takes it), else closes it (the
/// worker opens its own).
async fn open_first(
    config: &QueueConfig,
    database: &Database,
    keep: bool,
    look: Option<&FirstLook>,
) -> Result<Option<Session>, OpenError> {
    let opened = Session::open(config, database).await;
    if let Err(OpenError::Unreachable(error)) = &opened {
        // A refused login is a finding; a full server is said with its advice as
        // the queue tries again.
        if !error.is_access_denied() && !error.is_server_full() {
            warn!(queue = %config.name, %error, database = %database,
                "cannot connect to the database; the queue starts once it can");
        }
    }
    let session = match (opened, look) {
        (Ok(session), Some(look)) => looked_at(session, config, look).await,
        (Ok(session), None) => Some(session),
        (Err(e), _) => return Err(e),
    };
    match session {
        Some(session) if keep => Ok(Some(session)),
        // Closed, not dropped: its place in the budget is free once it is gone.
        Some(session) => {
            session.close().await;
            Ok(None)
        }
        None => Ok(None),
    }
}

/// `session` after `look` looked at it; `None` if the look took longer than the
/// queue's `database_timeout`: its statement is stopped with the session's
/// connection (killed on the server), and the worker opens a session of its own.
async fn looked_at(
    mut session: Session,
    config: &QueueConfig,
    look: &FirstLook,
) -> Option<Session> {
    let looked = tokio::time::timeout(config.database_timeout, (look.0)(&mut session, config));
    if looked.await.is_ok() {
        return Some(session);
    }
    debug!(queue = %config.name, "the look at the queue's claim took longer than database_timeout; stopped");
    let _ = session.kill_from_aside().await;
    None
}

/// Starts `queue`: with `session`, or once one opens, logs "queue started" and
/// spawns its workers (the first takes the session) and its progress line.
pub async fn start_queue(
    queue: Arc<QueueRuntime>,
    tracker: TaskTracker,
    session: Option<Session>,
    progress_every: Duration,
) {
    let mut session = match session {
        Some(session) => session,
        None => match first_session(&queue).await {
            Some(session) => session,
            None => return,
        },
    };
    let lag = queue.config.monitoring.waiting_since.is_some();
    queue.stats.observed.set_measures_lag(lag);
    read_clock(&queue, &mut session).await;
    // Before any worker claims: the binary log names a view's tables, not the view.
    let binlog = queue.wake.binlog();
    binlog.see_through_views(&queue.config, &mut session).await;
    // Before any worker claims: a paused queue starts paused.
    if let Some(ticket) = queue.pausing.due() {
        let read = session.read_pause(&queue.config.name, false).await;
        queue.pausing.found(ticket, read.into(), &queue.stats);
    }
    info!(queue = %queue.config.name, workers = queue.config.workers, batch = queue.config.batch,
        database = %queue.database, "queue started");
    // Counted among the other copies before its first action, and kept so.
    crate::engine::policy::sharing::join(&queue).await;
    tracker.spawn(crate::engine::policy::sharing::share(queue.clone()));
    tracker.spawn(crate::engine::alerts::watch(queue.clone()));
    // Taken before a worker starts, so the first progress line counts its work.
    let counted_from = queue.stats.counts();
    match (&queue.action, queue.config.is_lease()) {
        // Its workers and its backlog count share the queue's pool.
        (Action::External(action), true) => {
            crate::engine::modes::lease::start(queue.clone(), action.clone(), &tracker, session)
        }
        (Action::InTransaction(_), true) => {
            error!(queue = %queue.config.name, "lease mode needs an action that reaches outside the database")
        }
        (_, false) => start_transaction_workers(&queue, &tracker, session),
    }
    tracker.spawn(report_progress(
        queue.config.name.clone(),
        queue.stats.clone(),
        counted_from,
        progress_every,
        queue.stop.clone(),
    ));
}

/// Reads the database's clock on the queue's first session, before its workers
/// claim: the wait of the very first items is measured by it.
async fn read_clock(queue: &QueueRuntime, session: &mut Session) {
    match DbClock::read(session).await {
        Ok(clock) => queue.stats.observed.set_clock(clock),
        Err(e) => {
            debug!(queue = %queue.config.name, error = %e, "could not read the database's clock")
        }
    }
}

/// Opens the queue's first session, retrying with backoff; `None` once told to stop.
async fn first_session(queue: &QueueRuntime) -> Option<Session> {
    let stop = &queue.stop;
    let mut retry = Retry::new(queue.config.error_backoff, stop).reconnecting();
    let open = || async {
        tokio::select! {
            _ = stop.cancelled() => Err(None),
            opened = Session::open(&queue.config, &queue.database) => opened.map_err(Some),
        }
    };
    let opened = retry.run(open, |error, failure| match error {
        Some(error) => {
            let _span = tracing::info_span!("queue", queue = %queue.config.name).entered();
            queue.cannot_connect(error, failure.retry_in);
            Next::Again
        }
        None => Next::GiveUp,
    });
    opened.await.ok()
}

/// Starts a transaction-mode queue's workers (the first takes `session`) and its
/// backlog count.
fn start_transaction_workers(queue: &Arc<QueueRuntime>, tracker: &TaskTracker, session: Session) {
    let mut first = Some(session);
    for index in 0..queue.config.workers {
        let mut session = first.take();
        let for_mode = queue.clone();
        let mode = move || TransactionMode::new(for_mode.clone(), index, session.take());
        tracker.spawn(run_worker(queue.clone(), index, mode));
    }
    tracker.spawn(refresh_stats(queue.clone(), CountOn::OwnConnection));
}

/// Findings as one line each, for a status or a log line.
pub fn one_line(findings: &[Finding]) -> String {
    match findings {
        [] => String::new(),
        [one] => one.to_string(),
        [first, rest @ ..] => format!("{first} (and {} more)", rest.len()),
    }
}
