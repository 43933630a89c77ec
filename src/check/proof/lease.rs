//! The proof for `mode = "lease"`, in the same rolled-back XA transaction as
//! transaction mode's: with a claimed sample row, `[lease] sql` must take it out of
//! the select; renewal, release and outcome SQL must match no row with a wrong
//! `:lease_id`, and renewal and `[on_success]` the row with the right one; a release
//! with the right one must put the row back in the select; a day later (the session's clock moved on with `SET
//! timestamp`) the select must return it again — an expired lease is waiting — but
//! not once `[on_success]` has recorded it.

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use super::{Ending, Proof};
use crate::action::Outcome;
use crate::check::samples;
use crate::config::queue::lease::LeaseToken;
use crate::config::statement_path;
use crate::db::bind::bind;
use crate::db::item::{Item, LeaseParams, OutcomeParams};
use crate::db::prepared::BoundStatement;
use crate::diagnostic::{Finding, Severity};

/// The lease the proof takes, or one it never took.
#[derive(Debug, Clone, Copy)]
enum Token {
    Right,
    Wrong,
}

impl Token {
    /// As `[lease] token` says: a random token's sample, or a time — `now`, or 2001.
    fn text(self, kind: LeaseToken, now: u64) -> String {
        match (kind, self) {
            (LeaseToken::Random, Token::Right) => "tableq-check-lease".into(),
            (LeaseToken::Random, Token::Wrong) => "tableq-check-wrong".into(),
            (time, Token::Right) => time.at(now),
            (time, Token::Wrong) => time.at(1_000_000_000),
        }
    }
}
/// How far the proof moves the session's clock to let the lease expire.
const A_DAY_LATER: &str = "SET SESSION timestamp = UNIX_TIMESTAMP() + 86400";
const NOW_AGAIN: &str = "SET SESSION timestamp = DEFAULT";

/// One lease statement list and how many rows it should match with each lease.
struct Expect<'a> {
    path: &'a [&'a str],
    statements: &'a [BoundStatement],
    outcome: Outcome,
}

/// What running one guarded statement list showed.
enum Guarded {
    Holds,
    /// A finding; the sample row is as it was.
    Fails(Finding),
    /// It ran with a wrong lease and changed the row, or failed: the steps after it
    /// would prove nothing.
    Ignored(Finding),
}

