//! A lease-mode queue's workers, and one worker's turn: claim (a short
//! transaction), work each leased row with no connection held, record each outcome
//! under its lease.

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use tokio::time::Instant;
use tokio_util::task::TaskTracker;
use tracing::{warn, Instrument};

use crate::action::progress::Progress;
use crate::action::{External, Outcome};
use crate::db::due::DueQuery;
use crate::db::{DbError, Session, SessionPool};
use crate::engine::modes::lease::claim::{claim, Leased};
use crate::engine::modes::lease::heartbeat::{hold, Kept};
use crate::engine::modes::lease::{token, Lease};
use crate::engine::policy::pausing::Read;
use crate::engine::queue::stats_refresher::{refresh_stats, CountOn};
use crate::engine::queue::QueueRuntime;
use crate::engine::turn::execute::Work;
use crate::engine::turn::record::leased::{release, LeaseStore};
use crate::engine::turn::record::record;
use crate::engine::turn::report::{BatchReport, Fate, Returned};
use crate::engine::turn::settle::item_span;
use crate::engine::turn::Turn;
use crate::engine::worker::{run_worker, Ended, Mode};
use crate::telemetry::events::LostAt;
use crate::telemetry::stats::Connected;

/// Starts a lease-mode queue's workers and its backlog count, sharing a pool of
/// `[lease] connections` sessions, the first of them `first`, the session the queue
/// was validated with. Once they have all stopped, the pool's idle sessions are
/// closed politely.
pub fn start(
    queue: Arc<QueueRuntime>,
    action: Arc<dyn External>,
    tracker: &TaskTracker,
    first: Session,
) {
    let pool = Arc::new(SessionPool::new(
        &queue.config,
        &queue.database,
        queue.config.connections(),
        first,
        // The workers share the pool's sessions: their waits show as the first's.
        queue.stats.unanswered(0),
    ));
    let users = TaskTracker::new();
    for index in 0..queue.config.workers {
        let (for_mode, pool, action) = (queue.clone(), pool.clone(), action.clone());
        let mode = move || LeaseMode::new(for_mode.clone(), pool.clone(), action.clone(), index);
        users.spawn(run_worker(queue.clone(), index, mode));
    }
    users.spawn(refresh_stats(queue, CountOn::Pool(pool.clone())));
    users.close();
    tracker.spawn(async move {
        users.wait().await;
        pool.close().await;
    });
}

/// One lease-mode worker's state between turns.
pub struct LeaseMode {
    queue: Arc<QueueRuntime>,
    pool: Arc<SessionPool>,
    action: Arc<dyn External>,
    /// `:worker`: `host:pid:index`.
    name: Arc<str>,
    /// Counted as connected while its claims reach the database, so the watchdog
    /// watches the queue as it watches transaction mode's (one that cannot reach its
    /// database is waiting, not stalled).
    connected: Option<Connected>,
}

impl LeaseMode {
    pub fn new(
        queue: Arc<QueueRuntime>,
        pool: Arc<SessionPool>,
        action: Arc<dyn External>,
        index: usize,
    ) -> LeaseMode {
        LeaseMode {
            queue,
            pool,
            action,
            name: worker_name(index),
            connected: None,
        }
    }

    /// Stopping since the claim began: start nothing, and release the rows.
    async fn give_back(&self, leases: Vec<Lease>, report: &mut BatchReport) {
        for lease in leases {
            let stopping = Fate::Returned(Returned::Stopping);
            self.queue.settle(report, &lease.item, stopping, None);
            release(&self.queue, &self.pool, &lease, None).await;
            lease.end().await;
        }
    }

    /// Works the leased rows concurrently, each to its recorded end; each lease,
    /// and with it its key's slot, is given up as its row's end is recorded.
    async fn work_all(&self, leases: Vec<Lease>, report: &mut BatchReport) {
        let worked = join_all(leases.into_iter().map(|lease| {
            let span = item_span(&lease.item);
            async move {
                let report = self.work(&lease).await;
                lease.end().await;
                report
            }
            .instrument(span)
        }))
        .await;
        for one in worked {
            report.merge(one);
        }
    }

