//! One queue, validated: every value typed, every statement parsed — what `run`,
//! `check` and `count` are handed — with the defaults its keys fall back to.

pub mod alerts;
pub mod circuit;
pub mod failed;
pub mod lease;
pub mod limits;
pub mod mode;
pub mod monitoring;
pub mod recurring;
pub mod schedule;
pub mod scope;
pub mod site;
pub mod wake;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::config::action::ActionConfig;
use crate::config::queue::alerts::AlertsConfig;
use crate::config::queue::circuit::CircuitConfig;
use crate::config::queue::failed::FailedConfig;
use crate::config::queue::lease::LeaseConfig;
use crate::config::queue::limits::{Across, Concurrency};
use crate::config::queue::mode::Mode;
use crate::config::queue::monitoring::Monitoring;
use crate::config::queue::recurring::RecurringConfig;
use crate::config::queue::scope::Scope;
use crate::config::queue::site::Site;
use crate::config::queue::wake::{Wake, WakeSource};
use crate::config::value::secret_file::SecretFile;
use crate::diagnostic::{Finding, Severity};
use crate::sql::statement::ParsedStatement;

/// `rate_limit = "50/s"`: `count` items per `per`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub count: u32,
    pub per: Duration,
}

impl Rate {
    /// Reads `N/s`, `N/m` or `N/h`.
    pub fn parse(text: &str) -> Option<Rate> {
        let (count, unit) = text.trim().split_once('/')?;
        let count: u32 = count.trim().parse().ok().filter(|n| *n > 0)?;
        let per = match unit.trim() {
            "s" => Duration::from_secs(1),
            "m" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            _ => return None,
        };
        Some(Rate { count, per })
    }
}

/// `poll_interval` when the file does not set it.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(5);
/// `error_backoff` when the file does not set it.
pub const DEFAULT_ERROR_BACKOFF: Duration = Duration::from_secs(1);
/// `database_timeout` when the file does not set it.
pub const DEFAULT_DATABASE_TIMEOUT: Duration = Duration::from_secs(30);
/// `loop_window` when the file does not set it.
pub const DEFAULT_LOOP_WINDOW: Duration = Duration::from_secs(60);
/// `loop_limit` when the file does not set it.
pub const DEFAULT_LOOP_LIMIT: u32 = 3;
/// The longest wait between retries after database errors.
pub const MAX_ERROR_BACKOFF: Duration = Duration::from_secs(60);
/// The largest `batch`: one transaction holds this many row locks at most.
pub const MAX_BATCH: usize = 1000;
/// The largest `workers`: each one holds a database connection.
pub const MAX_WORKERS: usize = 1000;

/// One queue, validated: every value typed, every statement parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueConfig {
    pub name: String,
    /// The file it came from.
    pub file: PathBuf,
    pub workers: usize,
    pub batch: usize,
    /// How often an idle queue polls, when it does not follow the binary log.
    pub poll_interval: Duration,
    /// Where its wake-ups come from, and how often it polls on the binary log.
    pub wake: Wake,
    pub error_backoff: Duration,
    /// How long tableq waits for any one answer from the database (a claim, outcome
    /// SQL, a savepoint, COMMIT, a ping) before it gives the connection up.
    pub database_timeout: Duration,
    /// A row completed again within this long did not leave the select: a loop.
    /// Zero: rows are re-armed on purpose, no watch.
    pub loop_window: Duration,
    /// After this many loops of one row the queue stops claiming.
    pub loop_limit: u32,
    /// At most this many items started per period.
    pub rate_limit: Option<Rate>,
    /// At most this many actions running at once across the queue's workers.
    pub max_in_flight: Option<usize>,
    /// Whether those two hold across every copy, or per process.
    pub limits_across: Across,
    /// `[concurrency]`: at most N rows of one key in flight, across every copy.
    pub concurrency: Option<Concurrency>,
    /// The circuit breaker: `None` when it is off.
    pub circuit: Option<CircuitConfig>,
    /// Transaction mode (its statements once per item or per batch), or lease mode.
    pub mode: Mode,
    /// The queue's own database URL, with `${ENV}` already replaced.
    pub database_url: Option<String>,
    /// The `${VARS}` the file puts into `database_url` or a signing secret: a command
    /// must not be handed them.
    pub secret_variables: Vec<String>,
    /// The `${file:…}`s the file reads its secrets from, each with its key.
    pub secret_files: Vec<SecretFile>,
    pub select: ParsedStatement,
    /// The column that identifies a row; `None` means the first column.
    pub key: Option<String>,
    pub action: ActionConfig,
    pub on_success: Vec<ParsedStatement>,
    pub on_failure: Option<Vec<ParsedStatement>>,
    /// `[on_release]`: a row put back to wait (a release, a handler that died).
    pub on_release: Option<Vec<ParsedStatement>>,
    /// `[failed]`: the rows that gave up, and their retry and discard.
    pub failed: Option<FailedConfig>,
    /// `[recurring]`: rows that re-arm themselves, `:next_run` from their cron.
    pub recurring: Option<RecurringConfig>,
    /// `schedule = "…"`: the queue runs on a schedule, over its row of
    /// `tableq_schedules`.
    pub schedule: Option<crate::config::queue::schedule::ScheduleConfig>,
    /// `[alerts]`: a webhook told once per breach across every copy.
    pub alerts: Option<AlertsConfig>,
    /// `stats_interval`, `waiting_cap`, `waiting_since`.
    pub monitoring: Monitoring,
    /// The file's text, kept to point findings at lines.
    pub(super) source: Arc<str>,
}

