//! Why a command failed, and the exit status each kind of failure maps to.

use std::process::ExitCode;

use crate::diagnostic::Findings;

/// Why a command failed, and so how the process exits.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// Bad usage, or a queue file that does not load: exit 2.
    #[error("{0}")]
    Usage(String),
    /// Queue files (or their SQL) that are wrong: exit 2.
    #[error("{0}")]
    Config(Findings),
    /// `check` found problems; it has printed them already: exit 1.
    #[error("check found problems")]
    CheckFailed,
    /// Something went wrong while running: exit 1.
    #[error("{0}")]
    Runtime(String),
}

impl Failure {
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Failure::Usage(_) | Failure::Config(_) => ExitCode::from(2),
            Failure::CheckFailed | Failure::Runtime(_) => ExitCode::from(1),
        }
    }
}
