//! `tableq check`: everything that can be known about queue files before they run.
//! Offline, the loader's own validation; online, each queue's SQL prepared on its
//! database, exactly as `run` does at start.

use std::path::PathBuf;

use crate::config::load_paths;
use crate::database::parse_database_url;
use crate::diagnostic::{Finding, Severity};
use crate::session::{OpenError, Session};

#[derive(Debug, Clone, Default)]
pub struct CheckOptions {
    /// Skip everything that needs the database.
    pub offline: bool,
    /// For queues without their own `database_url`.
    pub database_url: Option<String>,
}

/// What `check` found.
#[derive(Debug, Clone, Default)]
pub struct CheckReport {
    pub queues: usize,
    pub findings: Vec<Finding>,
}

impl CheckReport {
    pub fn has_errors(&self) -> bool {
        self.findings.iter().any(Finding::is_error)
    }

    /// `checked 3 queues: 1 error, 2 warnings`.
    pub fn summary(&self) -> String {
        let errors = self.findings.iter().filter(|f| f.is_error()).count();
        let warnings = self.findings.len() - errors;
        format!(
            "checked {} queue{}: {} error{}, {} warning{}",
            self.queues,
            plural(self.queues),
            errors,
            plural(errors),
            warnings,
            plural(warnings)
        )
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Checks the queue files under `paths`.
pub async fn check(
    paths: &[PathBuf],
    env: &dyn Fn(&str) -> Option<String>,
    options: &CheckOptions,
) -> CheckReport {
    let queues = match load_paths(paths, env) {
        Ok(queues) => queues,
        Err(findings) => {
            return CheckReport {
                queues: 0,
                findings: findings.0,
            }
        }
    };
    let mut report = CheckReport {
        queues: queues.len(),
        findings: Vec::new(),
    };
    for queue in &queues {
        if queue.on_failure.is_none() {
            report.findings.push(queue.finding(
                Severity::Warning,
                &["action"],
                "no [on_failure]: a failing item returns to the queue at once and is retried forever; \
                 record the failure on the row (attempts, retry_at, status) so it leaves the query",
            ));
        }
        if options.offline {
            continue;
        }
        let Some(url) = queue
            .database_url
            .as_deref()
            .or(options.database_url.as_deref())
        else {
            report.findings.push(queue.finding(
                Severity::Error,
                &[],
                "no database: set `database_url`, pass --database-url or TABLEQ_DATABASE_URL, or use --offline",
            ));
            continue;
        };
        let opts = match parse_database_url(url) {
            Ok(opts) => opts,
            Err(e) => {
                report.findings.push(queue.finding(
                    Severity::Error,
                    &["database_url"],
                    e.to_string(),
                ));
                continue;
            }
        };
        match Session::open(queue, &opts).await {
            Ok(_) => {}
            Err(OpenError::Invalid(mut findings)) => report.findings.append(&mut findings),
            Err(OpenError::Unreachable(error)) => report.findings.push(queue.finding(
                Severity::Error,
                &["database_url"],
                format!("cannot reach the database: {error}"),
            )),
        }
    }
    report
}
