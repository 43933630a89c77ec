//! The figures: what each row ended as (read from the database), what arrived for
//! it (the SQL action's effect log, the receiver's log, the commands' logs), the
//! duplicates and their causes, what the tableq processes' logs say, and the
//! problems that fail the soak.

use std::collections::BTreeMap;
use std::path::Path;

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use crate::attribution::{cause, Failure, Shape};
use crate::data::{fails_by_design, values, Values};
use crate::database::table;
use crate::deliveries::Arrivals;
use crate::nemesis::Fault;

/// One queue's figures.
#[derive(Debug, Default)]
pub struct QueueFigures {
    pub queue: &'static str,
    pub rows: u64,
    pub done: u64,
    pub waiting: u64,
    /// Failed for good: rows that fail every time ([`fails_by_design`]) …
    pub failed_by_design: u64,
    /// … and others, with their last error.
    pub failed_other: Vec<String>,
    /// Rows missing from the table, or done with nothing delivered or applied.
    pub lost: u64,
    /// Rows whose values in the table are no longer what was written.
    pub changed: u64,
    /// SQL: effects applied; HTTP and command: deliveries.
    pub deliveries: u64,
    /// Deliveries beyond the first for their row (HTTP, command).
    pub duplicates: u64,
    /// SQL: rows whose effect was applied more than once, or without the row's
    /// outcome (the action committed, the outcome SQL not).
    pub doubled: u64,
    /// Rows that fail every time, yet ended done.
    pub by_design_done: u64,
    /// What arrived otherwise than it was written.
    pub altered: Vec<String>,
    /// Duplicates per cause.
    pub causes: BTreeMap<String, u64>,
    /// Duplicates that neither a recorded failure nor a fault explains.
    pub unexplained: Vec<String>,
}

/// The table of `queue`: each row's state, and the figures the table alone gives.
async fn table_states(
    conn: &mut Conn,
    queue: &'static str,
    rows: u64,
) -> anyhow::Result<(BTreeMap<u64, String>, QueueFigures)> {
    type Row = (
        u64,
        Option<Vec<u8>>,
        Option<Vec<u8>>,
        Option<Vec<u8>>,
        String,
        Option<String>,
    );
    let sql = format!(
        "SELECT id, label, body, raw, state, last_error FROM {}",
        table(queue)
    );
    let found: Vec<Row> = conn.query(sql).await?;
    let mut figures = QueueFigures {
        queue,
        rows,
        ..QueueFigures::default()
    };
    let mut states = BTreeMap::new();
    for (id, label, body, raw, state, error) in found {
        figures.changed += u64::from(!same(&values(id), &label, &body, &raw));
        let by_design = fails_by_design(queue, id);
        match state.as_str() {
            "done" => figures.done += 1,
            "waiting" | "leased" => figures.waiting += 1,
            "failed" if by_design => figures.failed_by_design += 1,
            "failed" => figures
                .failed_other
                .push(format!("row {id}: {}", error.unwrap_or_default())),
            _ => {}
        }
        figures.by_design_done += u64::from(by_design && state == "done");
        states.insert(id, state);
    }
    figures.lost = (1..=rows).filter(|id| !states.contains_key(id)).count() as u64;
    Ok((states, figures))
}

fn same(
    v: &Values,
    label: &Option<Vec<u8>>,
    body: &Option<Vec<u8>>,
    raw: &Option<Vec<u8>>,
) -> bool {
    let bytes = |s: &Option<String>| s.as_ref().map(|s| s.as_bytes().to_vec());
    bytes(&v.label) == *label && bytes(&v.body) == *body && v.raw == *raw
}

/// The SQL queue: one effect per done row, none for any other.
pub async fn sql(conn: &mut Conn, rows: u64) -> anyhow::Result<QueueFigures> {
    let (states, mut figures) = table_states(conn, "sql", rows).await?;
    type Effect = (u64, Option<Vec<u8>>, Option<Vec<u8>>, Option<Vec<u8>>);
    let effects: Vec<Effect> = conn
        .query("SELECT job_id, label, body, raw FROM sql_effect")
        .await?;
    let mut applied: BTreeMap<u64, u64> = BTreeMap::new();
    for (id, label, body, raw) in effects {
        if !same(&values(id), &label, &body, &raw) {
            figures
                .altered
                .push(format!("row {id}: its effect's values differ"));
        }
        *applied.entry(id).or_default() += 1;
    }
    figures.deliveries = applied.values().sum();
    for (id, state) in &states {
        let times = applied.get(id).copied().unwrap_or(0);
        let done = state == "done";
        figures.lost += u64::from(done && times == 0);
        figures.doubled += u64::from(times > 1 || (!done && times > 0));
    }
    Ok(figures)
}

/// What sets `queue`'s duplicates apart.
fn shape(queue: &str) -> Shape {
    let hung = match queue {
        "http" => "the endpoint hung",
        _ => "the command hung",
    };
    Shape {
        hung,
        lease: queue == "lease",
    }
}

