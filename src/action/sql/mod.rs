//! `type = "sql"`: the action's statements run in the item's own transaction, so the
//! work and the row's change commit together — exactly once by construction.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};
use tokio::time::Instant;

use crate::db::connect::{describe_error, is_statement_error, kill, Kill};
use crate::db::item::{bind, Item, Outcome};
use crate::db::prepared::BoundStatement;

/// How long a statement may take to return after KILL QUERY before the connection
/// is given up.
const KILL_GRACE: Duration = Duration::from_secs(10);

/// Runs the action's statements for `item`, stopping at the first that fails. A
/// statement's own error, or running past `timeout`, is a failed [`Outcome`]; an
/// `Err` means the transaction is lost and the item returns to the queue.
pub async fn run(
    conn: &mut Conn,
    statements: &[BoundStatement],
    item: &Item,
    queue: &str,
    timeout: Duration,
    opts: &Opts,
) -> Result<Outcome, mysql_async::Error> {
    let deadline = Instant::now() + timeout;
    for bound in statements {
        let params = bind(&bound.sources, item, queue, &Outcome::success());
        let connection_id = conn.id();
        let execution = conn.exec_drop(&bound.statement, params);
        tokio::pin!(execution);
        let result = match tokio::time::timeout_at(deadline, &mut execution).await {
            Ok(result) => result,
            Err(_elapsed) => {
                // Interrupt the statement server-side; the transaction stays open and
                // the caller rolls back to the item's savepoint.
                let killed = kill(opts, connection_id, Kill::Query).await;
                let finished = match killed {
                    Ok(()) => tokio::time::timeout(KILL_GRACE, execution).await.ok(),
                    Err(_) => None,
                };
                return match finished {
                    Some(Ok(())) => Ok(timed_out(timeout)),
                    Some(Err(e)) if is_statement_error(&e) || is_interrupted(&e) => {
                        Ok(timed_out(timeout))
                    }
                    Some(Err(e)) => Err(e),
                    None => {
                        // The statement would not stop: end the session, so the server
                        // rolls back and lets go of the locks now, not when it finishes.
                        let _ = kill(opts, connection_id, Kill::Connection).await;
                        Err(mysql_async::Error::Other(
                            "the action's statement could not be interrupted".into(),
                        ))
                    }
                };
            }
        };
        match result {
            Ok(()) => {}
            Err(e) if is_statement_error(&e) => return Ok(Outcome::failure(describe_error(&e))),
            Err(e) => return Err(e),
        }
    }
    Ok(Outcome::success())
}

fn timed_out(timeout: Duration) -> Outcome {
    Outcome::failure(format!(
        "timed out after {}",
        humantime::format_duration(timeout)
    ))
}

fn is_interrupted(e: &mysql_async::Error) -> bool {
    matches!(e, mysql_async::Error::Server(s) if s.code == crate::db::connect::ER_QUERY_INTERRUPTED)
}
