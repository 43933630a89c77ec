//! Talking to MySQL/MariaDB: turning a URL into connection options, opening a worker
//! connection with the session tableq relies on (READ COMMITTED, verified), telling
//! a statement's own error from a lost transaction, and killing a stuck session.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder};

/// How long opening a connection may take before it counts as unreachable.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// TCP keepalive on every connection, so a vanished peer is noticed in minutes.
const TCP_KEEPALIVE: Duration = Duration::from_secs(30);
/// How far the session's `wait_timeout` sits above the longest expected silence.
const WAIT_TIMEOUT_MARGIN: Duration = Duration::from_secs(30);

/// Why a database URL cannot be used. Never carries the URL: it may hold a password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a usable database URL ({0}); expected mysql://USER:PASSWORD@HOST:PORT/DATABASE")]
pub struct DatabaseUrlError(String);

/// Parses `mysql://…` (or `mariadb://…`) into connection options, with tableq's
/// defaults: TCP keepalive on, and TCP even for localhost unless the URL asks for
/// `prefer_socket`.
pub fn parse_database_url(url: &str) -> Result<Opts, DatabaseUrlError> {
    let url = match url.strip_prefix("mariadb://") {
        Some(rest) => format!("mysql://{rest}"),
        None => url.to_string(),
    };
    let opts = Opts::from_url(&url).map_err(|e| DatabaseUrlError(e.to_string()))?;
    // No statement cache: a worker holds its prepared statements for the life of the
    // connection, and the cache would close the least recently used ones under it.
    let mut builder = OptsBuilder::from_opts(opts)
        .tcp_keepalive(Some(TCP_KEEPALIVE))
        .stmt_cache_size(0);
    if !url.contains("prefer_socket=") {
        builder = builder.prefer_socket(false);
    }
    Ok(builder.into())
}

/// `user@host:port/database`: a database named for logs, without its password.
pub fn describe(opts: &Opts) -> String {
    format!(
        "{}@{}:{}/{}",
        opts.user().unwrap_or(""),
        opts.ip_or_hostname(),
        opts.tcp_port(),
        opts.db_name().unwrap_or("")
    )
}

/// Opens a connection, giving up after [`CONNECT_TIMEOUT`].
pub async fn connect(opts: &Opts) -> Result<Conn, mysql_async::Error> {
    match tokio::time::timeout(CONNECT_TIMEOUT, Conn::new(opts.clone())).await {
        Ok(result) => result,
        Err(_) => Err(mysql_async::Error::Other(
            format!("timed out after {}s connecting", CONNECT_TIMEOUT.as_secs()).into(),
        )),
    }
}

