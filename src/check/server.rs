//! The server a queue runs on: which one it is, whether it really has SKIP LOCKED,
//! whether its binary log can replicate a worker's writes, and whether it is a
//! multi-primary cluster whose nodes do not share row locks. Reading the facts
//! needs the database; judging them is pure, so every rule has unit tests.

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use crate::config::QueueConfig;
use crate::db::cluster::{self, optional, truthy, MultiPrimary};

/// What `check` needs to know about a server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerFacts {
    /// `SELECT VERSION()`: `10.11.19-MariaDB-0+deb12u1`, `8.0.36`.
    pub version: String,
    /// `@@version_comment`: `MySQL Community Server - GPL`, `mariadb.org binary distribution`.
    pub comment: String,
    /// `@@log_bin`.
    pub log_bin: bool,
    /// `@@binlog_format`, where the server has it.
    pub binlog_format: Option<String>,
    /// `@@wsrep_on` (Galera), where the server has it.
    pub wsrep_on: Option<bool>,
    /// Group replication, where it is running: whether it is in single-primary mode.
    pub group_replication_single_primary: Option<bool>,
    /// `@@max_connections`.
    pub max_connections: Option<u64>,
    /// `@@max_user_connections` (0: no limit of its own).
    pub max_user_connections: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    MariaDb,
    MySql,
    TiDb,
}

impl Flavour {
    fn name(self) -> &'static str {
        match self {
            Flavour::MariaDb => "MariaDB",
            Flavour::MySql => "MySQL",
            Flavour::TiDb => "TiDB",
        }
    }
}

/// Reads the facts from `conn`. A variable the server does not have is `None`.
pub async fn read_facts(conn: &mut Conn) -> Result<ServerFacts, mysql_async::Error> {
    let (version, comment): (String, String) = conn
        .query_first("SELECT VERSION(), COALESCE(@@version_comment, '')")
        .await?
        .unwrap_or_default();
    let log_bin = optional(conn, "SELECT @@log_bin").await?;
    let binlog_format = optional(conn, "SELECT @@binlog_format").await?;
    let wsrep_on = optional(conn, "SELECT @@wsrep_on").await?;
    let single_primary = optional(conn, "SELECT @@group_replication_single_primary_mode").await?;
    let members = optional(
        conn,
        "SELECT COUNT(*) FROM performance_schema.replication_group_members \
         WHERE MEMBER_STATE IN ('ONLINE', 'RECOVERING')",
    )
    .await?;
    let group_running = members.as_ref().and_then(truthy).unwrap_or(false);
    let max_connections = optional(conn, "SELECT @@max_connections").await?;
    let max_user_connections = optional(conn, "SELECT @@max_user_connections").await?;
    Ok(ServerFacts {
        version,
        comment,
        log_bin: log_bin.as_ref().and_then(truthy).unwrap_or(false),
        binlog_format: binlog_format.map(|v| crate::db::value::value_text(&v)),
        wsrep_on: wsrep_on.as_ref().and_then(truthy),
        group_replication_single_primary: if group_running {
            single_primary.as_ref().and_then(truthy)
        } else {
            None
        },
        max_connections: max_connections.as_ref().and_then(whole_number),
        max_user_connections: max_user_connections.as_ref().and_then(whole_number),
    })
}

/// A value as a whole number, if it is one.
fn whole_number(value: &mysql_async::Value) -> Option<u64> {
    crate::db::value::value_text(value).parse().ok()
}

/// The connection limit the queues on one server run into, if `workers` is more
/// than half of it: the application needs connections too.
pub fn connection_problem(facts: &ServerFacts, workers: usize, server: &str) -> Option<String> {
    let limits = [
        ("max_connections", facts.max_connections),
        (
            "max_user_connections",
            facts.max_user_connections.filter(|n| *n > 0),
        ),
    ];
    let (name, limit) = limits
        .into_iter()
        .filter_map(|(name, limit)| Some((name, limit?)))
        .min_by_key(|(_, limit)| *limit)?;
    (workers as u64 * 2 > limit).then(|| {
        format!(
            "the queues on {server} run {workers} workers, more than half of the server's \
             {name} ({limit}): each worker holds a connection while it works, so the \
             application may be left without; lower `workers` (summed over every copy of \
             tableq) or raise {name}"
        )
    })
}

