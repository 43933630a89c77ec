//! Loading queue files: every file named (files, or directories of `*.toml`),
//! parsed and validated, with every problem found rather than the first; and the
//! `--queue` names to keep.

pub mod files;
pub(crate) mod locate;
pub(crate) mod parse;
pub(crate) mod raw;
pub mod schema;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::action::Kinds;
use crate::config::queue::QueueConfig;
use crate::config::validate;
use crate::diagnostic::{Finding, Findings, Severity};
use files::queue_files;

/// Loads every queue file named by `paths` (files, or directories of `*.toml`).
/// `env` answers `${NAME}` lookups; `A` reads the `[action]` table (the action
/// layer's registry of kinds). Returns every problem found, not just the first.
pub(crate) fn load_paths<A: Kinds>(
    paths: &[PathBuf],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<QueueConfig>, Findings> {
    let loaded = load_all::<A>(paths, env);
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
pub(crate) fn load_all<A: Kinds>(
    paths: &[PathBuf],
    env: &dyn Fn(&str) -> Option<String>,
) -> Loaded {
    let mut loaded = Loaded::default();
    let files = queue_files(paths, &mut loaded.findings);
    loaded.files = files.len();
    for file in files {
        match load_file::<A>(&file, env) {
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
pub(crate) fn load_file<A: Kinds>(
    file: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<QueueConfig, Vec<Finding>> {
    let source = files::read_queue_file(file).map_err(|finding| vec![finding])?;
    let raw = parse::parse::<A>(file, &source)?;
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
    pub(crate) fn load<A: Kinds>(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Vec<QueueConfig>, LoadError> {
        let queues = load_paths::<A>(&self.paths, env).map_err(LoadError::Files)?;
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
