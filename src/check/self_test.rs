//! The two-session SKIP LOCKED self-test, on the queue's own claim: session A claims
//! a row and holds it; session B runs the same claim and must not get that row, nor
//! wait for it. Some servers parse SKIP LOCKED and ignore it; this catches them. And
//! when B gets nothing although other rows wait, the claim locks more than the row
//! it returns (a joined row every claim shares): workers would take turns. Rows are
//! told apart by every value the select returns, not by `key` alone. Both sessions
//! roll back.

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Params, Row, Value};

use super::queries::{self, WaitingRows};
use crate::config::QueueConfig;
use crate::db::error::is_statement_error;
use crate::db::prepared::{claim_sql, PreparedQueue};
use crate::db::session::{worker_connection, SessionSettings};
use crate::db::value::value_text;
use crate::db::Database;
use crate::diagnostic::{Finding, Severity};
use crate::sql::shape::from_tables;

/// How long session B may take at least before it counts as waiting for A's lock.
const PATIENCE: Duration = Duration::from_secs(10);
/// How many times as long as A's claim B's may take, for a claim that is slow anyway.
const SLOWER: u32 = 5;
/// A server that ignores SKIP LOCKED makes B wait: fail fast instead of in 50 s.
const B_LOCK_WAIT_SECONDS: u32 = 2;

/// What the self-test found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SelfTest {
    Passed,
    /// Nothing unlocked was waiting, so there was nothing to claim twice.
    NoRow,
    /// Why the server does not honour SKIP LOCKED.
    Failed(String),
    /// Session B claimed nothing although `waiting` rows are waiting; `joined`
    /// names the select's tables other than the key's.
    TakesTurns {
        waiting: u64,
        joined: Vec<String>,
    },
    /// B's row had the same values as A's, as this many waiting rows do.
    CannotTell(u64),
}

/// Runs the self-test for `queue` on two fresh sessions.
pub async fn skip_locked(
    queue: &QueueConfig,
    database: &Database,
    prepared: &PreparedQueue,
) -> Result<SelfTest, mysql_async::Error> {
    let mut a = session(database, queue, queries::LOCK_WAIT_SECONDS).await?;
    let mut b = session(database, queue, B_LOCK_WAIT_SECONDS).await?;
    let test = Test {
        queue,
        prepared,
        claim: claim_sql(&queue.select, 1),
        params: prepared.claim_params(&queue.name),
    };
    let result = test.run(&mut a, &mut b).await;
    for conn in [a, b] {
        let mut conn = conn;
        let _ = conn.query_drop("ROLLBACK").await;
        let _ = conn.disconnect().await;
    }
    result
}

/// How long B may take, when A's claim took `a_took`: a slow claim is not a wait.
pub fn patience(a_took: Duration) -> Duration {
    PATIENCE.max(a_took * SLOWER)
}

struct Test<'a> {
    queue: &'a QueueConfig,
    prepared: &'a PreparedQueue,
    claim: String,
    params: Params,
}

