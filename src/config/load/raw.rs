//! The queue file exactly as written: serde types with no meaning attached yet.
//! `validate` turns them into a [`crate::config::QueueConfig`].

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::config::value::duration::DurationText;
use crate::config::value::statements::Statements;

/// A queue file: one queue. `A` is its `[action]` table as written: the registry
/// of kinds' type ([`crate::config::action::Kinds`]), which this layer does not name.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawQueue<A> {
    /// The queue's name in logs and on the command line (--queue NAME). Default: the
    /// file name without .toml. Letters, digits, `_` and `-`; unique across the files.
    #[schemars(regex(pattern = r"^[A-Za-z0-9_-]+$"))]
    pub name: Option<String>,
    /// Concurrent worker loops, each with its own database connection. Default 1, at
    /// most 1000.
    #[schemars(range(min = 1, max = 1000))]
    pub workers: Option<u32>,
    /// Rows locked per transaction, at most 1000. Default 1. Larger batches commit
    /// less often and go faster, but hold more locks for longer.
    #[schemars(range(min = 1, max = 1000))]
    pub batch: Option<u32>,
    /// How long a worker waits after finding nothing. Default "5s" — "60s" while the
    /// queue follows the binary log (`wake`), which wakes it sooner.
    #[serde(default, with = "humantime_serde")]
    #[schemars(with = "Option<DurationText>")]
    pub poll_interval: Option<Duration>,
    /// How an idle queue learns of new rows: "auto" (default): the database's binary
    /// log, where the server writes one (row or mixed format) and the user may read it
    /// (REPLICATION SLAVE, REPLICATION CLIENT; BINLOG MONITOR on MariaDB), else polls;
    /// "binlog": the binary log, or the queue does not start; "poll": polls alone.
    #[schemars(extend("enum" = ["auto", "binlog", "poll"]))]
    pub wake: Option<String>,
    /// The first wait after a database error or a failed item; it doubles up to one
    /// minute. Default "1s".
    #[serde(default, with = "humantime_serde")]
    #[schemars(with = "Option<DurationText>")]
    pub error_backoff: Option<Duration>,
    /// How long tableq waits for any one answer from the database (a connection, the
    /// claim, outcome SQL, COMMIT, a ping) before it gives the connection up and
    /// reconnects. Default "30s".
    #[serde(default, with = "humantime_serde")]
    #[schemars(with = "Option<DurationText>")]
    pub database_timeout: Option<Duration>,
    /// A row completed again within this long did not leave the select: its
    /// [on_success] forgot to change it (a loop). "0s" for rows re-armed on purpose
    /// (a row [recurring] re-arms with :next_run is never a loop). Default "60s".
    #[serde(default, with = "humantime_serde")]
    #[schemars(with = "Option<DurationText>")]
    pub loop_window: Option<Duration>,
    /// After this many loops of one row the queue stops claiming until a reload.
    /// Default 3.
    pub loop_limit: Option<u32>,
    /// At most this many items started per second, minute or hour: "50/s", "600/m",
    /// "1000/h", across every copy of tableq on the database (see `limits`). Optional.
    #[schemars(regex(pattern = r"^\s*[0-9]+\s*/\s*[smh]\s*$"))]
    pub rate_limit: Option<String>,
    /// At most this many actions running at once across the queue's workers, and
    /// across every copy of tableq on the database (see `limits`). Optional.
    #[schemars(range(min = 1))]
    pub max_in_flight: Option<u32>,
    /// How far rate_limit and max_in_flight reach: "global" (default): every copy of
    /// tableq running the queue against its database together, coordinated by the
    /// server's named locks on one more connection per copy; "per_process": each
    /// copy on its own (K copies let K times as much through).
    #[schemars(extend("enum" = ["global", "per_process"]))]
    pub limits: Option<String>,
    /// At most `limit` rows of one key (say, one customer) worked on at once, across
    /// every copy; rows of other keys are claimed past a busy one.
    pub concurrency: Option<crate::config::queue::limits::RawConcurrency>,
    /// "transaction" (the default): one transaction per turn. "lease": for jobs of
    /// minutes or hours, a short claim that leases rows ([lease]), the action with
    /// no transaction held.
    #[schemars(extend("enum" = ["transaction", "lease"]))]
    pub mode: Option<String>,
    /// Lease mode's SQL: the claim's lease, renewals, the release.
    pub lease: Option<crate::config::queue::lease::RawLease>,
    /// The circuit breaker, on by default for HTTP and command actions.
    pub circuit: Option<crate::config::queue::circuit::RawCircuit>,
    /// "item" (default): every statement runs once per item, the columns as :column.
    /// "batch": every statement runs once per batch, with the items as a JSON array
    /// in :batch (only :batch and :queue).
    #[schemars(extend("enum" = ["item", "batch"]))]
    pub scope: Option<String>,
    /// The database: mysql://USER:PASSWORD@HOST:3306/DATABASE (mariadb:// works too).
    /// Optional: default --database-url (TABLEQ_DATABASE_URL), then the file
    /// TABLEQ_DATABASE_URL_FILE names, then the systemd credential database-url, then
    /// DATABASE_URL. ${NAME} is replaced from the environment; ${file:/PATH} by that
    /// file's text.
    pub database_url: Option<String>,
    /// How often one short connection, outside the workers, counts the rows `select`
    /// returns (without locking any), for tableq_waiting and the status page.
    /// Default "15s".
    #[serde(default, with = "humantime_serde")]
    #[schemars(with = "Option<DurationText>")]
    pub stats_interval: Option<Duration>,
    /// The background count stops here: tableq_waiting is at most this. Default
    /// 10000, at most 1000000.
    #[schemars(range(min = 1, max = 1_000_000))]
    pub waiting_cap: Option<u64>,
    /// A column of the select holding when the row started waiting (a DATETIME or
    /// TIMESTAMP, or a unix time in seconds): with it tableq exports the queue's
    /// lag. Optional.
    pub waiting_since: Option<String>,
    /// A column of the select naming what kind of job a row is (a framework job's
    /// class): /metrics counts items by it (tableq_items_by_label_total) and the
    /// status page lists them. The first 100 values are told apart, the rest count
    /// as "other". Optional.
    pub label: Option<String>,
    /// The rows waiting for work. Don't add LIMIT or FOR UPDATE: tableq appends
    /// `LIMIT <batch> FOR UPDATE SKIP LOCKED`. The columns it returns are the item:
    /// statements use them as :column. Keep it on an index. Required, unless the
    /// queue runs on a `schedule`.
    #[serde(default)]
    pub select: String,
    /// The column that identifies one row: unique, and never NULL, among waiting
    /// rows (a primary key). Logs name items by it. Default: the first column.
    pub key: Option<String>,
    /// What to do with one item: its `type` names the kind (the schema lists them).
    pub action: A,
    /// Runs in the same transaction when the action succeeded. Touch the row by its
    /// key: range predicates here deadlock against other workers.
    pub on_success: Option<RawOutcome>,
    /// Runs in the same transaction when the action failed; it can use :error,
    /// :status, :output and :retry_after. Without it a failed item returns to the
    /// queue at once: record the failure on the row instead.
    pub on_failure: Option<RawOutcome>,
    /// Runs instead of [on_failure] when the action said "not now" — a worker's
    /// `{"ok": false, "release_after": 30}` (a framework job released): counted as
    /// returned — or when the failure is not the item's own: its handler died, hung
    /// past the timeout or was cut off under it, or it failed downstream (a
    /// retry_after answer, an HTTP 5xx or timeout): counted as failed. The row is put
    /// back to wait :release_after seconds (0 for a death, or the answer's
    /// retry_after). It can use :release_after, :error and :status. Without it,
    /// [on_failure] records them all.
    pub on_release: Option<RawOutcome>,
    /// The rows that gave up, and how an operator retries or discards one (`tableq
    /// failed`, `inspect`, `retry`, `discard`).
    pub failed: Option<crate::config::queue::failed::RawFailed>,
    /// Rows that re-arm themselves: the select's column holding each row's cron
    /// expression (and time zone). Outcome SQL then has :next_run, the row's next due
    /// time after now (`SET next_run_at = :next_run`); such a row coming back is not
    /// a loop.
    pub recurring: Option<crate::config::queue::recurring::RawRecurring>,
    /// Runs the action on a schedule, once per due time across every copy, instead
    /// of over a select: a cron expression ("0 3 * * *", or 6 fields with seconds
    /// first) or "every 30s". Outcome SQL sees :scheduled_at and :run_at (UTC
    /// DATETIME(6)). State in the table tableq_schedules.
    pub schedule: Option<String>,
    /// The time zone a cron `schedule` is read in: an IANA name. Default "UTC".
    pub timezone: Option<String>,
    /// After the daemon was down: "none" of the missed due times run, "one" (the
    /// default) — the latest, once — or "all", each, up to catch_up_max.
    #[schemars(extend("enum" = ["none", "one", "all"]))]
    pub catch_up: Option<String>,
    /// With catch_up = "all": at most this many of the latest missed due times run.
    /// Default 10.
    #[schemars(range(min = 1, max = 1000))]
    pub catch_up_max: Option<u32>,
    /// Whether a run may start while the previous one runs (on another worker or
    /// copy). Default false: the due times a long run covers are recorded as
    /// missed. true: the claim re-arms the schedule; a run is then at most once
    /// and not retried. Not with an SQL action.
    pub overlap: Option<bool>,
    /// A webhook told once per breach across every copy, and when it clears: the
    /// oldest row waits too long, too many items fail, rows give up.
    pub alerts: Option<crate::config::queue::alerts::RawAlerts>,
}

/// `[on_success]`, `[on_failure]` or `[on_release]`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawOutcome {
    /// One statement, or an array of them run in order, with the row's columns as
    /// :column, :queue, and the outcome's :error, :status, :output, :retry_after
    /// (and :next_run with [recurring]).
    pub sql: Statements,
}