impl Proof<'_> {
    /// Follows a lease's life with `item`; the findings of every step that fails.
    pub(super) async fn lease(
        &self,
        conn: &mut Conn,
        item: &Item,
    ) -> Result<Vec<Finding>, mysql_async::Error> {
        let lease = &self.prepared.lease;
        let took = Expect {
            path: &["lease", "sql"],
            statements: &lease.sql,
            outcome: Outcome::success(),
        };
        match self.matched(conn, item, &took, Token::Right).await? {
            Ok(0) => {
                return Ok(vec![self.lease_finding(
                    &took,
                    "matched no row: it must update the claimed row by its key",
                )])
            }
            Ok(_) => {}
            Err(stopped) => return Ok(vec![stopped]),
        }
        if !matches!(
            self.still_waiting(conn, std::slice::from_ref(item)).await?,
            Ending::Leaves
        ) {
            return Ok(vec![self.lease_finding(&took, "leaves the row in the select: it must change the row so that the select no longer returns it (a state, a lease_until in the future)")]);
        }
        let mut findings = Vec::new();
        for expect in self.guarded() {
            match self.guards(conn, item, &expect).await? {
                Guarded::Holds => {}
                Guarded::Fails(finding) => findings.push(finding),
                Guarded::Ignored(finding) => {
                    findings.push(finding);
                    return Ok(findings);
                }
            }
        }
        if let Some(finding) = self.released(conn, item).await? {
            findings.push(finding);
            return Ok(findings);
        }
        findings.extend(self.expires(conn, item).await?);
        Ok(findings)
    }

    /// `release_sql` with the right lease puts the row back in the select; then
    /// `[lease] sql` takes it again, for the steps after.
    async fn released(
        &self,
        conn: &mut Conn,
        item: &Item,
    ) -> Result<Option<Finding>, mysql_async::Error> {
        let lease = &self.prepared.lease;
        if lease.release.is_empty() {
            return Ok(None);
        }
        let release = Expect {
            path: &["lease", "release_sql"],
            statements: &lease.release,
            outcome: Outcome::success(),
        };
        match self.matched(conn, item, &release, Token::Right).await? {
            Ok(0) => return Ok(Some(self.lease_finding(&release, "did not match the leased row with its own :lease_id: a release would never put the row back"))),
            Ok(_) => {}
            Err(stopped) => return Ok(Some(stopped)),
        }
        match self.still_waiting(conn, std::slice::from_ref(item)).await? {
            Ending::Stays(_) => {}
            Ending::Leaves => return Ok(Some(self.lease_finding(&release, "leaves the row out of the select: a released row would wait for its lease to expire anyway; put it back (e.g. state = 'waiting')"))),
            Ending::Stopped(finding) => return Ok(Some(finding)),
        }
        let took = Expect {
            path: &["lease", "sql"],
            statements: &lease.sql,
            outcome: Outcome::success(),
        };
        Ok(match self.matched(conn, item, &took, Token::Right).await? {
            Ok(0) => Some(self.lease_finding(
                &took,
                "matched no row after a release: it must update the claimed row by its key",
            )),
            Ok(_) => None,
            Err(stopped) => Some(stopped),
        })
    }

    /// The renewal, release and outcome statements, each guarded by the lease.
    fn guarded(&self) -> Vec<Expect<'_>> {
        let lease = &self.prepared.lease;
        let mut all = vec![
            Expect {
                path: &["lease", "renew_sql"],
                statements: &lease.renew,
                outcome: Outcome::success(),
            },
            Expect {
                path: &["lease", "release_sql"],
                statements: &lease.release,
                outcome: Outcome::success(),
            },
            Expect {
                path: &["on_success", "sql"],
                statements: &self.prepared.on_success,
                outcome: samples::success(&self.queue.action),
            },
        ];
        if let Some(on_failure) = &self.prepared.on_failure {
            all.push(Expect {
                path: &["on_failure", "sql"],
                statements: on_failure,
                outcome: samples::failure(&self.queue.action),
            });
        }
        if let Some(on_release) = &self.prepared.on_release {
            all.push(Expect {
                path: &["on_release", "sql"],
                statements: on_release,
                outcome: Outcome {
                    release_after: Some(30),
                    ..Outcome::failure("released for 30s")
                },
            });
        }
        all
    }

    /// `expect` matches no row with a wrong `:lease_id`; a renewal also matches the
    /// row with the right one (`[on_success]` is run with it by [`Proof::expires`];
    /// the others would end the lease here).
    async fn guards(
        &self,
        conn: &mut Conn,
        item: &Item,
        expect: &Expect<'_>,
    ) -> Result<Guarded, mysql_async::Error> {
        if expect.statements.is_empty() {
            return Ok(Guarded::Holds);
        }
        match self.matched(conn, item, expect, Token::Wrong).await? {
            Ok(0) => {}
            Ok(_) => return Ok(Guarded::Ignored(self.lease_finding(expect, "matched the row with a wrong :lease_id: it must check the lease (`AND lease_id = :lease_id`)"))),
            Err(stopped) => return Ok(Guarded::Ignored(stopped)),
        }
        if expect.path != ["lease", "renew_sql"] {
            return Ok(Guarded::Holds);
        }
        Ok(match self.matched(conn, item, expect, Token::Right).await? {
            Ok(0) => Guarded::Fails(self.lease_finding(expect, "did not match the leased row with its own :lease_id: every renewal would find the lease lost")),
            Ok(_) => Guarded::Holds,
            Err(stopped) => Guarded::Ignored(stopped),
        })
    }

    /// A day later the leased row is waiting again; after `[on_success]`, not even then.
    async fn expires(
        &self,
        conn: &mut Conn,
        item: &Item,
    ) -> Result<Option<Finding>, mysql_async::Error> {
        conn.query_drop(A_DAY_LATER).await?;
        let expired = self.still_waiting(conn, std::slice::from_ref(item)).await;
        conn.query_drop(NOW_AGAIN).await?;
        if matches!(expired?, Ending::Leaves) {
            return Ok(Some(self.queue.finding(
                Severity::Error,
                &["select"],
                "a day after its lease, the row is still not in the select: a crashed worker's row \
                 would never come back; return expired leases too, e.g. `WHERE state = 'waiting' OR \
                 (state = 'rendering' AND lease_until < UTC_TIMESTAMP())`",
            )));
        }
        let success = Expect {
            path: &["on_success", "sql"],
            statements: &self.prepared.on_success,
            outcome: samples::success(&self.queue.action),
        };
        match self.matched(conn, item, &success, Token::Right).await? {
            Ok(0) => return Ok(Some(self.lease_finding(&success, "did not match the leased row with its own :lease_id: no success would ever be recorded"))),
            Ok(_) => {}
            Err(stopped) => return Ok(Some(stopped)),
        }
        conn.query_drop(A_DAY_LATER).await?;
        let after = self.still_waiting(conn, std::slice::from_ref(item)).await;
        conn.query_drop(NOW_AGAIN).await?;
        Ok(match after? {
            Ending::Leaves => None,
            _ => Some(self.lease_finding(&success, "leaves the row in the select once its lease would have expired: the row would be worked on again; change its state too")),
        })
    }

    /// Runs `expect` with `token`: how many rows its first statement matched, or the
    /// finding of a statement that failed.
    async fn matched(
        &self,
        conn: &mut Conn,
        item: &Item,
        expect: &Expect<'_>,
        token: Token,
    ) -> Result<Result<u64, Finding>, mysql_async::Error> {
        let kind = self.queue.lease().map(|l| l.token).unwrap_or_default();
        let lease_id = token.text(kind, self.began);
        let mut params: OutcomeParams = expect.outcome.params();
        params.lease = LeaseParams {
            lease_id: Some(&lease_id),
            new_lease_id: None,
            worker: Some("tableq-check"),
            progress: Some("50%"),
        };
        let mut first = None;
        for (index, bound) in expect.statements.iter().enumerate() {
            let values = bind(&bound.sources, item, &self.queue.name, &params);
            if let Err(e) = conn.exec_drop(&bound.statement, values).await {
                let at = statement_path(expect.path, index, expect.statements.len());
                let at: Vec<&str> = at.iter().map(String::as_str).collect();
                return match self.stopped_by(&at, std::slice::from_ref(item), &e) {
                    Some(finding) => Ok(Err(finding)),
                    None => Err(e),
                };
            }
            first.get_or_insert(conn.affected_rows());
        }
        Ok(Ok(first.unwrap_or_default()))
    }

    fn lease_finding(&self, expect: &Expect<'_>, problem: &str) -> Finding {
        let key = expect.path.join(".");
        self.queue
            .finding(Severity::Error, expect.path, format!("`{key}` {problem}"))
    }
}
