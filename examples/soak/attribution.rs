//! A cause for each duplicate delivery, from the nemesis log. A row delivered n
//! times has n − 1 deliveries whose transaction did not commit; each must be
//! explained by a fault that can undo a delivery, close enough in time and, where
//! the fault hit one tableq process, made by that process:
//!
//! - the delivery itself hung past the action's timeout: a timeout;
//! - kill -9, SIGTERM or SIGHUP of the start that made it, the delivery at most
//!   [`LEAD`] before the fault (the batch's other actions, then the COMMIT) and no
//!   later than its end (a command tableq started before it was killed lives on);
//! - a stall of the path of the process that made it, or a database kill: from
//!   [`LEAD`] before it to `database_timeout` after it ended;
//! - an endpoint reset: from [`LEAD`] before it to its end.

use crate::deliveries::Delivery;
use crate::nemesis::{Fault, Kind};
use crate::queues::{ACTION_TIMEOUT, DATABASE_TIMEOUT, SHUTDOWN_TIMEOUT};

/// How long before a fault a delivery can be and still have its transaction open:
/// the rest of the batch's actions (their timeout), then outcome SQL and COMMIT
/// (the database's), and a second for the scheduler.
pub const LEAD: f64 = ACTION_TIMEOUT.as_secs_f64() + DATABASE_TIMEOUT.as_secs_f64() + 1.0;

/// Why `delivery` did not count, in a few words; None when nothing explains it.
pub fn cause(delivery: &Delivery, faults: &[Fault], hung: &str) -> Option<String> {
    if delivery.hung {
        return Some(format!("timeout: {hung}"));
    }
    faults
        .iter()
        .filter(|fault| explains(fault, delivery))
        .min_by(|a, b| distance(a, delivery).total_cmp(&distance(b, delivery)))
        .map(|fault| short(fault.kind).to_string())
}

fn explains(fault: &Fault, delivery: &Delivery) -> bool {
    let at = delivery.at;
    let from = fault.start - LEAD;
    let database = DATABASE_TIMEOUT.as_secs_f64();
    let same_start = fault.target.as_deref() == Some(delivery.process.as_str());
    let same_process = fault.target.as_deref().map(process) == Some(process(&delivery.process));
    match fault.kind {
        Kind::Kill | Kind::Term => same_start && (from..=fault.end).contains(&at),
        Kind::Hup => {
            let to = fault.end + SHUTDOWN_TIMEOUT.as_secs_f64();
            same_start && (from..=to).contains(&at)
        }
        Kind::Stall => same_process && (from..=fault.end + database).contains(&at),
        Kind::DatabaseKill => (from..=fault.end + database).contains(&at),
        Kind::EndpointReset => (from..=fault.end).contains(&at),
        _ => false,
    }
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
    }
}
