//! What a queue's workers share while it runs.

pub mod drain;
pub mod launch;
pub mod lifecycle;
pub mod liveness;
pub mod reload;
pub mod restart;
pub mod stats_refresher;
pub mod stop_when_empty;
pub mod supervisor;

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::action::Action;
use crate::config::{QueueConfig, Scope};
use crate::db::pause::Paused;
use crate::db::{Database, DbError, OpenError, Refusal};
use crate::engine::policy::circuit::Circuit;
use crate::engine::policy::gate::WriteGate;
use crate::engine::policy::limits::Limits;
use crate::engine::policy::loops::Loops;
use crate::engine::policy::pausing::Pausing;
use crate::engine::queue::drain::Drain;
use crate::engine::queue::stop_when_empty::StopWhenEmpty;
use crate::engine::wake::idle::Idle;
use crate::engine::wake::Wake;
use crate::telemetry::events::{DatabaseFull, Event, LoginRefused, NotConnected};
use crate::telemetry::log::once::OncePerKey;
use crate::telemetry::log::throttle::Throttle;
use crate::telemetry::stats::monitor::PauseHere;
use crate::telemetry::stats::QueueStats;

/// A running queue: its configuration, its action ready to run, its database, and
/// the state its workers coordinate through.
pub struct QueueRuntime {
    pub config: QueueConfig,
    /// The action, ready to run (for HTTP: with its client).
    pub action: Action,
    pub database: Database,
    pub stats: Arc<QueueStats>,
    pub stop_when_empty: StopWhenEmpty,
    /// Who polls while the queue is empty.
    pub idle: Idle,
    /// What wakes the idle queue: the poll, the binary log, rows due by time.
    pub wake: Wake,
    /// Stop claiming: the daemon is shutting down, or the queue is drained.
    pub stop: CancellationToken,
    /// Roll back whatever is in flight, now: the shutdown timeout has passed.
    pub abort: CancellationToken,
    /// The keys whose outcome SQL failed, so each is logged in full once.
    pub outcome_sql_failed: OncePerKey,
    /// The queue's own faults (errors no row causes), so each is logged in full once.
    pub queue_faults: OncePerKey,
    /// Connections the server refused for being full, said once a minute.
    pub full_server: Throttle,
    /// Logins the server refused, said once a minute.
    pub refused_login: Throttle,
    /// Connections that could not be made, said once a minute.
    pub unreachable: Throttle,
    /// Transactions lost, said once a minute.
    pub lost: Throttle,
    /// Certification conflicts (a multi-primary cluster), said once a minute.
    pub certification: Throttle,
    /// The keys completed lately, to notice rows that come straight back.
    pub loops: Loops,
    /// `rate_limit` and `max_in_flight`.
    pub limits: Limits,
    /// Stops claiming while the action fails downstream.
    pub circuit: Circuit,
    /// Stops claiming while the database refuses writes (shared by the queues on it).
    pub gate: Arc<WriteGate>,
    /// Stops claiming while the queue is paused (`tableq pause`).
    pub pausing: Pausing,
}

impl QueueRuntime {
    /// `config`'s queue, its `action` ready, on `database`, counted in `stats` — with
    /// a gate of its own, no part in `--stop-when-empty`, and stop and abort tokens
    /// of its own, for the supervisor to replace with the run's.
    pub fn new(
        config: QueueConfig,
        action: Action,
        database: Database,
        stats: Arc<QueueStats>,
    ) -> QueueRuntime {
        QueueRuntime {
            action,
            stop_when_empty: StopWhenEmpty::new(false, Arc::new(Drain::default()), &config.name),
            idle: Idle::default(),
            wake: Wake::of(&config, &stats),
            loops: Loops::new(config.loop_window),
            limits: Limits::new(&config, &database),
            circuit: Circuit::new(&config, stats.clone()),
            gate: Arc::default(),
            pausing: Pausing::new(config.poll_interval),
            stats,
            config,
            database,
            stop: CancellationToken::new(),
            abort: CancellationToken::new(),
            outcome_sql_failed: OncePerKey::default(),
            queue_faults: OncePerKey::default(),
            full_server: Throttle::default(),
            refused_login: Throttle::default(),
            unreachable: Throttle::default(),
            lost: Throttle::default(),
            certification: Throttle::default(),
        }
    }

