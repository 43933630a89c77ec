//! The action, held by its lease: every `renew_every`, `[lease] renew_sql` runs
//! (committed at once) with the command's last progress line as `:progress`. A
//! renewal that matches no row means another worker has the row now, or the
//! application changed it: the action is dropped — its command's process group
//! killed, its HTTP request aborted — and nothing is recorded.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use tracing::error;

use crate::action::progress::Progress;
use crate::db::{DbError, Refusal, Session, SessionPool, Statements};
use crate::engine::modes::lease::{Lease, LeaseError};
use crate::engine::queue::QueueRuntime;
use crate::telemetry::events::{Event, RenewalFailed};

/// How holding a lease through its action ended.
#[derive(Debug)]
pub enum Kept<T> {
    /// The action ended with this, the lease still held at the last renewal.
    Finished(T),
    /// A renewal matched no row (or the lease ran out while the database refused
    /// renewals): the action was cancelled.
    Lost,
    /// `renew_sql` kept failing on its own (an error the next renewal would meet
    /// again) until the lease was about to run out: the action was cancelled.
    RenewalFailed(String),
    /// The shutdown timeout passed: the action was cancelled.
    Aborted,
}

/// Runs `action` to its end, renewing `lease` meanwhile; cancels it when the lease
/// is lost, when `renew_sql` keeps failing on its own until the lease is about to
/// run out, when a read-only server refused renewals until it ran out, or when the
/// shutdown timeout passes.
pub async fn hold<T>(
    queue: &QueueRuntime,
    pool: &SessionPool,
    lease: &Lease,
    progress: Option<&Progress>,
    action: impl Future<Output = T>,
) -> Kept<T> {
    let config = queue.config.lease();
    let every = config.and_then(|l| l.renew_every).unwrap_or(Duration::MAX);
    let mut renewals = Renewals::new(every, config.and_then(|l| l.length));
    tokio::pin!(action);
    loop {
        tokio::select! {
            biased;
            // An action that has finished wins over the abort: its outcome is known.
            outcome = &mut action => return Kept::Finished(outcome),
            _ = queue.abort.cancelled() => return Kept::Aborted,
            _ = sleep(every) => {}
        }
        // The action is still watched while the renewal waits, however long: its end
        // (a command's exit status) is taken as it comes, and a slow renewal is let go.
        let line = progress.and_then(Progress::last);
        let renewed = tokio::select! {
            biased;
            outcome = &mut action => return Kept::Finished(outcome),
            _ = queue.abort.cancelled() => return Kept::Aborted,
            renewed = renew(queue, pool, lease, line.as_deref()) => renewed,
        };
        match renewed {
            Ok(true) => renewals.renewed(),
            Ok(false) => return Kept::Lost,
            Err(e) => {
                // A read-only server (a failover) refuses every write, not this SQL:
                // the action runs on while its lease lasts (it may still hold when
                // writes work again), and no queue on that database claims meanwhile.
                // A missing privilege is this SQL's own: it fails every time.
                let read_only =
                    e.db_error().and_then(DbError::refuses_writes) == Some(Refusal::ReadOnly);
                if read_only {
                    queue.writes_refused(Refusal::ReadOnly, every);
                    if renewals.ran_out() {
                        // Another copy may take the row once writes work: let it go.
                        return Kept::Lost;
                    }
                }
                let own = !read_only && e.db_error().is_some_and(DbError::is_statement_error);
                if own && renewals.failed_until_run_out() {
                    queue.stats.observed.record_db_error(e.kind());
                    error!(error = %e,
                        "renew_sql keeps failing and the lease is about to run out; the action is \
                         cancelled and recorded as failed: fix the SQL (a :progress line too long \
                         for its column? use LEFT(:progress, n))");
                    return Kept::RenewalFailed(e.to_string());
                }
                let failed = RenewalFailed {
                    error: &e.to_string(),
                    kind: e.kind(),
                };
                failed.emit(&queue.stats);
            }
        }
    }
}

/// When the lease was last renewed, and whether it would run out before the next
/// renewal.
struct Renewals {
    every: Duration,
    /// The lease's length, when the SQL says it; else two failures in a row are as
    /// much as a lease renewed every third of it can take.
    length: Option<Duration>,
    renewed: Instant,
    failed: u32,
}

impl Renewals {
    /// The claim's lease began about now.
    fn new(every: Duration, length: Option<Duration>) -> Renewals {
        Renewals {
            every,
            length,
            renewed: Instant::now(),
            failed: 0,
        }
    }

    fn renewed(&mut self) {
        self.renewed = Instant::now();
        self.failed = 0;
    }

    /// Whether the lease, as long as the SQL says, ran out since the last renewal
    /// (never, when its length is unknown).
    fn ran_out(&self) -> bool {
        self.length
            .is_some_and(|length| self.renewed.elapsed() >= length)
    }

    /// A renewal failed: true if the lease runs out before the next one could.
    fn failed_until_run_out(&mut self) -> bool {
        self.failed += 1;
        match self.length {
            Some(length) => self.renewed.elapsed().saturating_add(self.every) >= length,
            None => self.failed >= 2,
        }
    }
}

/// `tokio::time::sleep`, for any duration (a far one never ends).
async fn sleep(duration: Duration) {
    match tokio::time::Instant::now().checked_add(duration) {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Renews `lease` once; `false` if it matched no row.
async fn renew(
    queue: &QueueRuntime,
    pool: &SessionPool,
    lease: &Lease,
    progress: Option<&str>,
) -> Result<bool, LeaseError> {
    let mut pooled = pool.get().await?;
    let result = renew_on(pooled.session(), &queue.config.name, lease, progress).await;
    pooled.finish(&result).await;
    Ok(result?)
}

async fn renew_on(
    session: &mut Session,
    queue: &str,
    lease: &Lease,
    progress: Option<&str>,
) -> Result<bool, DbError> {
    loop {
        let (held, renewal) = (lease.token.held(), lease.token.renewal());
        let mut params = lease.params(&held, progress);
        params.lease.new_lease_id = Some(renewal.as_str());
        let matched = session
            .run_counted(Statements::Renew, &lease.item, queue, &params)
            .await?;
        session.commit().await?;
        if matched > 0 {
            lease.token.renewed(renewal);
            return Ok(true);
        }
        lease.token.missed(&renewal);
        // An earlier renewal whose end was not heard may hold the row.
        if !lease.token.adopt_pending() {
            return Ok(false);
        }
    }
}