    /// One leased row: its action held by renewals, then its outcome.
    async fn work(&self, lease: &Lease) -> BatchReport {
        let queue = &*self.queue;
        if let Some(why) = &lease.unreadable {
            return self
                .record(lease, Some(Outcome::failure(why.clone())), None)
                .await;
        }
        // Its file is named by random bits: a time token is shared by the leases of a second.
        let progress = self.progress(&token::random());
        let work = Work::item(queue, &lease.item);
        let running = queue.execute(&*self.action, work, progress.clone());
        let kept = hold(queue, &self.pool, lease, progress.as_deref(), running).await;
        let last = progress.as_deref().and_then(Progress::last);
        let mut report = BatchReport::default();
        let outcome = match kept {
            Kept::Finished(outcome) => outcome,
            // Recorded as the item's failure ([on_failure] spends an attempt), so a
            // row whose renewals always fail does not loop; with `[on_release]` the
            // cut-off row is put back, its attempt counted by the claim.
            Kept::RenewalFailed(error) => Some(Outcome {
                interrupted: true,
                ..Outcome::failure(format!("renew_sql failed: {error}"))
            }),
            Kept::Lost => {
                let lost = Returned::LeaseLost {
                    lease_id: lease.token.held(),
                    at: LostAt::Renewal,
                };
                queue.settle(&mut report, &lease.item, Fate::Returned(lost), None);
                return report;
            }
            Kept::Aborted => {
                let aborted = Fate::Returned(Returned::Aborted);
                queue.settle(&mut report, &lease.item, aborted, None);
                release(queue, &self.pool, lease, last.as_deref()).await;
                return report;
            }
        };
        self.record(lease, outcome, last.as_deref()).await
    }

    /// Records `lease`'s outcome under its lease.
    async fn record(
        &self,
        lease: &Lease,
        outcome: Option<Outcome>,
        progress: Option<&str>,
    ) -> BatchReport {
        let queue = &*self.queue;
        let mut report = BatchReport::default();
        let mut store = LeaseStore {
            queue,
            pool: &self.pool,
            lease,
            progress,
        };
        let entries = [(&lease.item, outcome.as_ref())];
        let Ok(()) = record(queue, &mut store, &entries, &mut report).await;
        report
    }

    /// Where the action reports its progress, if its kind can: a file of its own
    /// (named after the lease), and for a command its stdout.
    fn progress(&self, lease_id: &str) -> Option<Arc<Progress>> {
        if !self.queue.config.action.kind().reports_progress() {
            return None;
        }
        match Progress::create(lease_id) {
            Ok(progress) => Some(Arc::new(progress)),
            Err(e) => {
                warn!(error = %e, "cannot create the progress file; :progress stays NULL");
                None
            }
        }
    }

    /// Rows returned while still leased (a lease lost, no release_sql) are out of
    /// the select until their leases expire: the queue is not empty before.
    fn returned_leased(&self) {
        let queue = &self.queue;
        let expiry = queue
            .config
            .lease()
            .map(|l| l.expires_within(&queue.config));
        let until = Instant::now() + expiry.unwrap_or_default();
        queue.stop_when_empty.not_before(until);
    }
}

impl Mode for LeaseMode {
    const LEFT_BEHIND: &'static str = "its leases expire and their rows come back";

    async fn turn(&mut self, turn: &Turn<'_>) -> Ended {
        let queue = self.queue.clone();
        let leased = match claim(&queue, &self.pool, &self.name, turn).await {
            Ok(leased) => leased,
            Err(ended @ (Ended::Stopped | Ended::Paused)) => return ended,
            Err(ended) => {
                self.connected = None;
                return ended;
            }
        };
        if self.connected.is_none() {
            self.connected = Some(queue.stats.connection());
        }
        let Leased {
            leases,
            skipped,
            mut report,
        } = leased;
        if report.claimed == 0 {
            return Ended::Empty;
        }
        // Claimed and left waiting: returned, and the queue is not empty.
        for (item, why) in skipped {
            queue.settle(&mut report, &item, Fate::Returned(why), None);
        }
        if queue.stop.is_cancelled() {
            self.give_back(leases, &mut report).await;
            return Ended::Done(report);
        }
        let returned_unleased = report.returned;
        self.work_all(leases, &mut report).await;
        if report.returned > returned_unleased {
            self.returned_leased();
        }
        Ended::Done(report)
    }

    async fn sleep(&mut self) {
        self.connected = None;
        if self.queue.database.contended() {
            // Other connections wait for a place in the budget.
            self.pool.close().await;
        }
    }

    async fn read_pause(&mut self) -> Read {
        let Ok(mut pooled) = self.pool.get().await else {
            return Read::NoSession;
        };
        let read = pooled
            .session()
            .read_pause(&self.queue.config.name, false)
            .await;
        pooled.finish(&read).await;
        read.into()
    }

    async fn next_due(&mut self, query: &DueQuery) -> Option<Result<Option<Duration>, DbError>> {
        let mut pooled = self.pool.get().await.ok()?;
        let name = &self.queue.config.name;
        let next = pooled.session().next_due(query, name).await;
        pooled.finish(&next).await;
        Some(next)
    }
}

/// `:worker` for worker `index` of this process: `host:pid:index`.
fn worker_name(index: usize) -> Arc<str> {
    let host = crate::telemetry::metrics::process::hostname();
    Arc::from(format!("{host}:{}:{index}", std::process::id()))
}