impl Test<'_> {
    async fn run(&self, a: &mut Conn, b: &mut Conn) -> Result<SelfTest, mysql_async::Error> {
        let started = Instant::now();
        let held: Vec<Row> = a.exec(&self.claim, self.params.clone()).await?;
        let patience = patience(started.elapsed());
        let Some(held) = held.into_iter().next() else {
            return Ok(SelfTest::NoRow);
        };
        // mysql_async's `Row::unwrap`: the row's values (it cannot panic here).
        let held = held.unwrap();
        let second = b.exec::<Row, _, _>(&self.claim, self.params.clone());
        Ok(match tokio::time::timeout(patience, second).await {
            Err(_) => SelfTest::Failed(format!(
                "session B waited more than {}s for the row session A held ({}) instead of \
                 skipping it",
                patience.as_secs(),
                self.row(&held)
            )),
            Ok(Err(mysql_async::Error::Server(e))) => SelfTest::Failed(format!(
                "session B waited for the row session A held ({}) instead of skipping it: {e}",
                self.row(&held)
            )),
            Ok(Err(e)) => return Err(e),
            Ok(Ok(rows)) => self.judge(b, &held, rows).await?,
        })
    }

    /// B claimed `rows` while A held `held`.
    async fn judge(
        &self,
        b: &mut Conn,
        held: &[Value],
        rows: Vec<Row>,
    ) -> Result<SelfTest, mysql_async::Error> {
        let Some(got) = rows.into_iter().next() else {
            return Ok(match self.waiting(b, &[], &[]).await? {
                Some(waiting) if waiting >= 2 => SelfTest::TakesTurns {
                    waiting,
                    joined: self.joined_tables(),
                },
                _ => SelfTest::Passed,
            });
        };
        if got.unwrap() != held {
            return Ok(SelfTest::Passed);
        }
        // The same values: the same row, unless several rows have them all.
        let columns: Vec<&str> = self
            .prepared
            .columns
            .names
            .iter()
            .map(String::as_str)
            .collect();
        Ok(match self.waiting(b, &columns, held).await? {
            Some(twins) if twins >= 2 => SelfTest::CannotTell(twins),
            _ => SelfTest::Failed(format!(
                "session B claimed the row session A held ({}), so every worker would get the \
                 same row: the claim locks nothing (a select from a derived table or a view \
                 that is not merged?) or the server ignores SKIP LOCKED",
                self.row(held)
            )),
        })
    }

    /// Waiting rows with `values` in `columns`, counted without locking; `None` when
    /// the server cannot count them so.
    async fn waiting(
        &self,
        conn: &mut Conn,
        columns: &[&str],
        values: &[Value],
    ) -> Result<Option<u64>, mysql_async::Error> {
        let select = &self.queue.select;
        match WaitingRows::prepare(conn, select, &self.params, columns).await {
            Ok(rows) => rows.count(conn, values).await.map(Some),
            Err(e) if is_statement_error(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The select's tables other than the one its key column comes from (the
    /// first, when the server does not say).
    fn joined_tables(&self) -> Vec<String> {
        let columns = self.prepared.claim.columns();
        let main = columns
            .get(self.prepared.key_index)
            .map(|c| c.org_table_str().into_owned())
            .filter(|name| !name.is_empty());
        let tables = from_tables(&self.queue.select.text);
        let joined = tables.iter().enumerate().filter(|(i, t)| match &main {
            Some(main) => !t.name.eq_ignore_ascii_case(main),
            None => *i > 0,
        });
        joined.map(|(_, t)| t.name.clone()).collect()
    }

    /// `id = 1`: the row by its key.
    fn row(&self, values: &[Value]) -> String {
        let index = self.prepared.key_index;
        let name = self
            .prepared
            .columns
            .names
            .get(index)
            .map_or("key", String::as_str);
        let value = values.get(index).map(value_text).unwrap_or_default();
        format!("{name} = {value}")
    }
}

impl SelfTest {
    /// What the self-test has to say about `queue`, if anything.
    pub fn finding(&self, queue: &QueueConfig) -> Option<Finding> {
        let (severity, message) = match self {
            SelfTest::Passed | SelfTest::NoRow => return None,
            SelfTest::Failed(why) => (
                Severity::Error,
                format!("the two-session SKIP LOCKED self-test failed: {why}"),
            ),
            SelfTest::TakesTurns { waiting, joined } => {
                (Severity::Warning, takes_turns(*waiting, joined))
            }
            SelfTest::CannotTell(twins) => (
                Severity::Warning,
                format!(
                    "the two-session SKIP LOCKED self-test cannot tell session B's row from \
                     session A's: {twins} waiting rows have the same value in every column the \
                     select returns; return the table's primary key too"
                ),
            ),
        };
        Some(queue.finding(severity, &["select"], message))
    }
}

/// B got nothing although rows wait: say what the claim locks besides its rows.
fn takes_turns(waiting: u64, joined: &[String]) -> String {
    let (cause, advice) = if joined.is_empty() {
        (
            "the claim locks more rows than it returns (one that sorts keeps every row it \
             sorted locked)"
                .to_string(),
            "drive it with an index: the WHERE's equality columns, then the ORDER BY columns"
                .to_string(),
        )
    } else {
        let joined = joined.join(", ");
        (
            format!("the claim also locks the rows it joins from {joined}"),
            format!("test {joined} in an `EXISTS (SELECT …)` subquery instead of joining it"),
        )
    };
    format!(
        "workers would take turns: in the two-session SKIP LOCKED self-test, session B claimed \
         nothing while session A held one row, although {waiting} rows are waiting — {cause}, \
         so one worker's claim blocks the others; {advice}"
    )
}

/// A session set up as a worker's (READ COMMITTED, autocommit off) that waits at
/// most `lock_wait_seconds` for a row lock.
async fn session(
    database: &Database,
    queue: &QueueConfig,
    lock_wait_seconds: u32,
) -> Result<Conn, mysql_async::Error> {
    let mut conn = worker_connection(database, &SessionSettings::for_queue(queue))
        .await
        .map_err(|e| mysql_async::Error::Other(e.to_string().into()))?;
    queries::limit_lock_waits(&mut conn, lock_wait_seconds).await?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_claim_gets_more_patience() {
        assert_eq!(patience(Duration::from_millis(3)), PATIENCE);
        assert_eq!(patience(Duration::from_secs(2)), PATIENCE);
        assert_eq!(patience(Duration::from_secs(4)), Duration::from_secs(20));
    }
}
