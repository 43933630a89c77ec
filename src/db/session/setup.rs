//! Setting a connection up as a worker's session: READ COMMITTED (verified),
//! autocommit off, and timeouts that let the server notice a vanished worker.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use crate::config::QueueConfig;
use crate::db::connect::Database;
use crate::db::deadline::within;
use crate::db::error::{DbError, ER_UNKNOWN_SYSTEM_VARIABLE};

/// How far the session's `wait_timeout` sits above the longest expected silence.
const WAIT_TIMEOUT_MARGIN: Duration = Duration::from_secs(30);

/// A connection that could not be set up as a worker's.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("{0}")]
    Database(#[from] DbError),
    #[error("the server kept the session at {0} after SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED; tableq needs READ COMMITTED")]
    Isolation(String),
}

/// How a worker's session is set up for its queue.
pub struct SessionSettings {
    /// The longest the connection may sit silent: the action's timeout or the poll
    /// interval. The server's `wait_timeout` sits just above it.
    pub longest_silence: Duration,
    /// The queue's `database_timeout`: the server gives up on a silent client after
    /// it too (`net_read_timeout`, `net_write_timeout`), and a row lock is waited for
    /// at most three quarters of it (`innodb_lock_wait_timeout`, if the server's is
    /// longer), so a lock wait ends as an error before the deadline would cut it.
    pub database_timeout: Duration,
}

impl SessionSettings {
    pub fn for_queue(queue: &QueueConfig) -> SessionSettings {
        SessionSettings {
            longest_silence: queue.action.timeout().max(queue.longest_poll()),
            database_timeout: queue.database_timeout,
        }
    }

    fn statement(&self) -> String {
        let wait_timeout = (self.longest_silence + WAIT_TIMEOUT_MARGIN)
            .as_secs()
            .max(1);
        let net_timeout = self.database_timeout.as_secs().max(1);
        let lock_wait = (self.database_timeout.as_secs() * 3 / 4).max(1);
        format!(
            "SET SESSION autocommit = 0, SESSION wait_timeout = {wait_timeout}, \
             SESSION net_read_timeout = {net_timeout}, SESSION net_write_timeout = {net_timeout}, \
             SESSION innodb_lock_wait_timeout = LEAST(@@SESSION.innodb_lock_wait_timeout, {lock_wait})"
        )
    }
}

/// A connection set up to be a worker's: READ COMMITTED (verified, so a server that
/// ignores the setting is caught), autocommit off so the claim opens the transaction
/// itself, and a `wait_timeout` just above `longest_silence`, so the server drops a
/// vanished worker's locks soon after its action could have ended.
pub async fn worker_connection(
    database: &Database,
    settings: &SessionSettings,
) -> Result<Conn, SessionError> {
    let conn = database.connect_within(settings.database_timeout).await?;
    set_up(conn, settings).await
}

/// `conn`, new or reset, set up as a worker's (see [`worker_connection`]).
pub async fn set_up(mut conn: Conn, settings: &SessionSettings) -> Result<Conn, SessionError> {
    let setup = async {
        conn.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
            .await?;
        conn.query_drop(settings.statement()).await?;
        isolation_level(&mut conn).await
    };
    let isolation = within("the session's settings", settings.database_timeout, setup).await?;
    if isolation != "READ-COMMITTED" {
        return Err(SessionError::Isolation(isolation));
    }
    Ok(conn)
}

/// The session's isolation level as the server reports it (`READ-COMMITTED`, …).
pub async fn isolation_level(conn: &mut Conn) -> Result<String, mysql_async::Error> {
    // MySQL 8 and MariaDB ≥ 11.1 call it transaction_isolation; older MariaDB, tx_isolation.
    match conn
        .query_first::<String, _>("SELECT @@SESSION.transaction_isolation")
        .await
    {
        Ok(level) => Ok(level.unwrap_or_default()),
        Err(mysql_async::Error::Server(e)) if e.code == ER_UNKNOWN_SYSTEM_VARIABLE => Ok(conn
            .query_first::<String, _>("SELECT @@SESSION.tx_isolation")
            .await?
            .unwrap_or_default()),
        Err(e) => Err(e),
    }
}
