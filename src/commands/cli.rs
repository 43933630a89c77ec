//! The command line, as clap derive types. Every flag that a deployment sets has an
//! environment variable too.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::check::format::ReportFormat;
use crate::telemetry::log::LogFormat;

/// `tableq --version`: the version and the commit it was built from (build.rs).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("TABLEQ_BUILD_COMMIT"),
    ")"
);

#[derive(Debug, Parser)]
#[command(
    name = "tableq",
    version = VERSION,
    about = "Turn any MySQL or MariaDB table into a reliable work queue."
)]
pub struct Cli {
    /// Database for queues without their own `database_url` (else --database-url-file,
    /// then the systemd credential `database-url`, then $DATABASE_URL).
    #[arg(
        long,
        global = true,
        env = "TABLEQ_DATABASE_URL",
        hide_env_values = true,
        value_name = "URL"
    )]
    pub database_url: Option<String>,

    /// A file that holds that URL (a mounted Secret, a systemd credential), so that it
    /// is in no environment; relative to the working directory.
    #[arg(
        long,
        global = true,
        env = "TABLEQ_DATABASE_URL_FILE",
        value_name = "FILE"
    )]
    pub database_url_file: Option<PathBuf>,

    /// Log format on stderr; the level comes from TABLEQ_LOG (default "info").
    #[arg(
        long,
        global = true,
        env = "TABLEQ_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub log_format: LogFormat,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the worker daemon on queue files.
    Run(RunArgs),
    /// Check queue files for everything that can be known before running them.
    Check(CheckArgs),
    /// Print how many rows are waiting in each queue: "NAME<TAB>COUNT".
    Count(CountArgs),
    /// List the rows that gave up: what each queue's `[failed] select` returns.
    Failed(FailedArgs),
    /// Show one row as the queue's action would get it (JSON), and whether the
    /// queue's select and its `[failed] select` return it now.
    Inspect(InspectArgs),
    /// Put rows that gave up back into the queue: run `[failed] retry` for each.
    Retry(ChangeArgs),
    /// Take rows that gave up out of `[failed] select` for good: run `[failed]
    /// discard` for each.
    Discard(ChangeArgs),
    /// Pause a queue in every running copy, on every host: each stops claiming it
    /// within its poll_interval and a second (kept in the table tableq_paused of
    /// the queue's database).
    Pause(PauseArgs),
    /// Resume a paused queue in every running copy.
    Resume(ResumeArgs),
    /// List the schedule queues (`schedule = "…"`) with their state in the table
    /// tableq_schedules: the next due time, the last run and how it ended, the runs
    /// and the due times missed.
    Schedules(SchedulesArgs),
    /// Ask a running tableq's /healthz (or /readyz) whether it is well: exit 0 if so.
    Health(HealthArgs),
    /// Print a completion script for SHELL (bash, zsh, fish, elvish, powershell).
    Completions(CompletionsArgs),
    /// Print a commented queue file that works a framework's own queue table in
    /// place, with its bridge (bridges/ in tableq's repository): Laravel's database
    /// queue (`tableq new laravel`) or Symfony Messenger's Doctrine transport
    /// (`tableq new symfony`).
    New(NewArgs),
    /// Print a JSON Schema of the queue file, for editors (taplo, Even Better TOML)
    /// and CI: `tableq schema > tableq.schema.json`, then `#:schema ./tableq.schema.json`
    /// at the top of a queue file.
    Schema,
    /// Print the manual page tableq(1) (`tableq man > tableq.1`), or write every page
    /// into DIR: tableq.1, and tableq-run.1 and so on for each subcommand.
    Man(ManArgs),
}

#[derive(Debug, Args)]
pub struct NewArgs {
    #[command(subcommand)]
    pub framework: Framework,
}

