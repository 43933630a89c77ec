//! tableq turns any MySQL 8 or MariaDB ≥ 10.6 table into a work queue. A queue is a
//! SELECT: the rows it returns are waiting. A worker claims some with
//! `FOR UPDATE SKIP LOCKED` inside a transaction, runs an action on each, applies the
//! outcome SQL that takes the row out of the query, and commits. If the worker dies,
//! the server rolls the transaction back and the rows are simply waiting again.
//!
//! # Layout
//!
//! - [`cli`]: the command line (clap derive types).
//! - [`commands`]: what each subcommand does, and its exit status.
//! - [`config`]: queue files — loading, `${ENV}` interpolation, validation.
//! - [`diagnostic`]: findings, `FILE:LINE: queue NAME: error: message`.
//! - [`sql_text`]: just enough SQL lexing to find `:params` and clauses safely.
//! - [`sql_shape`]: what a statement's text alone tells: literal columns, tables,
//!   the index a claim wants, whether outcome SQL touches the row by its key.
//! - [`names`]: how statements name the select's columns, and the words when not.
//! - [`database`]: connection options, the worker session, error kinds, KILL.
//! - [`queue_sql`]: a queue's claim and statements, prepared and validated.
//! - [`session`]: one worker connection with its queue's SQL prepared.
//! - [`item`]: a claimed row, and the parameters bound from it.
//! - [`row_json`]: a row as JSON (bodies, stdin) and as placeholder text.
//! - [`template`]: `{column}` placeholders and `${ENV}` in URLs, headers, argv.
//! - [`action`]: what to do with one item: `sql`, `http`, `command`.
//! - [`batch`]: one transaction — claim, process the items (optimistically, or each
//!   in a savepoint after a failure), commit.
//! - [`worker`]: one worker loop, with reconnect and backoff.
//! - [`runner`]: N workers per queue, start-up validation, graceful shutdown.
//! - [`daemon`]: `run` under signals, with SIGHUP reloading the queue files.
//! - [`drain`]: knowing when a queue is empty, for `--stop-when-empty`.
//! - [`idle`]: one worker polls an empty queue; the others sleep until woken.
//! - [`stats`]: per-queue counters and the progress line.
//! - [`backoff`]: waits between retries.
//! - [`monitor`], [`metrics`]: what the process knows, served on `--metrics-addr`.
//! - [`count`]: `tableq count`.
//! - [`check`]: `tableq check` — the files, the server, the two-session SKIP LOCKED
//!   self-test, the claim's index and the leave-the-query proof, all rolled back.
//! - [`signals`], [`logging`]: the process around the daemon.

pub mod action;
pub mod check;
pub mod commands;
pub mod config;
pub mod count;
pub mod db;
pub mod diagnostic;
pub mod engine;
pub mod sql;
pub mod telemetry;

pub use config::{load_paths, QueueConfig};
pub use engine::supervisor::{run, RunOptions, RunSummary};
