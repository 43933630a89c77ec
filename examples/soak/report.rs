//! The summary: faults by kind, rows per queue, duplicates by cause, the verdict.

use std::collections::BTreeMap;

use crate::checker::{Outcome, QueueFigures};
use crate::nemesis::{Fault, Kind};

pub fn faults(faults: &[Fault]) {
    println!("\n==> faults: {}", faults.len());
    let mut by_kind: BTreeMap<Kind, usize> = BTreeMap::new();
    for fault in faults {
        *by_kind.entry(fault.kind).or_default() += 1;
    }
    for kind in Kind::ALL {
        let count = by_kind.get(&kind).copied().unwrap_or(0);
        println!("  {:<28} {count:>5}", kind.describe());
    }
}

pub fn rows(queues: &[QueueFigures]) {
    println!("\n==> rows");
    println!(
        "  {:<8} {:>7} {:>7} {:>18} {:>8} {:>5} {:>11} {:>11} {:>12} {:>8}",
        "queue",
        "rows",
        "done",
        "failed (by design)",
        "waiting",
        "lost",
        "deliveries",
        "duplicates",
        "doubled SQL",
        "altered"
    );
    for q in queues {
        let failed = q.failed_by_design + q.failed_other.len() as u64;
        let failed = format!("{failed} ({})", q.failed_by_design);
        let (duplicates, doubled) = match q.queue {
            "sql" => ("-".to_string(), q.doubled.to_string()),
            _ => (q.duplicates.to_string(), "-".to_string()),
        };
        println!(
            "  {:<8} {:>7} {:>7} {:>18} {:>8} {:>5} {:>11} {:>11} {:>12} {:>8}",
            q.queue,
            q.rows,
            q.done,
            failed,
            q.waiting,
            q.lost,
            q.deliveries,
            duplicates,
            doubled,
            q.altered.len()
        );
    }
}

pub fn duplicates(queues: &[QueueFigures]) {
    println!("\n==> duplicate deliveries by cause");
    for q in queues.iter().filter(|q| q.queue != "sql") {
        let causes: Vec<String> = q
            .causes
            .iter()
            .map(|(cause, count)| format!("{cause} {count}"))
            .collect();
        let causes = if causes.is_empty() {
            "none".to_string()
        } else {
            causes.join(", ")
        };
        println!(
            "  {:<8} {causes}; unexplained {}",
            q.queue,
            q.unexplained.len()
        );
        for line in q.unexplained.iter().take(10) {
            println!("           unexplained: {line}");
        }
    }
}

/// Prints the rest of the checks and the verdict; true if the soak passed.
pub fn verdict(outcome: &Outcome) -> bool {
    println!("\n==> other checks");
    println!(
        "  commands that saw a secret of tableq's environment: {}",
        outcome.leaks
    );
    println!(
        "  a value reached a shell: {}",
        if outcome.pwned { "yes" } else { "no" }
    );
    println!(
        "  read-only faults: {}; lines where tableq said the database refuses writes (read-only): {}",
        outcome.read_only_faults, outcome.said.read_only
    );
    println!(
        "  lease renewals that went through: {}; leases lost: {}",
        outcome.renewals, outcome.said.leases_lost
    );
    println!(
        "  \"No child processes\" in a log or a recorded failure: {}",
        outcome.said.no_child.len()
    );
    for line in outcome.said.no_child.iter().take(5) {
        println!("    {line}");
    }
    for q in &outcome.queues {
        for line in q.altered.iter().take(5) {
            println!("  {} arrived altered: {line}", q.queue);
        }
        for line in q.failed_other.iter().take(5) {
            println!("  {} failed for good after faults: {line}", q.queue);
        }
    }
    let problems = outcome.problems();
    if problems.is_empty() {
        println!("\n==> PASS: nothing lost, no SQL effect doubled, every duplicate explained");
        return true;
    }
    println!("\n==> FAIL");
    for problem in &problems {
        println!("  {problem}");
    }
    false
}
