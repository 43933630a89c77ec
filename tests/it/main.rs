//! The integration tests, as one crate (`cargo test` builds `tests/it/` as one test
//! binary). Each file of `tests/` used to be a crate of its own, and each crate is a
//! test binary linked on its own against tableq and every dev-dependency: one link
//! per file. One crate links once.
//!
//! One module per subject, in a folder per area (each folder's `mod.rs` says what it
//! holds): `kinds` (each action kind), `engine` (claiming, running and settling rows),
//! `outages` (the database or the downstream failing), `frameworks` (Laravel's and
//! Symfony's queue tables with their bridges), `check`, `config` (queue files
//! as the user writes them), `ops` (operating a running tableq), `telemetry` (logs,
//! metrics, the status page, traces) and `meta` (the repository agrees with the code).
//! A new test file is a module of its folder's `mod.rs`. The harness is the module
//! `support`.
//!
//! One process runs every module's tests, so what is process-wide is shared by all
//! of them: the private MariaDB of `support` (one per process), the captured log
//! (`support::logs`: a test reads only its own queue's lines, and gives its queue a
//! name no other test uses), the environment and the working directory. A test
//! that needs the server to itself (it stops it, or reads its global counters)
//! starts a private one of its own; no test changes the process's environment.

mod support;

mod check;
mod clusters;
mod config;
mod engine;
mod frameworks;
mod kinds;
mod meta;
mod ops;
mod outages;
mod telemetry;
