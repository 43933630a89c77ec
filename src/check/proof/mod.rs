//! The leave-the-query proof: processing must change a row so that the select no
//! longer returns it. On a worker's session (READ COMMITTED, autocommit off), each
//! path in an XA transaction of its own that is always rolled back ([`Xa`]): claim
//! one waiting row; on success run the SQL action and `[on_success]` with sample
//! parameters, on failure `[on_failure]`; then count the waiting rows with that
//! row's key, without locking. A row may stay for a retry only if it does not match
//! *now*. Inside XA the server refuses a COMMIT, even in a procedure, so nothing the
//! queue's SQL does is committed. HTTP and command actions never run here.
//!
//! In batch scope ([`sample`]) the path runs once for a sample of up to ten rows
//! in one `:batch`, and one more claimed row is kept out of it: every row of the
//! sample must leave the select, and no statement on the select's tables may change
//! more rows than the sample has (an outcome that forgets to join `:batch`).

mod lease;
mod sample;
mod words;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Params, Row, Value};

use super::queries::{self, WaitingRows, Xa, XaEnded};
use super::samples;
use crate::action::Outcome;
use crate::config::statement_path;
use crate::config::QueueConfig;
use crate::db::error::{describe_error, is_statement_error};
use crate::db::item::Item;
use crate::db::prepared::{claim_sql, BoundStatement, PreparedQueue};
use crate::diagnostic::{Finding, Severity};
use crate::sql::statement::{never_commits, ParsedStatement};

/// The proof's findings, or `None` when no unlocked row was waiting to prove it with.
pub async fn leaves_the_query(
    conn: &mut Conn,
    queue: &QueueConfig,
    prepared: &PreparedQueue,
) -> Result<Option<Vec<Finding>>, mysql_async::Error> {
    let Some(key) = prepared.columns.names.get(prepared.key_index) else {
        return Ok(Some(Vec::new()));
    };
    let select_params = prepared.claim_params(&queue.name);
    let with_key = match WaitingRows::prepare(conn, &queue.select, &select_params, &[key]).await {
        Ok(statement) => statement,
        Err(e) if is_statement_error(&e) => {
            return Ok(Some(vec![queue.finding(
                Severity::Warning,
                &["select"],
                format!(
                    "not proven: cannot re-read the select for one row by its key to see whether \
                     it left the queue: {}",
                    describe_error(&e)
                ),
            )]))
        }
        Err(e) => return Err(e),
    };
    let proof = Proof {
        queue,
        prepared,
        with_key,
        select_params,
        began: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    };
    proof.run(conn).await
}

struct Proof<'a> {
    queue: &'a QueueConfig,
    prepared: &'a PreparedQueue,
    /// Counts the waiting rows with a given key.
    with_key: WaitingRows,
    select_params: Params,
    /// When the proof began, in unix seconds: a time lease token's "now".
    began: u64,
}

/// One list of the queue's statements as the proof runs them.
#[derive(Clone, Copy)]
struct Run<'a> {
    /// Where they are in the file: `["on_success", "sql"]`.
    path: &'a [&'a str],
    /// Each prepared, with its text.
    statements: (&'a [BoundStatement], &'a [ParsedStatement]),
    /// Outcome SQL, which sees the outcome; else the action.
    outcome: bool,
}

impl<'a> Run<'a> {
    fn new(
        path: &'a [&'a str],
        statements: (&'a [BoundStatement], &'a [ParsedStatement]),
        outcome: bool,
    ) -> Self {
        Run {
            path,
            statements,
            outcome,
        }
    }
}

/// The first statement of `queue` that the proof runs and that might commit (see
/// [`never_commits`]), if any: without XA, nothing would stop it.
fn may_commit(queue: &QueueConfig) -> Option<&str> {
    let kind = queue.action.kind();
    let action = kind.statements().map(|s| s.list).unwrap_or_default();
    let lease = queue.lease().into_iter().flat_map(|lease| {
        let renew = lease.renew_sql.iter().flatten();
        let release = lease.release_sql.iter().flatten();
        lease.sql.iter().chain(renew).chain(release)
    });
    let outcomes = queue.outcome_statements().flat_map(|(_, list)| list);
    action
        .iter()
        .chain(outcomes)
        .chain(lease)
        .map(|s| s.text.as_str())
        .find(|sql| !never_commits(sql))
}

#[derive(Debug, Clone, Copy)]
enum Path {
    Success,
    Failure,
    /// Lease mode's whole life of a lease: see [`lease`].
    Lease,
}

