//! The server under test and the benchmark's database on it: a private MariaDB (or
//! the server of `TABLEQ_BENCH_DATABASE_URL`), the database `tableq_bench` created
//! afresh and dropped at the end, and the connections the benchmark uses.

use std::path::PathBuf;

use anyhow::Context;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder};

use crate::daemon;
use crate::mariadb::MariaDb;
use crate::measure::{self, Probe};
use crate::test_server::{with_database, Server};

const DATABASE: &str = "tableq_bench";

/// Everything a measurement needs: the database, the binary, a place for files.
pub struct Bench {
    /// The benchmark's database, as tableq gets it.
    pub url: String,
    /// The same, for the raw clients: TCP like tableq (mysql_async would otherwise
    /// switch to the Unix socket on localhost).
    pub opts: Opts,
    pub bin: PathBuf,
    pub dir: tempfile::TempDir,
    pub admin: Conn,
    pub probe: Probe,
    /// tableq runs so far, to give each one its own files.
    pub runs: usize,
    /// The server: a private one, if the benchmark started one, stops when dropped.
    server: Server,
    /// Whether the private server flushes every commit.
    durable: bool,
}

impl Bench {
    /// Starts a private server unless `TABLEQ_BENCH_DATABASE_URL` names one, creates
    /// the benchmark's database there afresh, and connects to it.
    pub async fn open(durable: bool) -> anyhow::Result<Bench> {
        Bench::open_with(durable, &[]).await
    }

    /// As [`Bench::open`], a private server started with `extra` server options too.
    pub async fn open_with(durable: bool, extra: &[&str]) -> anyhow::Result<Bench> {
        let server = Server::from_env("TABLEQ_BENCH_DATABASE_URL", || {
            eprintln!("==> starting a private MariaDB {}", extra.join(" "));
            // The harness's server trades durability for speed (commit flushed once a
            // second); `--durable` restores the server's default.
            let mut args = extra.to_vec();
            if durable {
                args.push("--innodb-flush-log-at-trx-commit=1");
            }
            MariaDb::start_with(&args)
        });
        let base = server.base_url();
        let port = Opts::from_url(&base).context("the server URL")?.tcp_port();
        let server_pid = measure::find_server_pid(port);
        let url = create_database(&base).await?;
        let admin = connect(&url).await?;
        let probe = Probe::new(connect(&url).await?, server_pid).await?;
        let bin = daemon::binary()?;
        Ok(Bench {
            opts: tcp_opts(&url)?,
            url,
            bin,
            dir: tempfile::tempdir()?,
            admin,
            probe,
            runs: 0,
            server,
            durable,
        })
    }

    /// The server's `VERSION()`.
    pub async fn version(&mut self) -> anyhow::Result<String> {
        Ok(self
            .admin
            .query_first("SELECT VERSION()")
            .await?
            .unwrap_or_default())
    }

    /// Where the server comes from, for the report: how a private one is set up.
    pub fn origin(&self) -> &'static str {
        match (&self.server, self.durable) {
            (Server::Private(_), true) => {
                "private: innodb_flush_log_at_trx_commit=1 (durable: every commit flushed), buffer pool 128M"
            }
            (Server::Private(_), false) => {
                "private: innodb_flush_log_at_trx_commit=2, buffer pool 128M"
            }
            (Server::External(_), _) => "TABLEQ_BENCH_DATABASE_URL",
        }
    }

    pub async fn drop_database(&mut self) -> anyhow::Result<()> {
        self.admin
            .query_drop(format!("DROP DATABASE IF EXISTS {DATABASE}"))
            .await?;
        Ok(())
    }
}

/// Creates the benchmark's database on the server of `base`, dropping any left
/// over; returns its URL.
async fn create_database(base: &str) -> anyhow::Result<String> {
    let mut admin = connect(base).await?;
    admin
        .query_drop(format!(
            "DROP DATABASE IF EXISTS {DATABASE}; CREATE DATABASE {DATABASE} DEFAULT CHARSET utf8mb4"
        ))
        .await?;
    admin.disconnect().await?;
    Ok(with_database(base, DATABASE))
}

/// A connection as the raw clients use one: READ COMMITTED, set once per session.
pub async fn read_committed(opts: Opts) -> anyhow::Result<Conn> {
    let mut conn = Conn::new(opts).await?;
    conn.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        .await?;
    Ok(conn)
}

async fn connect(url: &str) -> anyhow::Result<Conn> {
    Conn::new(tcp_opts(url)?)
        .await
        .with_context(|| format!("cannot connect to {}", without_password(url)))
}

/// The options of `url`, over TCP even to localhost.
fn tcp_opts(url: &str) -> anyhow::Result<Opts> {
    Ok(OptsBuilder::from_opts(Opts::from_url(url)?)
        .prefer_socket(false)
        .into())
}

fn without_password(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            let user = credentials.split(':').next().unwrap_or("");
            format!("{}{user}@{}", &url[..scheme + 3], &url[at + 1..])
        }
        _ => url.to_string(),
    }
}