/// MariaDB, MySQL (Percona and the clouds' builds included) or TiDB.
pub fn flavour(version: &str, comment: &str) -> Flavour {
    let version = version.to_ascii_lowercase();
    let comment = comment.to_ascii_lowercase();
    if version.contains("tidb") || comment.contains("tidb") {
        Flavour::TiDb
    } else if version.contains("mariadb") || comment.contains("mariadb") {
        Flavour::MariaDb
    } else {
        Flavour::MySql
    }
}

/// The leading `major.minor[.patch]` of a version string; a patch that is not a
/// number (`8.0.mysql_aurora.3.04.0`) is unknown.
pub fn parse_version(version: &str) -> Option<(u32, u32, Option<u32>)> {
    // MariaDB's protocol version may carry a `5.5.5-` prefix; VERSION() does not,
    // but be kind to it anyway.
    let version = version.strip_prefix("5.5.5-").unwrap_or(version);
    let numbers: Vec<u32> = version
        .split(|c: char| !c.is_ascii_digit() && c != '.')
        .next()?
        .split('.')
        .take(3)
        .map_while(|part| part.parse().ok())
        .collect();
    match numbers[..] {
        [major, minor, patch] => Some((major, minor, Some(patch))),
        [major, minor] => Some((major, minor, None)),
        _ => None,
    }
}

/// `MariaDB 10.11.19`.
pub fn describe(facts: &ServerFacts) -> String {
    let flavour = flavour(&facts.version, &facts.comment);
    match parse_version(&facts.version) {
        Some((a, b, Some(c))) => format!("{} {a}.{b}.{c}", flavour.name()),
        Some((a, b, None)) => format!("{} {a}.{b}", flavour.name()),
        None => format!("{} {}", flavour.name(), facts.version),
    }
}

/// Why this server cannot run tableq's claim, if it cannot: SKIP LOCKED needs
/// MySQL ≥ 8.0.1 or MariaDB ≥ 10.6; TiDB has none.
pub fn skip_locked_problem(facts: &ServerFacts) -> Option<String> {
    let flavour = flavour(&facts.version, &facts.comment);
    let needed = match flavour {
        Flavour::TiDb => {
            return Some(format!(
                "the server is {} ({}), which does not support FOR UPDATE SKIP LOCKED: \
                 tableq needs MySQL 8.0.1 or later, or MariaDB 10.6 or later",
                describe(facts),
                facts.version
            ))
        }
        Flavour::MariaDb => (10, 6, 0),
        Flavour::MySql => (8, 0, 1),
    };
    let Some(version) = parse_version(&facts.version) else {
        return Some(format!(
            "cannot read the server's version from {:?}; tableq needs MySQL 8.0.1 or later, or MariaDB 10.6 or later",
            facts.version
        ));
    };
    let too_old = match version {
        (major, minor, Some(patch)) => (major, minor, patch) < needed,
        (major, minor, None) => (major, minor) < (needed.0, needed.1),
    };
    too_old.then(|| {
        format!(
            "the server is {}, which does not support FOR UPDATE SKIP LOCKED (it needs {} {}.{}.{} or later)",
            describe(facts),
            flavour.name(),
            needed.0,
            needed.1,
            needed.2
        )
    })
}

/// Statement-based binary logging cannot replicate SKIP LOCKED claims or a READ
/// COMMITTED worker's writes.
pub fn binlog_problem(facts: &ServerFacts) -> Option<String> {
    let format = facts.binlog_format.as_deref()?;
    (facts.log_bin && format.eq_ignore_ascii_case("STATEMENT")).then(|| {
        "binary logging is on with binlog_format = STATEMENT, which cannot replicate SKIP LOCKED \
         claims or the writes of a READ COMMITTED worker: set binlog_format = ROW (or MIXED)"
            .to_string()
    })
}

/// The multi-primary cluster the server is a node of, if it is one.
pub fn multi_primary(facts: &ServerFacts) -> Option<MultiPrimary> {
    if facts.wsrep_on == Some(true) {
        Some(MultiPrimary::Galera)
    } else if facts.group_replication_single_primary == Some(false) {
        Some(MultiPrimary::GroupReplication)
    } else {
        None
    }
}

