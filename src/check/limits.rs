//! What `check` says of a queue's limits: how `rate_limit` and `max_in_flight`
//! are shared by the copies, and what `[concurrency]` does — as notes — and a
//! refusal where the server cannot keep them: a Galera node's named locks are its
//! own, not the cluster's. (That `[concurrency] key` names a column of the select
//! is proven as the queue's session opens: `db::key_lock`.)

use super::server::ServerFacts;
use crate::config::limits::Across;
use crate::config::QueueConfig;
use crate::diagnostic::{Finding, Severity};

/// Whether the queue's limits hold named locks on the server.
fn uses_named_locks(queue: &QueueConfig) -> bool {
    let limited = queue.rate_limit.is_some() || queue.max_in_flight.is_some();
    queue.concurrency.is_some() || (limited && queue.limits_across == Across::Copies)
}

/// The queue's limits explained, and refused on a Galera node.
pub fn limit_findings(queue: &QueueConfig, facts: &ServerFacts) -> Vec<Finding> {
    if facts.wsrep_on == Some(true) && uses_named_locks(queue) {
        let key = if queue.concurrency.is_some() {
            "concurrency"
        } else {
            "limits"
        };
        return vec![queue.finding(
            Severity::Error,
            &[key],
            "the server is a Galera node (wsrep_on = ON), whose named locks (GET_LOCK) are \
             not shared with the other nodes (nor replicated): `[concurrency]` and limits \
             shared by every copy cannot hold there; remove [concurrency], and set \
             limits = \"per_process\" (each copy keeps to rate_limit and max_in_flight on \
             its own)",
        )];
    }
    let mut notes = Vec::new();
    if queue.limits_across == Across::Copies {
        let limits: Vec<String> = [
            queue
                .rate_limit
                .map(|r| format!("rate_limit = {}/{}", r.count, unit(r.per))),
            queue.max_in_flight.map(|n| format!("max_in_flight = {n}")),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !limits.is_empty() {
            let message = format!(
                "{} hold across every copy of tableq running this queue on its database: \
                 each copy holds a place (a named lock) on one more connection, counts the \
                 copies every second and starts its share of the rate; a copy that dies \
                 gives its share back within seconds",
                limits.join(" and ")
            );
            notes.push(queue.finding(Severity::Note, &["limits"], message));
        }
    }
    if let Some(concurrency) = &queue.concurrency {
        let message = format!(
            "[concurrency]: at most {} row(s) of one `{}` in flight across every copy; the \
             claim skips the rows whose key is at its limit (rows of other keys behind them \
             are claimed), and a copy that dies frees its keys with its connection",
            concurrency.limit, concurrency.written
        );
        notes.push(queue.finding(Severity::Note, &["concurrency"], message));
    }
    notes
}

fn unit(per: std::time::Duration) -> &'static str {
    match per.as_secs() {
        1 => "s",
        60 => "m",
        _ => "h",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(file: &str) -> QueueConfig {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("jobs.toml");
        std::fs::write(&path, file).expect("the queue file written");
        crate::config::load_file(&path, &|_| None).expect("a valid queue file")
    }

    const SHARED: &str = "select = \"SELECT id FROM job\"\nrate_limit = \"30/s\"\n[action]\ntype = \"sql\"\nsql = \"DO 1\"\n";

    #[test]
    fn limits_shared_by_copies_are_refused_on_a_galera_node() {
        let shared = queue(SHARED);
        let galera = ServerFacts {
            wsrep_on: Some(true),
            ..ServerFacts::default()
        };
        let found = limit_findings(&shared, &galera);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].severity, Severity::Error);
        assert!(
            found[0].to_string().contains("limits = \"per_process\""),
            "{}",
            found[0]
        );
        let per_process = SHARED.replace("[action]", "limits = \"per_process\"\n[action]");
        assert!(limit_findings(&queue(&per_process), &galera).is_empty());
    }
}
