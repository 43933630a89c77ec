//! The soak's database: connecting (with patience: the nemesis restarts the server),
//! the schema, and how many rows are still waiting.
//!
//! The schema: a table per queue (the lease queue's with its lease columns); the SQL
//! action's effect log (`sql_effect`, a row per application, so that one applied
//! twice shows); every failure the queues recorded (`failure_log`; the lease queue's
//! by a trigger, as its outcome SQL may only update its own row); the procedure the
//! SQL action calls, which fails or hangs for some rows; the switch the nemesis
//! turns to make renewals slow (`soak_switch`); and the ordinary user the tableq
//! processes connect as — without SUPER or READ ONLY ADMIN, so that `read_only`
//! applies to them.

use std::time::{Duration, Instant};

use anyhow::Context;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder};

use crate::data::{POISON, SQL_HANG};

/// The database the soak creates on its private server.
pub const NAME: &str = "soak";

/// The four queues, each over `<queue>_job`: three in transaction mode named after
/// their action kind, and a command queue in lease mode.
pub const QUEUES: [&str; 4] = ["sql", "http", "command", "lease"];

/// The user the tableq processes connect as, and its password.
pub const WORKER: &str = "soak_worker";
pub const WORKER_PASSWORD: &str = "soak-worker-pw";

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

/// Creates the database, the queue tables, the SQL action's effect log, the
/// procedure the SQL action calls, the lease queue's failure trigger, the renewal
/// switch and the worker user; returns the database's URL (as root).
pub async fn create(base_url: &str) -> anyhow::Result<String> {
    let mut conn = connect(base_url).await?;
    conn.query_drop(format!(
        "CREATE DATABASE {NAME} DEFAULT CHARSET utf8mb4 COLLATE utf8mb4_bin"
    ))
    .await?;
    conn.query_drop(format!("USE {NAME}")).await?;
    for queue in QUEUES {
        conn.query_drop(queue_table(queue)).await?;
    }
    logs(&mut conn).await?;
    lease_extras(&mut conn).await?;
    worker_user(&mut conn).await?;
    conn.disconnect().await.ok();
    Ok(format!("{base_url}/{NAME}"))
}

/// The SQL action's effect log, the failure log and the SQL action's procedure.
async fn logs(conn: &mut Conn) -> anyhow::Result<()> {
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
    // SQL SECURITY INVOKER: it runs as the worker user, so that tableq's KILL QUERY
    // (as that user) may stop a hung call; a definer's (root's) call it may not.
    conn.query_drop(format!(
        "CREATE PROCEDURE soak_check(p_id BIGINT)
         SQL SECURITY INVOKER
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
    Ok(())
}

/// The lease queue's failures into `failure_log` (its `[on_failure]` counts the
/// attempt), and the switch its `renew_sql` reads: how long each renewal sleeps.
async fn lease_extras(conn: &mut Conn) -> anyhow::Result<()> {
    conn.query_drop(format!(
        "CREATE TRIGGER lease_failure AFTER UPDATE ON {} FOR EACH ROW
         IF NEW.attempts > OLD.attempts THEN
           INSERT INTO failure_log (queue, job_id, error, at)
           VALUES ('lease', NEW.id, NEW.last_error, UNIX_TIMESTAMP(NOW(6)));
         END IF",
        table("lease")
    ))
    .await?;
    conn.query_drop("CREATE TABLE soak_switch (renew_sleep DOUBLE NOT NULL)")
        .await?;
    conn.query_drop("INSERT INTO soak_switch VALUES (0)")
        .await?;
    Ok(())
}

/// The tableq processes' user: the rows, the procedure, nothing more — not
/// SUPER or READ ONLY ADMIN, which write through `read_only`.
async fn worker_user(conn: &mut Conn) -> anyhow::Result<()> {
    conn.query_drop(format!(
        "CREATE USER '{WORKER}'@'%' IDENTIFIED BY '{WORKER_PASSWORD}'"
    ))
    .await?;
    conn.query_drop(format!(
        "GRANT SELECT, INSERT, UPDATE, DELETE, EXECUTE ON {NAME}.* TO '{WORKER}'@'%'"
    ))
    .await?;
    Ok(())
}

/// `mysql://soak_worker:…@address/soak`: the worker user's URL through `address`.
pub fn worker_url(address: impl std::fmt::Display) -> String {
    format!("mysql://{WORKER}:{WORKER_PASSWORD}@{address}/{NAME}")
}

/// One queue's table: the values an item carries, and its state; the lease
/// queue's has its lease (`lease_until` in unix time) and the last progress line.
fn queue_table(queue: &str) -> String {
    let lease = match queue {
        "lease" => {
            "lease_until BIGINT NULL, lease_id VARCHAR(64) NULL, \
                    renewals INT NOT NULL DEFAULT 0, progress VARCHAR(20) NULL, \
                    INDEX state_lease (state, lease_until),"
        }
        _ => "",
    };
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
           {lease}
           INDEX state_id (state, id)
         )",
        name = table(queue)
    )
}

/// Rows still in state 'waiting' (or 'leased') over all queues (due now or later,
/// locked or not).
pub async fn waiting(conn: &mut Conn) -> anyhow::Result<u64> {
    let mut total = 0;
    for queue in QUEUES {
        let sql = format!(
            "SELECT COUNT(*) FROM {} WHERE state IN ('waiting', 'leased')",
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
