//! A queue's SQL on one connection: the claim built from the user's select, and every
//! action and outcome statement prepared, with each `:name` resolved to a column or a
//! special parameter. Preparing is also validation: the server itself rejects a
//! syntax error or an unknown column before any row is touched.

use std::sync::Arc;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Statement};

use crate::config::{ActionConfig, QueueConfig};
use crate::database::{describe_error, is_statement_error};
use crate::diagnostic::{Finding, Severity};
use crate::item::{ParamSource, OUTCOME_PARAMS};
use crate::sql_text::ParsedStatement;

/// The statement a worker claims with: the select, then tableq's own clause.
pub fn claim_sql(select: &ParsedStatement, limit: usize) -> String {
    format!(
        "{}\nLIMIT {limit} FOR UPDATE SKIP LOCKED",
        select.positional
    )
}

/// A prepared statement and where each of its parameters comes from.
#[derive(Debug, Clone)]
pub struct BoundStatement {
    pub statement: Statement,
    pub sources: Vec<ParamSource>,
}

/// Every statement of a queue, prepared on one connection.
#[derive(Debug, Clone)]
pub struct PreparedQueue {
    pub claim: BoundStatement,
    /// The select's column names: the item's fields.
    pub columns: Arc<[String]>,
    /// Which column is the key.
    pub key_index: usize,
    /// The action's statements, for `type = "sql"`.
    pub action: Vec<BoundStatement>,
    pub on_success: Vec<BoundStatement>,
    pub on_failure: Option<Vec<BoundStatement>>,
}

/// Why a queue's SQL could not be prepared.
#[derive(Debug)]
pub enum PrepareError {
    /// The queue is wrong: the server rejected a statement, or a name does not match.
    Invalid(Vec<Finding>),
    /// The connection failed; the queue may be fine.
    Database(mysql_async::Error),
}

/// Prepares `queue`'s SQL on `conn`, claiming at most `limit` rows at once.
pub async fn prepare_queue(
    conn: &mut Conn,
    queue: &QueueConfig,
    limit: usize,
) -> Result<PreparedQueue, PrepareError> {
    let mut findings = Vec::new();
    let claim_text = claim_sql(&queue.select, limit);
    let claim = match conn.prep(claim_text.as_str()).await {
        Ok(statement) => statement,
        Err(e) if is_statement_error(&e) => {
            return Err(PrepareError::Invalid(vec![queue.finding(
                Severity::Error,
                &["select"],
                format!(
                    "`select`: the server rejects the claim query (the select + `LIMIT {limit} FOR UPDATE SKIP LOCKED`): {}",
                    describe_error(&e)
                ),
            )]))
        }
        Err(e) => return Err(PrepareError::Database(e)),
    };
    let columns: Arc<[String]> = claim
        .columns()
        .iter()
        .map(|c| c.name_str().into_owned())
        .collect();
    let claim_sources = resolve(
        queue,
        &["select"],
        &queue.select,
        &columns,
        false,
        &mut findings,
    );
    check_distinct_columns(queue, &columns, &mut findings);
    let key_index = key_index(queue, &columns, &mut findings);

    let action = match &queue.action {
        ActionConfig::Sql(sql) => {
            prepare_all(
                conn,
                queue,
                &["action", "sql"],
                &sql.statements,
                &columns,
                false,
                &mut findings,
            )
            .await?
        }
    };
    let on_success = prepare_all(
        conn,
        queue,
        &["on_success", "sql"],
        &queue.on_success,
        &columns,
        true,
        &mut findings,
    )
    .await?;
    let on_failure = match &queue.on_failure {
        Some(statements) => Some(
            prepare_all(
                conn,
                queue,
                &["on_failure", "sql"],
                statements,
                &columns,
                true,
                &mut findings,
            )
            .await?,
        ),
        None => None,
    };
    if !findings.is_empty() {
        return Err(PrepareError::Invalid(findings));
    }
    Ok(PreparedQueue {
        claim: BoundStatement {
            statement: claim,
            sources: claim_sources,
        },
        columns,
        key_index,
        action,
        on_success,
        on_failure,
    })
}

async fn prepare_all(
    conn: &mut Conn,
    queue: &QueueConfig,
    path: &[&str],
    statements: &[ParsedStatement],
    columns: &[String],
    outcome: bool,
    findings: &mut Vec<Finding>,
) -> Result<Vec<BoundStatement>, PrepareError> {
    let mut prepared = Vec::with_capacity(statements.len());
    for (index, parsed) in statements.iter().enumerate() {
        let index_text = index.to_string();
        let mut at = path.to_vec();
        if statements.len() > 1 {
            at.push(&index_text);
        }
        let sources = resolve(queue, &at, parsed, columns, outcome, findings);
        match conn.prep(parsed.positional.as_str()).await {
            Ok(statement) => prepared.push(BoundStatement { statement, sources }),
            Err(e) if is_statement_error(&e) => findings.push(queue.finding(
                Severity::Error,
                &at,
                format!(
                    "`{}`: the server rejects it: {}",
                    path.join("."),
                    describe_error(&e)
                ),
            )),
            Err(e) => return Err(PrepareError::Database(e)),
        }
    }
    Ok(prepared)
}

/// Maps each `:name` of `statement` to a column (exact name first, then a unique
/// case-insensitive match, as MySQL compares column names) or a special parameter.
fn resolve(
    queue: &QueueConfig,
    at: &[&str],
    statement: &ParsedStatement,
    columns: &[String],
    outcome: bool,
    findings: &mut Vec<Finding>,
) -> Vec<ParamSource> {
    let mut sources = Vec::with_capacity(statement.params.len());
    for name in &statement.params {
        let exact = columns.iter().position(|c| c == name);
        let folded: Vec<usize> = (0..columns.len())
            .filter(|&i| columns[i].eq_ignore_ascii_case(name))
            .collect();
        let source = exact
            .or(if folded.len() == 1 {
                Some(folded[0])
            } else {
                None
            })
            .map(ParamSource::Column)
            .or_else(|| ParamSource::special(name, outcome));
        match source {
            Some(source) => sources.push(source),
            None => {
                let specials = if outcome { OUTCOME_PARAMS } else { ":queue" };
                findings.push(queue.finding(
                    Severity::Error,
                    at,
                    format!(
                        "`{}` uses `:{name}`, which is not a column the select returns ({}) nor one of {specials}",
                        at.iter().take_while(|s| s.parse::<usize>().is_err()).copied().collect::<Vec<_>>().join("."),
                        columns.join(", ")
                    ),
                ));
            }
        }
    }
    sources
}

fn check_distinct_columns(queue: &QueueConfig, columns: &[String], findings: &mut Vec<Finding>) {
    for (i, column) in columns.iter().enumerate() {
        if columns[..i].iter().any(|c| c.eq_ignore_ascii_case(column)) {
            findings.push(queue.finding(
                Severity::Error,
                &["select"],
                format!("`select` returns two columns named `{column}`; give them distinct aliases (`AS …`)"),
            ));
        }
    }
}

fn key_index(queue: &QueueConfig, columns: &[String], findings: &mut Vec<Finding>) -> usize {
    let Some(key) = &queue.key else { return 0 };
    match columns.iter().position(|c| c.eq_ignore_ascii_case(key)) {
        Some(index) => index,
        None => {
            findings.push(queue.finding(
                Severity::Error,
                &["key"],
                format!(
                    "`key` = {key:?} is not a column the select returns ({})",
                    columns.join(", ")
                ),
            ));
            0
        }
    }
}
