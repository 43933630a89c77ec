//! What arrived, read back from the receiver's log and the command scripts' logs and
//! files, in one shape: a delivery each time the receiver or the command did its
//! work for a row, and everything that arrived otherwise than it was written.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;

use serde_json::Value as Json;

use crate::data::{argv_bytes, fingerprint, json_fields, values};
use crate::queues::SCRIPT;
use crate::receiver::Request;

/// One time the endpoint or the command did its work for a row.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub at: f64,
    /// The tableq start that sent it (`p2.3`).
    pub process: String,
    /// It hung past the action's timeout after doing its work.
    pub hung: bool,
}

#[derive(Debug, Default)]
pub struct Arrivals {
    /// Per row key, in the order they happened.
    pub deliveries: BTreeMap<u64, Vec<Delivery>>,
    /// Every request or run, refused ones included.
    pub attempts: u64,
    /// Descriptions of what did not arrive as written (values, ids, signatures).
    pub altered: Vec<String>,
    /// Commands that saw a secret of tableq's environment.
    pub leaks: u64,
}

impl Arrivals {
    fn delivered(&mut self, key: u64, delivery: Delivery) {
        self.deliveries.entry(key).or_default().push(delivery);
    }
}

/// The fingerprint row `key`'s values should arrive with.
fn expected_print(key: u64) -> String {
    fingerprint(&json_fields(&values(key)))
}

/// The receiver's log.
pub fn http(log: &Path) -> anyhow::Result<Arrivals> {
    let mut arrivals = Arrivals::default();
    for line in BufReader::new(std::fs::File::open(log)?).lines() {
        let request: Request = serde_json::from_str(&line?)?;
        arrivals.attempts += 1;
        let Ok(key) = request.key.parse::<u64>() else {
            arrivals
                .altered
                .push(format!("a request for {:?}", request.key));
            continue;
        };
        if request.print != expected_print(key) {
            arrivals
                .altered
                .push(format!("row {key}: body {}", request.print));
        }
        if !request.signed {
            arrivals.altered.push(format!("row {key}: a bad signature"));
        }
        if request.webhook_id != format!("http_{key}") {
            let id = &request.webhook_id;
            arrivals.altered.push(format!("row {key}: webhook-id {id}"));
        }
        if request.accepted() {
            let delivery = Delivery {
                at: request.at,
                process: request.process.clone(),
                hung: request.answer == "hang",
            };
            arrivals.delivered(key, delivery);
        }
    }
    sort(&mut arrivals);
    Ok(arrivals)
}

/// A command script's log in `dir` (the command queue's or the lease queue's), and
/// the stdin and argv it kept for each run.
pub fn command(dir: &Path, log: &str) -> anyhow::Result<Arrivals> {
    let mut arrivals = Arrivals::default();
    let Ok(log) = std::fs::File::open(dir.join(log)) else {
        return Ok(arrivals);
    };
    for line in BufReader::new(log).lines() {
        let line = line?;
        let fields: Vec<&str> = line.split('\t').collect();
        let [at, key, mode, process, leak, name] = fields[..] else {
            arrivals.altered.push(format!("{SCRIPT} logged {line:?}"));
            continue;
        };
        let key: u64 = key.parse()?;
        arrivals.attempts += 1;
        arrivals.leaks += u64::from(leak != "no");
        if let Some(wrong) = command_inputs(dir, name, key) {
            arrivals.altered.push(format!("row {key}: {wrong}"));
        }
        let delivery = Delivery {
            at: at.parse()?,
            process: process.to_string(),
            hung: mode == "hang",
        };
        arrivals.delivered(key, delivery);
    }
    sort(&mut arrivals);
    Ok(arrivals)
}

/// What is wrong with the stdin and argv one run of the command kept, if anything.
fn command_inputs(dir: &Path, name: &str, key: u64) -> Option<String> {
    let row = values(key);
    let stdin = std::fs::read(dir.join(format!("{name}.json"))).unwrap_or_default();
    let print = match serde_json::from_slice::<Json>(&stdin) {
        Ok(json) if json["id"] == key => fingerprint(&[
            json["label"].clone(),
            json["body"].clone(),
            json["raw"].clone(),
        ]),
        Ok(json) => return Some(format!("stdin has id {}", json["id"])),
        Err(e) => return Some(format!("stdin is not JSON: {e}")),
    };
    if print != fingerprint(&json_fields(&row)) {
        return Some("stdin's values differ".to_string());
    }
    let argv = std::fs::read(dir.join(format!("{name}.argv"))).unwrap_or_default();
    (argv != argv_bytes(&row)).then(|| format!("argv {:?}", String::from_utf8_lossy(&argv)))
}

fn sort(arrivals: &mut Arrivals) {
    for deliveries in arrivals.deliveries.values_mut() {
        deliveries.sort_by(|a, b| a.at.total_cmp(&b.at));
    }
}
