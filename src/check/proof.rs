//! The leave-the-query proof: processing must change a row so that the select no
//! longer returns it. On a worker's session (READ COMMITTED, autocommit off), in a
//! transaction that is always rolled back: claim one waiting row; run the SQL action
//! and `[on_success]` with sample parameters, and re-read the select for that row's
//! key; back to a savepoint; run `[on_failure]` the same way. A row may stay for a
//! retry only if it does not match *now*. HTTP and command actions never run here.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Params, Row, Statement, Value};

use super::claim_params;
use crate::config::{ActionConfig, QueueConfig};
use crate::database::{describe_error, is_statement_error};
use crate::diagnostic::{Finding, Severity};
use crate::item::{bind, Item, Outcome};
use crate::names::statement_path;
use crate::queue_sql::{claim_sql, BoundStatement, PreparedQueue};

const SAVEPOINT: &str = "SAVEPOINT tableq_check";
const BACK_TO_SAVEPOINT: &str = "ROLLBACK TO SAVEPOINT tableq_check";

/// The proof's findings, or `None` when no row was waiting to prove it with.
pub async fn leaves_the_query(
    conn: &mut Conn,
    queue: &QueueConfig,
    prepared: &PreparedQueue,
) -> Result<Option<Vec<Finding>>, mysql_async::Error> {
    let Some(key) = prepared.columns.names.get(prepared.key_index) else {
        return Ok(Some(Vec::new()));
    };
    let recheck_sql = format!(
        "SELECT 1 FROM ({}) AS tableq_check WHERE tableq_check.{} <=> ?",
        queue.select.positional,
        quote_identifier(key)
    );
    let recheck = match conn.prep(recheck_sql).await {
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
    let params = claim_params(prepared.claim.sources.len(), &queue.name);
    let claimed: Vec<Row> = conn
        .exec(claim_sql(&queue.select, 1), params.clone())
        .await?;
    let Some(row) = claimed.into_iter().next() else {
        conn.query_drop("ROLLBACK").await?;
        return Ok(None);
    };
    let item = Item {
        columns: prepared.columns.clone(),
        values: row.unwrap(),
        key_index: prepared.key_index,
    };
    let proof = Proof {
        queue,
        prepared,
        item: &item,
        recheck: &recheck,
        select_params: params,
    };
    let result = proof.run(conn).await;
    // Whatever happened, nothing the proof did may stay.
    let rolled_back = conn.query_drop("ROLLBACK").await;
    let mut findings = result?;
    rolled_back?;
    if conn.get_warnings() > 0 && not_rolled_back(conn).await? {
        findings.push(queue.finding(
            Severity::Error,
            &["action"],
            "the queue's SQL changed a table that is not transactional (not InnoDB), and check \
             could not roll that change back: tableq needs every table it writes to be InnoDB",
        ));
    }
    Ok(Some(findings))
}

/// After ROLLBACK: did the server warn that some changes could not be undone?
async fn not_rolled_back(conn: &mut Conn) -> Result<bool, mysql_async::Error> {
    // ER_WARNING_NOT_COMPLETE_ROLLBACK
    const NOT_COMPLETE_ROLLBACK: u16 = 1196;
    let warnings: Vec<Row> = conn.query("SHOW WARNINGS").await?;
    Ok(warnings.iter().any(|w| {
        w.get_opt::<u16, _>("Code")
            .and_then(Result::ok)
            .is_some_and(|code| code == NOT_COMPLETE_ROLLBACK)
    }))
}

struct Proof<'a> {
    queue: &'a QueueConfig,
    prepared: &'a PreparedQueue,
    item: &'a Item,
    recheck: &'a Statement,
    select_params: Params,
}

/// How one path (success or failure) went.
enum Path {
    /// The row no longer matches the select.
    Leaves,
    /// The row still matches.
    Stays,
    /// A finding says why the path could not be followed to the end.
    Stopped(Finding),
}

