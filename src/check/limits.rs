//! What `check` says of a queue's limits: how `rate_limit` and `max_in_flight`
//! are shared by the copies, and what `[concurrency]` does — as notes — and a
//! refusal where the server cannot keep them: on a node of a multi-primary cluster
//! (Galera, group replication in multi-primary mode) named locks are the node's
//! own, not the cluster's. (That `[concurrency] key` names a column of the select
//! is proven as the queue's session opens: `db::key_lock`.)

use super::server::{multi_primary, ServerFacts};
use crate::config::queue::limits::Across;
use crate::config::QueueConfig;
use crate::diagnostic::{Finding, Severity};

/// Whether the queue's limits hold named locks on the server.
fn uses_named_locks(queue: &QueueConfig) -> bool {
    let limited = queue.rate_limit.is_some() || queue.max_in_flight.is_some();
    queue.concurrency.is_some() || (limited && queue.limits_across == Across::Copies)
}

/// The queue's limits explained, and refused on a node of a multi-primary cluster.
pub fn limit_findings(queue: &QueueConfig, facts: &ServerFacts) -> Vec<Finding> {
    if let Some(cluster) = multi_primary(facts).filter(|_| uses_named_locks(queue)) {
        let key = if queue.concurrency.is_some() {
            "concurrency"
        } else {
            "limits"
        };
        let message = format!(
            "{}, whose named locks (GET_LOCK) are not shared with the other nodes (nor \
             replicated): `[concurrency]` and limits shared by every copy cannot hold there; \
             remove [concurrency], and set limits = \"per_process\" (each copy keeps to \
             rate_limit and max_in_flight on its own)",
            cluster.describe()
        );
        return vec![queue.finding(Severity::Error, &[key], message)];
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
        crate::config::load_file::<crate::action::RawAction>(&path, &|_| None)
            .expect("a valid queue file")
    }

    const SHARED: &str = "select = \"SELECT id FROM job\"\nrate_limit = \"30/s\"\n[action]\ntype = \"sql\"\nsql = \"DO 1\"\n";

    const CONCURRENCY: &str = "select = \"SELECT id, customer FROM job\"\n[concurrency]\nkey = \"customer\"\nlimit = 1\n[action]\ntype = \"sql\"\nsql = \"DO 1\"\n";

    fn galera() -> ServerFacts {
        ServerFacts {
            wsrep_on: Some(true),
            ..ServerFacts::default()
        }
    }

    /// Group replication running in multi-primary mode.
    fn multi_primary_group() -> ServerFacts {
        ServerFacts {
            group_replication_single_primary: Some(false),
            ..ServerFacts::default()
        }
    }

    #[test]
    fn limits_shared_by_copies_are_refused_on_a_galera_node() {
        let shared = queue(SHARED);
        let found = limit_findings(&shared, &galera());
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].severity, Severity::Error);
        assert!(
            found[0].to_string().contains("limits = \"per_process\""),
            "{}",
            found[0]
        );
        let per_process = SHARED.replace("[action]", "limits = \"per_process\"\n[action]");
        assert!(limit_findings(&queue(&per_process), &galera()).is_empty());
    }

    #[test]
    fn limits_and_concurrency_are_refused_on_multi_primary_group_replication() {
        let group = multi_primary_group();
        let found = limit_findings(&queue(SHARED), &group);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].severity, Severity::Error);
        let said = found[0].to_string();
        assert!(
            said.contains("group replication in multi-primary mode"),
            "{said}"
        );
        assert!(said.contains("limits = \"per_process\""), "{said}");

        let found = limit_findings(&queue(CONCURRENCY), &group);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].to_string().contains("[concurrency]"),
            "{}",
            found[0]
        );

        // The way out is Galera's: limits per process, no [concurrency].
        let per_process = SHARED.replace("[action]", "limits = \"per_process\"\n[action]");
        assert!(limit_findings(&queue(&per_process), &group).is_empty());
        // Single-primary group replication keeps them: one node takes the writes.
        let single = ServerFacts {
            group_replication_single_primary: Some(true),
            ..ServerFacts::default()
        };
        assert!(limit_findings(&queue(SHARED), &single)
            .iter()
            .all(|f| f.severity == Severity::Note));
        assert!(limit_findings(&queue(CONCURRENCY), &single)
            .iter()
            .all(|f| f.severity == Severity::Note));
    }
}
