//! The soak of issues 9 and 25: three tableq processes work four queues — an SQL
//! action, a signed webhook to a local receiver, a command, and a command of 1 to 3 s
//! in lease mode — while a seeded nemesis kills, stops, reloads, stalls and breaks
//! everything around them, turns the database read-only for a while (a failover)
//! and makes lease renewals slow; then a checker reads the database and every log
//! and says what happened to each row.
//!
//! ```text
//! scripts/soak.sh [--rows 20000] [--seconds 120] [--seed N] [--workers 4] [--keep]
//! ```
//!
//! The run: a private MariaDB (tests/it/support/mariadb.rs); the tables and a producer
//! that inserts `--rows` rows per queue (a tenth of that into the lease queue) over
//! the first part of the run, hostile values included; three `tableq run` processes
//! over the same queue files, each connected as an ordinary user (so `read_only`
//! applies to it) through a loopback proxy of its own that can stall; the nemesis
//! for `--seconds`; then every fault healed, the queues drained, the processes
//! stopped with SIGTERM, and the checker. Exit status 0 when nothing was lost, no SQL
//! effect was applied twice, every value arrived as it was written, every duplicate
//! delivery has a cause in the nemesis log, the queues drained, no log says "No
//! child processes" and the processes said the database was read-only when it was;
//! 1 otherwise; 2 when the soak itself could not run.
//!
//! # Layout
//!
//! - `options`: the command line.
//! - `database`: connecting, the schema (four queue tables, the SQL action's effect
//!   log, the failure log, a procedure that fails or hangs for some rows, the switch
//!   that makes renewals slow, the worker user), counting waiting rows.
//! - `data`: what each row holds (chosen by its id, so the checker knows), what it
//!   should look like when it arrives, and the producer that inserts the rows.
//! - `queues`: the four queue files and the command queues' scripts.
//! - `receiver`: the webhook receiver, which logs every request it gets.
//! - `fleet`: the tableq processes: start, kill -9, SIGTERM, SIGHUP, their proxies.
//! - `nemesis`: the seeded faults and their log; `rng`: its random numbers;
//!   `clock`: the time every log is written in.
//! - `deliveries`: the receiver's and the scripts' logs read back.
//! - `checker`: the figures per queue, and what the processes' logs say;
//!   `attribution`: a cause for each duplicate.
//! - `report`: the summary table; `run`: one soak, start to end.

// The test harness's own code, not a copy: the private MariaDB, the stalling proxy
// and the loopback web server.
#[allow(dead_code)]
#[path = "../../tests/it/support/mariadb.rs"]
mod mariadb;
#[allow(dead_code)]
#[path = "../../tests/it/support/proxy.rs"]
mod proxy;
#[allow(dead_code)]
#[path = "../../tests/it/support/web.rs"]
mod web;

mod attribution;
mod checker;
mod clock;
mod data;
mod database;
mod deliveries;
mod fleet;
mod nemesis;
mod options;
mod queues;
mod receiver;
mod report;
mod rng;
mod run;

use std::process::ExitCode;

use clap::Parser;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let options = options::Options::parse();
    match run::soak(&options).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(error) => {
            eprintln!("soak: could not run: {error:#}");
            ExitCode::from(2)
        }
    }
}