/// The frameworks whose queue tables `tableq new` writes a queue file for.
#[derive(Debug, Subcommand)]
pub enum Framework {
    /// Laravel's `database` queue driver: its `jobs` and `failed_jobs` tables, worked
    /// by `php artisan tableq:work` (bridges/laravel).
    Laravel(LaravelArgs),
    /// Symfony Messenger's Doctrine transport: its `messenger_messages` table, worked
    /// by `bin/console tableq:consume` (bridges/symfony).
    Symfony(SymfonyArgs),
}

#[derive(Debug, Args)]
pub struct LaravelArgs {
    /// The Laravel queue the file works (`dispatch(...)->onQueue(NAME)`).
    #[arg(long, default_value = "default", value_name = "NAME")]
    pub queue: String,
    /// The jobs table (config/queue.php: connections.database.table).
    #[arg(long, default_value = "jobs", value_name = "TABLE")]
    pub table: String,
    /// The failed jobs table (config/queue.php: failed.table).
    #[arg(long, default_value = "failed_jobs", value_name = "TABLE")]
    pub failed_table: String,
    /// The queue connection's name, as failed_jobs records it.
    #[arg(long, default_value = "database", value_name = "NAME")]
    pub connection: String,
    /// The connection's retry_after, in seconds: a reservation older than this is
    /// taken again, by queue:work or by tableq.
    #[arg(long, default_value_t = 90, value_name = "SECONDS")]
    pub retry_after: u64,
    /// The bridge's command line, split at spaces.
    #[arg(
        long,
        default_value = "php artisan tableq:work",
        value_name = "COMMAND"
    )]
    pub command: String,
    /// Worker loops (jobs at once).
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub workers: u32,
}

#[derive(Debug, Args)]
pub struct SymfonyArgs {
    /// The Messenger transport the bridge consumes (framework.messenger.transports).
    #[arg(long, value_name = "NAME")]
    pub transport: String,
    /// The transport's table (its `table_name` option).
    #[arg(long, default_value = "messenger_messages", value_name = "TABLE")]
    pub table: String,
    /// The transport's `queue_name` option.
    #[arg(long, default_value = "default", value_name = "NAME")]
    pub queue_name: String,
    /// The failure transport's `queue_name` in the same table, for `tableq failed`
    /// and `retry`.
    #[arg(long, default_value = "failed", value_name = "NAME")]
    pub failed_queue_name: String,
    /// The transport's `redeliver_timeout`, in seconds.
    #[arg(long, default_value_t = 3600, value_name = "SECONDS")]
    pub redeliver_timeout: u64,
    /// The bridge's command line, split at spaces. Default: `php bin/console
    /// tableq:consume TRANSPORT`.
    #[arg(long, value_name = "COMMAND")]
    pub command: Option<String>,
    /// Worker loops (messages at once).
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub workers: u32,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// The directory to write the pages into (made if it does not exist).
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// Where `run --metrics-addr` listens when it is not told (the container's default).
pub const DEFAULT_METRICS_ADDR: &str = "127.0.0.1:7436";

#[derive(Debug, Args)]
pub struct HealthArgs {
    /// The address `run --metrics-addr` listens on; 0.0.0.0 means this machine.
    #[arg(long, env = "TABLEQ_METRICS_ADDR", default_value = DEFAULT_METRICS_ADDR, value_name = "ADDR")]
    pub metrics_addr: std::net::SocketAddr,

    /// Ask /readyz (every queue has its database) instead of /healthz.
    #[arg(long)]
    pub ready: bool,

    /// How long to wait for the answer.
    #[arg(long, default_value = "5s", value_name = "DURATION")]
    pub timeout: humantime::Duration,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `run --shutdown-timeout` when not given; the systemd unit, the supervisor file
/// and the container wait longer than this before SIGKILL (tests/it/meta/deploy.rs).
pub const DEFAULT_SHUTDOWN_TIMEOUT: &str = "30s";

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Queue files, or directories of *.toml queue files.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,

