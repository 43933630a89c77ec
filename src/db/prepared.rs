//! A queue's SQL on one connection: the claim built from the user's select, and every
//! action and outcome statement prepared, with each `:name` resolved to a column or a
//! special parameter. Preparing is also validation: the server itself rejects a
//! syntax error or an unknown column before any row is touched, and the names are
//! checked against the columns it reports, by the loader's own rule.

use std::sync::Arc;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row, Statement};

use super::bind::ParamSource;
use super::error::DbError;
use super::item::{Columns, Item};
use super::key_claim::KeyClaim;
use crate::config::statement_path;
use crate::config::validate::names::{find_column, unknown_names, BuiltIn, ParamScope};
use crate::config::QueueConfig;
use crate::diagnostic::{Finding, Severity};
use crate::sql::statement::ParsedStatement;

/// Which of a queue's statement lists to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Statements {
    /// The action's statements, for `type = "sql"`.
    Action,
    OnSuccess,
    OnFailure,
    /// `[lease] sql`: takes a claimed row out of the select.
    Lease,
    /// `[lease] renew_sql`.
    Renew,
    /// `[lease] release_sql`.
    Release,
    /// `[on_release]`: a row put back to wait.
    OnRelease,
}

impl Statements {
    /// Their name in messages: `[on_success] SQL`, `[lease] sql`.
    pub fn label(self) -> &'static str {
        match self {
            Statements::Action => "[action] sql",
            Statements::OnSuccess => "[on_success] SQL",
            Statements::OnFailure => "[on_failure] SQL",
            Statements::Lease => "[lease] sql",
            Statements::Renew => "[lease] renew_sql",
            Statements::Release => "[lease] release_sql",
            Statements::OnRelease => "[on_release] SQL",
        }
    }

    /// What a worker running them waits for, in a log line.
    pub fn waiting_for(self) -> &'static str {
        match self {
            Statements::Action => "the SQL action",
            Statements::OnSuccess => "[on_success]",
            Statements::OnFailure => "[on_failure]",
            Statements::Lease => "[lease] sql",
            Statements::Renew => "[lease] renew_sql",
            Statements::Release => "[lease] release_sql",
            Statements::OnRelease => "[on_release]",
        }
    }
}

/// The statement a worker claims with: the select, then tableq's own clause.
pub fn claim_sql(select: &ParsedStatement, limit: usize) -> String {
    claim_text(&select.positional, limit)
}

/// The claim without its lock: the rows a claim would take, read without holding
/// them, for measuring what a claim reads while workers may be claiming.
pub fn unlocked_claim_sql(select: &ParsedStatement, limit: usize) -> String {
    format!("{}\nLIMIT {limit}", select.positional)
}

/// The claim for `select`'s text (with its parameters as `?`).
pub fn claim_text(select: &str, limit: usize) -> String {
    format!("{select}\nLIMIT {limit} FOR UPDATE SKIP LOCKED")
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
    /// The claim; its parameters can only be `:queue`.
    pub claim: Statement,
    /// The claim key first, where the select allows it (what the worker claims with).
    pub keys: Option<KeyClaim>,
    /// The select's columns: the item's fields.
    pub columns: Arc<Columns>,
    /// Which column is the key.
    pub key_index: usize,
    /// The action's statements, for `type = "sql"`.
    pub action: Vec<BoundStatement>,
    pub on_success: Vec<BoundStatement>,
    pub on_failure: Option<Vec<BoundStatement>>,
    pub on_release: Option<Vec<BoundStatement>>,
    /// Lease mode's `[lease]` statements (empty in transaction mode).
    pub lease: LeaseStatements,
}

/// A lease-mode queue's `[lease]` statements, prepared.
#[derive(Debug, Clone, Default)]
pub struct LeaseStatements {
    pub sql: Vec<BoundStatement>,
    pub renew: Vec<BoundStatement>,
    pub release: Vec<BoundStatement>,
}

impl PreparedQueue {
    /// Every statement prepared for the queue, to close them on a connection that
    /// lives on.
    pub fn all_statements(&self) -> impl Iterator<Item = &Statement> {
        let bound = [&self.action, &self.on_success]
            .into_iter()
            .chain(self.on_failure.as_ref())
            .chain(self.on_release.as_ref())
            .chain([&self.lease.sql, &self.lease.renew, &self.lease.release])
            .flatten()
            .map(|b| &b.statement);
        std::iter::once(&self.claim).chain(bound)
    }

