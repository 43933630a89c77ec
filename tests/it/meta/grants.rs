//! Every GRANT the book and the README show is a statement the server runs as
//! written — a reader copies them — and the grants the install page gives are all
//! tableq needs.
//!
//! How the docs write a GRANT, so that this test finds and runs it:
//! - A statement is a fenced block's text between `;` (its `--` comments left out),
//!   or an inline code span, that starts with `GRANT `. A `GRANT …` quotes a
//!   message and is not run; a `GRANT` anywhere else in code fails the test.
//! - It names the account `'tableq'@'%'` and the database `app` (`app.email`,
//!   `app.*`). The test runs it for an account and a database of its own: those two
//!   placeholders are replaced, nothing else.
//! - Each table it names exists first, as it would for the reader, unless it grants
//!   `CREATE`, which lets a grant name a table not created yet.
//! - A privilege only MariaDB has (`BINLOG MONITOR`) runs on MariaDB only.

use std::path::{Path, PathBuf};
use std::time::Duration;

use mysql_async::prelude::Queryable;

use crate::support::daemon::{run_to_end, tableq};
use crate::support::server::with_database;
use crate::support::{assert_has, row_binlog_server, TestDb};

const ACCOUNT: &str = "'tableq'@'%'";
const DATABASE: &str = "app";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The README and every page of the book.
fn doc_pages() -> Vec<PathBuf> {
    fn under(dir: &Path, found: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
            let path = entry.path();
            if path.is_dir() {
                under(&path, found);
            } else if path.extension().is_some_and(|ext| ext == "md") {
                found.push(path);
            }
        }
    }
    let mut found = vec![repo().join("README.md")];
    under(&repo().join("docs/src"), &mut found);
    found
}

/// A GRANT a page shows: the page, and the statement with its spaces collapsed.
#[derive(Debug)]
struct Grant {
    page: String,
    sql: String,
}

/// The code of a Markdown text: each fenced block's statements (split at `;`, `--`
/// comments left out) and each inline code span, spaces collapsed.
fn code_of(text: &str) -> Vec<String> {
    let mut code = Vec::new();
    let (mut prose, mut block, mut fenced) = (String::new(), String::new(), false);
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            if fenced {
                code.extend(block.split(';').map(String::from));
                block.clear();
            }
            fenced = !fenced;
        } else if fenced {
            let comment = line.trim_start().starts_with("--");
            let line = if comment {
                ""
            } else {
                line.split(" --").next().unwrap_or_default()
            };
            block.push_str(line);
            block.push('\n');
        } else {
            prose.push_str(line);
            prose.push('\n');
        }
    }
    code.extend(inline_spans(&prose));
    code.iter()
        .map(|c| c.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|c| !c.is_empty())
        .collect()
}

/// The inline code spans of `prose`: text between two runs of as many backticks.
fn inline_spans(prose: &str) -> Vec<String> {
    let bytes = prose.as_bytes();
    let run = |at: usize| bytes[at..].iter().take_while(|b| **b == b'`').count();
    let (mut spans, mut i) = (Vec::new(), 0);
    while i < bytes.len() {
        if bytes[i] != b'`' {
            i += 1;
            continue;
        }
        let width = run(i);
        let start = i + width;
        let mut end = start;
        while end < bytes.len() && !(bytes[end] == b'`' && run(end) == width) {
            end += if bytes[end] == b'`' { run(end) } else { 1 };
        }
        if end >= bytes.len() {
            i = start;
            continue;
        }
        spans.push(prose[start..end].to_string());
        i = end + width;
    }
    spans
}

