//! Queue files: find them, parse them, validate them, and hand out typed
//! [`QueueConfig`]s. `run`, `check` and `count` all load through [`load_paths`], so
//! they agree on what a valid queue is and say the same thing when it is not.

pub mod action;
pub mod circuit;
pub(crate) mod duration;
pub mod failed;
pub mod files;
pub(crate) mod interpolate;
pub mod kind;
pub mod lease;
mod locate;
pub mod mode;
pub mod monitoring;
pub mod names;
mod parse;
mod raw;
pub mod schema;
pub mod scope;
pub mod secret_file;
pub(crate) mod statements;
pub mod template;
mod validate;
pub(crate) mod validator;
pub mod wake;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::diagnostic::{Finding, Findings, Severity};
use crate::sql::statement::ParsedStatement;

pub use action::ActionConfig;
pub use circuit::CircuitConfig;
use files::queue_files;
pub use interpolate::{files, interpolate, interpolate_secret, variables, InterpolateError};
pub use locate::{line_of, statement_path};
pub use mode::Mode;
pub use monitoring::Monitoring;
pub use scope::Scope;
pub use wake::{Wake, WakeSource};

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

/// A file a secret was read from (`${file:/PATH}`), and the key that read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretFile {
    pub path: PathBuf,
    /// Where in the queue file: `["action", "headers", "Authorization"]`.
    pub key: Vec<String>,
}

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
    pub wake: wake::Wake,
    pub error_backoff: Duration,
    /// How long tableq waits for any one answer from the database (a claim, outcome
    /// SQL, a savepoint, COMMIT, a ping) before it gives the connection up.
    pub database_timeout: Duration,
    /// A row completed again within this long did not leave the select: a loop.
    /// Zero: rows are re-armed on purpose, no watch.
    pub loop_window: Duration,
    /// After this many loops of one row the queue stops claiming.
    pub loop_limit: u32,
    /// At most this many items started per period, per process.
    pub rate_limit: Option<Rate>,
    /// At most this many actions running at once across the queue's workers, per
    /// process.
    pub max_in_flight: Option<usize>,
    /// The circuit breaker: `None` when it is off.
    pub circuit: Option<circuit::CircuitConfig>,
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
    /// `[failed]`: the rows that gave up, and their retry and discard.
    pub failed: Option<failed::FailedConfig>,
    /// `stats_interval`, `waiting_cap`, `waiting_since`.
    pub monitoring: Monitoring,
    /// The file's text, kept to point findings at lines.
    source: Arc<str>,
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
        line_of(&self.source, path)
    }

    /// A finding about this queue, pointing at the line of `path`.
    pub fn finding(
        &self,
        severity: Severity,
        path: &[&str],
        message: impl Into<String>,
    ) -> Finding {
        let finding = Finding {
            severity,
            ..Finding::error(&self.file, message)
        };
        finding.at_line(self.line_of(path)).in_queue(&self.name)
    }
}

/// Loads every queue file named by `paths` (files, or directories of `*.toml`).
/// `env` answers `${NAME}` lookups. Returns every problem found, not just the first.
pub fn load_paths(
    paths: &[PathBuf],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<QueueConfig>, Findings> {
    let loaded = load_all(paths, env);
    if loaded.findings.iter().any(Finding::is_error) {
        Err(Findings(loaded.findings))
    } else {
        Ok(loaded.queues)
    }
}

/// What [`load_all`] found: the queues that loaded, and the problems of the rest.
#[derive(Debug, Default)]
pub struct Loaded {
    pub queues: Vec<QueueConfig>,
    pub findings: Vec<Finding>,
    /// How many queue files there were, loaded or not.
    pub files: usize,
}

/// Loads every queue file named by `paths`, keeping the queues that load next to
/// the problems of those that do not (so `check` can go on with the good ones).
pub fn load_all(paths: &[PathBuf], env: &dyn Fn(&str) -> Option<String>) -> Loaded {
    let mut loaded = Loaded::default();
    let files = queue_files(paths, &mut loaded.findings);
    loaded.files = files.len();
    for file in files {
        match load_file(&file, env) {
            Ok(queue) => {
                if let Some(first) = loaded.queues.iter().find(|q| q.name == queue.name) {
                    let finding = queue.finding(
                        Severity::Error,
                        &["name"],
                        format!(
                            "queue name `{}` is already used by {}; give each queue its own `name`",
                            queue.name,
                            first.file.display()
                        ),
                    );
                    loaded.findings.push(finding);
                } else {
                    loaded.queues.push(queue);
                }
            }
            Err(mut problems) => loaded.findings.append(&mut problems),
        }
    }
    loaded
}

/// Loads one queue file.
pub fn load_file(
    file: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<QueueConfig, Vec<Finding>> {
    let source = files::read_queue_file(file).map_err(|finding| vec![finding])?;
    let raw = parse::parse(file, &source)?;
    validate::validate(raw, file, Arc::from(source), env)
}

/// Where the queues come from — files and directories, and the `--queue` names to
/// keep — so that `run`, `count` and a reload load them the same way.
#[derive(Debug, Clone)]
pub struct QueueSource {
    pub paths: Vec<PathBuf>,
    /// Only these queues (all of them when empty).
    pub names: Vec<String>,
}

/// Why the queues could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Queue files that do not load.
    #[error("{0}")]
    Files(Findings),
    /// `--queue NAME` names no queue.
    #[error("--queue {missing}: no queue has that name; the files define: {}", known.join(", "))]
    UnknownQueue { missing: String, known: Vec<String> },
}

impl QueueSource {
    /// Loads the queue files, keeping the queues named.
    pub fn load(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Vec<QueueConfig>, LoadError> {
        let queues = load_paths(&self.paths, env).map_err(LoadError::Files)?;
        if let Some(missing) = self
            .names
            .iter()
            .find(|n| !queues.iter().any(|q| &q.name == *n))
        {
            return Err(LoadError::UnknownQueue {
                missing: missing.clone(),
                known: queues.iter().map(|q| q.name.clone()).collect(),
            });
        }
        let wanted = |q: &QueueConfig| self.names.is_empty() || self.names.contains(&q.name);
        Ok(queues.into_iter().filter(wanted).collect())
    }
}
