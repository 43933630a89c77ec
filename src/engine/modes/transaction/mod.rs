//! Transaction mode: each turn is one transaction on the worker's own session —
//! claim up to `batch` rows with `FOR UPDATE SKIP LOCKED`, run each item's action
//! and outcome SQL, commit. The rule it keeps: an item either commits with its
//! outcome SQL, or it is left as it was — waiting again.
//!
//! - [`batch`]: one transaction, claim to commit.
//! - [`sql`]: actions that run in the transaction, optimistically (no savepoints)
//!   or with a savepoint per item (after an optimistic batch had a failure).
//! - [`external`]: actions outside the database, run concurrently while the
//!   connection is kept alive, then their outcome SQL.

mod batch;
mod external;
mod sql;

use std::sync::Arc;
use std::time::Duration;

use tracing::warn;

use crate::db::due::DueQuery;
use crate::db::{DbError, Reuse, Session};
use crate::engine::policy::pausing::Read;
use crate::engine::queue::QueueRuntime;
use crate::engine::turn::Turn;
use crate::engine::worker::{Ended, Mode};
use crate::telemetry::stats::Connected;
use batch::{claim_and_process, Processed};

/// One transaction-mode worker's state between turns.
pub struct TransactionMode {
    queue: Arc<QueueRuntime>,
    index: usize,
    session: Option<HeldSession>,
    /// Run the next batch with a savepoint per item: an optimistic one failed.
    with_savepoints: bool,
}

/// A session held by a worker, counted in its queue's connected workers.
struct HeldSession {
    session: Session,
    _connected: Connected,
}

impl TransactionMode {
    /// Worker `index` of `queue`, starting with `session` if one is open already.
    pub fn new(queue: Arc<QueueRuntime>, index: usize, session: Option<Session>) -> Self {
        let session = session.map(|session| HeldSession {
            session: session.watched_by(queue.stats.unanswered(index)),
            _connected: queue.stats.connection(),
        });
        TransactionMode {
            queue,
            index,
            session,
            with_savepoints: false,
        }
    }

    /// The session to claim on: the one held, if still alive, else a new one.
    async fn ready_session(&mut self) -> Result<HeldSession, Ended> {
        if let Some(mut held) = self.session.take() {
            match held.session.reusable(&self.queue.database).await {
                Reuse::Yes => return Ok(held),
                Reuse::OtherHost => held.session.close().await,
                Reuse::Dead => {}
            }
        }
        let queue = &self.queue;
        let unanswered = queue.stats.unanswered(self.index);
        let config = &queue.config;
        let opening = Session::open_with_limit(config, &queue.database, config.batch, unanswered);
        let opened = tokio::select! {
            _ = queue.stop.cancelled() => return Err(Ended::Stopped),
            opened = opening => opened,
        };
        match opened {
            Ok(session) => Ok(HeldSession {
                session,
                _connected: queue.stats.connection(),
            }),
            Err(e) => Err(Ended::NotOpened(e)),
        }
    }

    /// Keeps the session for the next turn.
    fn keep(&mut self, mut held: HeldSession, ended: Ended) -> Ended {
        held.session.touch();
        self.session = Some(held);
        ended
    }

    /// The queue was paused as the claim was about to leave: the transaction the
    /// read of the pause may have left open for it ends, and the session is kept
    /// if it answered.
    async fn not_claimed(&mut self, mut held: HeldSession) -> Ended {
        if held.session.rollback_quickly().await {
            return self.keep(held, Ended::Paused);
        }
        Ended::Paused
    }

    /// The shutdown timeout passed mid-batch: the session is killed, and the server
    /// rolls its transaction back.
    async fn abort(&self, session: &Session, turn: &Turn<'_>) -> Ended {
        turn.rolled_back();
        warn!("the shutdown timeout passed; rolling back the items in flight");
        if let Err(e) = session.kill_from_aside().await {
            warn!(error = %e, "could not kill the session; the server rolls it back when the connection drops");
        }
        Ended::Aborted
    }
}

impl Mode for TransactionMode {
    const LEFT_BEHIND: &'static str = "its transaction is rolled back";

    async fn turn(&mut self, turn: &Turn<'_>) -> Ended {
        let mut held = match self.ready_session().await {
            Ok(held) => held,
            Err(ended) => return ended,
        };
        let queue = self.queue.clone();
        if !turn.claiming() {
            return self.not_claimed(held).await;
        }
        let processing = claim_and_process(&mut held.session, &queue, self.with_savepoints, turn);
        let processed = tokio::select! {
            biased;
            _ = queue.abort.cancelled() => None,
            processed = processing => Some(processed),
        };
        let Some(processed) = processed else {
            return self.abort(&held.session, turn).await;
        };
        self.with_savepoints = false;
        match processed {
            Ok(Processed::Empty) => self.keep(held, Ended::Empty),
            Ok(Processed::Committed(report)) => {
                turn.committed();
                self.keep(held, Ended::Done(report))
            }
            Ok(Processed::RolledBack) => {
                turn.rolled_back();
                self.with_savepoints = true;
                self.keep(held, Ended::RolledBack)
            }
            Err(e) if e.is_contention() && held.session.rollback_quickly().await => {
                turn.failed(&e);
                self.keep(held, Ended::Contention(e))
            }
            Err(e) => {
                turn.failed(&e);
                Ended::Lost(e)
            }
        }
    }

    async fn sleep(&mut self) {
        if let Some(idle) = self.session.take() {
            idle.session.close().await;
        }
    }

    async fn read_pause(&mut self) -> Read {
        let Ok(mut held) = self.ready_session().await else {
            return Read::NoSession;
        };
        let read = held.session.read_pause(&self.queue.config.name, true).await;
        // A read the server answered leaves the session for the claim (its
        // transaction open when the queue is not paused); one it did not leaves it
        // untrusted.
        if read
            .as_ref()
            .err()
            .is_none_or(|e| e.server_code().is_some())
        {
            self.session = Some(held);
        }
        read.into()
    }

    async fn next_due(&mut self, query: &DueQuery) -> Option<Result<Option<Duration>, DbError>> {
        let mut held = self.ready_session().await.ok()?;
        let next = held.session.next_due(query, &self.queue.config.name).await;
        // As after a read of the pause: a session the server answered is kept.
        if next
            .as_ref()
            .err()
            .is_none_or(|e| e.server_code().is_some())
        {
            self.session = Some(held);
        }
        Some(next)
    }
}
