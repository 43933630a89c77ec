//! The claim: which index it can use, the statement each side sends for it, and
//! what EXPLAIN says the server walks to answer it.

use anyhow::bail;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};

/// Which index the claim can use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Claim {
    /// The article's table as it is: `INDEX (status, retry_at)`.
    Article,
    /// Plus `INDEX status_id (status, id)`, left to the optimizer.
    StatusId,
    /// Plus `INDEX status_id (status, id)`, and `FORCE INDEX (status_id)` in the claim.
    Forced,
}

impl Claim {
    pub const ALL: [Claim; 3] = [Claim::Article, Claim::StatusId, Claim::Forced];

    /// The claim called `name` on the command line: article, status_id, forced.
    pub fn named(name: &str) -> Option<Claim> {
        match name {
            "article" => Some(Claim::Article),
            "status_id" => Some(Claim::StatusId),
            "forced" => Some(Claim::Forced),
            _ => None,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Claim::Article => "(status, retry_at)",
            Claim::StatusId => "+ (status, id)",
            Claim::Forced => "+ (status, id) FORCE",
        }
    }

    /// Whether the table has `INDEX status_id (status, id)`.
    pub fn extra_index(self) -> bool {
        !matches!(self, Claim::Article)
    }

    /// The hand-written worker's claim: the article's, one id.
    pub fn raw_sql(self) -> String {
        format!(
            "SELECT id FROM email{} WHERE status = 'waiting' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED",
            self.hint()
        )
    }

    /// The queue's select: the same predicate and order as the raw claim, and the
    /// article's columns, so the item arrives with the claim.
    pub fn select(self, table: &str) -> String {
        format!(
            "SELECT id, recipient, subject, body, attempts FROM {table}{} WHERE status = 'waiting' ORDER BY id",
            self.hint()
        )
    }

    /// tableq's claim of up to `batch` items: the queue's select, locked.
    pub fn tableq_sql(self, table: &str, batch: usize) -> String {
        format!(
            "{} LIMIT {batch} FOR UPDATE SKIP LOCKED",
            self.select(table)
        )
    }

    fn hint(self) -> &'static str {
        match self {
            Claim::Forced => " FORCE INDEX (status_id)",
            _ => "",
        }
    }
}

/// EXPLAIN's verdict on a claim: the index it walks, and a filesort if it sorts.
pub async fn explain(admin: &mut Conn, sql: &str) -> anyhow::Result<String> {
    let rows: Vec<Row> = admin.query(format!("EXPLAIN {sql}")).await?;
    let Some(row) = rows.first() else {
        bail!("EXPLAIN returned nothing for {sql}");
    };
    let key: Option<String> = row.get_opt("key").and_then(Result::ok).flatten();
    let extra: Option<String> = row.get_opt("Extra").and_then(Result::ok).flatten();
    let mut plan = key.unwrap_or_else(|| "none (full scan)".into());
    if extra.is_some_and(|e| e.contains("filesort")) {
        plan.push_str(" + filesort");
    }
    Ok(plan)
}