/// What one XA transaction of the proof found.
enum Tried {
    /// No unlocked row was waiting.
    NoRow,
    /// The path was followed; what it found.
    Followed(Vec<Finding>),
    /// The proof cannot go on (a key that names no one row, XA refused).
    Stop(Vec<Finding>),
}

/// Where one path left the rows.
enum Ending {
    /// The rows no longer match the select.
    Leaves,
    /// The sample's row at this index still matches.
    Stays(usize),
    /// A finding says why the path could not be followed to the end.
    Stopped(Finding),
}

impl Proof<'_> {
    async fn run(&self, conn: &mut Conn) -> Result<Option<Vec<Finding>>, mysql_async::Error> {
        if self.queue.is_lease() {
            return Ok(match self.in_xa(conn, Path::Lease).await? {
                Tried::NoRow => None,
                Tried::Followed(findings) | Tried::Stop(findings) => Some(findings),
            });
        }
        let mut findings = match self.in_xa(conn, Path::Success).await? {
            Tried::NoRow => return Ok(None),
            Tried::Stop(findings) => return Ok(Some(findings)),
            Tried::Followed(findings) => findings,
        };
        if self.prepared.on_failure.is_some() {
            match self.in_xa(conn, Path::Failure).await? {
                Tried::NoRow => findings.push(self.queue.finding(
                    Severity::Warning,
                    &["on_failure"],
                    "not proven on failure: no unlocked row was waiting any more to claim again",
                )),
                Tried::Followed(more) | Tried::Stop(more) => findings.extend(more),
            }
        }
        Ok(Some(findings))
    }

    /// Claims a row in an XA transaction of its own, follows `path` with it, and
    /// rolls it all back — whatever happened.
    async fn in_xa(&self, conn: &mut Conn, path: Path) -> Result<Tried, mysql_async::Error> {
        let may_commit = may_commit(self.queue);
        let xa = match Xa::start_or_plain(conn, may_commit.is_none()).await {
            Ok(xa) => xa,
            Err(e) if is_statement_error(&e) => {
                let statement = may_commit.unwrap_or_default();
                return Ok(Tried::Stop(vec![self.queue.finding(
                    Severity::Warning,
                    &["select"],
                    format!(
                        "not proven: the server refused XA START ({}), which check needs so \
                         that nothing the queue's SQL does can commit, as `{statement}` might \
                         (only reads and changes of rows are proven in a plain transaction)",
                        describe_error(&e)
                    ),
                )]));
            }
            Err(e) => return Err(e),
        };
        let tried = self.claim_and_follow(conn, path).await;
        let ended = xa.roll_back(conn).await;
        let mut tried = tried?;
        let problem = match ended? {
            XaEnded::RolledBack => self.rolled_back_partly(conn).await?,
            XaEnded::Gone(e) => Some(self.ended_early(path, &e)),
        };
        if let (Some(problem), Tried::Followed(found) | Tried::Stop(found)) = (problem, &mut tried)
        {
            found.push(problem);
        }
        Ok(tried)
    }

    async fn claim_and_follow(
        &self,
        conn: &mut Conn,
        path: Path,
    ) -> Result<Tried, mysql_async::Error> {
        let claim = claim_sql(&self.queue.select, self.claim_size());
        let claimed: Vec<Row> = conn.exec(claim, self.select_params.clone()).await?;
        let claimed: Vec<Item> = claimed
            .into_iter()
            .map(|row| self.prepared.item(row))
            .collect();
        if claimed.is_empty() {
            return Ok(Tried::NoRow);
        }
        let sample = self.sample_of(&claimed);
        for item in sample {
            if let Some(problem) = self.key_problem(conn, item).await? {
                return Ok(Tried::Stop(vec![problem]));
            }
        }
        let found = match path {
            Path::Success => self.success(conn, sample).await?.into_iter().collect(),
            Path::Failure => self.failure(conn, sample).await?.into_iter().collect(),
            // Lease mode is item scope: the sample is the one claimed row.
            Path::Lease => self.lease(conn, &sample[0]).await?,
        };
        Ok(Tried::Followed(found))
    }

    /// A key that is NULL, or that several waiting rows share, names no one row:
    /// re-reading the select by it proves nothing.
    async fn key_problem(
        &self,
        conn: &mut Conn,
        item: &Item,
    ) -> Result<Option<Finding>, mysql_async::Error> {
        let name = self.key_name(item);
        let why = if *item.key() == Value::NULL {
            format!("`key` {name} is NULL on a waiting row")
        } else {
            let rows = self.with_key.count(conn, &[item.key().clone()]).await?;
            if rows <= 1 {
                return Ok(None);
            }
            format!(
                "`key` {name} is not unique among waiting rows ({rows} rows have {name} = {})",
                item.key_text()
            )
        };
        let at: &[&str] = if self.queue.key.is_some() {
            &["key"]
        } else {
            &["select"]
        };
        Ok(Some(self.queue.finding(
            Severity::Warning,
            at,
            format!(
                "not proven: {why}; set `key` to a column that identifies one row (unique, and \
                 never NULL)"
            ),
        )))
    }

    /// The SQL action and `[on_success]`, then: are the rows gone?
    async fn success(
        &self,
        conn: &mut Conn,
        sample: &[Item],
    ) -> Result<Option<Finding>, mysql_async::Error> {
        let kind = self.queue.action.kind();
        let sql_action = kind.in_transaction();
        let mut ending = Ending::Leaves;
        if let Some(statements) = kind.statements() {
            let action = (&self.prepared.action[..], statements.list);
            let path = ["action", statements.key];
            let run = Run::new(&path, action, false);
            ending = self
                .statements(conn, sample, run, &Outcome::success())
                .await?;
        }
        if matches!(ending, Ending::Leaves) {
            let outcome = samples::success(&self.queue.action);
            let on_success = (&self.prepared.on_success[..], &self.queue.on_success[..]);
            let run = Run::new(&["on_success", "sql"], on_success, true);
            ending = self.statements(conn, sample, run, &outcome).await?;
        }
        if matches!(ending, Ending::Leaves) {
            ending = self.still_waiting(conn, sample).await?;
        }
        Ok(match ending {
            Ending::Leaves => None,
            Ending::Stays(index) => Some(self.stays_after_success(&sample[index], sql_action)),
            Ending::Stopped(finding) => Some(finding),
        })
    }

    /// `[on_failure]`, then: do the rows match the select *now*?
    async fn failure(
        &self,
        conn: &mut Conn,
        sample: &[Item],
    ) -> Result<Option<Finding>, mysql_async::Error> {
        let (Some(prepared), Some(texts)) = (&self.prepared.on_failure, &self.queue.on_failure)
        else {
            return Ok(None);
        };
        let outcome = samples::failure(&self.queue.action);
        let run = Run::new(&["on_failure", "sql"], (prepared, texts), true);
        let mut ending = self.statements(conn, sample, run, &outcome).await?;
        if matches!(ending, Ending::Leaves) {
            ending = self.still_waiting(conn, sample).await?;
        }
        Ok(match ending {
            Ending::Leaves => None,
            Ending::Stays(index) => Some(self.stays_after_failure(&sample[index])),
            Ending::Stopped(finding) => Some(finding),
        })
    }

    /// Runs `run`'s statements for the sample; a statement's own error stops the path,
    /// and so does one that changes rows outside the sample (batch scope).
    async fn statements(
        &self,
        conn: &mut Conn,
        sample: &[Item],
        run: Run<'_>,
        outcome: &Outcome,
    ) -> Result<Ending, mysql_async::Error> {
        for (index, (bound, text)) in run.statements.0.iter().zip(run.statements.1).enumerate() {
            let params = self.params(bound, sample, run.outcome.then_some(outcome));
            let at = statement_path(run.path, index, run.statements.0.len());
            let at: Vec<&str> = at.iter().map(String::as_str).collect();
            if let Err(e) = conn.exec_drop(&bound.statement, params).await {
                return match self.stopped_by(&at, sample, &e) {
                    Some(finding) => Ok(Ending::Stopped(finding)),
                    None => Err(e),
                };
            }
            if let Some(finding) = self.overreach(&at, text, conn.affected_rows(), sample) {
                return Ok(Ending::Stopped(finding));
            }
        }
        Ok(Ending::Leaves)
    }

    /// Counts the waiting rows with each sampled row's key, without locking.
    async fn still_waiting(
        &self,
        conn: &mut Conn,
        sample: &[Item],
    ) -> Result<Ending, mysql_async::Error> {
        for (index, item) in sample.iter().enumerate() {
            let rows = self.with_key.count(conn, &[item.key().clone()]).await?;
            if rows > 0 {
                return Ok(Ending::Stays(index));
            }
        }
        Ok(Ending::Leaves)
    }

    /// After the rollback: did the server warn that a change could not be undone?
    async fn rolled_back_partly(
        &self,
        conn: &mut Conn,
    ) -> Result<Option<Finding>, mysql_async::Error> {
        if !queries::rollback_was_incomplete(conn).await? {
            return Ok(None);
        }
        Ok(Some(self.queue.finding(
            Severity::Error,
            &["action"],
            "the queue's SQL changed a table that is not transactional (not InnoDB), and check \
             could not roll that change back: tableq needs every table it writes to be InnoDB",
        )))
    }
}
