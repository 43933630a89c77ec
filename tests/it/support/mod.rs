//! The test harness: a real database for every test, queue files on disk, the real
//! binary, and waiting on conditions instead of sleeping.
//!
//! Tests use `TABLEQ_TEST_DATABASE_URL` when it is set; otherwise one private
//! MariaDB is started for the test process. Every test gets a database of its own.
#![allow(dead_code)]

pub mod brokers;
pub mod check;
pub mod daemon;
pub mod endpoint;
pub mod fpm;
pub mod galera;
pub mod laravel;
pub mod logs;
pub mod mariadb;
pub mod process;
pub mod proxy;
pub mod queue_file;
pub mod scrape;
pub mod server;
pub mod symfony;
pub mod tools;
pub mod web;

use std::future::Future;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use mysql_async::prelude::{FromRow, FromValue, Queryable};
use mysql_async::{Conn, Opts};
use tokio_util::sync::CancellationToken;

pub use mariadb::{free_port, MariaDb};
#[allow(unused_imports)] // not every test writes its queue files with it
pub use queue_file::QueueFile;
use server::{with_database, Server};

/// The server shared by this test process: `TABLEQ_TEST_DATABASE_URL`, or a private one.
fn shared() -> &'static Server {
    static SHARED: OnceLock<Server> = OnceLock::new();
    SHARED.get_or_init(|| Server::from_env("TABLEQ_TEST_DATABASE_URL", MariaDb::start))
}

/// The shared server's URL without a database.
pub fn shared_base_url() -> String {
    shared().base_url()
}

/// A database of one test's own, dropped when the test ends.
pub struct TestDb {
    pub name: String,
    /// The URL tableq should use: this database on its server.
    pub url: String,
    base: String,
}

impl TestDb {
    /// A fresh database on the shared server.
    pub async fn new() -> TestDb {
        TestDb::on(&shared_base_url()).await
    }

    /// A fresh database on the server at `base` (a URL without a database).
    pub async fn on(base: &str) -> TestDb {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "tq_{}_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_micros()
        );
        TestDb::named(base, name).await
    }

    /// A database of this one's name on the server at `base`: its twin on another
    /// host of a URL that lists several.
    pub async fn twin_on(&self, base: &str) -> TestDb {
        TestDb::named(base, self.name.clone()).await
    }

    async fn named(base: &str, name: String) -> TestDb {
        let mut admin = connect(base).await;
        admin
            .query_drop(format!("CREATE DATABASE `{name}` DEFAULT CHARSET utf8mb4"))
            .await
            .expect("create the test database");
        admin.disconnect().await.ok();
        TestDb {
            url: with_database(base, &name),
            name,
            base: base.to_string(),
        }
    }

    pub async fn conn(&self) -> Conn {
        connect(&self.url).await
    }

    /// Runs statements (text protocol; several separated by `;` are fine).
    pub async fn exec(&self, sql: &str) {
        let mut conn = self.conn().await;
        conn.query_drop(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        conn.disconnect().await.ok();
    }

    pub async fn rows<T: FromRow + Send + 'static>(&self, sql: &str) -> Vec<T> {
        let mut conn = self.conn().await;
        let rows = conn
            .query(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        conn.disconnect().await.ok();
        rows
    }

    pub async fn scalar<T: FromValue + Send + 'static>(&self, sql: &str) -> T {
        self.rows::<(T,)>(sql)
            .await
            .pop()
            .unwrap_or_else(|| panic!("{sql}: no row"))
            .0
    }

    pub async fn count(&self, sql: &str) -> u64 {
        self.scalar::<u64>(sql).await
    }

    /// Asserts that `sql` counts `expected`.
    pub async fn assert_count(&self, sql: &str, expected: u64) {
        assert_eq!(self.count(sql).await, expected, "{sql}");
    }

    /// Asserts that `sql` counts `expected`, saying `why` when it does not.
    pub async fn assert_count_because(&self, sql: &str, expected: u64, why: &str) {
        assert_eq!(self.count(sql).await, expected, "{why}: {sql}");
    }

    /// Waits until `sql` counts `rows`, checking every 50 ms; panics after `seconds`.
    pub async fn until_count(&self, sql: &str, rows: u64, seconds: u64) {
        let what = format!("{sql} = {rows}");
        eventually(&what, Duration::from_secs(seconds), || async {
            self.count(sql).await == rows
        })
        .await;
    }

    /// Waits until `sql` counts `rows` or more; panics after `seconds`.
    pub async fn until_count_at_least(&self, sql: &str, rows: u64, seconds: u64) {
        let what = format!("{sql} >= {rows}");
        eventually(&what, Duration::from_secs(seconds), || async {
            self.count(sql).await >= rows
        })
        .await;
    }

    /// Inserts `rows` rows into `table` from `values(i)` (1-based), in chunks.
    pub async fn fill(
        &self,
        table: &str,
        columns: &str,
        rows: usize,
        values: impl Fn(usize) -> String,
    ) {
        let mut conn = self.conn().await;
        for chunk in (1..=rows).collect::<Vec<_>>().chunks(1000) {
            let tuples: Vec<String> = chunk.iter().map(|&i| format!("({})", values(i))).collect();
            conn.query_drop(format!(
                "INSERT INTO {table} ({columns}) VALUES {}",
                tuples.join(",")
            ))
            .await
            .expect("fill the table");
        }
        conn.disconnect().await.ok();
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let (base, name) = (self.base.clone(), self.name.clone());
        // Drop runs outside any runtime's async context: use a thread with its own.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async {
                let mut conn = Conn::new(Opts::from_url(&base).ok()?).await.ok()?;
                conn.query_drop(format!("DROP DATABASE IF EXISTS `{name}`"))
                    .await
                    .ok()?;
                conn.disconnect().await.ok()
            })
        })
        .join();
    }
}

