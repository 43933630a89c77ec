//! `tableq check`: everything that can be known about queue files before they run.
//!
//! Offline: what the loader rejects (every file's problems, all at once) and what
//! the file alone warns about ([`offline`]). With the database ([`online`]): the
//! server ([`server`]), each statement prepared exactly as `run` does at start, the
//! tables' engine ([`tables`]), the two-session SKIP LOCKED self-test
//! ([`self_test`]), whether the claim is driven by an index ([`index`], with
//! [`explain`]), `[recurring]`'s cron expressions on a sample of rows
//! ([`recurring`]), and the leave-the-query proof ([`proof`], with [`samples`]) — all
//! in transactions that are rolled back; then, for an action that reaches a broker,
//! the action's own look at it with a sample row ([`downstream`]). Every statement
//! check runs of its own is in [`queries`].

pub mod downstream;
pub mod due;
pub mod explain;
pub mod failed;
pub mod format;
pub mod history;
pub mod index;
pub mod limits;
pub mod offline;
pub mod oldest;
pub mod online;
pub mod options;
pub mod packet;
pub mod proof;
pub mod queries;
pub mod reads;
pub mod recurring;
pub mod samples;
pub mod self_test;
pub mod server;
pub mod tables;
pub mod wake;

use std::path::PathBuf;

use crate::action::{Action, RawAction};
use crate::config::load_all;
use crate::config::validate::names::key_name;
use crate::db::Database;
use crate::diagnostic::{Finding, Severity};
pub use options::CheckOptions;

/// What `check` found.
#[derive(Debug, Clone, Default)]
pub struct CheckReport {
    pub queues: usize,
    pub findings: Vec<Finding>,
    /// The servers the queues were checked on (`MariaDB 10.11.19`); empty offline.
    pub servers: Vec<String>,
    /// Each table the selects that read more than one read, explained
    /// ([`reads`]); empty offline.
    pub reads: Vec<String>,
    /// Where each queue's wake-ups would come from; empty offline.
    pub wakes: Vec<wake::WakeReport>,
    /// How the queues whose selects read the clock find their rows due by time, on
    /// time (those that cannot are warnings); empty offline.
    pub due: Vec<due::DueReport>,
    pub offline: bool,
}

impl CheckReport {
    pub fn has_errors(&self) -> bool {
        self.findings.iter().any(Finding::is_error)
    }

    /// Whether `check` fails: on any error, or with `strict` on any warning too
    /// (notes never fail it).
    pub fn fails(&self, strict: bool) -> bool {
        self.has_errors() || (strict && self.count(Severity::Warning) > 0)
    }

    fn count(&self, severity: Severity) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == severity)
            .count()
    }

    /// A line for each table a select of several tables reads, for each way the
    /// queues wake up and each way their rows due by time are found, naming its queues (a reason many queues share is said once), then
    /// the verdict, last: `checked 3 queues on MariaDB 10.11.19: 1 error, 2 warnings`.
    pub fn summary(&self) -> String {
        let errors = self.count(Severity::Error);
        let warnings = self.count(Severity::Warning);
        let place = if self.offline {
            " offline".to_string()
        } else if self.servers.is_empty() {
            String::new()
        } else {
            format!(" on {}", self.servers.join(", "))
        };
        let wakes = wake::describe(&self.wakes).into_iter();
        let due = due::describe(&self.due).into_iter();
        let reads = self.reads.iter().map(|said| format!("reads: {said}"));
        let mut lines: Vec<String> = reads
            .chain(wakes.map(|said| format!("wake-ups: {said}")))
            .chain(due.map(|said| format!("due by time: {said}")))
            .collect();
        lines.push(format!(
            "checked {} queue{}{place}: {} error{}, {} warning{}",
            self.queues,
            plural(self.queues),
            errors,
            plural(errors),
            warnings,
            plural(warnings)
        ));
        lines.join("\n")
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Checks the queue files under `paths`. A file that does not load is reported and
/// the others are still checked.
pub async fn check(
    paths: &[PathBuf],
    env: &dyn Fn(&str) -> Option<String>,
    options: &CheckOptions,
) -> CheckReport {
    let loaded = load_all::<RawAction>(paths, env);
    let mut report = CheckReport {
        queues: loaded.files,
        findings: loaded.findings,
        servers: Vec::new(),
        reads: Vec::new(),
        wakes: Vec::new(),
        due: Vec::new(),
        offline: options.offline,
    };
    let mut servers = online::Servers::default();
    for queue in &loaded.queues {
        // `run` builds every action before it starts (for HTTP: its client, which
        // needs the system's root certificates): so does `check`.
        let action = Action::new(&queue.action)
            .map_err(|e| {
                report
                    .findings
                    .push(queue.finding(Severity::Error, &["action"], e.to_string()))
            })
            .ok();
        if options.offline {
            // The database is not asked, but its URL — the queue's own, or the one
            // given to check — must be one `run` can use.
            let default_url = options.database_url.as_deref();
            if queue.database_url.is_some() || default_url.is_some() {
                report
                    .findings
                    .extend(Database::for_queue(queue, default_url).err());
            }
            let key = key_name(queue);
            report
                .findings
                .extend(offline::warnings(queue, key.as_deref()));
            continue;
        }
        let findings = online::check_queue(queue, action.as_ref(), options, &mut servers).await;
        report.findings.extend(findings);
    }
    report.findings.extend(servers.connection_findings());
    report.servers = servers.described();
    report.reads = std::mem::take(&mut servers.reads);
    report.wakes = std::mem::take(&mut servers.wakes);
    report.due = std::mem::take(&mut servers.due);
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The PHP shop's summary: nine queues, polling at two intervals, all for want of
    /// one grant, and reading the clock alike. One line per reason, each naming its
    /// queues; the grant said once.
    #[test]
    fn the_summary_says_each_reason_once_on_a_line_of_its_own() {
        let grant = "user 'tableq'@'%' may not read the binary log (ERROR 1227 …): GRANT \
                     REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'tableq'@'%'";
        let names: Vec<String> = (1..=9).map(|i| format!("orders_{i}")).collect();
        let wakes = names
            .iter()
            .enumerate()
            .map(|(i, name)| wake::WakeReport {
                queue: name.clone(),
                source: "poll",
                polls_every: if i % 3 == 0 { "1m" } else { "5s" }.into(),
                why: Some(grant.into()),
            })
            .collect();
        let said = "claims rows due by time (`due_at <= NOW()`) when they fall due, asking \
                    the database when the next one is";
        let due = names
            .iter()
            .take(4)
            .map(|name| due::DueReport {
                queue: name.clone(),
                said: said.into(),
            })
            .collect();
        let report = CheckReport {
            queues: 9,
            servers: vec!["MariaDB 10.11.19".into()],
            wakes,
            due,
            ..CheckReport::default()
        };
        let summary = report.summary();
        let lines: Vec<&str> = summary.lines().collect();
        assert_eq!(
            lines,
            [
                format!(
                    "wake-ups: orders_1, orders_2, orders_3, orders_4, orders_5, orders_6, \
                     orders_7, orders_8, orders_9 by polling every 1m (orders_1, orders_4, \
                     orders_7), 5s (orders_2, orders_3, orders_5, orders_6, orders_8, \
                     orders_9), as {grant}"
                ),
                format!("due by time: orders_1, orders_2, orders_3, orders_4 {said}"),
                "checked 9 queues on MariaDB 10.11.19: 0 errors, 0 warnings".to_string(),
            ]
        );
    }
}
