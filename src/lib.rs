//! tableq turns any MySQL 8 or MariaDB ≥ 10.6 table into a work queue. A queue is a
//! SELECT: the rows it returns are waiting. A worker claims some with
//! `FOR UPDATE SKIP LOCKED` inside a transaction, runs an action on each, applies the
//! outcome SQL that takes the row out of the query, and commits. If the worker dies,
//! the server rolls the transaction back and the rows are simply waiting again.
//!
//! # Layout
//!
//! Layers, whose imports point one way (`tests/layers.rs` checks it):
//!
//! ```text
//! commands → engine | check | count → telemetry → action → db → config → sql → diagnostic
//! ```
//!
//! - [`commands`]: the command line ([`commands::cli`]), signals, systemd's notify
//!   socket, reaping orphaned processes, the man pages, where the database URL comes
//!   from (a flag, a file, a systemd credential), and what each subcommand does,
//!   with its exit status.
//! - `engine`: running queues — `supervisor` (one version per queue: start, reload
//!   without harm, the watchdog, graceful shutdown), `launch` (prepare, then start
//!   a queue's workers), `reload` (SIGHUP), `lifecycle` and `liveness` (what the
//!   service manager hears, and whether queues progress), `queue` (what a queue's
//!   workers share), `worker` (one loop: claim once, decide the next step), `batch`
//!   (one transaction: SQL actions in it, HTTP/command actions outside it, the outcome
//!   SQL; in batch scope each statement once per batch), `lease` (`mode = "lease"`: a
//!   short claim that leases rows, the action with no connection held, renewals,
//!   outcome SQL guarded by the lease), `observe` (one batch's timings and
//!   rollbacks), `stats_refresher` (the background count of waiting rows), `report`,
//!   `idle` (one worker polls an empty queue), `stop_when_empty`, `backoff`.
//! - `check`: `tableq check` — the files, the server, the two-session SKIP LOCKED
//!   self-test, the claim's index and the leave-the-query proof (and lease mode's),
//!   all rolled back; the report as text, JSON or GitHub annotations.
//! - `count`: `tableq count`, and the background count's statement for an
//!   autoscaler (`--print-sql`).
//! - [`telemetry`]: per-queue counters, timings and recent failures, the progress
//!   line, the metrics and health endpoint, the status page, logging.
//! - `action`: what to do with one item, one folder per kind (`sql`, `http`,
//!   `command`), each reporting an `Outcome`.
//! - `db`: the only place outside `check` that talks to the driver — connecting and
//!   KILL, error classes and kinds, the worker `Session` (claim, statements,
//!   savepoints, commit), a lease-mode queue's small `SessionPool`, the backlog and
//!   the database's clock, a queue's SQL prepared, the claimed row as parameters and
//!   as JSON.
//! - [`config`]: queue files — locating lines, `${ENV}` and `${file:…}` secrets,
//!   `{column}` templates, the queue-level keys and each action kind's table, `mode`
//!   and `[lease]`, `scope`, validation, names.
//! - `sql`: the user's SQL as text — one lexer, statements and their `:params`, what
//!   a statement's shape tells (literal columns, tables, the index a claim wants).
//! - [`diagnostic`]: findings, `FILE:LINE: queue NAME: error: message`.

mod action;
mod check;
pub mod commands;
pub mod config;
mod count;
mod db;
pub mod diagnostic;
mod engine;
mod sql;
pub mod telemetry;

pub use check::{check, CheckOptions, CheckReport};
pub use config::{load_paths, ActionConfig, QueueConfig};
pub use db::prepared::claim_sql;
pub use engine::supervisor::{run, RunOptions, RunSummary};
pub use telemetry::stats::Counts;