    /// Run only these queues (repeatable; in the environment, comma-separated).
    #[arg(
        long = "queue",
        env = "TABLEQ_QUEUES",
        value_delimiter = ',',
        value_name = "NAME"
    )]
    pub queues: Vec<String>,

    /// Exit 0 once nothing is waiting and nothing is in flight.
    #[arg(long, env = "TABLEQ_STOP_WHEN_EMPTY")]
    pub stop_when_empty: bool,

    /// Run transaction-mode queues whose action reaches outside the database on a
    /// node of a Galera cluster or of multi-primary group replication: say so only
    /// when every copy of tableq uses the same node (row locks are not shared
    /// between primaries; copies on two nodes deliver rows twice).
    #[arg(long, env = "TABLEQ_ALLOW_MULTI_PRIMARY")]
    pub allow_multi_primary: bool,

    /// Serve /metrics, /healthz and /readyz on this address (e.g. 127.0.0.1:7436).
    #[arg(long, env = "TABLEQ_METRICS_ADDR", value_name = "ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,

    /// A file holding the console's token: with it, the status page (and
    /// POST /api/queues/…) can pause, resume, retry and discard, for whoever holds
    /// the token. Without it (and without the systemd credential console-token),
    /// the page only reads.
    #[arg(long, env = "TABLEQ_CONSOLE_TOKEN_FILE", value_name = "PATH")]
    pub console_token_file: Option<std::path::PathBuf>,

    /// A file holding a token that reads the console's history and copies
    /// (/api/queues/{queue}/history, /api/copies, the charts): with it, they need
    /// this token or the acting one; without it, they are open like the status page.
    #[arg(long, env = "TABLEQ_CONSOLE_READ_TOKEN_FILE", value_name = "PATH")]
    pub console_read_token_file: Option<std::path::PathBuf>,

    /// Keep each queue's history in tableq_* tables of its database — minutes,
    /// failed attempts, the copies' heartbeats — for the console of every copy.
    #[arg(
        long,
        env = "TABLEQ_HISTORY",
        default_value = "on",
        value_name = "on|off"
    )]
    pub history: OnOff,

    /// How long the history (minutes and failed attempts) is kept.
    #[arg(
        long,
        env = "TABLEQ_HISTORY_RETENTION",
        default_value = "7d",
        value_name = "DURATION"
    )]
    pub history_retention: humantime::Duration,

    /// How long items in flight may take to finish after SIGTERM/SIGINT; past it,
    /// they are rolled back and return to the queue.
    #[arg(
        long,
        env = "TABLEQ_SHUTDOWN_TIMEOUT",
        default_value = DEFAULT_SHUTDOWN_TIMEOUT,
        value_name = "DURATION"
    )]
    pub shutdown_timeout: humantime::Duration,

    /// At most this many database connections at once, across every queue (workers,
    /// lease pools, background counts); beyond it, a connection waits for a place.
    #[arg(
        long,
        env = "TABLEQ_MAX_CONNECTIONS",
        default_value_t = crate::db::budget::DEFAULT_MAX_CONNECTIONS as u32,
        value_parser = clap::value_parser!(u32).range(1..=100_000),
        value_name = "N"
    )]
    pub max_connections: u32,

    /// Export a trace span per item to this OpenTelemetry collector, over OTLP/HTTP
    /// with protobuf (e.g. http://127.0.0.1:4318; /v1/traces is added). Without it,
    /// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (used as is) or OTEL_EXPORTER_OTLP_ENDPOINT
    /// turn export on; OTEL_SERVICE_NAME names the service (default tableq).
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Check only what needs no database.
    #[arg(long)]
    pub offline: bool,

    /// Fail (exit 1) on warnings too, not only on errors.
    #[arg(long)]
    pub strict: bool,

    /// Accept a Galera cluster or multi-primary group replication (every tableq
    /// must then use the same node: row locks are not shared between primaries).
    #[arg(long)]
    pub allow_multi_primary: bool,

    /// How to print the report: text, json (one document), or github (workflow
    /// commands that annotate the queue file's lines in a pull request).
    #[arg(long, value_enum, default_value = "text")]
    pub format: ReportFormat,

    /// Queue files, or directories of *.toml queue files.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CountArgs {
    /// Count at most this many rows per queue; more is shown as "N+".
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=1_000_000), value_name = "N")]
    pub cap: u64,

    /// Count only these queues (repeatable).
    #[arg(long = "queue", value_name = "NAME")]
    pub queues: Vec<String>,

    /// Print the statement the background count runs for one queue (for KEDA's
    /// MySQL scaler) instead of counting; its cap is the queue's `waiting_cap`.
    #[arg(long)]
    pub print_sql: bool,

    /// Queue files, or directories of *.toml queue files.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

