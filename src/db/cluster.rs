//! Multi-primary clusters — Galera (MariaDB Galera Cluster, Percona XtraDB Cluster)
//! and MySQL group replication in multi-primary mode — whose nodes each take writes
//! but do not share row locks: two copies of tableq on two nodes can both claim one
//! row with SKIP LOCKED. The loser's transaction is rolled back at COMMIT
//! (certification), which keeps an SQL action exactly-once and a lease-mode claim
//! single (it commits before the action runs); but a transaction-mode action that
//! reached outside the database has happened by then, on both nodes. `run` and
//! `check` ask here whether a server is such a node, and judge each queue alike.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Value};

use super::{Database, DbError};
use crate::config::QueueConfig;

/// A server that is one primary of several.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MultiPrimary {
    /// `wsrep_on = ON`.
    Galera,
    /// Group replication running with `group_replication_single_primary_mode = OFF`.
    GroupReplication,
}

impl MultiPrimary {
    /// What the server is, in a message's words.
    pub fn describe(self) -> &'static str {
        match self {
            MultiPrimary::Galera => "the server is a Galera node (wsrep_on = ON)",
            MultiPrimary::GroupReplication => {
                "the server runs group replication in multi-primary mode"
            }
        }
    }
}

/// Whether the server on `conn` is a node of a multi-primary cluster. A variable or
/// table the server does not have (or the user may not read) means no; only a lost
/// connection is an error.
pub async fn multi_primary(conn: &mut Conn) -> Result<Option<MultiPrimary>, mysql_async::Error> {
    if optional(conn, "SELECT @@wsrep_on")
        .await?
        .as_ref()
        .and_then(truthy)
        == Some(true)
    {
        return Ok(Some(MultiPrimary::Galera));
    }
    let members = "SELECT COUNT(*) FROM performance_schema.replication_group_members \
                   WHERE MEMBER_STATE IN ('ONLINE', 'RECOVERING')";
    let running = optional(conn, members).await?.as_ref().and_then(truthy) == Some(true);
    let single = "SELECT @@group_replication_single_primary_mode";
    let single = optional(conn, single).await?.as_ref().and_then(truthy);
    Ok((running && single == Some(false)).then_some(MultiPrimary::GroupReplication))
}

/// As [`multi_primary`], on a connection of its own to `database`.
pub async fn multi_primary_at(database: &Database) -> Result<Option<MultiPrimary>, DbError> {
    let mut conn = database.connect().await?;
    let found = multi_primary(&mut conn).await;
    let _ = conn.disconnect().await;
    Ok(found?)
}

/// Whether `queue` would do its action twice when copies of tableq on two nodes of
/// a multi-primary cluster claim one row: in transaction mode, an action that
/// reaches outside the database (whatever its kind: the kind says so) runs before
/// the COMMIT that certification refuses. An SQL action is rolled back with its
/// claim; a lease-mode claim commits, certified, before the action runs.
pub fn delivers_twice_across_nodes(queue: &QueueConfig) -> bool {
    !queue.is_lease() && !queue.action.in_transaction()
}

/// Why `queue` is refused on `cluster`, and the two ways out.
pub fn refusal(queue: &QueueConfig, cluster: MultiPrimary) -> String {
    format!(
        "{}: its nodes do not share row locks, so copies of tableq on two nodes can claim \
         the same row, and this queue's action (type = \"{}\") reaches outside the database \
         in transaction mode — it runs before the COMMIT that the cluster refuses to the \
         loser, so the row is delivered twice (or more). Either point every copy of tableq \
         at one node (one address for all: a proxy, or the same multi-host URL) and say so \
         with --allow-multi-primary, or use mode = \"lease\", whose claim the cluster \
         certifies before the action runs",
        cluster.describe(),
        queue.action.type_name()
    )
}

/// One value, or `None` when the server refuses the question (an unknown variable
/// or table, a missing privilege): only a lost connection is an error.
pub async fn optional(conn: &mut Conn, sql: &str) -> Result<Option<Value>, mysql_async::Error> {
    match conn.query_first::<Value, _>(sql).await {
        Ok(value) => Ok(value.filter(|v| *v != Value::NULL)),
        Err(mysql_async::Error::Server(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `1`, `ON`, `TRUE` → true; `0`, `OFF`, `FALSE` → false.
pub fn truthy(value: &Value) -> Option<bool> {
    match value {
        Value::Int(n) => Some(*n != 0),
        Value::UInt(n) => Some(*n != 0),
        Value::Bytes(bytes) => match String::from_utf8_lossy(bytes).to_ascii_uppercase().as_str() {
            "ON" | "1" | "TRUE" | "YES" => Some(true),
            "OFF" | "0" | "FALSE" | "NO" => Some(false),
            other => other.parse::<i64>().ok().map(|n| n != 0),
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_boolean_variables_either_way() {
        assert_eq!(truthy(&Value::Int(1)), Some(true));
        assert_eq!(truthy(&Value::Bytes(b"OFF".to_vec())), Some(false));
        assert_eq!(truthy(&Value::Bytes(b"ON".to_vec())), Some(true));
        assert_eq!(truthy(&Value::Bytes(b"2".to_vec())), Some(true));
        assert_eq!(truthy(&Value::NULL), None);
    }
}