    /// The claim's parameters: the queue's name for each `:queue`.
    pub fn claim_params(&self, queue: &str) -> mysql_async::Params {
        match self.claim.num_params() {
            0 => mysql_async::Params::Empty,
            n => mysql_async::Params::Positional(vec![mysql_async::Value::from(queue); n.into()]),
        }
    }

    /// A claimed row as an item: its values, in the order of the select's columns.
    pub fn item(&self, row: Row) -> Item {
        // mysql_async's `Row::unwrap`: the row's values. It panics only for a value
        // taken out of the row beforehand, which nothing does.
        Item::new(self.columns.clone(), row.unwrap(), self.key_index)
    }

    /// One of the queue's statement lists; no `[on_failure]` is an empty one.
    pub fn statements(&self, which: Statements) -> &[BoundStatement] {
        match which {
            Statements::Action => &self.action,
            Statements::OnSuccess => &self.on_success,
            Statements::OnFailure => self.on_failure.as_deref().unwrap_or_default(),
            Statements::Lease => &self.lease.sql,
            Statements::Renew => &self.lease.renew,
            Statements::Release => &self.lease.release,
            Statements::OnRelease => self.on_release.as_deref().unwrap_or_default(),
        }
    }
}

/// Why a queue's SQL could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// The queue is wrong: the server rejected a statement, or a name does not match.
    #[error("{}", crate::diagnostic::messages(.0))]
    Invalid(Vec<Finding>),
    /// The connection failed; the queue may be fine.
    #[error("{0}")]
    Database(DbError),
}

/// Prepares `queue`'s SQL on `conn`, claiming at most `limit` rows at once, none
/// larger than `max_packet`.
pub async fn prepare_queue(
    conn: &mut Conn,
    queue: &QueueConfig,
    limit: usize,
    max_packet: usize,
) -> Result<PreparedQueue, PrepareError> {
    let claim = prepare_claim(conn, queue, &queue.select.positional, limit).await?;
    let columns = columns_of(&claim);
    // `[concurrency]` skips the rows whose key is at its limit in the claim itself.
    let database = conn.opts().db_name().unwrap_or_default().to_string();
    let (claim, claim_text) = match super::key_lock::claim_select(queue, &columns, &database) {
        Ok(None) => (claim, claim_sql(&queue.select, limit)),
        Ok(Some(select)) => (
            prepare_claim(conn, queue, &select, limit).await?,
            claim_text(&select, limit),
        ),
        Err(finding) => return Err(PrepareError::Invalid(vec![finding])),
    };
    let mut findings = distinct_columns(queue, &columns.names);
    findings.extend(unknown_names(queue, &columns.names));
    let mut preparer = Preparer {
        conn,
        queue,
        columns: &columns,
        findings,
    };
    let action = match queue.action.kind().statements() {
        Some(action) => {
            preparer
                .prepare_all(&["action", action.key], action.list, false)
                .await?
        }
        None => Vec::new(),
    };
    let on_success = preparer
        .prepare_all(&["on_success", "sql"], &queue.on_success, true)
        .await?;
    let on_failure = preparer
        .prepare_optional(&["on_failure", "sql"], queue.on_failure.as_deref())
        .await?;
    let on_release = preparer
        .prepare_optional(&["on_release", "sql"], queue.on_release.as_deref())
        .await?;
    let lease = preparer.prepare_lease().await?;
    if !preparer.findings.is_empty() {
        return Err(PrepareError::Invalid(preparer.findings));
    }
    let key_index = queue
        .key
        .as_deref()
        .and_then(|key| columns.find(key))
        .unwrap_or(0);
    let claimed = (&claim, claim_text.as_str());
    let keys = KeyClaim::prepare(conn, &queue.select, claimed, key_index, limit, max_packet);
    let keys = keys.await.map_err(PrepareError::Database)?;
    Ok(PreparedQueue {
        claim,
        keys,
        columns,
        key_index,
        action,
        on_success,
        on_failure,
        on_release,
        lease,
    })
}

/// The claim's columns: what every item of the queue looks like.
fn columns_of(claim: &Statement) -> Arc<Columns> {
    Arc::new(Columns {
        names: claim
            .columns()
            .iter()
            .map(|c| c.name_str().into_owned())
            .collect(),
        types: claim.columns().iter().map(|c| c.column_type()).collect(),
    })
}

