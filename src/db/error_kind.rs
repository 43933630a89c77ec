//! Database errors sorted for counting: which kind of trouble a queue meets.

use super::error::{DbError, ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT};

/// The kinds `tableq_db_errors_total{kind}` counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A connection could not be opened.
    Connect,
    Deadlock,
    LockWait,
    /// A certification conflict on a multi-primary cluster: another node committed a
    /// change to one of the transaction's rows first.
    Certification,
    /// The connection or the transaction was lost (network, server restart, KILL).
    Lost,
    /// No answer within `database_timeout`.
    Deadline,
    /// Anything else: a statement the server rejected.
    Other,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 7] = [
        ErrorKind::Connect,
        ErrorKind::Deadlock,
        ErrorKind::LockWait,
        ErrorKind::Certification,
        ErrorKind::Lost,
        ErrorKind::Deadline,
        ErrorKind::Other,
    ];

    /// The `kind` label.
    pub fn label(self) -> &'static str {
        match self {
            ErrorKind::Connect => "connect",
            ErrorKind::Deadlock => "deadlock",
            ErrorKind::LockWait => "lock_wait",
            ErrorKind::Certification => "certification",
            ErrorKind::Lost => "lost",
            ErrorKind::Deadline => "deadline",
            ErrorKind::Other => "other",
        }
    }
}

impl DbError {
    /// The kind of an error met on an open connection.
    pub fn kind(&self) -> ErrorKind {
        match self {
            DbError::Deadline { .. } => ErrorKind::Deadline,
            DbError::TooLarge { .. } => ErrorKind::Other,
            DbError::Certification(_) => ErrorKind::Certification,
            _ if self.server_code() == Some(ER_LOCK_DEADLOCK) => ErrorKind::Deadlock,
            _ if self.server_code() == Some(ER_LOCK_WAIT_TIMEOUT) => ErrorKind::LockWait,
            DbError::Driver(mysql_async::Error::Server(_)) if self.is_statement_error() => {
                ErrorKind::Other
            }
            DbError::Driver(
                mysql_async::Error::Server(_)
                | mysql_async::Error::Io(_)
                | mysql_async::Error::Driver(_),
            ) => ErrorKind::Lost,
            DbError::Driver(_) => ErrorKind::Other,
        }
    }
}