/// Prepares a connection to be a worker's: READ COMMITTED (verified, so a server
/// that ignores the setting is caught), autocommit off so the claim opens the
/// transaction itself, and a `wait_timeout` just above `longest_silence`, so the
/// server drops a vanished worker's locks soon after its action could have ended.
pub async fn prepare_worker_session(
    conn: &mut Conn,
    longest_silence: Duration,
) -> Result<(), SessionError> {
    let wait_timeout = (longest_silence + WAIT_TIMEOUT_MARGIN).as_secs().max(1);
    conn.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        .await?;
    conn.query_drop(format!(
        "SET SESSION autocommit = 0, SESSION wait_timeout = {wait_timeout}"
    ))
    .await?;
    let isolation = isolation_level(conn).await?;
    if isolation != "READ-COMMITTED" {
        return Err(SessionError::Isolation(isolation));
    }
    Ok(())
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

/// A worker session that could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("{}", describe_error(.0))]
    Database(#[from] mysql_async::Error),
    #[error("the server kept the session at {0} after SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED; tableq needs READ COMMITTED")]
    Isolation(String),
}

const ER_UNKNOWN_SYSTEM_VARIABLE: u16 = 1193;
/// Deadlock found when trying to get lock; the server rolled the transaction back.
pub const ER_LOCK_DEADLOCK: u16 = 1213;
/// Lock wait timeout exceeded.
pub const ER_LOCK_WAIT_TIMEOUT: u16 = 1205;
/// Query execution was interrupted (KILL QUERY).
pub const ER_QUERY_INTERRUPTED: u16 = 1317;

/// Server errors after which the transaction, and with it the item's lock, cannot be
/// trusted: deadlock, lock wait timeout, the session killed, the server shutting down,
/// network trouble the server saw.
const TRANSACTION_LOST: &[u16] = &[
    ER_LOCK_DEADLOCK,
    ER_LOCK_WAIT_TIMEOUT,
    ER_QUERY_INTERRUPTED,
    1053, // server shutdown in progress
    1152, // aborted connection
    1153, // packet too large
    1154, // read error from connection pipe
    1155, // error from fcntl
    1156, // packets out of order
    1157, // couldn't uncompress
    1158, // read error
    1159, // read timeout
    1160, // write error
    1161, // write timeout
    1180, // got error during COMMIT
    1181, // got error during ROLLBACK
    1184, // aborted connection (init)
    1206, // lock table full: InnoDB rolled the transaction back
    1927, // connection was killed (MariaDB)
    3169, // session was killed (MySQL 8)
    4031, // disconnected for inactivity (MariaDB)
];

/// True when `e` is one statement's own failure (a constraint, a bad value, a
/// SIGNAL): the transaction is still open and the item's lock still held.
pub fn is_statement_error(e: &mysql_async::Error) -> bool {
    matches!(e, mysql_async::Error::Server(s) if !TRANSACTION_LOST.contains(&s.code))
}

/// True for the errors a busy queue expects now and then: deadlock and lock wait
/// timeout. They are logged quietly; the items simply return to the queue.
pub fn is_expected_contention(e: &mysql_async::Error) -> bool {
    matches!(e, mysql_async::Error::Server(s) if s.code == ER_LOCK_DEADLOCK || s.code == ER_LOCK_WAIT_TIMEOUT)
}

/// One line for a user: `ERROR 1064 (42000): You have an error…` for the server's
/// errors, the cause for everything else.
pub fn describe_error(e: &mysql_async::Error) -> String {
    match e {
        mysql_async::Error::Server(s) => s.to_string(),
        mysql_async::Error::Io(mysql_async::IoError::Io(io)) => format!("network error: {io}"),
        mysql_async::Error::Io(io) => format!("network error: {io}"),
        mysql_async::Error::Driver(d) => d.to_string(),
        mysql_async::Error::Other(o) => o.to_string(),
        mysql_async::Error::Url(u) => u.to_string(),
    }
}

/// What to stop in another session.
#[derive(Debug, Clone, Copy)]
pub enum Kill {
    /// The running statement; the transaction stays open.
    Query,
    /// The whole session; the server rolls its transaction back.
    Connection,
}

/// How long a KILL may take, side connection included.
const KILL_TIMEOUT: Duration = Duration::from_secs(15);

/// Stops `what` in session `connection_id` from a fresh side connection: the only way
/// to interrupt a statement that is still running.
pub async fn kill(opts: &Opts, connection_id: u32, what: Kill) -> Result<(), mysql_async::Error> {
    match tokio::time::timeout(KILL_TIMEOUT, kill_now(opts, connection_id, what)).await {
        Ok(result) => result,
        Err(_) => Err(mysql_async::Error::Other("timed out sending KILL".into())),
    }
}

async fn kill_now(opts: &Opts, connection_id: u32, what: Kill) -> Result<(), mysql_async::Error> {
    let mut conn = connect(opts).await?;
    let verb = match what {
        Kill::Query => "QUERY",
        Kill::Connection => "CONNECTION",
    };
    let result = conn
        .query_drop(format!("KILL {verb} {connection_id}"))
        .await;
    let _ = conn.disconnect().await;
    match result {
        // ER_NO_SUCH_THREAD: it ended by itself meanwhile.
        Err(mysql_async::Error::Server(e)) if e.code == 1094 => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_mysql_and_mariadb_urls_and_never_shows_the_password() {
        let opts = parse_database_url("mariadb://app:s3cret@db.example:3307/shop").unwrap();
        assert_eq!(describe(&opts), "app@db.example:3307/shop");
        assert!(!opts.prefer_socket());
        assert_eq!(opts.tcp_keepalive(), Some(TCP_KEEPALIVE));
        assert_eq!(opts.stmt_cache_size(), 0);
        let err = parse_database_url("postgres://app:s3cret@db/x").unwrap_err();
        assert!(!err.to_string().contains("s3cret"), "{err}");
        assert!(err.to_string().contains("expected mysql://"), "{err}");
    }
}