/// The HTTP, command or lease queue: at least one delivery per done row, and a
/// cause for every delivery beyond the first.
pub async fn delivered(
    conn: &mut Conn,
    queue: &'static str,
    rows: u64,
    arrivals: &Arrivals,
    faults: &[Fault],
) -> anyhow::Result<QueueFigures> {
    let (states, mut figures) = table_states(conn, queue, rows).await?;
    let failures = failures(conn, queue).await?;
    figures.altered = arrivals.altered.clone();
    for (id, state) in &states {
        let deliveries = arrivals.deliveries.get(id).map_or(&[][..], |d| &d[..]);
        figures.deliveries += deliveries.len() as u64;
        figures.lost += u64::from(state == "done" && deliveries.is_empty());
        let Some((_, extra)) = deliveries.split_last() else {
            continue;
        };
        figures.duplicates += extra.len() as u64;
        let failed = failures.get(id).map_or(&[][..], |f| &f[..]);
        for (n, delivery) in extra.iter().enumerate() {
            let next = deliveries[n + 1].at;
            match cause(delivery, next, failed, faults, shape(queue)) {
                Some(cause) => *figures.causes.entry(cause).or_default() += 1,
                None => figures.unexplained.push(format!(
                    "row {id}: delivered at {:.3} by {}",
                    delivery.at, delivery.process
                )),
            }
        }
    }
    Ok(figures)
}

/// The failures `queue` recorded, per row, in the order they were recorded.
async fn failures(conn: &mut Conn, queue: &str) -> anyhow::Result<BTreeMap<u64, Vec<Failure>>> {
    let found: Vec<(u64, f64, Option<String>)> = conn
        .exec(
            "SELECT job_id, at, error FROM failure_log WHERE queue = ? ORDER BY seq",
            (queue,),
        )
        .await?;
    let mut failures: BTreeMap<u64, Vec<Failure>> = BTreeMap::new();
    for (id, at, error) in found {
        let error = error.unwrap_or_default();
        failures.entry(id).or_default().push(Failure { at, error });
    }
    Ok(failures)
}

/// What the tableq processes' logs and the failure log say.
#[derive(Debug, Default)]
pub struct Said {
    /// Where "No child processes" appears: a command's exit status taken away
    /// from its worker (the old bug of slow renewals), so a command that exited 0
    /// was recorded failed.
    pub no_child: Vec<String>,
    /// Lines saying the database refuses writes because it is read-only.
    pub read_only: u64,
    /// Leases lost (a renewal or an outcome matched no row), as the processes said.
    pub leases_lost: u64,
}

/// Reads every `tableq-*.log` in `logs`, and the failure log.
pub async fn said(conn: &mut Conn, logs: &Path) -> anyhow::Result<Said> {
    const NO_CHILD: &str = "No child processes";
    let mut said = Said::default();
    for entry in std::fs::read_dir(logs)? {
        let path = entry?.path();
        let text = String::from_utf8_lossy(&std::fs::read(&path)?).into_owned();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        for line in text.lines() {
            if line.contains(NO_CHILD) {
                said.no_child.push(format!("{name}: {line}"));
            }
            said.read_only += u64::from(line.contains("refuses writes (read-only)"));
            said.leases_lost += u64::from(line.contains("lease lost"));
        }
    }
    let recorded: Vec<(String, u64)> = conn
        .exec(
            "SELECT queue, job_id FROM failure_log WHERE error LIKE ?",
            (format!("%{NO_CHILD}%"),),
        )
        .await?;
    for (queue, id) in recorded {
        said.no_child
            .push(format!("{queue} row {id}: recorded failed with {NO_CHILD}"));
    }
    Ok(said)
}

/// The lease queue's renewals that went through, over all its rows.
pub async fn renewals(conn: &mut Conn) -> anyhow::Result<u64> {
    let sql = format!("SELECT SUM(renewals) FROM {}", table("lease"));
    let sum: Option<Option<u64>> = conn.query_first(sql).await?;
    Ok(sum.flatten().unwrap_or(0))
}

/// Everything the soak found.
#[derive(Debug, Default)]
pub struct Outcome {
    pub queues: Vec<QueueFigures>,
    pub said: Said,
    /// How many times the nemesis made the database read-only.
    pub read_only_faults: u64,
    /// The lease queue's renewals that went through.
    pub renewals: u64,
    /// Commands that saw a secret of tableq's environment.
    pub leaks: u64,
    /// A value reached a shell: the file its `$(touch …)` names exists.
    pub pwned: bool,
    /// Processes that exited by themselves, stops that were not clean.
    pub anomalies: Vec<String>,
}

impl Outcome {
    /// Why the soak fails; empty when it passes.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for q in &self.queues {
            let name = q.queue;
            let mut say = |count: u64, what: &str| {
                if count > 0 {
                    problems.push(format!("{name}: {count} {what}"));
                }
            };
            say(q.lost, "rows lost");
            say(
                q.doubled,
                "rows whose SQL effect was applied more than once",
            );
            say(q.changed, "rows whose values changed in the table");
            say(
                q.altered.len() as u64,
                "deliveries that did not arrive as written",
            );
            say(
                q.unexplained.len() as u64,
                "duplicates that no recorded failure or fault explains",
            );
            say(q.waiting, "rows still waiting after the drain");
            say(q.by_design_done, "rows that fail every time ended done");
        }
        if self.leaks > 0 {
            problems.push(format!("{} commands saw a secret", self.leaks));
        }
        if self.pwned {
            problems.push("a value reached a shell".to_string());
        }
        if !self.said.no_child.is_empty() {
            problems.push(format!(
                "\"No child processes\" {} times: a command's exit status taken from its worker",
                self.said.no_child.len()
            ));
        }
        if self.read_only_faults > 0 && self.said.read_only == 0 {
            problems.push(format!(
                "the database was read-only {} times, and no tableq process said so",
                self.read_only_faults
            ));
        }
        problems.extend(self.anomalies.iter().cloned());
        problems
    }
}
