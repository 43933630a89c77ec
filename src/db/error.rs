//! What can go wrong talking to the database, sorted into the classes callers branch
//! on: one statement's own failure (the transaction lives on), expected contention
//! (deadlock, lock wait), and everything else (the transaction is lost).

use std::time::Duration;

/// Deadlock found when trying to get lock; the server rolled the transaction back.
pub const ER_LOCK_DEADLOCK: u16 = 1213;
/// Lock wait timeout exceeded.
pub const ER_LOCK_WAIT_TIMEOUT: u16 = 1205;
/// Query execution was interrupted (KILL QUERY).
pub const ER_QUERY_INTERRUPTED: u16 = 1317;
/// Unknown system variable.
pub const ER_UNKNOWN_SYSTEM_VARIABLE: u16 = 1193;
/// Unknown thread id (a KILL whose session ended meanwhile).
pub const ER_NO_SUCH_THREAD: u16 = 1094;
/// Access denied for user to database (1044), for user with that password (1045), or
/// for a user that must log in another way (1698: MariaDB's unix_socket root).
const ACCESS_DENIED: &[u16] = &[1044, 1045, 1698];
/// Too many connections (`max_connections`, 1040); the user has more than
/// `max_user_connections` (1203).
const SERVER_FULL: &[u16] = &[1040, 1203];
/// Errors that are the queue's own, whatever the row: an unknown column (1054) or
/// table (1146), a syntax error (1064), a privilege the user lacks on a table (1142)
/// or a column (1143), a procedure or function that does not exist (1305).
const QUEUE_FAULTS: &[u16] = &[1054, 1146, 1064, 1142, 1143, 1305];
/// The server runs read-only (1290: `--read-only`, `super_read_only`; 1836: a
/// read-only mode).
const READ_ONLY: &[u16] = &[1290, 1836];
/// A Galera node that is not synced with its cluster (1047: "WSREP has not yet
/// prepared node for application use"): it takes no queries until it is.
const NOT_SYNCED: u16 = 1047;
/// A privilege the user lacks on a table (1142) or a column (1143).
const DENIED: &[u16] = &[1142, 1143];
/// Data too long for a column (strict mode).
const ER_DATA_TOO_LONG: u16 = 1406;
/// The server got a packet larger than `max_allowed_packet`.
const ER_NET_PACKET_TOO_LARGE: u16 = 1153;

/// How the driver says a packet it reads is larger than `max_allowed_packet`
/// (mysql_common's `PacketCodecError::PacketTooLarge`, which it does not export).
const DRIVER_PACKET_TOO_LARGE: &str = "Packet is larger than max_allowed_packet";

/// Server errors after which the transaction, and with it the item's lock, cannot be
/// trusted: deadlock, lock wait timeout, the session killed, the server shutting down,
/// network trouble the server saw.
const TRANSACTION_LOST: &[u16] = &[
    ER_LOCK_DEADLOCK,
    ER_LOCK_WAIT_TIMEOUT,
    ER_QUERY_INTERRUPTED,
    1053, // server shutdown in progress
    1152, // aborted connection
    ER_NET_PACKET_TOO_LARGE,
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

/// Why a database refuses writes for now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    ReadOnly,
    /// A Galera node not synced with its cluster (joining, or cut off from it).
    NotSynced,
    PermissionDenied,
}

impl Refusal {
    /// In the words of `/readyz` and the log.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::ReadOnly => "read-only",
            Refusal::NotSynced => "not synced",
            Refusal::PermissionDenied => "permission denied",
        }
    }
}

/// A database error, in one line for a user when displayed.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("{}", describe_error(.0))]
    Driver(#[from] mysql_async::Error),
    /// A deadlock at COMMIT, which only a multi-primary cluster answers (Galera's
    /// certification failure): another node committed a change to one of the
    /// transaction's rows first, and this transaction was rolled back.
    #[error(
        "{}: another node of the cluster committed a change to one of these rows first \
         (a certification conflict); the transaction is rolled back",
        describe_error(.0)
    )]
    Certification(mysql_async::Error),
    /// No answer within the deadline: the connection may be half-read, and is given up.
    #[error("no answer from the database within {} while waiting for {waiting_for}", humantime::format_duration(*.limit))]
    Deadline {
        waiting_for: &'static str,
        limit: Duration,
    },
    /// A statement's values are larger than the server takes in one packet: it was
    /// not sent (the connection and the transaction live on).
    #[error(
        "{what} would send {size} bytes of values, more than the server's max_allowed_packet \
             ({limit} bytes): raise max_allowed_packet, make the batch smaller, or bind less (a \
             column the statement does not need, `:output`)"
    )]
    TooLarge {
        what: &'static str,
        size: usize,
        limit: usize,
    },
}

impl DbError {
    /// One statement's own failure: the transaction and its locks live on.
    pub fn is_statement_error(&self) -> bool {
        match self {
            DbError::Driver(e) => is_statement_error(e),
            DbError::TooLarge { .. } => true,
            DbError::Deadline { .. } | DbError::Certification(_) => false,
        }
    }

    /// The statement was too large to send (see [`DbError::TooLarge`]).
    pub fn is_too_large(&self) -> bool {
        matches!(self, DbError::TooLarge { .. })
            || self.server_code() == Some(ER_NET_PACKET_TOO_LARGE)
    }

    /// The driver refused a packet from the server larger than `max_allowed_packet`
    /// (a row too large to read): the rest of the packet is still on the wire, so
    /// the connection is lost, and its transaction with it.
    pub fn is_packet_refused(&self) -> bool {
        match self {
            DbError::Driver(mysql_async::Error::Io(mysql_async::IoError::Io(io))) => io
                .get_ref()
                .is_some_and(|inner| inner.to_string() == DRIVER_PACKET_TOO_LARGE),
            _ => false,
        }
    }