/// A switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnOff {
    On,
    Off,
}

/// How `failed` prints the rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RowsFormat {
    /// A header of column names, then a line a row, tab-separated.
    Text,
    /// One JSON array of row objects, typed as an HTTP action's body.
    Json,
}

#[derive(Debug, Args)]
pub struct FailedArgs {
    /// Only this queue (else every queue with a `[failed]` table).
    #[arg(long = "queue", value_name = "NAME")]
    pub queue: Option<String>,

    /// At most this many rows per queue.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=1_000_000), value_name = "N")]
    pub limit: u64,

    #[arg(long, value_enum, default_value = "text")]
    pub format: RowsFormat,

    /// Queue files, or directories of *.toml queue files.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

/// How `schedules` prints them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SchedulesFormat {
    /// A table with a header, a line a schedule, times in UTC.
    Text,
    /// One JSON array of objects, a schedule each; times in UTC, RFC 3339.
    Json,
}

#[derive(Debug, Args)]
pub struct SchedulesArgs {
    /// Only these queues (repeatable; else every schedule queue of the files).
    #[arg(long = "queue", value_name = "NAME")]
    pub queues: Vec<String>,

    #[arg(long, value_enum, default_value = "text")]
    pub format: SchedulesFormat,

    /// Queue files, or directories of *.toml queue files.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The queue (may be left out when the files hold one queue).
    #[arg(long = "queue", value_name = "NAME")]
    pub queue: Option<String>,

    /// The row's key (`hex:…` for a key that is not text, as tableq prints it).
    #[arg(long, value_name = "VALUE", required = true)]
    pub key: String,

    /// Queue files, or directories of *.toml queue files.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("rows").required(true).args(["keys", "all"])))]
pub struct ChangeArgs {
    /// The queue (may be left out when the files hold one queue).
    #[arg(long = "queue", value_name = "NAME")]
    pub queue: Option<String>,

    /// The rows by key (repeatable; `hex:…` for a key that is not text).
    #[arg(long = "key", value_name = "VALUE")]
    pub keys: Vec<String>,

    /// Every row `[failed] select` returns.
    #[arg(long)]
    pub all: bool,

    /// Say what would change, and change nothing (each transaction rolled back).
    #[arg(long)]
    pub dry_run: bool,

    /// Queue files, or directories of *.toml queue files.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct PauseArgs {
    /// The queue (may be left out when the files hold one queue).
    #[arg(long = "queue", value_name = "NAME")]
    pub queue: Option<String>,

    /// Resume by itself after this long (`30m`, `2h`); else at `tableq resume`.
    #[arg(long = "for", value_name = "DURATION")]
    pub duration: Option<humantime::Duration>,

    /// Why, shown in every copy's log and status page.
    #[arg(long, value_name = "TEXT", default_value = "")]
    pub reason: String,

    /// Queue files, or directories of *.toml queue files.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The queue (may be left out when the files hold one queue).
    #[arg(long = "queue", value_name = "NAME")]
    pub queue: Option<String>,

    /// Queue files, or directories of *.toml queue files.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn verify_cli() {
        Cli::command().debug_assert();
    }
}
