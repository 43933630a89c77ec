//! The two-session SKIP LOCKED self-test, on the queue's own claim: session A claims
//! a row and holds it; session B runs the same claim and must not get that row, nor
//! wait for it. Some servers parse SKIP LOCKED and ignore it; this catches them.
//! Both sessions roll back.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, Params, Row, Value};

use super::claim_params;
use crate::config::QueueConfig;
use crate::database::{connect, prepare_worker_session, SessionError};
use crate::queue_sql::{claim_sql, PreparedQueue};

/// How long session B may take before it counts as waiting for A's lock.
const PATIENCE: Duration = Duration::from_secs(10);

/// What the self-test found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SelfTest {
    Passed,
    /// Nothing was waiting, so there was nothing to claim twice.
    NoRow,
    /// Why the server does not honour SKIP LOCKED.
    Failed(String),
}

/// Runs the self-test for `queue` on two fresh sessions.
pub async fn skip_locked(
    queue: &QueueConfig,
    opts: &Opts,
    prepared: &PreparedQueue,
) -> Result<SelfTest, mysql_async::Error> {
    let mut a = session(opts, queue).await?;
    let mut b = session(opts, queue).await?;
    // A server that ignores SKIP LOCKED makes B wait: fail fast instead of in 50 s.
    b.query_drop("SET SESSION innodb_lock_wait_timeout = 2")
        .await?;
    let claim = claim_sql(&queue.select, 1);
    let params = claim_params(prepared.claim.sources.len(), &queue.name);
    let result = run(&mut a, &mut b, &claim, params, prepared.key_index).await;
    for conn in [a, b] {
        let mut conn = conn;
        let _ = conn.query_drop("ROLLBACK").await;
        let _ = conn.disconnect().await;
    }
    result
}

async fn run(
    a: &mut Conn,
    b: &mut Conn,
    claim: &str,
    params: Params,
    key_index: usize,
) -> Result<SelfTest, mysql_async::Error> {
    let held: Vec<Row> = a.exec(claim, params.clone()).await?;
    let Some(held) = held.first() else {
        return Ok(SelfTest::NoRow);
    };
    let held_key: Option<Value> = held.as_ref(key_index).cloned();
    let second = tokio::time::timeout(PATIENCE, b.exec::<Row, _, _>(claim, params)).await;
    let key = held_key
        .as_ref()
        .map(crate::item::value_text)
        .unwrap_or_default();
    Ok(match second {
        Err(_) => SelfTest::Failed(format!(
            "session B waited more than {}s for the row session A held (key {key}) instead of \
             skipping it",
            PATIENCE.as_secs()
        )),
        Ok(Err(mysql_async::Error::Server(e))) => SelfTest::Failed(format!(
            "session B waited for the row session A held (key {key}) instead of skipping it: {e}"
        )),
        Ok(Err(e)) => return Err(e),
        Ok(Ok(rows)) => {
            let twice = rows
                .iter()
                .any(|row| row.as_ref(key_index).cloned() == held_key);
            if twice {
                SelfTest::Failed(format!(
                    "session B claimed the row session A held (key {key}), so every worker \
                     would get the same row: the claim locks nothing (a select from a derived \
                     table or a view that is not merged?) or the server ignores SKIP LOCKED"
                ))
            } else {
                SelfTest::Passed
            }
        }
    })
}

/// A session set up as a worker's: READ COMMITTED, autocommit off.
async fn session(opts: &Opts, queue: &QueueConfig) -> Result<Conn, mysql_async::Error> {
    let mut conn = connect(opts).await?;
    match prepare_worker_session(&mut conn, queue.action.timeout()).await {
        Ok(()) => Ok(conn),
        Err(SessionError::Database(e)) => Err(e),
        Err(e @ SessionError::Isolation(_)) => Err(mysql_async::Error::Other(e.to_string().into())),
    }
}
