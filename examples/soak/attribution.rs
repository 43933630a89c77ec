//! A cause for each duplicate delivery. A row delivered n times has n − 1
//! deliveries that did not count, each for one of two reasons:
//!
//! - tableq recorded the attempt as failed (the queues' `[on_failure]` logs every
//!   failure): the endpoint or the command hung past the action's timeout after
//!   doing its work (they log that they did), the answer came too late, or the
//!   connection broke after the request had arrived;
//! - or nothing was recorded, so the transaction never committed: it must have been
//!   a fault of the nemesis, close enough in time and, where it hit one tableq
//!   process, made by that process — kill -9, SIGTERM or SIGHUP of the start that
//!   made the delivery, at most [`LEAD`] after it (a command started before the kill
//!   lives on, so until the fault's end too); a stall of that process's path, a
//!   database kill, or the database read-only, from [`LEAD`] before to
//!   `database_timeout` after; an endpoint reset, from [`LEAD`] before to its end.
//!
//! The lease queue's jobs live on outside any transaction, and log their delivery
//! when done: each window reaches [`LEASE_JOB_LONGEST`] further for it. A lease
//! that expired meanwhile (renewals refused or slow, the process gone) lets
//! another process take the row over; the first job's outcome then matches no
//! row. Its renewals made slow explain its duplicates as the database's faults do.

use crate::deliveries::Delivery;
use crate::nemesis::{Fault, Kind};
use crate::queues::{ACTION_TIMEOUT, DATABASE_TIMEOUT, LEASE_JOB_LONGEST, SHUTDOWN_TIMEOUT};

/// How long before a fault a delivery can be and still have its transaction open:
/// the rest of the batch's actions (their timeout), then outcome SQL and COMMIT
/// (the database's), and a second for the scheduler.
pub const LEAD: f64 = ACTION_TIMEOUT.as_secs_f64() + DATABASE_TIMEOUT.as_secs_f64() + 1.0;

/// What sets one queue's duplicates apart.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// What hangs past the action's timeout in it (`the endpoint hung`).
    pub hung: &'static str,
    /// It works in lease mode: its deliveries come later, its renewals can be slow.
    pub lease: bool,
}

/// A failed attempt a queue recorded for a row.
#[derive(Debug, Clone)]
pub struct Failure {
    pub at: f64,
    pub error: String,
}

/// Why `delivery` did not count, in a few words; None when nothing explains it.
/// `next` is the time of the row's next delivery; `failures` the row's recorded
/// failures; `shape` the queue's.
pub fn cause(
    delivery: &Delivery,
    next: f64,
    failures: &[Failure],
    faults: &[Fault],
    shape: Shape,
) -> Option<String> {
    if delivery.hung {
        return Some(format!("timeout: {}", shape.hung));
    }
    if let Some(failure) = failures
        .iter()
        .find(|failure| (delivery.at..=next).contains(&failure.at))
    {
        return Some(recorded(&failure.error));
    }
    faults
        .iter()
        .filter(|fault| explains(fault, delivery, shape))
        .min_by(|a, b| distance(a, delivery).total_cmp(&distance(b, delivery)))
        .map(|fault| short(fault.kind).to_string())
}

/// Whether `fault` explains `delivery` not counting: the right process, the right
/// time.
fn explains(fault: &Fault, delivery: &Delivery, shape: Shape) -> bool {
    let at = delivery.at;
    let from = fault.start - LEAD;
    let late = if shape.lease {
        LEASE_JOB_LONGEST.as_secs_f64()
    } else {
        0.0
    };
    let database = DATABASE_TIMEOUT.as_secs_f64() + late;
    let same_start = fault.target.as_deref() == Some(delivery.process.as_str());
    let same_process = fault.target.as_deref().map(process) == Some(process(&delivery.process));
    match fault.kind {
        Kind::Kill | Kind::Term => same_start && (from..=fault.end + late).contains(&at),
        Kind::Hup => {
            let to = fault.end + SHUTDOWN_TIMEOUT.as_secs_f64() + late;
            same_start && (from..=to).contains(&at)
        }
        Kind::Stall => same_process && (from..=fault.end + database).contains(&at),
        Kind::DatabaseKill | Kind::ReadOnly => (from..=fault.end + database).contains(&at),
        Kind::SlowRenewal => shape.lease && (from..=fault.end + database).contains(&at),
        Kind::EndpointReset => (from..=fault.end).contains(&at),
        _ => false,
    }
}

/// The cause a recorded failure gives: a timeout, a broken connection, or the
/// error's first words.
fn recorded(error: &str) -> String {
    if error.starts_with("timed out") {
        return "timeout: answered too late".to_string();
    }
    if error.contains("connection") && (error.contains("closed") || error.contains("reset")) {
        return "connection broken after it arrived".to_string();
    }
    // "request to 127.0.0.1:PORT failed: why" → "why"
    let why = error.split_once("failed: ").map_or(error, |(_, why)| why);
    let head: String = why.chars().take(48).collect();
    format!("failed after it arrived: {head}")
}

/// `p2` of `p2.3`: the process, whichever start of it.
fn process(label: &str) -> &str {
    label.split('.').next().unwrap_or(label)
}

fn distance(fault: &Fault, delivery: &Delivery) -> f64 {
    (fault.start - delivery.at).abs()
}

pub fn short(kind: Kind) -> &'static str {
    match kind {
        Kind::Kill => "kill -9",
        Kind::Term => "SIGTERM",
        Kind::Hup => "SIGHUP",
        Kind::DatabaseKill => "database kill",
        Kind::Stall => "stall",
        Kind::EndpointReset => "reset",
        Kind::EndpointHang => "endpoint hang",
        Kind::EndpointError => "500",
        Kind::CommandFail => "command fails",
        Kind::CommandHang => "command hang",
        Kind::ReadOnly => "read-only",
        Kind::SlowRenewal => "slow renewal",
    }
}
