//! tableq turns any MySQL 8 or MariaDB ≥ 10.6 table into a work queue. A queue is a
//! SELECT: the rows it returns are waiting. A worker claims some with
//! `FOR UPDATE SKIP LOCKED` inside a transaction, runs an action on each, applies the
//! outcome SQL that takes the row out of the query, and commits. If the worker dies,
//! the server rolls the transaction back and the rows are simply waiting again.
//!
//! # Layout
//!
//! Layers, whose imports point one way (`tests/it/meta/layers.rs` checks it, that no
//! two files of a module import each other, and that this map names every module):
//!
//! ```text
//! commands → engine | check | count | console → telemetry → action → db → config → sql → diagnostic → lock | duration | backoff | trace_context | sketch
//! ```
//!
//! - [`commands`]: the command line and what each subcommand does, with its exit
//!   status — `commands::cli` (clap types), `commands::signals`, `commands::notify`
//!   (systemd's notify socket), `commands::reaper` (orphaned processes),
//!   `commands::health` (`tableq health`), `commands::man` (the man pages),
//!   `commands::database_url` (the URL from a flag, a file or a systemd credential),
//!   `commands::operate` (`tableq failed`, `inspect`, `retry`, `discard`),
//!   `commands::pause` (`tableq pause`, `resume`), `commands::schedules`
//!   (`tableq schedules`), `commands::failure` (why a
//!   command failed: its exit status), `commands::load` (the queues a command
//!   works on), `commands::stdout` (what a command prints: a reader gone is no
//!   failure), `commands::new` (`tableq new laravel|symfony`: `commands::new::laravel`,
//!   `commands::new::symfony`, each a template filled by `commands::new::fill`).
//! - `engine`: running queues; its folders show one turn and what surrounds it.
//!   - `engine::worker` (the one worker loop, over a `Mode`).
//!   - `engine::turn` (one turn, as the metrics and the idle queue see it):
//!     `engine::turn::admit` (claimed rows become the items a turn works: one
//!     path for both modes), `engine::turn::execute` (the one place an action
//!     runs, under the queue's policy), `engine::turn::record` (the one recorder
//!     of outcomes, with its stores `engine::turn::record::item`,
//!     `engine::turn::record::set`, `engine::turn::record::leased` and
//!     `engine::turn::record::transaction`, transaction mode's pick of the first two),
//!     `engine::turn::settle` (how an item's turn ends, in one call: counted,
//!     noted for its trace span, said), `engine::turn::report` (what a turn did).
//!   - `engine::modes`: `engine::modes::transaction` (one transaction per turn:
//!     `engine::modes::transaction::batch`, `engine::modes::transaction::sql`,
//!     `engine::modes::transaction::external`) and `engine::modes::lease` (a short
//!     claim that leases rows, the action with no connection held:
//!     `engine::modes::lease::mode`, `engine::modes::lease::claim`,
//!     `engine::modes::lease::heartbeat`, `engine::modes::lease::token` — random,
//!     or the table's own reservation time).
//!   - `engine::policy`, what a queue's workers keep together:
//!     `engine::policy::circuit` (the circuit breaker), `engine::policy::gate` (no
//!     claims while the database refuses writes), `engine::policy::limits`
//!     (`rate_limit`, `max_in_flight`), `engine::policy::concurrency`
//!     (`[concurrency]`'s key slots, held where each mode holds them),
//!     `engine::policy::copies` (the copies on the database that share them),
//!     `engine::policy::sharing` (kept shared), `engine::policy::pausing` (whether
//!     `tableq pause` holds the queue, read by one worker for all),
//!     `engine::policy::loops` (rows that come straight back),
//!     `engine::policy::recurring` (`[recurring]`: a row's cron read, `:next_run`;
//!     a schedule's `:next_run`, `:skipped`, `:retry_at`),
//!     `engine::policy::retry` (the one retry helper, over `backoff`).
//!   - `engine::history` (the copy's history in the database, kept by one task,
//!     `engine::history::recorder`: minutes, failed attempts, heartbeats, the trim;
//!     `engine::history::options`: how it is kept).
//!   - `engine::queue` (what a queue's workers share), and a queue's life:
//!     `engine::queue::supervisor` (one version per queue: start, reload without
//!     harm, the watchdog, graceful shutdown), `engine::queue::launch` (prepare,
//!     then start a queue's workers), `engine::queue::reload` (SIGHUP),
//!     `engine::queue::lifecycle` and `engine::queue::liveness` (what the service
//!     manager hears, whether queues progress), `engine::queue::restart` (a worker
//!     that panicked runs again), `engine::queue::stats_refresher` (the background
//!     count of waiting rows), `engine::queue::stop_when_empty` (one queue found
//!     itself empty), `engine::queue::drain` (every queue of the process is).
//!   - `engine::wake`, when an idle queue looks again: a queue's sources of
//!     wake-ups combined (`engine::wake::source`, what a source is), each one
//!     file: `engine::wake::poll` (the poll), `engine::wake::binlog` (the binary
//!     log, for a queue) and `engine::wake::due` (rows due by time: the watcher asks
//!     when the next one is); `engine::wake::idle` (one worker polls an empty
//!     queue); the binary log's `engine::wake::follower` (one per database),
//!     `engine::wake::tables` (which tables wake a queue) and `engine::wake::blind`
//!     (a stream that shows none of the queue's own commits).
//!   - `engine::alerts`, `[alerts]` told once per breach across every copy:
//!     `engine::alerts::decide`, `engine::alerts::message`, `engine::alerts::webhook`.
//! - `check`: `tableq check` — `check::options`, `check::offline` (the files
//!   alone), `check::online`
//!   (each queue on its database), `check::server`, `check::self_test` (two
//!   sessions, one row), `check::index` and `check::explain` (the claim's index),
//!   `check::tables`, `check::reads` (every table a select reads, explained),
//!   `check::limits` (the limits explained; refused on Galera),
//!   `check::wake` (where each queue's wake-ups would come from), `check::due`
//!   (how its rows due by time would be found),
//!   `check::oldest`, `check::recurring` (a sample of rows' cron expressions),
//!   `check::queries`, `check::samples` (sample
//!   outcomes), `check::format` (the report as text, JSON or GitHub annotations),
//!   `check::downstream` (the action's own look at what it reaches, with a sample
//!   row), `check::proof` (the leave-the-query proof: `check::proof::sample`,
//!   `check::proof::lease`, `check::proof::words`), `check::failed` (the proof
//!   of `[failed]` retry and discard), `check::packet` (a batch that would not
//!   fit in `max_allowed_packet`) and `check::history` (whether `run` can keep the
//!   console's history there), all rolled back.
//! - `console`: the status page's actions, behind the console token — it acts on
//!   the queues (it writes to the database), so it is no part of telemetry, which
//!   only observes; the metrics endpoint serves its routes — `console::auth`
//!   (token, sessions, CSRF), `console::act` (pause, resume, retry, discard,
//!   inspect), `console::request` (what a JSON body or a form asks),
//!   `console::history` (the history read back for every copy's console: charts'
//!   buckets, the rows that gave up searched, a row's failed attempts, the copies),
//!   `console::pages` (the pages that read it: a queue's, a row's attempts, the
//!   fleet).
//! - `count`: `tableq count`, and the background count's statement for an
//!   autoscaler (`--print-sql`).
//! - [`telemetry`]: what the process tells about itself. `telemetry::events`
//!   (what is both logged and counted, one type each), and four ways out beside
//!   what they read:
//!   - `telemetry::stats` (per-queue counters, the progress line) with
//!     `telemetry::stats::observed` (timings, rollbacks, errors, backlog, history,
//!     failures), `telemetry::stats::by_label` (items by the queue's `label` column: a job's
//!     class), `telemetry::stats::failure_kinds` (failures grouped by kind: ids,
//!     numbers and quoted values masked), `telemetry::stats::in_flight` (the action's runs under way),
//!     `telemetry::stats::limited` (what the limits shared by copies hold back),
//!     `telemetry::stats::history_tap` (failed attempts on their way to the
//!     history, never waited for), `telemetry::stats::recent` (the status page's percentiles over the last 5
//!     and 15 minutes), `telemetry::stats::monitor` (every queue's, for the
//!     endpoint);
//!   - `telemetry::log` (text or JSON, to stderr): `telemetry::log::json_lines`
//!     (flat JSON lines: the spans' fields at the top level),
//!     `telemetry::log::journal` (under journald: each line's priority),
//!     `telemetry::log::throttle` (a line that would repeat, said once a minute),
//!     `telemetry::log::once` (said once per key);
//!   - `telemetry::metrics` (/metrics): `telemetry::metrics::exports`,
//!     `telemetry::metrics::exposition` (its format: OpenMetrics or text 0.0.4),
//!     `telemetry::metrics::histograms` (Prometheus's), `telemetry::metrics::process`;
//!   - `telemetry::http` (`--metrics-addr`'s routes): `telemetry::http::listener`
//!     (the hardened HTTP listener), `telemetry::http::status` (the status page:
//!     `telemetry::http::status::html`, `telemetry::http::status::sparkline`,
//!     `telemetry::http::status::charts` (a queue's history as SVG charts),
//!     `telemetry::http::status::failed_rows` (the failed rows, a row's attempts),
//!     `telemetry::http::status::fleet` (every copy, `/copies`),
//!     `telemetry::http::status::schedule` (a schedule queue's state, as shown),
//!     `telemetry::http::status::response` (the page's and its data's answers),
//!     `telemetry::http::status::queue_page` (a queue's own page, the sign-in and
//!     inspect pages)), serving beside them the routes of what acts (the console's);
//!   - `telemetry::trace`: `telemetry::trace::spans` (a committed turn's
//!     OpenTelemetry spans) and `telemetry::trace::otlp` (their export over OTLP:
//!     bounded, batched, dropped and counted when the collector is away).
//! - `action`: what to do with one item. A kind is one folder, `action::<kind>`,
//!   holding its `[action]` table as written and validated (its `config.rs`) and
//!   its runtime, each file named in the folder's own `mod.rs`; registered by one
//!   line of the registry in `action`'s own `mod.rs` (`kinds!`), which is the list of
//!   kinds (`tableq schema` and the reference list them too): it reads `[action]`
//!   for the loader, which names no kind. `action::message` (a broker message made from a
//!   row, and its keys, for amqp and nats); `action::process` (a program tableq
//!   starts, for command and worker: its environment, its process group, the one
//!   grace it is given to end, its keys `workdir` and `env`); `action::deadline`
//!   (the deadlines a kind keeps itself, outside an item's, which is the engine's:
//!   a connect, a question, `check`'s look downstream); `action::outcome` (what an action came
//!   to, and whose fault a failure is), `action::answer` (what an HTTP status says
//!   of an item, and `Retry-After`: for http and fastcgi), `action::progress` (lease mode's
//!   `:progress`), `action::capture` (bounded output, and what a run had captured
//!   when its deadline came), `action::php` (PHP's death recognised in what a PHP
//!   handler sent back, for fastcgi and worker).
//! - `db`: the only place outside `check` that talks to the driver —
//!   `db::connect` (a database, KILL), `db::deadline` (the one deadline on a call
//!   to the database), `db::account` (the account a session is
//!   logged in as, quoted for a GRANT: `'tableq'@'%'`), `db::error` and `db::error_kind` (error
//!   classes and kinds), `db::session` (the worker's session: `db::session::setup`, `db::session::claim`,
//!   `db::session::run`, `db::session::interrupt`), `db::pool` (a lease-mode
//!   queue's few shared sessions), `db::prepared` (a queue's SQL prepared),
//!   `db::item` (the claimed row), `db::key_claim` (the claim, key
//!   first, after a row too large to read: it fails alone), `db::key_lock` (`[concurrency]`'s key slots and
//!   the claim's condition), `db::bind` (the values a statement is bound
//!   with), `db::row_json` (a row as JSON), `db::value` (a value as text: a
//!   placeholder's, a key's and back),
//!   `db::backlog`, `db::due` (when the next row falls due by time), `db::clock`, `db::cluster` (a multi-primary cluster: whether a server is a node of one, and which queues it refuses), `db::unanswered` (how long a worker has waited for the database), `db::budget` (the process's
//!   connection budget), `db::failed` (`[failed]` run for the operator's commands),
//!   `db::pause` (the table `tableq pause` writes and every copy reads),
//!   `db::history` (the console's memory in `tableq_*` tables: `db::history::tables`,
//!   `db::history::minutes`, `db::history::attempts`, `db::history::copies`,
//!   `db::history::trim`, `db::history::alerts` — `[alerts]`' state, which decides
//!   which copy tells),
//!   `db::views` (what a table is, and the base tables behind a view),
//!   `db::schedules` (`tableq_schedules`: a schedule queue's row readied when a
//!   session opens — created, caught up — and read back),
//!   `db::named_lock` (the server's named locks that limits across copies hold),
//!   `db::binlog` (the binary log followed as a replica: `db::binlog::open`,
//!   `db::binlog::reader`).
//! - [`config`]: queue files, in five folders that say where a rule lives:
//!   - `config::load`: a file read (every file named, with every problem found) —
//!     `config::load::files` (which paths are queue files, and reading one: regular
//!     files of at most 1 MiB), `config::load::raw` (the file as written),
//!     `config::load::parse` (every key's problem at once), `config::load::locate`
//!     (a key's line), `config::load::schema` (`tableq schema`: the JSON Schema
//!     derived from `config::load::raw`'s types);
//!   - `config::value`: one value of a key, whichever key holds it —
//!     `config::value::duration` and `config::value::statements` (a duration key,
//!     SQL keys: as written, and checked), `config::value::template` (`{column}`),
//!     `config::value::interpolate` (`${ENV}`, `${file:…}`),
//!     `config::value::secret_file`, `config::value::cron` (a cron expression's
//!     next time, in a time zone), `config::value::address` (whether an address
//!     is public);
//!   - `config::queue` (`QueueConfig`: one queue, validated, and the defaults) and
//!     its tables — `config::queue::site` (where a queue's findings point, and what
//!     a kind's checks read of it), `config::queue::wake` (`wake` and the polls it
//!     implies), `config::queue::mode` (`mode` and `scope` as one value),
//!     `config::queue::scope`, `config::queue::lease`, `config::queue::limits`
//!     (`limits`, `[concurrency]`), `config::queue::circuit`,
//!     `config::queue::failed`, `config::queue::monitoring`,
//!     `config::queue::recurring` (`[recurring]`), `config::queue::alerts`,
//!     `config::queue::schedule` (`schedule = "…"`: the queue tableq writes over its
//!     row of `tableq_schedules`), `config::queue::schedule::when` (its due
//!     times, and what a finished run makes of them) and
//!     `config::queue::schedule::statements` (the lease and outcome SQL tableq
//!     writes for it);
//!   - `config::validate` (a whole file) and the rules across its tables —
//!     `config::validate::validator` (what every check reports to),
//!     `config::validate::names` (one rule for unknown names),
//!     `config::validate::batch_scope` (what batch scope refuses of a queue),
//!     `config::validate::lease_queue` (a lease-mode queue as a whole: statements
//!     that must check the lease, the session's clock),
//!     `config::validate::schedule_queue` (a schedule queue as a whole: `overlap`
//!     needs an action outside the database);
//!   - `config::action` (the `[action]` table as this layer sees it, naming no kind:
//!     `Kinds`, what the action layer's registry hands the loader to read it, and
//!     `ActionConfig`, a kind's validated table) and `config::action::kind` (what
//!     every kind's table has and answers: `Common`, `ActionKind`).
//! - `sql`: the user's SQL as text — `sql::lex` (the one lexer), `sql::statement`,
//!   `sql::shape`, `sql::tables`, `sql::due` (a select's time conditions, and the
//!   statement that asks when the next row falls due), `sql::condition` (a condition
//!   added to a WHERE).
//! - [`diagnostic`]: findings, `FILE:LINE: queue NAME: error: message`.
//! - `lock`: a mutex's guard even after a holder panicked; `duration`: a duration
//!   as a message says it (`651ms`, `1.7s`, `2m 5s`), the one rounding every line
//!   uses; `backoff`: waiting before trying again — the one `jitter`, and waits
//!   that double from a first to a ceiling, each caller's own (the engine's
//!   retries, a broker's reconnections, a worker process started again);
//!   `sketch`: durations as a DDSketch of one configuration, mergeable across
//!   minutes and copies; `trace_context`: W3C Trace Context (`traceparent`) as text — a row's, read by
//!   `db::item`, continued by an HTTP delivery's header and by `telemetry::trace`'s
//!   spans.

mod action;
mod backoff;
mod check;
pub mod commands;
pub mod config;
mod console;
mod count;
mod db;
pub mod diagnostic;
mod duration;
mod engine;
mod lock;
mod sketch;
mod sql;
pub mod telemetry;
mod trace_context;

pub use check::{check, CheckOptions, CheckReport};
pub use config::{ActionConfig, QueueConfig};
pub use db::prepared::claim_sql;
pub use engine::queue::supervisor::{run, RunOptions, RunSummary};
pub use telemetry::stats::Counts;

/// Loads every queue file named by `paths` (files, or directories of `*.toml`),
/// with the kinds of action this build has; `env` answers `${NAME}`. Every problem
/// found, not just the first.
pub fn load_paths(
    paths: &[std::path::PathBuf],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<QueueConfig>, diagnostic::Findings> {
    config::load_paths::<action::RawAction>(paths, env)
}

/// The queue file's JSON Schema, as `tableq schema` prints it.
pub fn queue_file_schema() -> String {
    config::load::schema::queue_file_schema::<action::RawAction>()
}
