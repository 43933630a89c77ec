//! The article's email table, as `config/email.sql` has it: created under any name,
//! with or without an index for the claim, filled with waiting rows, and checked
//! after a drain.

use anyhow::{ensure, Context};
use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use crate::claim::Claim;

/// The article's schema, from the file the demo and the docs use.
const EMAIL_SQL: &str = include_str!("../../config/email.sql");

/// The columns a fill writes; the others keep their defaults (`status` waiting).
const COLUMNS: &str = "recipient, subject, body";

/// Drops and recreates `email` with `rows` waiting emails and the claim's indexes.
pub async fn fresh(admin: &mut Conn, claim: Claim, rows: u64) -> anyhow::Result<()> {
    create(admin, "email", claim.extra_index()).await?;
    fill(admin, "email", rows).await
}

/// The article's email table, as `config/email.sql` has it, named `table`; with
/// `status_id` = `INDEX (status, id)` added if asked.
pub async fn create(admin: &mut Conn, table: &str, status_id: bool) -> anyhow::Result<()> {
    let start = EMAIL_SQL
        .find("CREATE TABLE email (")
        .context("config/email.sql has no CREATE TABLE email")?;
    let end = start
        + EMAIL_SQL[start..]
            .find(';')
            .context("config/email.sql: no `;`")?;
    let ddl = EMAIL_SQL[start..end].replacen("TABLE email", &format!("TABLE {table}"), 1);
    admin
        .query_drop(format!("DROP TABLE IF EXISTS {table}"))
        .await?;
    admin.query_drop(ddl).await?;
    if status_id {
        admin
            .query_drop(format!(
                "ALTER TABLE {table} ADD INDEX status_id (status, id)"
            ))
            .await?;
    }
    Ok(())
}

/// Inserts `rows` waiting emails into `table`, then has the server ANALYZE it.
pub async fn fill(admin: &mut Conn, table: &str, rows: u64) -> anyhow::Result<()> {
    insert_waiting(admin, table, rows).await?;
    admin.query_drop(format!("ANALYZE TABLE {table}")).await?;
    Ok(())
}

/// Checks that the `email` table holds `n` rows, every one of them sent.
pub async fn verify_sent(admin: &mut Conn, n: u64) -> anyhow::Result<()> {
    let (sent, total): (u64, u64) = admin
        .query_first("SELECT COALESCE(SUM(status = 'sent'), 0), COUNT(*) FROM email")
        .await?
        .unwrap_or_default();
    ensure!(
        sent == n && total == n,
        "{sent} of {total} rows sent, expected {n}"
    );
    Ok(())
}

/// Inserts `rows` waiting emails: MariaDB's SEQUENCE engine in chunks, or, on a
/// server without it, doubling the table with INSERT … SELECT.
async fn insert_waiting(admin: &mut Conn, table: &str, rows: u64) -> anyhow::Result<()> {
    const CHUNK: u64 = 100_000;
    let mut first = 1;
    while first <= rows {
        let last = (first + CHUNK - 1).min(rows);
        let sequence = format!(
            "INSERT INTO {table} ({COLUMNS}) SELECT CONCAT('user', seq, '@example.com'), \
             CONCAT('Hello #', seq), 'This is the body of the email.' FROM seq_{first}_to_{last}"
        );
        match admin.query_drop(sequence).await {
            Ok(()) => first = last + 1,
            Err(mysql_async::Error::Server(_)) if first == 1 => {
                return insert_by_doubling(admin, table, rows).await
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

async fn insert_by_doubling(admin: &mut Conn, table: &str, rows: u64) -> anyhow::Result<()> {
    admin
        .query_drop(format!(
            "INSERT INTO {table} ({COLUMNS}) VALUES ('user1@example.com', 'Hello #1', 'This is the body of the email.')"
        ))
        .await?;
    let mut have = 1;
    while have < rows {
        let more = have.min(rows - have);
        admin
            .query_drop(format!(
                "INSERT INTO {table} ({COLUMNS}) SELECT {COLUMNS} FROM {table} LIMIT {more}"
            ))
            .await?;
        have += more;
    }
    Ok(())
}
