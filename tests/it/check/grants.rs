//! The grants `check` advises are statements the server runs as printed: they name
//! the account as the server does (`CURRENT_USER()`, user and host), not the user
//! alone, which means `'user'@'%'` and is refused for any other host (ERROR 1133).

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder};

use crate::support::check::{check, jobs_file, GOOD, JOBS};
use crate::support::server::with_database;
use crate::support::{assert_has, row_binlog_server, TestDb};

/// This machine as the server at `url` names a client that connects over TCP, as
/// tableq does (the harness's own sessions may take the server's socket).
async fn tcp_client_host(url: &str) -> String {
    let opts = OptsBuilder::from_opts(Opts::from_url(url).unwrap()).prefer_socket(false);
    let mut conn = Conn::new(opts).await.unwrap();
    let host: Option<String> = conn
        .query_first("SELECT SUBSTRING_INDEX(USER(), '@', -1)")
        .await
        .unwrap();
    conn.disconnect().await.ok();
    host.unwrap()
}

/// A user of `db`'s server with only `grants` (`{db}` is the database's name), as
/// the server sees tableq's connections over TCP (not the `%` a bare user name
/// means): its account, quoted for a GRANT, and a URL that logs in as it.
async fn limited_account(db: &TestDb, prefix: &str, grants: &str) -> (String, String) {
    let user = format!("{prefix}{}", db.name[3..].replace('_', ""));
    let user = &user[..user.len().min(32)];
    let account = format!("'{user}'@'{}'", tcp_client_host(&db.url).await);
    let grants = grants.replace("{db}", &db.name);
    db.exec(&format!(
        "CREATE USER {account}; GRANT {grants} TO {account}"
    ))
    .await;
    let (scheme, server) = db.url.split_once("://").unwrap();
    let host = server.rsplit_once('@').map_or(server, |(_, host)| host);
    let host = host.split_once('/').map_or(host, |(host, _)| host);
    (
        account,
        with_database(&format!("{scheme}://{user}@{host}"), &db.name),
    )
}

/// A user whose account's host is not `%` (`'user'@'127.0.0.1'`): check's advice for
/// the binary log names that account, runs as printed, and check then finds the
/// queue on the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_log_grant_check_advises_runs_as_printed() {
    let (_server, base) = row_binlog_server().await;
    let db = TestDb::on(&base).await;
    db.exec(JOBS).await;
    let (account, url) = limited_account(&db, "a", "ALL ON `{db}`.*").await;
    let (_files, path, _) = jobs_file(GOOD);

    let polled = check(&[], &[&path], Some(&url)).await;
    let said = format!("wake-ups: jobs by polling every 5s, as user {account} may not read");
    let line = polled
        .stdout
        .lines()
        .find(|line| line.starts_with(&said))
        .unwrap_or_else(|| panic!("{said:?} in\n{}", polled.stdout));
    let grant = &line[line.find(": GRANT ").expect("a GRANT") + 2..];
    assert!(grant.ends_with(&format!(" ON *.* TO {account}")), "{grant}");
    db.exec(grant).await;

    let woken = check(&[], &[&path], Some(&url)).await;
    assert_has(&woken.stdout, "wake-ups: jobs on the binary log");
    assert_eq!(woken.code(), Some(0), "{}", woken.stdout);
    db.exec(&format!("DROP USER {account}")).await;
}

/// A user who may work the queue but not create the history tables: check warns
/// that `run` would keep no history, naming the grants; granted as printed, check
/// says nothing of the history; and with the tables there, it writes a row to each
/// (rolled back) and stays silent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_history_grants_check_advises_run_as_printed() {
    let db = TestDb::new().await;
    db.exec(JOBS).await;
    let (account, url) = limited_account(&db, "h", "SELECT, UPDATE ON `{db}`.job").await;
    let (_files, path, _) = jobs_file(GOOD);

    let refused = check(&[], &[&path], Some(&url)).await;
    let line = refused
        .stdout
        .lines()
        .find(|line| line.contains("history: `run` keeps no history"))
        .unwrap_or_else(|| panic!("a history warning in\n{}", refused.stdout));
    assert_has(line, "or run with --history off");
    let grants = &line[line.find("GRANT ").expect("a GRANT")..];
    for grant in grants
        .split(';')
        .filter(|g| g.trim_start().starts_with("GRANT "))
    {
        db.exec(grant.trim()).await;
    }
    let granted = check(&[], &[&path], Some(&url)).await;
    assert!(!granted.stdout.contains("history:"), "{}", granted.stdout);
    assert_eq!(granted.code(), Some(0), "{}", granted.stdout);
    db.exec(&format!("DROP USER {account}")).await;
}

/// A schedule queue whose account may not create `tableq_schedules` is refused,
/// with the GRANT to give; given, `check` passes (and made the table as `run`
/// would).
#[tokio::test]
async fn the_schedules_grant_check_advises_runs_as_printed() {
    let db = TestDb::new().await;
    let (account, url) =
        limited_account(&db, "s", "SELECT, INSERT, UPDATE, DELETE ON `{db}`.*").await;
    let files = crate::support::QueueFiles::new();
    let path = files.write(
        "nightly.toml",
        "schedule = \"0 3 * * *\"\n[action]\ntype = \"sql\"\nsql = \"DO :scheduled_at\"\n",
    );

    let refused = check(&[], &[&path], Some(&url)).await;
    assert_ne!(refused.code(), Some(0), "{}", refused.stdout);
    let line = refused
        .stdout
        .lines()
        .find(|line| line.contains("tableq_schedules is missing"))
        .unwrap_or_else(|| panic!("a refusal in\n{}", refused.stdout));
    assert_has(line, "CREATE TABLE IF NOT EXISTS tableq_schedules");
    let grant = &line[line.find("GRANT ").expect("a GRANT")..];
    let grant = &grant[..=grant.find(';').expect("the GRANT's end")];
    db.exec(grant).await;
    let granted = check(&[], &[&path], Some(&url)).await;
    assert_eq!(granted.code(), Some(0), "{}", granted.stdout);
    db.assert_count(
        "SELECT COUNT(*) FROM tableq_schedules WHERE name = 'nightly'",
        1,
    )
    .await;
    db.exec(&format!("DROP USER {account}")).await;
}
