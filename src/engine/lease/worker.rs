//! One lease-mode worker: claim (a short transaction), work each leased row with no
//! connection held, record each outcome; idle as transaction mode's workers do —
//! one watcher polls an empty queue, the others sleep until a full claim wakes them.

use std::sync::Arc;

use futures::future::join_all;
use tokio::time::Instant;
use tracing::{debug, info, info_span, warn, Instrument};

use super::claim::{claim, Claimed};
use super::heartbeat::{hold, Held};
use super::outcome::{release, settle};
use super::{worker_name, Lease, LeaseError};
use crate::action::command::Progress;
use crate::action::{Action, Outcome, Outside};
use crate::db::SessionPool;
use crate::engine::backoff::{pause, Backoff};
use crate::engine::idle::{Turn, Watch};
use crate::engine::queue::QueueRuntime;
use crate::engine::report::{BatchReport, Fate};
use crate::engine::stop_when_empty::Ticket;
use crate::telemetry::stats::Connected;

/// Runs worker `index` of a lease-mode `queue` until it is told to stop.
pub async fn run(queue: Arc<QueueRuntime>, pool: Arc<SessionPool>, index: usize) {
    let span = info_span!("worker", queue = %queue.config.name, worker = index);
    let worker = LeaseWorker {
        queue: &queue,
        pool: &pool,
        index,
        name: worker_name(index),
        connected: None,
        backoff: Backoff::new(queue.config.error_backoff),
        watch: None,
    };
    worker.run().instrument(span).await;
}

struct LeaseWorker<'a> {
    queue: &'a QueueRuntime,
    pool: &'a SessionPool,
    index: usize,
    name: Arc<str>,
    /// Counted as connected while its claims reach the database, so the watchdog
    /// watches the queue as it watches transaction mode's (one that cannot reach its
    /// database is waiting, not stalled).
    connected: Option<Connected>,
    backoff: Backoff,
    /// Held while this worker is the one that polls the empty queue.
    watch: Option<Watch<'a>>,
}

impl<'a> LeaseWorker<'a> {
    async fn run(mut self) {
        while !self.queue.stop.is_cancelled() {
            if !self.turn().await {
                break;
            }
        }
    }

    /// One claim and its work; false when the worker is to stop. The circuit's pass
    /// is held from the claim to the end of the work, never while idle or waiting.
    async fn turn(&mut self) -> bool {
        let queue = self.queue;
        // While the circuit is open, wait here: claiming would spend attempts.
        let Some(pass) = queue.circuit.pass(&queue.stop).await else {
            return false;
        };
        let ticket = queue.stop_when_empty.begin();
        let Claimed { leases, skipped } = match claim(queue, self.pool, &self.name).await {
            Ok(claimed) => claimed,
            Err(e) => {
                drop((pass, ticket));
                return self.not_claimed(&e).await;
            }
        };
        if self.connected.is_none() {
            self.connected = Some(queue.stats.connection());
        }
        if skipped > 0 {
            // Claimed and left waiting: counted as returned, and the queue is not
            // empty.
            queue.stats.record(0, 0, skipped);
        }
        if leases.is_empty() {
            drop(pass);
            if skipped > 0 {
                ticket.finish(true);
                return pause(&queue.stop, self.backoff.next_wait()).await;
            }
            return self.found_none(ticket).await;
        }
        self.watch = None;
        if leases.len() == queue.config.batch {
            queue.idle.wake_all();
        }
        if queue.stop.is_cancelled() {
            self.give_back(&leases).await;
            ticket.finish(true);
            return false;
        }
        let report = self.work_all(leases).await;
        drop(pass);
        queue
            .stats
            .record(report.done, report.failed, report.returned);
        if report.returned > 0 {
            // Some may still be leased (a lease lost, no release_sql): the queue is
            // not empty before their leases expire.
            let expiry = queue
                .config
                .lease
                .as_ref()
                .map(|l| l.expires_within(&queue.config));
            let until = Instant::now() + expiry.unwrap_or_default();
            queue.stop_when_empty.not_before(until);
        }
        let returned = report.returned + skipped;
        ticket.finish(returned > 0);
        if returned > 0 {
            return pause(&queue.stop, self.backoff.next_wait()).await;
        }
        self.backoff.reset();
        true
    }