/// Every GRANT statement of the README and the book; a `GRANT` in code that is not
/// one (nor a `GRANT …` quoting a message) is a problem, in the second list.
fn doc_grants() -> (Vec<Grant>, Vec<String>) {
    let (mut grants, mut problems) = (Vec::new(), Vec::new());
    for path in doc_pages() {
        let page = path.strip_prefix(repo()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        for code in code_of(&text) {
            let Some(at) = code.find("GRANT ") else {
                continue;
            };
            let statement = &code[at..];
            if statement.starts_with("GRANT …") {
                continue;
            }
            match at {
                0 => grants.push(Grant {
                    page: page.clone(),
                    sql: statement.to_string(),
                }),
                _ => problems.push(format!(
                    "{page}: `{code}`: write a GRANT as a statement of its own (a code span or \
                     a block's statement), or quote a message as `GRANT …`"
                )),
            }
        }
    }
    (grants, problems)
}

/// What `grant` gives (`SELECT, UPDATE`), its object (`app.email`), its account.
fn parts(grant: &str) -> Option<(&str, &str, &str)> {
    let rest = grant.strip_prefix("GRANT ")?;
    let (privileges, rest) = rest.split_once(" ON ")?;
    let (object, account) = rest.split_once(" TO ")?;
    Some((privileges, object.trim(), account.trim()))
}

/// `grant` as the test runs it: for `user` at any host, on the database `db`; and
/// the table it names that must exist first, if any.
fn for_the_test(grant: &Grant, user: &str, db: &str) -> Result<(String, Option<String>), String> {
    let (privileges, object, account) = parts(&grant.sql)
        .ok_or_else(|| format!("{}: `{}` is no GRANT … ON … TO …", grant.page, grant.sql))?;
    if account != ACCOUNT {
        return Err(format!(
            "{}: `{}` grants to {account}: write the account {ACCOUNT}, user and host",
            grant.page, grant.sql
        ));
    }
    let table = object
        .strip_prefix(&format!("{DATABASE}."))
        .filter(|table| *table != "*")
        .filter(|_| !privileges.split(',').any(|p| p.trim() == "CREATE"))
        .map(|table| table.trim_matches('`').to_string());
    let sql = grant
        .sql
        .replace(&format!(" ON {DATABASE}."), &format!(" ON `{db}`."))
        .replace(ACCOUNT, &format!("'{user}'@'%'"));
    Ok((sql, table))
}

/// A user name of the test's own, at most 32 characters.
fn user_for(db: &TestDb, prefix: &str) -> String {
    let user = format!("{prefix}{}", db.name[3..].replace('_', ""));
    user[..user.len().min(32)].to_string()
}

async fn is_mariadb(db: &TestDb) -> bool {
    let version: String = db.scalar("SELECT VERSION()").await;
    version.to_ascii_lowercase().contains("mariadb")
}

/// Every GRANT the README and the book show runs on the test server as written, for
/// the account it names ('tableq'@'%', user and host) and the database `app`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_grant_in_the_book_and_the_readme_runs() {
    let (grants, mut problems) = doc_grants();
    let install: Vec<&Grant> = grants
        .iter()
        .filter(|g| g.page.ends_with("install.md"))
        .collect();
    assert!(
        install.len() >= 4,
        "install.md shows every grant: {grants:#?}"
    );
    let db = TestDb::new().await;
    let user = user_for(&db, "g");
    db.exec(&format!("CREATE USER '{user}'@'%'")).await;
    let mariadb = is_mariadb(&db).await;
    let mut conn = db.conn().await;
    for grant in &grants {
        if !mariadb && grant.sql.contains("BINLOG MONITOR") {
            continue;
        }
        let (sql, table) = match for_the_test(grant, &user, &db.name) {
            Ok(runnable) => runnable,
            Err(problem) => {
                problems.push(problem);
                continue;
            }
        };
        if let Some(table) = table {
            let create = format!("CREATE TABLE IF NOT EXISTS `{table}` (id INT PRIMARY KEY)");
            conn.query_drop(create).await.unwrap();
        }
        if let Err(e) = conn.query_drop(&sql).await {
            problems.push(format!("{}: `{}` fails: {e}", grant.page, grant.sql));
        }
    }
    conn.disconnect().await.ok();
    db.exec(&format!("DROP USER '{user}'@'%'")).await;
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The grants install.md gives are all tableq needs: a user with only them checks
/// config/email.toml (proven, and on the binary log) and pauses and resumes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_install_pages_grants_are_all_tableq_needs() {
    let (_server, base) = row_binlog_server().await;
    let db = TestDb::on(&base).await;
    db.exec(&std::fs::read_to_string(repo().join("config/email.sql")).unwrap())
        .await;
    db.exec(
        "INSERT INTO email (recipient, subject, body) VALUES \
         ('ada@example.com', 'Hello', 'Hi'), ('bob@example.com', 'Hello', 'Hi')",
    )
    .await;
    let user = user_for(&db, "i");
    let page = std::fs::read_to_string(repo().join("docs/src/howto/install.md")).unwrap();
    let mariadb = is_mariadb(&db).await;
    let mut granted = 0;
    for statement in code_of(&page)
        .iter()
        .filter(|c| c.starts_with("CREATE USER "))
    {
        db.exec(&statement.replace(ACCOUNT, &format!("'{user}'@'%'")))
            .await;
    }
    for grant in doc_grants()
        .0
        .iter()
        .filter(|g| g.page.ends_with("install.md"))
    {
        if !mariadb && grant.sql.contains("BINLOG MONITOR") {
            continue;
        }
        let (sql, _) = for_the_test(grant, &user, &db.name).unwrap();
        db.exec(&sql).await;
        granted += 1;
    }
    assert!(granted >= 4, "install.md's grants: {granted}");

    let (scheme, server) = base.split_once("://").unwrap();
    let host = server.rsplit_once('@').map_or(server, |(_, host)| host);
    let url = with_database(&format!("{scheme}://{user}:PASSWORD@{host}"), &db.name);
    let tableq_as_user = |args: &[&str]| {
        let mut cmd = tableq(args);
        cmd.arg(repo().join("config/email.toml"))
            .env("TABLEQ_DATABASE_URL", &url);
        run_to_end(cmd, Duration::from_secs(60))
    };
    let checked = tableq_as_user(&["check"]).await;
    assert_eq!(
        checked.code(),
        Some(0),
        "{}{}",
        checked.stdout,
        checked.stderr
    );
    assert_has(&checked.stdout, "wake-ups: email on the binary log");
    for command in ["pause", "resume"] {
        let done = tableq_as_user(&[command, "--queue", "email"]).await;
        assert_eq!(done.code(), Some(0), "{command}: {}", done.stderr);
    }
    db.exec(&format!("DROP USER '{user}'@'%'")).await;
}
