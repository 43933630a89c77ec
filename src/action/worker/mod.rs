//! `type = "worker"`: long-lived processes fed one JSON line per item on stdin
//! (the row; in batch scope the batch), each answering one line per item (the
//! protocol: [`protocol`]). A queue keeps as many as it runs items at once, started
//! as items need them and kept between items: a handler stays warm (its
//! interpreter, its framework's bootstrap) instead of starting for every row.
//!
//! A process that exits, hangs past the item's deadline, or writes a line that is
//! not the protocol is killed (its process group) and replaced — the next start
//! waits a little longer each time it happens again — and the item it held fails
//! with why — PHP's own message when PHP died in it; one that ends before its first
//! answer is trouble downstream (a program that cannot run, or an item that kills
//! it: the breaker tells). A program that does not start at all cannot have
//! handled the item: unreached, its attempt not spent. After `max_items` a process is retired: its
//! stdin closed, [`GRACE`] to exit, then killed. So are the idle ones when the
//! queue ends (a stop, a reload). Each dies with tableq, even by `kill -9`.
//!
//! - [`config`]: its `[action]` table.
//! - `protocol`: what a line a worker writes means.
//! - `process`: one worker process — started, handed an item, its stderr logged,
//!   ended.
//! - `probe`: `check`'s look: the command starts, and ends when its input does.

pub mod config;
mod probe;
mod process;
mod protocol;

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use tracing::{info, warn};

use super::{Action, ActionError, External, Job, Outcome, Ready};
use crate::backoff::doubled;
use crate::db::row_json::{item_json, items_json};
use crate::lock::lock;
use config::WorkerAction;
use process::{Ended, Running};

/// How long a retired process has to exit once its stdin is closed.
pub const GRACE: Duration = Duration::from_secs(5);
/// The longest wait before starting a process again after others ended badly.
const MOST_BACKOFF: Duration = Duration::from_secs(5);

/// A queue's worker action: its processes.
pub struct Worker {
    config: Arc<WorkerAction>,
    /// The command as a message names it: `php worker.php`.
    program: String,
    /// The processes waiting for an item.
    idle: Mutex<Vec<Running>>,
    /// How many processes were started: the next one's number.
    started: AtomicU64,
    /// Processes that ended badly since the last good answer: the next start
    /// waits for them.
    troubles: AtomicU32,
}

impl Worker {
    pub fn new(config: &WorkerAction) -> Worker {
        Worker {
            program: config.argv.join(" "),
            config: Arc::new(config.clone()),
            idle: Mutex::new(Vec::new()),
            started: AtomicU64::new(0),
            troubles: AtomicU32::new(0),
        }
    }

    /// Hands the job's item (in batch scope, its items) to a process, as one line,
    /// and reads its answer.
    async fn run_job(&self, job: Job<'_>) -> Outcome {
        let Some(first) = job.items.first() else {
            return Outcome::success();
        };
        let row = match job.batch {
            true => items_json(job.items),
            false => item_json(first),
        };
        let mut line = match serde_json::to_vec(&row) {
            Ok(line) => line,
            Err(e) => return Outcome::failure(format!("cannot encode the row as JSON: {e}")),
        };
        line.push(b'\n');
        let mut lent = match self.lend(job.queue).await {
            Ok(lent) => lent,
            Err(cannot) => return cannot,
        };
        let answered = lent.process().exchange(&line, job.progress.as_deref()).await;
        match answered {
            Ok(outcome) => {
                self.troubles.store(0, Ordering::Relaxed);
                lent.give_back();
                outcome
            }
            Err(ended) => lent.ended(ended),
        }
    }

