//! The one deadline on a call to the database: a call that has no answer within
//! its limit is given up, as [`DbError::Deadline`] naming what it waited for (the
//! connection may be half-read: its owner gives it up too).

use std::future::Future;
use std::time::Duration;

use super::error::DbError;

/// Awaits `call` for at most `limit`; past it, a deadline error that says it was
/// waiting for `waiting_for` ("a named lock").
pub async fn within<T, E: Into<DbError>>(
    waiting_for: &'static str,
    limit: Duration,
    call: impl Future<Output = Result<T, E>>,
) -> Result<T, DbError> {
    match tokio::time::timeout(limit, call).await {
        Ok(answer) => answer.map_err(Into::into),
        Err(_) => Err(DbError::Deadline { waiting_for, limit }),
    }
}
