//! A finding about a queue file: where it is, which queue, how bad, and what to do.
//!
//! The loader, `run`'s start-up checks and `tableq check` all speak in findings, so a
//! user sees the same words for the same mistake wherever it is caught.

use std::fmt;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Not a problem: what `check` saw, for the reader (a sample message).
    Note,
    Warning,
    Error,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Note => "note",
            Severity::Warning => "warning",
            Severity::Error => "error",
        })
    }
}

/// One line of feedback: `FILE:LINE: queue NAME: error: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub file: PathBuf,
    pub line: Option<usize>,
    pub queue: Option<String>,
    pub severity: Severity,
    pub message: String,
}

impl Finding {
    pub fn error(file: &Path, message: impl Into<String>) -> Self {
        Finding {
            file: file.to_path_buf(),
            line: None,
            queue: None,
            severity: Severity::Error,
            message: message.into(),
        }
    }

    pub fn warning(file: &Path, message: impl Into<String>) -> Self {
        Finding {
            severity: Severity::Warning,
            ..Finding::error(file, message)
        }
    }

    pub fn at_line(mut self, line: Option<usize>) -> Self {
        self.line = line;
        self
    }

    pub fn in_queue(mut self, queue: &str) -> Self {
        self.queue = Some(queue.to_string());
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(queue) = &self.queue {
            write!(f, ": queue {queue}")?;
        }
        write!(f, ": {}: {}", self.severity, self.message)
    }
}

/// A list of findings that stops a command; its `Display` prints one per line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Findings(pub Vec<Finding>);

/// The findings' messages in one line, `; `-separated: for a log line.
pub fn messages(findings: &[Finding]) -> String {
    let messages: Vec<&str> = findings.iter().map(|f| f.message.as_str()).collect();
    messages.join("; ")
}

impl fmt::Display for Findings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, finding) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{finding}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_file_line_queue_severity_and_message() {
        let f = Finding::error(Path::new("q/email.toml"), "`batch` must be at most 1000")
            .at_line(Some(3))
            .in_queue("email");
        assert_eq!(
            f.to_string(),
            "q/email.toml:3: queue email: error: `batch` must be at most 1000"
        );
        let w = Finding::warning(Path::new("a.toml"), "no [on_failure]");
        assert_eq!(w.to_string(), "a.toml: warning: no [on_failure]");
    }
}