/// Why `queue` may not run on this server, if it is a node of a multi-primary
/// cluster and the queue would deliver a row twice from copies on two nodes: what
/// `run` refuses, in the same words (lease mode and SQL actions are fine there).
pub fn multi_primary_problem(facts: &ServerFacts, queue: &QueueConfig) -> Option<String> {
    let cluster = multi_primary(facts)?;
    cluster::delivers_twice_across_nodes(queue).then(|| cluster::refusal(queue, cluster))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(version: &str, comment: &str) -> ServerFacts {
        ServerFacts {
            version: version.into(),
            comment: comment.into(),
            ..ServerFacts::default()
        }
    }

    #[test]
    fn tells_the_flavour_and_version() {
        let maria = server("10.11.19-MariaDB-0+deb12u1", "Debian 12");
        assert_eq!(flavour(&maria.version, &maria.comment), Flavour::MariaDb);
        assert_eq!(parse_version(&maria.version), Some((10, 11, Some(19))));
        assert_eq!(describe(&maria), "MariaDB 10.11.19");
        let mysql = server("8.0.36", "MySQL Community Server - GPL");
        assert_eq!(describe(&mysql), "MySQL 8.0.36");
        assert_eq!(
            flavour("8.0.11-TiDB-v7.5.0", "Source distribution"),
            Flavour::TiDb
        );
        assert_eq!(
            flavour("10.6.12", "mariadb.org binary distribution"),
            Flavour::MariaDb
        );
        assert_eq!(parse_version("8.0.mysql_aurora.3.04.0"), Some((8, 0, None)));
        assert_eq!(
            parse_version("5.5.5-10.5.2-MariaDB"),
            Some((10, 5, Some(2)))
        );
        assert_eq!(parse_version("garbage"), None);
    }

    #[test]
    fn knows_which_servers_have_skip_locked() {
        assert_eq!(skip_locked_problem(&server("10.6.0-MariaDB", "")), None);
        assert_eq!(skip_locked_problem(&server("11.4.2-MariaDB", "")), None);
        assert_eq!(skip_locked_problem(&server("8.0.1", "MySQL")), None);
        assert_eq!(skip_locked_problem(&server("8.4.0", "MySQL")), None);
        assert_eq!(
            skip_locked_problem(&server("8.0.mysql_aurora.3.04.0", "")),
            None
        );
        assert_eq!(
            skip_locked_problem(&server("10.5.24-MariaDB", "")).as_deref(),
            Some("the server is MariaDB 10.5.24, which does not support FOR UPDATE SKIP LOCKED (it needs MariaDB 10.6.0 or later)")
        );
        assert!(
            skip_locked_problem(&server("8.0.0-dmr", "MySQL Community Server"))
                .unwrap()
                .contains("MySQL 8.0.1 or later")
        );
        assert!(skip_locked_problem(&server("5.7.44-log", "MySQL"))
            .unwrap()
            .contains("MySQL 5.7.44"));
        assert!(skip_locked_problem(&server("8.0.11-TiDB-v7.5.0", ""))
            .unwrap()
            .contains("TiDB"));
    }

    #[test]
    fn statement_binlog_is_a_problem_only_when_logging() {
        let mut facts = server("8.0.36", "MySQL");
        facts.binlog_format = Some("STATEMENT".into());
        assert_eq!(binlog_problem(&facts), None, "log_bin is off");
        facts.log_bin = true;
        assert!(binlog_problem(&facts)
            .unwrap()
            .contains("binlog_format = STATEMENT"));
        for fine in ["ROW", "MIXED"] {
            facts.binlog_format = Some(fine.into());
            assert_eq!(binlog_problem(&facts), None, "{fine}");
        }
        facts.binlog_format = None;
        assert_eq!(binlog_problem(&facts), None);
    }

    #[test]
    fn multi_primary_clusters_are_named() {
        let mut facts = server("10.11.6-MariaDB", "");
        assert_eq!(multi_primary(&facts), None);
        facts.wsrep_on = Some(false);
        assert_eq!(multi_primary(&facts), None);
        facts.wsrep_on = Some(true);
        assert_eq!(multi_primary(&facts), Some(MultiPrimary::Galera));
        let mut gr = server("8.0.36", "MySQL");
        gr.group_replication_single_primary = Some(true);
        assert_eq!(multi_primary(&gr), None);
        gr.group_replication_single_primary = Some(false);
        assert_eq!(multi_primary(&gr), Some(MultiPrimary::GroupReplication));
    }
}
