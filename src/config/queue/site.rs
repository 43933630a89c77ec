//! Where a queue's findings point — its name, its file and the file's text — and
//! what a kind's own checks may read of the queue it is in, without the whole
//! queue (which holds the kind: the two would import each other).

use std::path::Path;

use crate::config::load::locate::line_of;
use crate::diagnostic::{Finding, Severity};

/// A queue as its findings and its kind's checks see it.
#[derive(Debug, Clone, Copy)]
pub struct Site<'a> {
    pub name: &'a str,
    pub file: &'a Path,
    /// The file's text, to point findings at lines.
    pub source: &'a str,
    /// The `${VARS}` the file puts into a secret: a command must not be handed them.
    pub secret_variables: &'a [String],
    /// The most actions the queue runs at once in one copy.
    pub actions_at_once: usize,
}

impl Site<'_> {
    /// The 1-based line of `path` in the queue's file, if it is there.
    pub fn line_of(&self, path: &[&str]) -> Option<usize> {
        line_of(self.source, path)
    }

    /// A finding about the queue, pointing at the line of `path`.
    pub fn finding(
        &self,
        severity: Severity,
        path: &[&str],
        message: impl Into<String>,
    ) -> Finding {
        let finding = Finding {
            severity,
            ..Finding::error(self.file, message)
        };
        finding.at_line(self.line_of(path)).in_queue(self.name)
    }
}
