//! One queue checked against its database: the server, the statements prepared as
//! `run` prepares them, then the deeper checks on a worker's session — everything
//! they do is rolled back.

use std::collections::BTreeMap;

use mysql_async::prelude::Queryable;
use mysql_async::Opts;

use super::self_test::SelfTest;
use super::server::{self, ServerFacts};
use super::tables::Engines;
use super::{index, offline, proof, self_test, tables, CheckOptions};
use crate::config::QueueConfig;
use crate::database::{connect, describe_error, is_statement_error, parse_database_url};
use crate::diagnostic::{Finding, Severity};
use crate::names::key_name;
use crate::session::{OpenError, Session};

/// What each server said about itself, read once per database URL.
#[derive(Default)]
pub struct Servers {
    facts: BTreeMap<String, Result<ServerFacts, String>>,
}

impl Servers {
    async fn facts(&mut self, url: &str, opts: &Opts) -> Result<ServerFacts, String> {
        if let Some(known) = self.facts.get(url) {
            return known.clone();
        }
        let read = async {
            let mut conn = connect(opts).await?;
            let facts = server::read_facts(&mut conn).await;
            let _ = conn.disconnect().await;
            facts
        }
        .await
        .map_err(|e| describe_error(&e));
        self.facts.insert(url.to_string(), read.clone());
        read
    }

    /// `MariaDB 10.11.19`, once per distinct server kind reached.
    pub fn described(&self) -> Vec<String> {
        let mut all: Vec<String> = Vec::new();
        for facts in self.facts.values().flatten() {
            let described = server::describe(facts);
            if !all.contains(&described) {
                all.push(described);
            }
        }
        all
    }
}

/// Every finding for `queue` that its database can tell.
pub async fn check_queue(
    queue: &QueueConfig,
    options: &CheckOptions,
    servers: &mut Servers,
) -> Vec<Finding> {
    let mut findings: Vec<Finding> = offline::missing_on_failure(queue).into_iter().collect();
    let Some(url) = queue
        .database_url
        .as_deref()
        .or(options.database_url.as_deref())
    else {
        findings.push(queue.finding(
            Severity::Error,
            &[],
            "no database: set `database_url`, pass --database-url or TABLEQ_DATABASE_URL, or use --offline",
        ));
        return findings;
    };
    let opts = match parse_database_url(url) {
        Ok(opts) => opts,
        Err(e) => {
            findings.push(queue.finding(Severity::Error, &["database_url"], e.to_string()));
            return findings;
        }
    };
    let unreachable = |error: String| {
        queue.finding(
            Severity::Error,
            &["database_url"],
            format!("cannot reach the database: {error}"),
        )
    };
    let facts = match servers.facts(url, &opts).await {
        Ok(facts) => facts,
        Err(error) => {
            findings.push(unreachable(error));
            return findings;
        }
    };
    findings.extend(server_findings(queue, &facts, options.allow_multi_primary));
    let mut session = match Session::open(queue, &opts).await {
        Ok(session) => session,
        Err(OpenError::Invalid(invalid)) => {
            findings.extend(invalid);
            if let Some(key) = key_name(queue) {
                findings.extend(offline::outcome_not_by_key(queue, &key));
            }
            return findings;
        }
        Err(OpenError::Unreachable(error)) => {
            findings.push(unreachable(error));
            return findings;
        }
    };
    let prepared = &session.prepared;
    if let Some(key) = prepared.columns.names.get(prepared.key_index) {
        findings.extend(offline::outcome_not_by_key(queue, key));
    }
    match deeper(queue, &opts, &mut session).await {
        Ok(more) => findings.extend(more),
        Err(e) if is_statement_error(&e) => findings.push(queue.finding(
            Severity::Error,
            &["select"],
            format!(
                "check stopped: the server refused one of its statements (a claim, a savepoint): {}",
                describe_error(&e)
            ),
        )),
        Err(e) => findings.push(queue.finding(
            Severity::Error,
            &["database_url"],
            format!(
                "lost the database connection while checking: {}",
                describe_error(&e)
            ),
        )),
    }
    let _ = session.conn.disconnect().await;
    findings
}

/// The server's own problems, for a queue on it.
fn server_findings(
    queue: &QueueConfig,
    facts: &ServerFacts,
    allow_multi_primary: bool,
) -> Vec<Finding> {
    let mut problems = Vec::new();
    problems.extend(server::skip_locked_problem(facts));
    problems.extend(server::binlog_problem(facts));
    if !allow_multi_primary {
        problems.extend(server::multi_primary_problem(facts));
    }
    problems
        .into_iter()
        .map(|message| queue.finding(Severity::Error, &["database_url"], message))
        .collect()
}

/// The checks that need the queue prepared: tables, self-test, index, proof.
async fn deeper(
    queue: &QueueConfig,
    opts: &Opts,
    session: &mut Session,
) -> Result<Vec<Finding>, mysql_async::Error> {
    let conn = &mut session.conn;
    let prepared = &session.prepared;
    let engines = tables::engines(conn, queue, prepared).await?;
    if !engines.not_innodb.is_empty() {
        // Changes to such a table survive ROLLBACK: never run the queue's SQL on it.
        let mut findings = engines.not_innodb;
        findings.push(queue.finding(
            Severity::Warning,
            &["select"],
            "not proven: check runs the SKIP LOCKED self-test and the leave-the-query proof \
             only when every table is InnoDB, where its changes roll back",
        ));
        return Ok(findings);
    }
    let self_test = self_test::skip_locked(queue, opts, prepared).await?;
    let mut findings: Vec<Finding> = self_test.finding(queue).into_iter().collect();
    findings.extend(index::claim_cost(conn, queue, prepared).await?);
    if let Some(not_proven) = proof_not_run(queue, &engines, &self_test) {
        findings.push(not_proven);
        return Ok(findings);
    }
    match proof::leaves_the_query(conn, queue, prepared).await? {
        Some(proved) => {
            if self_test == SelfTest::NoRow {
                findings.push(queue.finding(
                    Severity::Warning,
                    &["select"],
                    "the two-session SKIP LOCKED self-test could not run: no row was waiting",
                ));
            }
            findings.extend(proved);
        }
        None => findings.push(queue.finding(
            Severity::Warning,
            &["select"],
            "not proven: queue is empty — with no row waiting, neither the leave-the-query proof \
             nor the two-session SKIP LOCKED self-test could run; check again when a row is waiting",
        )),
    }
    conn.query_drop("ROLLBACK").await?;
    Ok(findings)
}

/// Why the leave-the-query proof must not run, if it must not: its changes might
/// not roll back.
fn proof_not_run(queue: &QueueConfig, engines: &Engines, self_test: &SelfTest) -> Option<Finding> {
    if let Some((path, view)) = engines.unsure_views.first() {
        let at: Vec<&str> = path.iter().map(String::as_str).collect();
        return Some(queue.finding(
            Severity::Warning,
            &at,
            format!(
                "not proven: {view} is a view; check cannot tell which engine it writes to, so \
                 it runs none of the queue's SQL"
            ),
        ));
    }
    matches!(self_test, SelfTest::Failed(_)).then(|| {
        queue.finding(
            Severity::Warning,
            &["select"],
            "not proven: check runs the leave-the-query proof only on a claim that locks its \
             row; one that locks nothing may read a table whose changes survive ROLLBACK",
        )
    })
}
