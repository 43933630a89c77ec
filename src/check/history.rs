//! Whether `run` can keep the console's history in the queue's database: with the
//! tables there, an insert into each in the check's transaction (of no row, and
//! rolled back); without them, whether the account may create them.

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use crate::config::QueueConfig;
use crate::db::account;
use crate::db::error::describe_error;
use crate::db::history::tables::{self, ALL};
use crate::diagnostic::{Finding, Severity};

/// The history's finding for `queue`, if `run` could not keep it, on the check's
/// session (in its transaction). Nothing when it can: the tables are writable, or
/// the account may create them.
pub async fn writable(
    conn: &mut Conn,
    queue: &QueueConfig,
) -> Result<Option<Finding>, mysql_async::Error> {
    let missing = missing_tables(conn).await?;
    let account = account::current(conn)
        .await
        .unwrap_or_else(|_| "its account".into());
    let grant = tables::grant(conn_database(conn).await?.as_str(), &account);
    if !missing.is_empty() {
        return Ok(match may_create(conn).await? {
            true => None,
            false => Some(warning(
                queue,
                format!(
                    "`run` keeps no history (the console's charts, failed attempts, copies): \
                 {} is not there and {account} may not create it; {grant}; or run with \
                 --history off",
                    missing.join(", ")
                ),
            )),
        });
    }
    for (table, _) in ALL {
        // Needs INSERT and SELECT, changes nothing, and is rolled back anyway.
        let probe = format!("INSERT INTO {table} SELECT * FROM {table} WHERE FALSE");
        if let Err(e) = conn.query_drop(probe).await {
            return Ok(Some(warning(
                queue,
                format!(
                    "`run` cannot write the history ({}); {grant}; or run with --history off",
                    describe_error(&e)
                ),
            )));
        }
    }
    Ok(None)
}

fn warning(queue: &QueueConfig, message: String) -> Finding {
    queue.finding(Severity::Warning, &[], format!("history: {message}"))
}

/// The history tables that are not in the session's database.
async fn missing_tables(conn: &mut Conn) -> Result<Vec<String>, mysql_async::Error> {
    let there: Vec<String> = conn
        .query(
            "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() \
             AND TABLE_NAME LIKE 'tableq\\_%'",
        )
        .await?;
    Ok(ALL
        .iter()
        .map(|(table, _)| table.to_string())
        .filter(|table| !there.contains(table))
        .collect())
}

async fn conn_database(conn: &mut Conn) -> Result<String, mysql_async::Error> {
    let name: Option<Option<String>> = conn.query_first("SELECT DATABASE()").await?;
    Ok(name.flatten().unwrap_or_default())
}

/// Whether the session's account holds CREATE on its database: globally, on the
/// database, or on a history table.
async fn may_create(conn: &mut Conn) -> Result<bool, mysql_async::Error> {
    let grantee = account::current(conn).await.unwrap_or_default();
    let found: Option<u8> = conn
        .exec_first(
            "SELECT 1 FROM information_schema.USER_PRIVILEGES WHERE GRANTEE = ? AND \
             PRIVILEGE_TYPE = 'CREATE' UNION ALL SELECT 1 FROM \
             information_schema.SCHEMA_PRIVILEGES WHERE GRANTEE = ? AND PRIVILEGE_TYPE = \
             'CREATE' AND TABLE_SCHEMA = DATABASE() UNION ALL SELECT 1 FROM \
             information_schema.TABLE_PRIVILEGES WHERE GRANTEE = ? AND PRIVILEGE_TYPE = \
             'CREATE' AND TABLE_SCHEMA = DATABASE() AND TABLE_NAME LIKE 'tableq\\_%' LIMIT 1",
            (&grantee, &grantee, &grantee),
        )
        .await?;
    Ok(found.is_some())
}