impl QueueConfig {
    /// Whether `other` is this same queue, unchanged: the same file, the same text,
    /// and the same values from outside it (`${ENV}`, a `ca_file`'s certificates, a
    /// secret — which `Debug` hides). Every field is compared (`PartialEq` is
    /// derived, so a field added later is compared too).
    pub fn same_as(&self, other: &QueueConfig) -> bool {
        self == other
    }

    /// The 1-based line of `path` in this queue's file, if it is there.
    pub fn line_of(&self, path: &[&str]) -> Option<usize> {
        self.site().line_of(path)
    }

    /// Where this queue's findings point, and what a kind's checks may read of it.
    pub fn site(&self) -> Site<'_> {
        Site {
            name: &self.name,
            file: &self.file,
            source: &self.source,
            secret_variables: &self.secret_variables,
            actions_at_once: self.actions_at_once(),
        }
    }

    /// The most actions the queue runs at once in one copy: each worker's batch
    /// (one action for the whole batch in batch scope), within `max_in_flight`.
    fn actions_at_once(&self) -> usize {
        let per_worker = match self.mode {
            Mode::Transaction {
                scope: Scope::Batch,
            } => 1,
            _ => self.batch,
        };
        let at_once = self.workers * per_worker;
        self.max_in_flight.map_or(at_once, |max| at_once.min(max))
    }

    /// A finding about this queue, pointing at the line of `path`.
    pub fn finding(
        &self,
        severity: Severity,
        path: &[&str],
        message: impl Into<String>,
    ) -> Finding {
        self.site().finding(severity, path, message)
    }
}

impl QueueConfig {
    /// Its outcome statements with their paths: `[on_success]`, then `[on_failure]`
    /// and `[on_release]` when the file has them.
    pub fn outcome_statements(
        &self,
    ) -> impl Iterator<Item = ([&'static str; 2], &[ParsedStatement])> {
        let success = (["on_success", "sql"], self.on_success.as_slice());
        let failure = self
            .on_failure
            .as_deref()
            .map(|s| (["on_failure", "sql"], s));
        let release = self
            .on_release
            .as_deref()
            .map(|s| (["on_release", "sql"], s));
        std::iter::once(success).chain(failure).chain(release)
    }

    /// Whether the statements run once per item or once per batch (always per item
    /// in lease mode).
    pub fn scope(&self) -> Scope {
        match &self.mode {
            Mode::Transaction { scope } => *scope,
            Mode::Lease(_) => Scope::Item,
        }
    }

    /// The `[lease]` table, in lease mode.
    pub fn lease(&self) -> Option<&LeaseConfig> {
        match &self.mode {
            Mode::Lease(lease) => Some(lease),
            Mode::Transaction { .. } => None,
        }
    }

    /// Whether its rows re-arm by a cron: `[recurring]`, or a schedule (outcome
    /// statements have `:next_run`).
    pub fn rearms_rows(&self) -> bool {
        self.recurring.is_some() || self.schedule.is_some()
    }

    /// Whether `[on_success]` re-arms its rows on purpose: the queue has
    /// `[recurring]` and binds `:next_run` there (such a row coming back is no loop).
    pub fn rearms(&self) -> bool {
        let binds = |s: &ParsedStatement| s.params.iter().any(|p| p == "next_run");
        self.rearms_rows() && self.on_success.iter().any(binds)
    }

    /// Whether its claim moves its row on by itself (a schedule with `overlap =
    /// true` re-arms at the claim): an item of it has nothing to be left waiting
    /// for, so a run that failed for any cause is recorded (a missed due time).
    pub fn claim_moves_on(&self) -> bool {
        self.schedule.as_ref().is_some_and(|s| s.overlap)
    }

    /// Whether the queue runs in lease mode.
    pub fn is_lease(&self) -> bool {
        self.lease().is_some()
    }

    /// The most database connections the queue holds: one per worker, or in lease
    /// mode the pool's `[lease] connections`.
    pub fn connections(&self) -> usize {
        self.lease().map_or(self.workers, |l| l.connections)
    }
}

impl QueueConfig {
    /// The longest an idle queue's watcher waits between polls: on the binary log,
    /// or without it.
    pub fn longest_poll(&self) -> Duration {
        match self.wake.source {
            WakeSource::Poll => self.poll_interval,
            _ => self.poll_interval.max(self.wake.poll_on_binlog),
        }
    }
}