    /// The database refuses writes for now — it is read-only (a replica, a failover
    /// under way), a Galera node not synced, or the user's privilege was taken away
    /// — whatever the row.
    pub fn refuses_writes(&self) -> Option<Refusal> {
        match self.server_code()? {
            code if READ_ONLY.contains(&code) => Some(Refusal::ReadOnly),
            NOT_SYNCED => Some(Refusal::NotSynced),
            code if DENIED.contains(&code) => Some(Refusal::PermissionDenied),
            _ => None,
        }
    }

    /// A deadlock or lock wait timeout: expected now and then on a busy queue; a
    /// certification conflict on a multi-primary cluster is one too.
    pub fn is_contention(&self) -> bool {
        match self {
            DbError::Driver(e) => is_expected_contention(e),
            DbError::Certification(_) => true,
            _ => false,
        }
    }

    /// The error COMMIT answered: a deadlock there is a certification conflict (no
    /// lock is taken at COMMIT on a single server).
    pub fn at_commit(self) -> DbError {
        match self {
            DbError::Driver(e) if self_deadlock(&e) => DbError::Certification(e),
            other => other,
        }
    }

    /// A certification conflict (see [`DbError::Certification`]).
    pub fn is_certification(&self) -> bool {
        matches!(self, DbError::Certification(_))
    }

    /// The statement was stopped by KILL QUERY.
    pub fn is_interrupted(&self) -> bool {
        self.server_code() == Some(ER_QUERY_INTERRUPTED)
    }

    /// The server refused the login: wrong user, password, or no access to the
    /// database. Retrying will not help until someone changes the URL or the grants.
    pub fn is_access_denied(&self) -> bool {
        self.server_code()
            .is_some_and(|code| ACCESS_DENIED.contains(&code))
    }

    /// The server refused a connection for being full (`max_connections`,
    /// `max_user_connections`).
    pub fn is_server_full(&self) -> bool {
        self.server_code()
            .is_some_and(|code| SERVER_FULL.contains(&code))
    }

    /// A statement failed for a reason that is the queue's own — its SQL names a
    /// column, table or procedure that is not there, or a privilege its user lacks
    /// — not the row's: every row would fail alike. (A row's own errors — SIGNAL,
    /// a duplicate key, a foreign key, a bad or too long value, a CHECK — are not.)
    pub fn is_queue_fault(&self) -> bool {
        self.server_code()
            .is_some_and(|code| QUEUE_FAULTS.contains(&code))
    }

    /// The server's error code, for a server error.
    pub fn server_code(&self) -> Option<u16> {
        match self {
            DbError::Driver(mysql_async::Error::Server(s))
            | DbError::Certification(mysql_async::Error::Server(s)) => Some(s.code),
            _ => None,
        }
    }
}

#[cfg(test)]
impl DbError {
    /// The server's error `code`, as unit tests anywhere in the crate meet it.
    pub fn server(code: u16, message: &str) -> DbError {
        DbError::Driver(mysql_async::Error::Server(mysql_async::ServerError {
            code,
            message: message.into(),
            state: "HY000".into(),
        }))
    }
}

/// True when `e` is one statement's own failure (a constraint, a bad value, a
/// SIGNAL): the transaction is still open and the item's lock still held.
pub fn is_statement_error(e: &mysql_async::Error) -> bool {
    matches!(e, mysql_async::Error::Server(s) if !TRANSACTION_LOST.contains(&s.code))
}

/// True when `e` is a deadlock.
fn self_deadlock(e: &mysql_async::Error) -> bool {
    matches!(e, mysql_async::Error::Server(s) if s.code == ER_LOCK_DEADLOCK)
}

/// True when `e` says a value was too long for its column (1406, strict mode).
pub fn is_value_too_long(e: &mysql_async::Error) -> bool {
    matches!(e, mysql_async::Error::Server(s) if s.code == ER_DATA_TOO_LONG)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn server_error(code: u16) -> DbError {
        DbError::server(code, "test")
    }

    #[test]
    fn sorts_the_queues_faults_from_the_rows() {
        for code in [1054, 1146, 1064, 1142, 1143, 1305] {
            assert!(server_error(code).is_queue_fault(), "{code}");
        }
        // SIGNAL '45000', duplicate key, foreign key, bad value, too long, CHECK.
        for code in [1644, 1062, 1452, 1366, 1406, 4025] {
            let e = server_error(code);
            assert!(!e.is_queue_fault() && e.is_statement_error(), "{code}");
        }
        assert!(server_error(1040).is_server_full() && server_error(1203).is_server_full());
        assert!(!server_error(1045).is_server_full());
    }

    #[test]
    fn says_why_writes_are_refused() {
        let said = |code| server_error(code).refuses_writes().map(Refusal::as_str);
        assert_eq!(said(1290), Some("read-only"));
        assert_eq!(said(1047), Some("not synced"));
        assert_eq!(said(1142), Some("permission denied"));
        assert_eq!(said(1062), None);
    }

    #[test]
    fn a_deadlock_at_commit_is_a_certification_conflict() {
        let at_commit = server_error(ER_LOCK_DEADLOCK).at_commit();
        assert!(at_commit.is_certification() && at_commit.is_contention());
        assert!(
            at_commit.to_string().contains("another node"),
            "{at_commit}"
        );
        assert_eq!(at_commit.server_code(), Some(ER_LOCK_DEADLOCK));
        assert!(!server_error(1290).at_commit().is_certification());
    }
}