/// Connects, retrying for a while: a server that was just restarted may not be ready.
pub async fn connect(url: &str) -> Conn {
    let opts = Opts::from_url(url).expect("a valid test URL");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match Conn::new(opts.clone()).await {
            Ok(conn) => return conn,
            Err(e) if Instant::now() > deadline => {
                panic!("cannot connect to the test database: {e}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// The article's email table (and the outbox of the examples), from the file the
/// demo and the examples use.
pub const EMAIL_SQL: &str = include_str!("../../../config/email.sql");

/// Creates the email table with `rows` waiting emails to `user<i>@example.com`.
pub async fn email_table(db: &TestDb, rows: usize) {
    db.exec(EMAIL_SQL).await;
    db.fill("email", "recipient, subject, body", rows, |i| {
        format!("'user{i}@example.com', 'Hello {i}', 'Body {i}'")
    })
    .await;
}

/// A directory of queue files for one test.
pub struct QueueFiles {
    dir: tempfile::TempDir,
}

impl QueueFiles {
    pub fn new() -> QueueFiles {
        QueueFiles {
            dir: tempfile::tempdir().expect("create a directory for queue files"),
        }
    }

    /// Writes `file_name` with `contents`; returns its path.
    pub fn write(&self, file_name: &str, contents: &str) -> PathBuf {
        let path = self.dir.path().join(file_name);
        std::fs::write(&path, contents).expect("write a queue file");
        path
    }

    /// Writes an executable shell script `file_name` that runs `body`; returns its path.
    pub fn script(&self, file_name: &str, body: &str) -> PathBuf {
        let path = self.write(file_name, &format!("#!/bin/sh\n{body}\n"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .expect("make the script executable");
        path
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }
}

/// Copies the directory `from` to `to`, recursively: a test app's sources, a
/// template datadir.
pub fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("create {}: {e}", to.display()));
    let entries =
        std::fs::read_dir(from).unwrap_or_else(|e| panic!("read {}: {e}", from.display()));
    for entry in entries {
        let entry = entry.unwrap_or_else(|e| panic!("read {}: {e}", from.display()));
        let target = to.join(entry.file_name());
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target)
                .unwrap_or_else(|e| panic!("copy {}: {e}", entry.path().display()));
        }
    }
}

/// Loads queue files through the library, panicking with the findings if they fail.
pub fn load(paths: &[PathBuf]) -> Vec<tableq::QueueConfig> {
    tableq::load_paths(paths, &|name| std::env::var(name).ok()).unwrap_or_else(|f| panic!("{f}"))
}

/// A daemon run through the library, for a test to stop when it has seen enough.
pub struct Engine {
    shutdown: CancellationToken,
    handle: tokio::task::JoinHandle<Result<tableq::RunSummary, tableq::diagnostic::Findings>>,
}

impl Engine {
    /// Runs `queues` against `url` with the default options.
    pub fn start(queues: Vec<tableq::QueueConfig>, url: &str) -> Engine {
        Engine::start_with(
            queues,
            tableq::RunOptions {
                database_url: Some(url.to_string()),
                ..tableq::RunOptions::default()
            },
        )
    }

    pub fn start_with(queues: Vec<tableq::QueueConfig>, options: tableq::RunOptions) -> Engine {
        let shutdown = CancellationToken::new();
        let handle = tokio::spawn(tableq::run(queues, options, shutdown.clone()));
        Engine { shutdown, handle }
    }

    /// Stops it as SIGTERM would, and returns what it did.
    pub async fn stop(self) -> tableq::RunSummary {
        self.shutdown.cancel();
        self.finish().await
    }

    /// Waits for it to end by itself (`stop_when_empty`).
    pub async fn finish(self) -> tableq::RunSummary {
        tokio::time::timeout(Duration::from_secs(300), self.handle)
            .await
            .expect("the engine stops within 5 minutes")
            .expect("the engine did not panic")
            .unwrap_or_else(|f| panic!("{f}"))
    }
}

/// Runs queues through the library until they are drained.
pub async fn run_until_empty(queues: Vec<tableq::QueueConfig>, url: &str) -> tableq::RunSummary {
    let options = tableq::RunOptions {
        database_url: Some(url.to_string()),
        stop_when_empty: true,
        ..tableq::RunOptions::default()
    };
    tokio::time::timeout(
        Duration::from_secs(300),
        tableq::run(queues, options, CancellationToken::new()),
    )
    .await
    .expect("the queues drain within 5 minutes")
    .unwrap_or_else(|f| panic!("{f}"))
}

/// Asserts that `text` (a command's output, a page, a log) contains `needle`,
/// showing the whole text when it does not.
#[track_caller]
pub fn assert_has(text: &str, needle: &str) {
    assert!(text.contains(needle), "no {needle:?} in:\n{text}");
}

/// Waits until `condition` holds, checking every 50 ms; panics after `timeout`.
pub async fn eventually<F, Fut>(what: &str, timeout: Duration, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    while !condition().await {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits (up to a minute) until `rows` rows of table `job` are done.
pub async fn jobs_done(db: &TestDb, rows: u64) {
    eventually("every job done", Duration::from_secs(60), || async {
        db.count("SELECT COUNT(*) FROM job WHERE state = 'done'")
            .await
            == rows
    })
    .await;
}

/// True while some session of `db` is running a statement that starts with `prefix`.
pub async fn running(db: &TestDb, prefix: &str) -> bool {
    db.count(&format!(
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = '{}' AND INFO LIKE '{}%'",
        db.name, prefix
    ))
    .await
        > 0
}

/// How many other sessions are connected to `db` (workers, for a test watching a
/// daemon: an idle queue keeps one, its watcher's).
pub async fn connections(db: &TestDb) -> u64 {
    db.count(&format!(
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = '{}' AND ID <> CONNECTION_ID()",
        db.name
    ))
    .await
}

/// The worker's transaction, as `query` (a SELECT of `information_schema.INNODB_TRX`)
/// reads it: asked until it is listed, as the server refreshes that table at most
/// every 0.1 s.
pub async fn listed_transaction<T: FromValue + Send + 'static>(db: &TestDb, query: &str) -> T {
    eventually(
        "the worker's transaction is listed",
        Duration::from_secs(30),
        || async { !db.rows::<(T,)>(query).await.is_empty() },
    )
    .await;
    db.scalar(query).await
}

/// Waits until every worker but the watcher sleeps without a connection, then
/// inserts the jobs 1 to `rows` into `job` and waits until they are done.
pub async fn burst_after_idle(db: &TestDb, rows: usize) {
    eventually(
        "all but the watcher sleep, without a connection",
        Duration::from_secs(30),
        || async { connections(db).await == 1 },
    )
    .await;
    db.fill("job", "id", rows, |i| i.to_string()).await;
    let done = "SELECT COUNT(*) FROM job WHERE state = 'done'";
    db.until_count(done, rows as u64, 60).await;
}

/// True if a claim right now could lock `condition`'s row (it is waiting and unlocked).
pub async fn claimable(db: &TestDb, table: &str, condition: &str) -> bool {
    let mut conn = db.conn().await;
    let found: Vec<(i64,)> = conn
        .query(format!(
            "SELECT 1 FROM {table} WHERE {condition} FOR UPDATE SKIP LOCKED"
        ))
        .await
        .expect("probe the row");
    conn.query_drop("ROLLBACK").await.ok();
    conn.disconnect().await.ok();
    !found.is_empty()
}

/// Creates `job (id, state)` with the rows `ids` waiting.
pub async fn job_table(db: &TestDb, ids: &[u32]) {
    db.exec("CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting')")
        .await;
    for id in ids {
        db.exec(&format!("INSERT INTO job (id) VALUES ({id})"))
            .await;
    }
}

/// Creates `job (id, state)` with the rows 1 to `rows` waiting, and `job_log (job_id)`
/// for actions to log the job they ran in (`INSERT INTO job_log (job_id) VALUES (:id)`).
pub async fn logged_jobs(db: &TestDb, rows: usize) {
    db.exec(
        "CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting') DEFAULT CHARSET=utf8mb4;
         CREATE TABLE job_log (job_id INT NOT NULL) DEFAULT CHARSET=utf8mb4",
    )
    .await;
    db.fill("job", "id", rows, |i| i.to_string()).await;
}

/// Each of [`logged_jobs`]' `rows` jobs is done, and was run (logged) exactly once.
pub async fn each_job_done_and_logged_once(db: &TestDb, rows: usize) {
    let rows = rows as u64;
    assert_eq!(
        db.count("SELECT COUNT(*) FROM job WHERE state = 'done'")
            .await,
        rows
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM job_log").await,
        rows,
        "a job was done twice"
    );
    assert_eq!(
        db.count("SELECT COUNT(DISTINCT job_id) FROM job_log").await,
        rows,
        "no job's SQL effect applied twice"
    );
}

/// The queue `name` on [`job_table`]'s rows: waiting ones in id order, marked done on
/// success; the caller sets the action.
pub fn waiting_jobs(name: &str) -> QueueFile {
    QueueFile::new(name)
        .select("SELECT id FROM job WHERE state = 'waiting' ORDER BY id")
        .on_success("UPDATE job SET state = 'done' WHERE id = :id")
}

/// A private MariaDB of the test's own, started with `args` (a test that stops it,
/// fills it, or reads its server-wide counters), and a database on it.
pub async fn private_db(args: &[&str]) -> (MariaDb, TestDb) {
    let args: Vec<String> = args.iter().map(|arg| arg.to_string()).collect();
    let server = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        MariaDb::start_with(&args)
    })
    .await
    .expect("start a private MariaDB");
    let db = TestDb::on(&server.base_url()).await;
    (server, db)
}

/// A server writing a row-based binary log, as a URL without a database: the shared
/// one when it writes one (MySQL 8 does by default), else a private MariaDB started
/// with one, which the first value keeps alive.
pub async fn row_binlog_server() -> (Option<MariaDb>, String) {
    let base = shared_base_url();
    let mut conn = connect(&base).await;
    let logging: Option<(i64, String)> = conn
        .query_first("SELECT @@log_bin, @@binlog_format")
        .await
        .expect("read the binary log's settings");
    conn.disconnect().await.ok();
    if logging.is_some_and(|(on, format)| on == 1 && format == "ROW") {
        return (None, base);
    }
    let server = tokio::task::spawn_blocking(|| {
        MariaDb::start_with(&["--log-bin", "--binlog-format=ROW", "--server-id=1"])
    })
    .await
    .expect("start a MariaDB with a binary log");
    let base = server.base_url();
    (Some(server), base)
}