impl Proof<'_> {
    async fn run(&self, conn: &mut Conn) -> Result<Vec<Finding>, mysql_async::Error> {
        let mut findings = Vec::new();
        let sql_action = matches!(self.queue.action, ActionConfig::Sql(_));
        let success_at: &[&str] = if self.queue.on_success.is_empty() {
            &["action"]
        } else {
            &["on_success"]
        };
        conn.query_drop(SAVEPOINT).await?;
        let mut success = Path::Leaves;
        if sql_action {
            success = self
                .statements(
                    conn,
                    &["action", "sql"],
                    &self.prepared.action,
                    &Outcome::success(),
                )
                .await?;
        }
        if matches!(success, Path::Leaves) {
            let outcome = sample_success(&self.queue.action);
            success = self
                .statements(
                    conn,
                    &["on_success", "sql"],
                    &self.prepared.on_success,
                    &outcome,
                )
                .await?;
        }
        if matches!(success, Path::Leaves) {
            success = self.still_waiting(conn).await?;
        }
        match success {
            Path::Leaves => {}
            Path::Stays => findings.push(self.stays_after_success(success_at, sql_action)),
            Path::Stopped(finding) => findings.push(finding),
        }
        if let Err(e) = conn.query_drop(BACK_TO_SAVEPOINT).await {
            return self.ended(e, success_at, findings);
        }
        let Some(on_failure) = &self.prepared.on_failure else {
            return Ok(findings);
        };
        let outcome = sample_failure(&self.queue.action);
        let mut failure = self
            .statements(conn, &["on_failure", "sql"], on_failure, &outcome)
            .await?;
        if matches!(failure, Path::Leaves) {
            failure = self.still_waiting(conn).await?;
        }
        match failure {
            Path::Leaves => {}
            Path::Stays => findings.push(self.queue.finding(
                Severity::Error,
                &["on_failure"],
                format!(
                    "on failure the row stays in the queue: after [on_failure] on {} the select \
                     still returns it now, so a failing item comes straight back, at the front of \
                     the queue; change the row so it no longer matches now (a retry time in the \
                     future, or a final status)",
                    self.row()
                ),
            )),
            Path::Stopped(finding) => findings.push(finding),
        }
        if let Err(e) = conn.query_drop(BACK_TO_SAVEPOINT).await {
            return self.ended(e, &["on_failure"], findings);
        }
        Ok(findings)
    }

    /// Runs `statements` for the item; a statement's own error stops the path.
    async fn statements(
        &self,
        conn: &mut Conn,
        path: &[&str],
        statements: &[BoundStatement],
        outcome: &Outcome,
    ) -> Result<Path, mysql_async::Error> {
        for (index, bound) in statements.iter().enumerate() {
            let params = bind(&bound.sources, self.item, &self.queue.name, outcome);
            match conn.exec_drop(&bound.statement, params).await {
                Ok(()) => {}
                Err(e) if is_statement_error(&e) => {
                    let at = statement_path(path, index, statements.len());
                    let at: Vec<&str> = at.iter().map(String::as_str).collect();
                    return Ok(Path::Stopped(self.statement_failed(&at, &e)));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(Path::Leaves)
    }

    fn statement_failed(&self, at: &[&str], e: &mysql_async::Error) -> Finding {
        let key = at.iter().take(2).copied().collect::<Vec<_>>().join(".");
        if at[0] == "action" {
            // The row's data may make the action fail: that is the failure path.
            return self.queue.finding(
                Severity::Warning,
                at,
                format!(
                    "not proven on success: the SQL action fails on {}: {}",
                    self.row(),
                    describe_error(e)
                ),
            );
        }
        self.queue.finding(
            Severity::Error,
            at,
            format!(
                "`{key}` fails on {}: {}; the item would be rolled back and come straight back",
                self.row(),
                describe_error(e)
            ),
        )
    }

    /// Re-reads the select, without locking, for the claimed row's key.
    async fn still_waiting(&self, conn: &mut Conn) -> Result<Path, mysql_async::Error> {
        let mut values = match &self.select_params {
            Params::Positional(values) => values.clone(),
            _ => Vec::new(),
        };
        values.push(self.item.key().clone());
        let found: Option<Value> = conn
            .exec_first(self.recheck, Params::Positional(values))
            .await?;
        Ok(if found.is_some() {
            Path::Stays
        } else {
            Path::Leaves
        })
    }

    fn stays_after_success(&self, at: &[&str], sql_action: bool) -> Finding {
        let what = match (sql_action, self.queue.on_success.is_empty()) {
            (true, false) => "the SQL action and [on_success]",
            (true, true) => "the SQL action (there is no [on_success])",
            (false, false) => "[on_success]",
            (false, true) => "a successful action (there is no [on_success])",
        };
        self.queue.finding(
            Severity::Error,
            at,
            format!(
                "on success the row stays in the queue: after {what} on {} the select still \
                 returns it, so it would be processed again and again; change the row in \
                 [on_success] so the select no longer returns it",
                self.row()
            ),
        )
    }

    /// The savepoint is gone: a statement ended the transaction.
    fn ended(
        &self,
        e: mysql_async::Error,
        at: &[&str],
        mut findings: Vec<Finding>,
    ) -> Result<Vec<Finding>, mysql_async::Error> {
        if !is_statement_error(&e) {
            return Err(e);
        }
        findings.push(self.queue.finding(
            Severity::Error,
            at,
            format!(
                "a statement ended the transaction the item's lock lives in (a procedure that \
                 COMMITs?): its work may have been committed by check: {}",
                describe_error(&e)
            ),
        ));
        Ok(findings)
    }

    fn row(&self) -> String {
        let names = &self.item.columns.names;
        let key = names.get(self.item.key_index).map_or("key", String::as_str);
        format!("row {key} = {}", self.item.key_text())
    }
}

/// What a successful action binds: an HTTP 200 or exit status 0 with empty output;
/// NULL for an SQL action.
fn sample_success(action: &ActionConfig) -> Outcome {
    match action {
        ActionConfig::Sql(_) => Outcome::success(),
        ActionConfig::Http(_) => Outcome {
            status: Some(200),
            output: Some(Vec::new()),
            ..Outcome::success()
        },
        ActionConfig::Command(_) => Outcome {
            status: Some(0),
            output: Some(Vec::new()),
            ..Outcome::success()
        },
    }
}

/// What a failed action binds: `:error` = 'tableq check', an HTTP 500 or exit
/// status 1 (NULL for SQL), empty output.
fn sample_failure(action: &ActionConfig) -> Outcome {
    let status = match action {
        ActionConfig::Sql(_) => None,
        ActionConfig::Http(_) => Some(500),
        ActionConfig::Command(_) => Some(1),
    };
    Outcome {
        error: Some("tableq check".to_string()),
        status,
        output: Some(Vec::new()),
        retry_after: None,
    }
}

fn quote_identifier(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}