    /// An idle process that can take an item, or a new one; `Err`: none can be
    /// started.
    async fn lend(&self, queue: &str) -> Result<Lent<'_>, Outcome> {
        loop {
            let idle = lock(&self.idle).pop();
            let Some(mut process) = idle else { break };
            match process.idle_check().await {
                Ok(()) => return Ok(Lent::new(self, process)),
                Err(ended) => {
                    let (number, pid) = (process.number, process.pid);
                    warn!(process = number, pid, "worker process {} while it had no item; a new one starts", said(&ended));
                    self.troubles.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        let troubles = self.troubles.load(Ordering::Relaxed);
        if troubles > 0 {
            tokio::time::sleep(backoff(troubles)).await;
        }
        let number = self.started.fetch_add(1, Ordering::Relaxed) + 1;
        match Running::start(&self.config, queue, number) {
            Ok(process) => {
                info!(process = number, pid = process.pid, "worker process started");
                Ok(Lent::new(self, process))
            }
            // Nothing was handed over: unreached, and the circuit paces the tries
            // (no backoff of its own, which would eat into the item's deadline).
            Err(e) => Err(Outcome::unreached(format!("cannot run {}: {e}", self.program))),
        }
    }
}

/// How long to wait before starting a process after `troubles` ended badly in a
/// row: 100 ms, doubling, at most [`MOST_BACKOFF`].
fn backoff(troubles: u32) -> Duration {
    doubled(Duration::from_millis(100), troubles, MOST_BACKOFF)
}

/// What a process did, for a message: `exited (exit status 3: …)`.
fn said(ended: &Ended) -> String {
    match ended {
        Ended::Exited(how) => format!("exited ({how})"),
        Ended::NotProtocol(why) => format!("wrote {why}"),
        Ended::Died(php) => format!("died: {php}"),
    }
}

/// A process handling an item. Dropped with it still in hand — the item's
/// deadline passed, or the item was cancelled — it is killed.
struct Lent<'w> {
    worker: &'w Worker,
    process: Option<Running>,
}

impl<'w> Lent<'w> {
    fn new(worker: &'w Worker, process: Running) -> Lent<'w> {
        Lent {
            worker,
            process: Some(process),
        }
    }

    fn process(&mut self) -> &mut Running {
        self.process.as_mut().expect("a lent process until it is given back")
    }

    /// The item answered: the process waits for the next, or is retired after
    /// `max_items`, or once it said that answer was its last.
    fn give_back(mut self) {
        let Some(process) = self.process.take() else {
            return;
        };
        if process.leaving {
            info!(process = process.number, pid = process.pid, items = process.answered,
                "worker process said its answer was its last; a new one starts with the next item");
        } else if process.answered < self.worker.config.max_items {
            lock(&self.worker.idle).push(process);
            return;
        } else {
            info!(process = process.number, pid = process.pid, items = process.answered,
                "worker process retired after max_items; a new one starts with the next item");
        }
        tokio::spawn(process.retire(GRACE));
    }

    /// The process ended without answering: it is killed, and the item's outcome
    /// says why. The item was handed over, so it may have run: PHP's death while
    /// the process held it is its failure, with PHP's message; before the process's
    /// first answer, it is trouble downstream (a program that cannot run, or the
    /// item killed it: the breaker tells), else the item's failure.
    fn ended(mut self, ended: Ended) -> Outcome {
        let Some(process) = self.process.take() else {
            return Outcome::failure("the worker process was lost");
        };
        self.worker.troubles.fetch_add(1, Ordering::Relaxed);
        let what = said(&ended);
        warn!(process = process.number, pid = process.pid, "worker process {what}; it is killed, a new one starts");
        let first = process.answered == 0;
        let outcome = match ended {
            Ended::Died(php) if first => Outcome::downstream(format!(
                "{php} (the worker process {} died before its first answer)",
                self.worker.program
            )),
            Ended::Died(php) => Outcome::failure(php),
            _ if first => Outcome::downstream(format!(
                "cannot run {}: the worker process {what} before its first answer",
                self.worker.program
            )),
            _ => Outcome::failure(format!(
                "while handling the item, the worker process {what}; a new one starts"
            )),
        };
        Outcome {
            interrupted: true,
            ..outcome
        }
    }
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        if let Some(process) = self.process.take() {
            self.worker.troubles.fetch_add(1, Ordering::Relaxed);
            warn!(process = process.number, pid = process.pid,
                "worker process killed: its item was cut off (its deadline, or the item cancelled); a new one starts");
        }
    }
}

/// The queue is done with its processes (a stop, a reload): each idle one gets
/// its stdin closed and [`GRACE`] to exit, then is killed.
impl Drop for Worker {
    fn drop(&mut self) {
        let mut idle = std::mem::take(&mut *lock(&self.idle));
        for process in &mut idle {
            process.close_stdin();
        }
        let until = Instant::now() + GRACE;
        while Instant::now() < until && idle.iter_mut().any(|p| !p.has_exited()) {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Ready for WorkerAction {
    fn ready(&self) -> Result<Action, ActionError> {
        Ok(Action::external(Worker::new(self)))
    }
}

impl External for Worker {
    fn run<'a>(&'a self, job: Job<'a>) -> BoxFuture<'a, Outcome> {
        Box::pin(self.run_job(job))
    }

    fn waiting_for(&self) -> Option<String> {
        Some(format!(
            "for the worker process ({}) to answer; it is killed, a new one starts",
            self.program
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_again_sooner_than_later() {
        assert_eq!(backoff(1), Duration::from_millis(100));
        assert_eq!(backoff(3), Duration::from_millis(400));
        assert_eq!(backoff(40), MOST_BACKOFF);
    }
}
