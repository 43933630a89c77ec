//! A small pool of sessions shared by a lease-mode queue's workers: claims,
//! renewals and outcomes are short, so a few connections serve many workers whose
//! actions run with none held. At most `size` sessions exist at once; a worker waits
//! for one rather than opening more.

use std::sync::{Arc, Mutex};

use tokio::sync::{Semaphore, SemaphorePermit};

use super::backlog::{read_backlog_on, Backlog, BacklogError};
use super::connect::Database;
use super::error::DbError;
use super::session::{OpenError, Reuse, Session};
use super::unanswered::Unanswered;
use crate::config::QueueConfig;
use crate::lock::lock;

/// Sessions for one queue, at most `size` of them.
pub struct SessionPool {
    queue: QueueConfig,
    database: Database,
    permits: Semaphore,
    idle: Mutex<Vec<Session>>,
    /// How long its sessions have waited for the database, for readiness.
    unanswered: Arc<Unanswered>,
}

/// A session taken from the pool; it goes back only by [`Pooled::keep`] or
/// [`Pooled::finish`].
pub struct Pooled<'a> {
    session: Option<Session>,
    pool: &'a SessionPool,
    _permit: SemaphorePermit<'a>,
}

impl SessionPool {
    /// A pool of at most `size` sessions on `database` (for a lease-mode queue it
    /// counts matched rows, so a guard that matches its row says so even when it
    /// changes nothing), starting with `first`, one opened already. Every session's
    /// wait for the database shows in `unanswered` (one for the queue's workers, who
    /// share the sessions), so a stall on any of them is seen at `database_timeout`.
    pub fn new(
        queue: &QueueConfig,
        database: &Database,
        size: usize,
        first: Session,
        unanswered: Arc<Unanswered>,
    ) -> SessionPool {
        SessionPool {
            queue: queue.clone(),
            database: database.clone(),
            permits: Semaphore::new(size),
            idle: Mutex::new(vec![first.watched_by(unanswered.clone())]),
            unanswered,
        }
    }

    /// A session: an idle one still alive, else a new one. Waits while all `size`
    /// are in use.
    pub async fn get(&self) -> Result<Pooled<'_>, OpenError> {
        let Ok(permit) = self.permits.acquire().await else {
            unreachable!("the pool's semaphore is never closed")
        };
        self.take(permit).await
    }

    /// A session under `permit`: an idle one that may serve (as a transaction-mode
    /// worker's own: see [`Session::reusable`]), else a new one.
    async fn take<'a>(&'a self, permit: SemaphorePermit<'a>) -> Result<Pooled<'a>, OpenError> {
        loop {
            let Some(mut session) = self.lock().pop() else {
                break;
            };
            match session.reusable(&self.database).await {
                Reuse::Yes => return Ok(self.pooled(session, permit)),
                Reuse::OtherHost => {
                    session.close().await;
                    self.close_on_other_hosts().await;
                }
                Reuse::Dead => {}
            }
        }
        let (queue, unanswered) = (&self.queue, self.unanswered.clone());
        let session = Session::open_with_limit(queue, &self.database, queue.batch, unanswered);
        let session = session.await?;
        Ok(self.pooled(session, permit))
    }

    /// Reads the queue's backlog on one of the pool's sessions (see
    /// [`super::backlog`]), and ends the read's transaction; `None` (nothing read)
    /// when every session is in use.
    pub async fn read_backlog(&self) -> Option<Result<Backlog, BacklogError>> {
        let permit = self.permits.try_acquire().ok()?;
        Some(self.read_backlog_with(permit).await)
    }

    async fn read_backlog_with<'a>(
        &'a self,
        permit: SemaphorePermit<'a>,
    ) -> Result<Backlog, BacklogError> {
        let mut pooled = self.take(permit).await.map_err(BacklogError::Open)?;
        let session = pooled.session();
        let read = read_backlog_on(session.parts().0, &self.queue).await;
        let result = match read {
            Ok(backlog) => session.rollback().await.map(|()| backlog),
            Err(e) => Err(e),
        };
        pooled.finish(&result).await;
        result.map_err(BacklogError::Read)
    }

    /// Closes the idle sessions on another host than the one the connections go to
    /// now (the new session about to open looks for it): the idle ones are not
    /// left behind.
    async fn close_on_other_hosts(&self) {
        let elsewhere: Vec<Session> = {
            let mut idle = self.lock();
            let (here, elsewhere) = std::mem::take(&mut *idle)
                .into_iter()
                .partition(|s| s.on_host_in_use(&self.database));
            *idle = here;
            elsewhere
        };
        for session in elsewhere {
            session.close().await;
        }
    }

    /// Closes the idle sessions (the daemon is stopping).
    pub async fn close(&self) {
        let idle = std::mem::take(&mut *self.lock());
        for session in idle {
            session.close().await;
        }
    }

    fn pooled<'a>(&'a self, session: Session, permit: SemaphorePermit<'a>) -> Pooled<'a> {
        Pooled {
            session: Some(session),
            pool: self,
            _permit: permit,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Session>> {
        lock(&self.idle)
    }
}

impl Pooled<'_> {
    /// The session.
    pub fn session(&mut self) -> &mut Session {
        self.session
            .as_mut()
            .unwrap_or_else(|| unreachable!("a pooled session is only taken by keep or drop"))
    }

    /// Returns the session after `result`: kept when it succeeded, rolled back and
    /// kept after the statement's own error, given up otherwise.
    pub async fn finish<T>(self, result: &Result<T, DbError>) {
        self.finish_after(result.as_ref().err()).await;
    }

    /// [`Pooled::finish`] after `error`, if any.
    pub async fn finish_after(mut self, error: Option<&DbError>) {
        match error {
            None => self.keep(),
            Some(e) if e.is_statement_error() && self.session().rollback_quickly().await => {
                self.keep()
            }
            Some(_) => {}
        }
    }

    /// Returns the session to the pool: its user ended what it began on it.
    pub fn keep(mut self) {
        if let Some(mut session) = self.session.take() {
            session.touch();
            self.pool.lock().push(session);
        }
    }
}

/// A session neither kept nor finished — its user was cancelled or panicked midway,
/// perhaps in a transaction or with a reply unread — is given up, not returned:
/// its connection closes, and the server rolls back whatever it held.
impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        self.session.take();
    }
}
