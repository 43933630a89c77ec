//! A queue's SQL on one connection: the claim built from the user's select, and every
//! action and outcome statement prepared, with each `:name` resolved to a column or a
//! special parameter. Preparing is also validation: the server itself rejects a
//! syntax error or an unknown column before any row is touched.

use std::sync::Arc;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Statement};

use crate::config::names::{statement_path, unknown_key, unknown_param, unknown_placeholder};
use crate::config::{ActionConfig, QueueConfig};
use crate::db::connect::{describe_error, is_statement_error};
use crate::db::item::{Columns, ParamSource};
use crate::diagnostic::{Finding, Severity};
use crate::sql::statement::ParsedStatement;

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
    /// The select's columns: the item's fields.
    pub columns: Arc<Columns>,
    /// Which column is the key.
    pub key_index: usize,
    /// The action's statements, for `type = "sql"`.
    pub action: Vec<BoundStatement>,
    pub on_success: Vec<BoundStatement>,
    pub on_failure: Option<Vec<BoundStatement>>,
}

impl PreparedQueue {
    /// The claim's parameters: it can only use `:queue`.
    pub fn claim_params(&self, queue: &str) -> mysql_async::Params {
        match self.claim.sources.len() {
            0 => mysql_async::Params::Empty,
            n => mysql_async::Params::Positional(vec![mysql_async::Value::from(queue); n]),
        }
    }
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
    let claim = match conn.prep(claim_sql(&queue.select, limit)).await {
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
    let columns = Arc::new(Columns {
        names: claim
            .columns()
            .iter()
            .map(|c| c.name_str().into_owned())
            .collect(),
        types: claim.columns().iter().map(|c| c.column_type()).collect(),
    });
    let mut preparer = Preparer {
        conn,
        queue,
        columns: &columns,
        findings: Vec::new(),
    };
    let claim_sources = preparer.resolve(&["select"], &queue.select, false);
    preparer.check_distinct_columns();
    preparer.check_placeholders();
    let key_index = preparer.key_index();
    let action = match &queue.action {
        ActionConfig::Sql(sql) => {
            preparer
                .prepare_all(&["action", "sql"], &sql.statements, false)
                .await?
        }
        ActionConfig::Http(_) | ActionConfig::Command(_) => Vec::new(),
    };
    let on_success = preparer
        .prepare_all(&["on_success", "sql"], &queue.on_success, true)
        .await?;
    let on_failure = match &queue.on_failure {
        Some(statements) => Some(
            preparer
                .prepare_all(&["on_failure", "sql"], statements, true)
                .await?,
        ),
        None => None,
    };
    if !preparer.findings.is_empty() {
        return Err(PrepareError::Invalid(preparer.findings));
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

/// Prepares statements for one queue, collecting findings as it goes.
struct Preparer<'a> {
    conn: &'a mut Conn,
    queue: &'a QueueConfig,
    columns: &'a Columns,
    findings: Vec<Finding>,
}

impl Preparer<'_> {
    fn error(&mut self, at: &[&str], message: String) {
        self.findings
            .push(self.queue.finding(Severity::Error, at, message));
    }

    async fn prepare_all(
        &mut self,
        path: &[&str],
        statements: &[ParsedStatement],
        outcome: bool,
    ) -> Result<Vec<BoundStatement>, PrepareError> {
        let mut prepared = Vec::with_capacity(statements.len());
        for (index, parsed) in statements.iter().enumerate() {
            let at = statement_path(path, index, statements.len());
            let at: Vec<&str> = at.iter().map(String::as_str).collect();
            let sources = self.resolve(&at, parsed, outcome);
            match self.conn.prep(parsed.positional.as_str()).await {
                Ok(statement) => prepared.push(BoundStatement { statement, sources }),
                Err(e) if is_statement_error(&e) => self.error(
                    &at,
                    format!(
                        "`{}`: the server rejects it: {}",
                        path.join("."),
                        describe_error(&e)
                    ),
                ),
                Err(e) => return Err(PrepareError::Database(e)),
            }
        }
        Ok(prepared)
    }

    /// Maps each `:name` of `statement` to a special parameter or a column.
    fn resolve(
        &mut self,
        at: &[&str],
        statement: &ParsedStatement,
        outcome: bool,
    ) -> Vec<ParamSource> {
        let mut sources = Vec::with_capacity(statement.params.len());
        for name in &statement.params {
            // A special parameter wins over a column of the same name (the article's
            // table has a `status` column): alias the column to use it.
            let source = ParamSource::special(name, outcome)
                .or_else(|| self.columns.find(name).map(ParamSource::Column));
            match source {
                Some(source) => sources.push(source),
                None => {
                    let key: Vec<&str> = at
                        .iter()
                        .take_while(|s| s.parse::<usize>().is_err())
                        .copied()
                        .collect();
                    let message = unknown_param(&key.join("."), name, &self.columns.names, outcome);
                    self.error(at, message);
                }
            }
        }
        sources
    }

    /// Every `{placeholder}` of an HTTP or command action names a column, or `queue`.
    fn check_placeholders(&mut self) {
        let problems: Vec<(String, String)> = self
            .queue
            .action
            .placeholders()
            .into_iter()
            .filter(|(_, name)| *name != "queue" && self.columns.find(name).is_none())
            .map(|(key, name)| (key, name.to_string()))
            .collect();
        for (key, name) in problems {
            let path: Vec<&str> = key.split('.').collect();
            let message = unknown_placeholder(&key, &name, &self.columns.names);
            self.error(&path, message);
        }
    }

    fn check_distinct_columns(&mut self) {
        let names = &self.columns.names;
        let duplicates: Vec<String> = names
            .iter()
            .enumerate()
            .filter(|(i, column)| names[..*i].iter().any(|c| c.eq_ignore_ascii_case(column)))
            .map(|(_, column)| column.clone())
            .collect();
        for column in duplicates {
            self.error(
                &["select"],
                format!("`select` returns two columns named `{column}`; give them distinct aliases (`AS …`)"),
            );
        }
    }

    fn key_index(&mut self) -> usize {
        let Some(key) = &self.queue.key else { return 0 };
        match self.columns.find(key) {
            Some(index) => index,
            None => {
                let message = unknown_key(key, &self.columns.names);
                self.error(&["key"], message);
                0
            }
        }
    }
}