    /// Says why a connection could not be opened — the one way, wherever one opens
    /// (a worker's session, a lease pool's, a queue's first): with its advice when
    /// the server is full or refuses the login, else that the database cannot be
    /// reached (or the queue's SQL does not work on it), retrying after `retry_in`.
    /// Counted every time; said once a minute per queue, as every worker and every
    /// attempt would say the same.
    pub fn cannot_connect(&self, error: &OpenError, retry_in: Duration) {
        if error
            .unreachable()
            .is_some_and(|e| self.said_with_advice(e, retry_in))
        {
            return;
        }
        let not_connected = NotConnected {
            error,
            database: &self.database,
            retry_in,
            times: self.unreachable.record(),
        };
        not_connected.emit(&self.stats);
    }

    /// When `error` is the server refusing a connection for being full, or refusing
    /// the login, says so with what to do about it (once a minute per queue) and
    /// counts it; true if it was. The same words wherever a connection opens.
    pub fn said_with_advice(&self, error: &DbError, retry_in: Duration) -> bool {
        if error.is_server_full() {
            let full = DatabaseFull {
                error,
                database: &self.database,
                refused: self.full_server.record(),
            };
            full.emit(&self.stats);
            return true;
        }
        if error.is_access_denied() {
            let refused = LoginRefused {
                error,
                database: &self.database,
                retry_in,
                times: self.refused_login.record(),
            };
            refused.emit(&self.stats);
            return true;
        }
        false
    }

    /// The database refuses writes (`why`): the gate of the database closes — no
    /// queue on it claims for `retry_in`, or until writes work again — and this
    /// queue says so at once (its workers wait at the gate with no connection).
    pub fn writes_refused(&self, why: Refusal, retry_in: Duration) {
        self.gate.refused(why.as_str(), retry_in);
        self.stats.set_refusing(Some(why.as_str()));
    }

    /// Another node of a multi-primary cluster committed a change to the row `key`
    /// (one of `items` rolled back) first: said once a minute per queue, with how
    /// many since — it happens when copies work the queue on several nodes.
    pub fn certification_conflict(&self, key: &str, items: usize) {
        if let Some(times) = self.certification.record() {
            warn!(
                key,
                items,
                times,
                "another node of the cluster committed a change to row {key} first (a \
                 certification conflict): the transaction is rolled back and its items are \
                 waiting again; {times} such conflicts since this was last said. Copies of \
                 tableq on several nodes claim the same rows: point them all at one node"
            );
        }
    }

    /// Whether the queue's statements and actions run once per batch.
    pub fn batch_scope(&self) -> bool {
        self.config.scope() == Scope::Batch
    }
}

/// The console's way to its own copy's queue (see [`PauseHere`]): the pause set in
/// its [`Pausing`] at once, and on a resume the watcher woken to claim.
#[derive(Debug)]
pub struct Here(pub Weak<QueueRuntime>);

impl PauseHere for Here {
    fn set(&self, paused: Option<Paused>) {
        let Some(queue) = self.0.upgrade() else {
            return;
        };
        let resumed = paused.is_none();
        queue.pausing.set_here(paused, &queue.stats);
        if resumed {
            queue.idle.nudge();
        }
    }
}

#[cfg(test)]
impl QueueRuntime {
    /// A queue for unit tests, as the queue file `file` describes it, on a database
    /// nobody connects to: what its workers decide can be tested without one.
    pub fn for_tests(file: &str) -> QueueRuntime {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("test.toml");
        std::fs::write(&path, file).expect("the queue file written");
        let config = crate::config::load_file::<crate::action::RawAction>(&path, &|_| None)
            .expect("a valid queue file");
        let action = Action::new(&config.action).expect("its action");
        let database = Database::from_url("mysql://tableq@127.0.0.1:1/tests").expect("a URL");
        QueueRuntime::new(config, action, database, Arc::default())
    }
}