    /// After an empty claim: stop if the queue is drained (or stopping), else idle.
    async fn found_none(&mut self, ticket: Ticket<'_>) -> bool {
        if self.queue.stop.is_cancelled() {
            // The claim gave up on seeing the stop; the queue is not known empty.
            return false;
        }
        if ticket.finish_empty() {
            info!("the queue is drained");
            return false;
        }
        self.backoff.reset();
        self.idle().await
    }

    /// After a claim that failed: back off, and say so — loud from the first worker
    /// only, as every worker would say the same. False when the worker is to stop.
    async fn not_claimed(&mut self, e: &LeaseError) -> bool {
        self.connected = None;
        let wait = self.backoff.next_wait();
        let retry_in = humantime::format_duration(wait);
        if self.index == 0 {
            warn!(error = %e, %retry_in, "could not claim; the rows are waiting");
        } else {
            debug!(error = %e, %retry_in, "could not claim; the rows are waiting");
        }
        pause(&self.queue.stop, wait).await
    }

    /// Stopping since the claim began: start nothing, and release the rows.
    async fn give_back(&self, leases: &[Lease]) {
        for lease in leases {
            release(self.queue, self.pool, lease, None).await;
        }
        self.queue.stats.record(0, 0, leases.len());
    }

    /// Works the leased rows concurrently, each to its recorded end.
    async fn work_all(&self, leases: Vec<Lease>) -> BatchReport {
        let _busy = self.queue.stats.observed.busy();
        let mut report = BatchReport::claimed(leases.len());
        let fates = join_all(leases.iter().map(|lease| {
            let span = info_span!("item", key = %lease.item.key_text());
            self.work(lease).instrument(span)
        }))
        .await;
        for (lease, fate) in leases.iter().zip(fates) {
            report.count(fate, || lease.item.key_text());
        }
        report
    }

    /// One leased row: its action held by renewals, then its outcome.
    async fn work(&self, lease: &Lease) -> Fate {
        let queue = self.queue;
        let Action::Outside(action) = &queue.action else {
            // Refused by the loader: lease mode has no SQL action.
            return Fate::Returned;
        };
        let progress = self.progress(action, &lease.id);
        let name = queue.config.name.as_str();
        let reporting = progress.clone();
        let running = async {
            let _admitted = queue.limits.admit().await;
            let ticket = queue.circuit.admit()?;
            let started = Instant::now();
            let outcome = action.run_reporting(&lease.item, name, reporting).await;
            queue.stats.observed.action.observe(started.elapsed());
            ticket.finished(&outcome).then_some(outcome)
        };
        let held = hold(queue, self.pool, lease, progress.as_deref(), running).await;
        let last = progress.as_deref().and_then(Progress::last);
        let last = last.as_deref();
        match held {
            Held::Finished(Some(outcome)) => settle(queue, self.pool, lease, &outcome, last).await,
            // Not run, or failed downstream, while the circuit is open: its attempt
            // is not spent, and the row waits again.
            Held::Finished(None) => {
                release(queue, self.pool, lease, last).await;
                Fate::Returned
            }
            // Recorded as the item's failure ([on_failure] spends an attempt), so a
            // row whose renewals always fail does not loop.
            Held::RenewalFailed(error) => {
                let failed = Outcome::failure(format!("renew_sql failed: {error}"));
                settle(queue, self.pool, lease, &failed, last).await
            }
            Held::Lost => Fate::Returned,
            Held::Aborted => {
                warn!("the shutdown timeout passed; the action is cancelled");
                release(queue, self.pool, lease, last).await;
                Fate::Returned
            }
        }
    }

    /// Where a command reports its progress: a file of its own (named after the
    /// lease) and its stdout. An HTTP action reports none.
    fn progress(&self, action: &Outside, lease_id: &str) -> Option<Arc<Progress>> {
        let Outside::Command(_) = action else {
            return None;
        };
        match Progress::create(lease_id) {
            Ok(progress) => Some(Arc::new(progress)),
            Err(e) => {
                warn!(error = %e, "cannot create the progress file; :progress stays NULL");
                None
            }
        }
    }

    /// After an empty claim: poll again after `poll_interval` as the queue's watcher,
    /// or sleep until woken.
    async fn idle(&mut self) -> bool {
        let queue = self.queue;
        if self.watch.is_none() {
            match queue.idle.turn() {
                Turn::Watch(role) => self.watch = Some(role),
                Turn::Sleep(sleep) => {
                    self.connected = None;
                    sleep.until_woken(&queue.stop).await;
                    return true;
                }
            }
        }
        pause(&queue.stop, queue.config.poll_interval).await
    }
}
