//! One queue checked against its database: the server, the statements prepared as
//! `run` prepares them, then the deeper checks on a worker's session — everything
//! they do is rolled back.

use std::collections::BTreeMap;

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use super::options::CheckOptions;
use super::queries::{self, WaitingRows};
use super::self_test::SelfTest;
use super::server::{self, ServerFacts};
use super::tables::Engines;
use super::{downstream, index, offline, oldest, proof, self_test, tables};
use crate::action::Action;
use crate::config::validate::names::key_name;
use crate::config::QueueConfig;
use crate::db::error::{describe_error, is_expected_contention, is_statement_error};
use crate::db::prepared::PreparedQueue;
use crate::db::{Database, OpenError, Session};
use crate::diagnostic::{Finding, Severity};

/// What each server said about itself, read once per database.
#[derive(Default)]
pub struct Servers {
    facts: BTreeMap<String, Result<ServerFacts, String>>,
    /// Per server (`host:port`): the workers of the queues checked on it, its facts,
    /// and the first of those queues, to point a finding at.
    workers: BTreeMap<String, (usize, ServerFacts, QueueConfig)>,
    /// Whether each database streams its binary log to its user.
    binlog: crate::db::binlog::Verdicts,
    /// Each table the selects of several tables read, explained.
    pub reads: Vec<String>,
    /// Where each queue's wake-ups would come from.
    pub wakes: Vec<super::wake::WakeReport>,
    /// How each queue whose select reads the clock finds its rows due by time, on time.
    pub due: Vec<super::due::DueReport>,
}

impl Servers {
    async fn facts(&mut self, database: &Database) -> Result<ServerFacts, String> {
        let named = database.to_string();
        if let Some(known) = self.facts.get(&named) {
            return known.clone();
        }
        let read = async {
            let mut conn = database
                .connect()
                .await
                .map_err(|e| match e.is_access_denied() {
                    // In `run`'s words: the user, the server and the database, and what to
                    // check.
                    true => database.refused_login(&e),
                    false => format!("cannot reach the database: {e}"),
                })?;
            let facts = server::read_facts(&mut conn).await;
            let _ = conn.disconnect().await;
            facts.map_err(|e| describe_error(&e))
        }
        .await;
        self.facts.insert(named, read.clone());
        read
    }

    /// Counts `queue`'s connections (its workers, or its lease pool) against its
    /// server's connection limits.
    fn count_workers(&mut self, database: &Database, queue: &QueueConfig, facts: &ServerFacts) {
        let entry = self
            .workers
            .entry(database.server())
            .or_insert_with(|| (0, facts.clone(), queue.clone()));
        entry.0 += queue.connections();
    }

