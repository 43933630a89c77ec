//! The soak's database: connecting (with patience: the nemesis restarts the server),
//! the schema, and how many rows are still waiting.
//!
//! The schema: a table per queue; the SQL action's effect log (`sql_effect`, a row
//! per application, so that one applied twice shows); every failure the queues
//! recorded (`failure_log`); and the procedure the SQL action calls, which fails
//! or hangs for some rows.

use std::time::{Duration, Instant};

use anyhow::Context;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder};

use crate::data::{POISON, SQL_HANG};

/// The database the soak creates on its private server.
pub const NAME: &str = "soak";

/// The three queues, each named after its action kind, each over `<queue>_job`.
pub const QUEUES: [&str; 3] = ["sql", "http", "command"];

pub fn table(queue: &str) -> String {
    format!("{queue}_job")
}

/// Connects over TCP, retrying for up to a minute (the server may be restarting).
pub async fn connect(url: &str) -> anyhow::Result<Conn> {
    let opts = OptsBuilder::from_opts(Opts::from_url(url)?).prefer_socket(false);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match Conn::new(opts.clone()).await {
            Ok(conn) => return Ok(conn),
            Err(e) if Instant::now() > deadline => {
                return Err(e).context(format!("cannot connect to {url}"))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Creates the database, the queue tables, the SQL action's effect log and the
/// procedure the SQL action calls.
pub async fn create(base_url: &str) -> anyhow::Result<String> {
    let mut conn = connect(base_url).await?;
    conn.query_drop(format!(
        "CREATE DATABASE {NAME} DEFAULT CHARSET utf8mb4 COLLATE utf8mb4_bin"
    ))
    .await?;
    conn.query_drop(format!("USE {NAME}")).await?;
    for queue in QUEUES {
        conn.query_drop(queue_table(&table(queue))).await?;
    }
    // No unique key on job_id: an effect applied twice must show, not fail.
    conn.query_drop(
        "CREATE TABLE sql_effect (
           seq BIGINT AUTO_INCREMENT PRIMARY KEY,
           job_id BIGINT NOT NULL,
           label VARCHAR(200) NULL,
           body MEDIUMTEXT NULL,
           raw VARBINARY(64) NULL,
           session BIGINT NOT NULL,
           applied_at DATETIME(6) NOT NULL DEFAULT NOW(6),
           INDEX (job_id)
         )",
    )
    .await?;
    // Every failure any queue recorded, so a duplicate delivery can be matched with
    // the failed attempt that caused it.
    conn.query_drop(
        "CREATE TABLE failure_log (
           seq BIGINT AUTO_INCREMENT PRIMARY KEY,
           queue VARCHAR(10) NOT NULL,
           job_id BIGINT NOT NULL,
           error TEXT NULL,
           at DOUBLE NOT NULL
         )",
    )
    .await?;
    conn.query_drop(format!(
        "CREATE PROCEDURE soak_check(p_id BIGINT)
         BEGIN
           IF p_id % {POISON} = 0 THEN
             SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'poison row: fails every time';
           END IF;
           IF p_id % {SQL_HANG} = 1 THEN
             DO SLEEP(30);
           END IF;
         END"
    ))
    .await?;
    conn.disconnect().await.ok();
    Ok(format!("{base_url}/{NAME}"))
}

/// One queue's table: the values an item carries, and its state.
fn queue_table(name: &str) -> String {
    format!(
        "CREATE TABLE {name} (
           id BIGINT PRIMARY KEY,
           label VARCHAR(200) NULL,
           body MEDIUMTEXT NULL,
           raw VARBINARY(64) NULL,
           state VARCHAR(10) NOT NULL DEFAULT 'waiting',
           attempts INT NOT NULL DEFAULT 0,
           retry_at BIGINT NULL,
           last_error TEXT NULL,
           done_at DATETIME(6) NULL,
           INDEX state_id (state, id)
         )"
    )
}

/// Rows still in state 'waiting' over all queues (due now or later, locked or not).
pub async fn waiting(conn: &mut Conn) -> anyhow::Result<u64> {
    let mut total = 0;
    for queue in QUEUES {
        let sql = format!(
            "SELECT COUNT(*) FROM {} WHERE state = 'waiting'",
            table(queue)
        );
        let count: Option<u64> = conn.query_first(sql).await?;
        total += count.unwrap_or(0);
    }
    Ok(total)
}

/// Waits (a minute at most) until every queue's table has a row.
pub async fn wait_for_rows(url: &str) -> anyhow::Result<()> {
    let mut conn = connect(url).await?;
    let deadline = Instant::now() + Duration::from_secs(60);
    for queue in QUEUES {
        let sql = format!("SELECT EXISTS (SELECT 1 FROM {})", table(queue));
        while conn.query_first::<bool, _>(&sql).await? != Some(true) {
            anyhow::ensure!(Instant::now() < deadline, "no rows in {}", table(queue));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    conn.disconnect().await.ok();
    Ok(())
}
