//! The queues a command works on, loaded as `run` loads them: from the files and
//! `--queue` names, `${NAME}` from the environment, each problem the failure it
//! exits with.

use super::failure::Failure;
use crate::action::RawAction;
use crate::config::{LoadError, QueueConfig, QueueSource};

/// `${NAME}` in a queue file: the process's environment.
pub fn env_lookup(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Loads the queues `source` names.
pub fn load(source: &QueueSource) -> Result<Vec<QueueConfig>, Failure> {
    source.load::<RawAction>(&env_lookup).map_err(|e| match e {
        LoadError::Files(findings) => Failure::Config(findings),
        unknown @ LoadError::UnknownQueue { .. } => Failure::Usage(unknown.to_string()),
    })
}