    /// A warning per server whose queues' workers would take more than half its
    /// connections.
    pub fn connection_findings(&self) -> Vec<Finding> {
        self.workers
            .iter()
            .filter_map(|(server, (workers, facts, queue))| {
                let message = server::connection_problem(facts, *workers, server)?;
                Some(queue.finding(Severity::Warning, &["workers"], message))
            })
            .collect()
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

/// Every finding for `queue` that its database can tell, and what its `action`
/// finds downstream with a sample row.
pub async fn check_queue(
    queue: &QueueConfig,
    action: Option<&Action>,
    options: &CheckOptions,
    servers: &mut Servers,
) -> Vec<Finding> {
    let mut findings: Vec<Finding> = offline::missing_on_failure(queue).into_iter().collect();
    findings.extend(offline::secret_files_others_can_read(queue));
    findings.extend(queue.action.kind().warnings(&queue.site()));
    let database = match Database::for_queue(queue, options.database_url.as_deref()) {
        Ok(database) => database,
        Err(finding) => {
            findings.push(finding);
            return findings;
        }
    };
    let facts = match servers.facts(&database).await {
        Ok(facts) => facts,
        Err(error) => {
            findings.push(unreachable(queue, &error));
            return findings;
        }
    };
    findings.extend(server_findings(queue, &facts, options.allow_multi_primary));
    findings.extend(super::limits::limit_findings(queue, &facts));
    match super::wake::wake_report(queue, &database, &mut servers.binlog).await {
        Ok(wake) => servers.wakes.push(wake),
        Err(finding) => findings.push(finding),
    }
    match super::due::due_report(queue) {
        Some(Ok(on_time)) => servers.due.push(on_time),
        Some(Err(finding)) => findings.push(finding),
        None => {}
    }
    servers.count_workers(&database, queue, &facts);
    let mut session = match Session::open(queue, &database).await {
        Ok(session) => session,
        Err(e) => {
            findings.extend(not_opened(queue, e));
            return findings;
        }
    };
    let (conn, prepared) = session.parts();
    if let Some(key) = prepared.columns.names.get(prepared.key_index) {
        findings.extend(offline::outcome_not_by_key(queue, key));
    }
    match tables::session_clock(conn, queue).await {
        Ok(clocks) => findings.extend(clocks),
        Err(e) => findings.push(stopped(queue, &e)),
    }
    match deeper(queue, &database, &mut session).await {
        Ok(more) => findings.extend(more),
        Err(e) => findings.push(stopped(queue, &e)),
    }
    let wake = servers.wakes.iter().find(|w| w.queue == queue.name);
    match explain_reads(queue, &mut session, wake).await {
        Ok(reads) => servers.reads.extend(reads),
        Err(e) => findings.push(stopped(queue, &e)),
    }
    if let Some(Action::External(action)) = action {
        let sample = downstream::sample_row(queue, &mut session).await;
        findings.extend(downstream::probe(queue, action.as_ref(), sample.as_ref()).await);
    }
    // Ends whatever check left open, XA transactions included: the server rolls
    // back a session's transaction when the session ends.
    session.close().await;
    findings
}

/// Each table the queue's select reads, explained ([`super::reads`]), in a
/// transaction rolled back.
async fn explain_reads(
    queue: &QueueConfig,
    session: &mut Session,
    wake: Option<&super::wake::WakeReport>,
) -> Result<Vec<String>, mysql_async::Error> {
    let (conn, prepared) = session.parts();
    let reads = super::reads::tables_read(conn, queue, prepared, wake).await;
    conn.query_drop("ROLLBACK").await?;
    reads
}

/// The database could not be used: `why` says so in full.
fn unreachable(queue: &QueueConfig, why: &str) -> Finding {
    queue.finding(Severity::Error, &["database_url"], why)
}

/// Why a worker's session could not be opened, as `run` would say at start.
fn not_opened(queue: &QueueConfig, e: OpenError) -> Vec<Finding> {
    match e {
        OpenError::Invalid(mut invalid) => {
            if let Some(key) = key_name(queue) {
                invalid.extend(offline::outcome_not_by_key(queue, &key));
            }
            invalid
        }
        OpenError::Unreachable(error) => vec![unreachable(
            queue,
            &format!("cannot reach the database: {error}"),
        )],
    }
}

/// Why the deeper checks stopped part way.
fn stopped(queue: &QueueConfig, e: &mysql_async::Error) -> Finding {
    if is_expected_contention(e) {
        return queue.finding(
            Severity::Warning,
            &["select"],
            format!(
                "not proven: a running transaction held a lock the proof needed ({}); check again",
                describe_error(e)
            ),
        );
    }
    if is_statement_error(e) {
        return queue.finding(
            Severity::Error,
            &["select"],
            format!(
                "check stopped: the server refused one of its statements (a claim, XA START): {}",
                describe_error(e)
            ),
        );
    }
    queue.finding(
        Severity::Error,
        &["database_url"],
        format!(
            "lost the database connection while checking: {}",
            describe_error(e)
        ),
    )
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
        problems.extend(server::multi_primary_problem(facts, queue));
    }
    problems
        .into_iter()
        .map(|message| queue.finding(Severity::Error, &["database_url"], message))
        .collect()
}

/// The checks that need the queue prepared: tables, self-test, index, proof.
async fn deeper(
    queue: &QueueConfig,
    database: &Database,
    session: &mut Session,
) -> Result<Vec<Finding>, mysql_async::Error> {
    let (conn, prepared) = session.parts();
    queries::limit_lock_waits(conn, queries::LOCK_WAIT_SECONDS).await?;
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
    let self_test = self_test::skip_locked(queue, database, prepared).await?;
    let mut findings: Vec<Finding> = self_test.finding(queue).into_iter().collect();
    match index::claim_cost(conn, queue, prepared).await? {
        Some(costly) => findings.push(costly),
        None => findings.extend(index::missing_index(conn, queue).await?),
    }
    findings.extend(oldest::oldest_read(conn, queue, prepared).await?);
    findings.extend(super::recurring::bad_expressions(conn, queue, prepared).await?);
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
                    "the two-session SKIP LOCKED self-test could not run: no unlocked row was \
                     waiting",
                ));
            }
            findings.extend(proved);
        }
        None => findings.push(nothing_to_claim(conn, queue, prepared).await?),
    }
    findings.extend(super::failed::prove(conn, queue, prepared).await?);
    findings.extend(super::packet::batch_fits(conn, queue, prepared).await?);
    findings.extend(super::history::writable(conn, queue).await?);
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

/// The warning when no row could be claimed: an empty queue, or every waiting row
/// held by running workers.
async fn nothing_to_claim(
    conn: &mut Conn,
    queue: &QueueConfig,
    prepared: &PreparedQueue,
) -> Result<Finding, mysql_async::Error> {
    let params = prepared.claim_params(&queue.name);
    let waiting = match WaitingRows::prepare(conn, &queue.select, &params, &[]).await {
        Ok(rows) => Some(rows.count(conn, &[]).await?),
        Err(e) if is_statement_error(&e) => None,
        Err(e) => return Err(e),
    };
    // An empty queue is a correct queue not yet proven: a note, so that `--strict` in
    // a deploy pipeline passes on it; rows that wait but are locked are a warning.
    let severity = match waiting {
        Some(0) => Severity::Note,
        _ => Severity::Warning,
    };
    let what = match waiting {
        Some(0) => "queue is empty".to_string(),
        Some(locked) => format!(
            "no unlocked row is waiting ({locked} waiting row{} locked by running transactions)",
            if locked == 1 { " is" } else { "s are" }
        ),
        None => "no unlocked row is waiting".to_string(),
    };
    Ok(queue.finding(
        severity,
        &["select"],
        format!(
            "not proven: {what} — with no row to claim, neither the leave-the-query proof nor \
             the two-session SKIP LOCKED self-test could run; check again when a row is waiting"
        ),
    ))
}