/// Prepares the claim for `select` (its parameters as `?`), at most `limit` rows.
async fn prepare_claim(
    conn: &mut Conn,
    queue: &QueueConfig,
    select: &str,
    limit: usize,
) -> Result<Statement, PrepareError> {
    match conn.prep(claim_text(select, limit)).await.map_err(DbError::from) {
        Ok(statement) => Ok(statement),
        Err(e) if e.is_statement_error() => Err(PrepareError::Invalid(vec![queue.finding(
            Severity::Error,
            &["select"],
            format!(
                "`select`: the server rejects the claim query (the select + `LIMIT {limit} FOR UPDATE SKIP LOCKED`): {e}"
            ),
        )])),
        Err(e) => Err(PrepareError::Database(e)),
    }
}

/// Prepares statements for one queue, collecting findings as it goes.
struct Preparer<'a> {
    conn: &'a mut Conn,
    queue: &'a QueueConfig,
    columns: &'a Columns,
    findings: Vec<Finding>,
}

impl Preparer<'_> {
    /// An optional outcome table's statements (`[on_failure]`, `[on_release]`).
    async fn prepare_optional(
        &mut self,
        path: &[&str],
        statements: Option<&[ParsedStatement]>,
    ) -> Result<Option<Vec<BoundStatement>>, PrepareError> {
        match statements {
            Some(statements) => Ok(Some(self.prepare_all(path, statements, true).await?)),
            None => Ok(None),
        }
    }

    async fn prepare_all(
        &mut self,
        path: &[&str],
        statements: &[ParsedStatement],
        outcome: bool,
    ) -> Result<Vec<BoundStatement>, PrepareError> {
        let mut prepared = Vec::with_capacity(statements.len());
        for (index, parsed) in statements.iter().enumerate() {
            let sources = self.resolve(parsed, outcome);
            match self
                .conn
                .prep(parsed.positional.as_str())
                .await
                .map_err(DbError::from)
            {
                Ok(statement) => prepared.push(BoundStatement { statement, sources }),
                Err(e) if e.is_statement_error() => {
                    let at = statement_path(path, index, statements.len());
                    let at: Vec<&str> = at.iter().map(String::as_str).collect();
                    let message = format!("`{}`: the server rejects it: {e}", path.join("."));
                    self.findings
                        .push(self.queue.finding(Severity::Error, &at, message));
                }
                Err(e) => return Err(PrepareError::Database(e)),
            }
        }
        Ok(prepared)
    }

    /// Prepares `[lease]`'s statements, if the queue has them.
    async fn prepare_lease(&mut self) -> Result<LeaseStatements, PrepareError> {
        let Some(lease) = self.queue.lease() else {
            return Ok(LeaseStatements::default());
        };
        let renew = lease.renew_sql.as_deref().unwrap_or_default();
        let release = lease.release_sql.as_deref().unwrap_or_default();
        Ok(LeaseStatements {
            sql: self
                .prepare_all(&["lease", "sql"], &lease.sql, false)
                .await?,
            renew: self
                .prepare_all(&["lease", "renew_sql"], renew, false)
                .await?,
            release: self
                .prepare_all(&["lease", "release_sql"], release, false)
                .await?,
        })
    }

    /// Maps each `:name` of `statement` to a special parameter or a column. A name
    /// that resolves to neither is among the findings of [`unknown_names`].
    fn resolve(&self, statement: &ParsedStatement, outcome: bool) -> Vec<ParamSource> {
        statement
            .params
            .iter()
            .filter_map(|name| {
                let scope = ParamScope {
                    outcome,
                    lease: self.queue.is_lease(),
                    scope: self.queue.scope(),
                    recurring: self.queue.rearms_rows(),
                };
                BuiltIn::named(name, scope)
                    .map(ParamSource::BuiltIn)
                    .or_else(|| find_column(&self.columns.names, name).map(ParamSource::Column))
            })
            .collect()
    }
}

/// `select` must not return two columns of one name: the item names its fields.
fn distinct_columns(queue: &QueueConfig, names: &[String]) -> Vec<Finding> {
    names
        .iter()
        .enumerate()
        .filter(|(i, column)| names[..*i].iter().any(|c| c.eq_ignore_ascii_case(column)))
        .map(|(_, column)| {
            queue.finding(
                Severity::Error,
                &["select"],
                format!("`select` returns two columns named `{column}`; give them distinct aliases (`AS …`)"),
            )
        })
        .collect()
}
