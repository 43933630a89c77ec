//! What a queue's workers share while it runs.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::circuit::Circuit;
use super::gate::WriteGate;
use super::idle::Idle;
use super::limits::Limits;
use super::loops::Loops;
use super::pausing::Pausing;
use super::stop_when_empty::StopWhenEmpty;
use super::wake::QueueWake;
use crate::action::Action;
use crate::config::{QueueConfig, Scope};
use crate::db::{Database, DbError};
use crate::telemetry::events::{DatabaseFull, Event};
use crate::telemetry::log::once::OncePerKey;
use crate::telemetry::log::throttle::Throttle;
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
    /// Whether the binary log wakes the queue now, and how often it polls.
    pub wake: QueueWake,
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
    /// Connections that could not be made, said once a minute.
    pub unreachable: Throttle,
    /// Transactions lost, said once a minute.
    pub lost: Throttle,
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
    /// When `error` is the server refusing a connection for being full, says so
    /// with the advice (once a minute per queue) and counts it; true if it was.
    /// Wherever a connection opens — a worker's session, a lease pool's — the same
    /// words.
    pub fn said_if_full(&self, error: &DbError) -> bool {
        if !error.is_server_full() {
            return false;
        }
        let full = DatabaseFull {
            error,
            database: &self.database,
            refused: self.full_server.record(),
        };
        full.emit(&self.stats);
        true
    }

    /// Whether the queue's statements and actions run once per batch.
    pub fn batch_scope(&self) -> bool {
        self.config.scope() == Scope::Batch
    }
}
