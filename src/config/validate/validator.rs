//! What every check of a queue file reports to: the [`Validator`] collects each
//! problem as a finding at its key's line, so that all of them are said at once,
//! and answers what the checks need to know of the file (its directory, `${NAME}`).
//! `validate` drives it over a whole file; each table's checks take it.

use std::path::{Path, PathBuf};

use crate::config::load::locate::line_of;
use crate::diagnostic::Finding;

/// Collects the problems of one queue file, each pointing at its key's line.
pub struct Validator<'a> {
    file: &'a Path,
    source: &'a str,
    queue: String,
    findings: Vec<Finding>,
    /// The queue file's directory: relative paths in it start here.
    pub dir: PathBuf,
    /// Answers `${NAME}`.
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

impl<'a> Validator<'a> {
    /// A validator for the queue `queue` of `file`, whose text is `source`.
    pub fn new(
        file: &'a Path,
        source: &'a str,
        queue: &str,
        env: &'a dyn Fn(&str) -> Option<String>,
    ) -> Validator<'a> {
        Validator {
            file,
            source,
            queue: queue.to_string(),
            findings: Vec::new(),
            dir: directory_of(file),
            env,
        }
    }

    pub fn error(&mut self, path: &[&str], message: impl Into<String>) {
        let finding = Finding::error(self.file, message)
            .at_line(line_of(self.source, path))
            .in_queue(&self.queue);
        self.findings.push(finding);
    }

    pub fn in_range(&mut self, key: &str, value: Option<u32>, min: usize, max: usize) -> usize {
        let Some(value) = value else { return min };
        let value = value as usize;
        if value < min || value > max {
            self.error(
                &[key],
                format!("`{key}` = {value} is out of range: use {min} to {max}"),
            );
        }
        value
    }

    /// The certificates of `ca_file` (relative to the queue file's directory), when
    /// `holds_certificates` finds one in them; else said, at `action.ca_file`.
    pub fn ca_file(
        &mut self,
        ca_file: Option<&PathBuf>,
        holds_certificates: impl Fn(&[u8]) -> bool,
    ) -> Option<Vec<u8>> {
        let path = self.dir.join(ca_file?);
        let key = ["action", "ca_file"];
        match std::fs::read(&path) {
            Ok(pem) if holds_certificates(&pem) => Some(pem),
            Ok(_) => {
                let message = format!(
                    "`action.ca_file`: {} holds no PEM certificate",
                    path.display()
                );
                self.error(&key, message);
                None
            }
            Err(e) => {
                self.error(
                    &key,
                    format!("`action.ca_file`: cannot read {}: {e}", path.display()),
                );
                None
            }
        }
    }

    /// The problems found so far.
    pub fn take_findings(&mut self) -> Vec<Finding> {
        std::mem::take(&mut self.findings)
    }
}

/// The directory a queue file is in, absolute where it can be.
fn directory_of(file: &Path) -> PathBuf {
    let dir = match file.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::canonicalize(&dir).unwrap_or(dir)
}
