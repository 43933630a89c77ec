//! Trying again, one way for every loop that does (what River's `withRetries` is to
//! its completers): [`Retry::run`] tries until the attempt succeeds, the caller
//! gives up on its error, or a stop cuts a wait short. The waits back off — the
//! first from the queue file, doubling to a minute — each jittered so that workers
//! (of one copy or of many) that failed together do not all try again in the same
//! instant. A database that worked until lately is the exception: it is tried again
//! promptly ([`Retry::reconnect_wait`]), as it is likely back soon — a restart, a
//! failover — and is used again within [`PROMPTLY`] of taking connections; the long
//! waits are for one that keeps failing.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use crate::backoff::jitter;
use crate::backoff::Backoff;
use crate::config::MAX_ERROR_BACKOFF;

/// The longest wait before reconnecting to a database that worked until lately
/// (unless the queue's own `error_backoff` is longer).
pub const PROMPTLY: Duration = Duration::from_secs(2);
/// How long a database that stopped working is tried again [`PROMPTLY`]: past it,
/// the waits are the backoff's, up to a minute.
pub const LATELY: Duration = Duration::from_secs(300);

/// Tries again with backoff until told to stop.
pub struct Retry<'s> {
    backoff: Backoff,
    stop: &'s CancellationToken,
    ceiling: Duration,
    /// A try that lasted this long was a success of sorts (a stream that lived):
    /// the next failure starts the backoff afresh.
    steady: Option<Duration>,
    /// Failures in a row since the backoff last started afresh.
    failures: u32,
    /// Since when tries have failed (none since the backoff last started afresh).
    failing_since: Option<Instant>,
    /// The tries reconnect to a database: waits as [`Retry::reconnect_wait`]'s.
    reconnects: bool,
}

/// What the caller makes of a failed try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Try again after the backoff's wait.
    Again,
    /// Try again after a wait of the caller's own.
    After(Duration),
    /// Stop trying: the error stands.
    GiveUp,
}

/// A failed try, as the caller hears of it.
#[derive(Debug, Clone, Copy)]
pub struct Failure {
    /// Failures in a row, this one included (since the backoff last started afresh).
    pub times: u32,
    /// How long the next try waits, unless the caller says otherwise.
    pub retry_in: Duration,
}

impl<'s> Retry<'s> {
    /// Waits from `first`, doubling; each cut short by `stop`.
    pub fn new(first: Duration, stop: &'s CancellationToken) -> Self {
        Retry {
            backoff: Backoff::new(first, MAX_ERROR_BACKOFF),
            stop,
            ceiling: Duration::MAX,
            steady: None,
            failures: 0,
            failing_since: None,
            reconnects: false,
        }
    }

    /// No wait longer than `ceiling`.
    pub fn at_most(self, ceiling: Duration) -> Self {
        Retry { ceiling, ..self }
    }

    /// A try that lasted `steady` starts the backoff afresh when it fails.
    pub fn afresh_after(self, steady: Duration) -> Self {
        Retry {
            steady: Some(steady),
            ..self
        }
    }

    /// Each try reconnects to a database: its waits are [`Retry::reconnect_wait`]'s.
    pub fn reconnecting(self) -> Self {
        Retry {
            reconnects: true,
            ..self
        }
    }

    /// Runs `attempt` until it succeeds. After each failure, `failed` hears the
    /// error with the wait before the next try — and says so — and answers what
    /// next. The last error once it gives up, or once `stop` cuts a wait short.
    pub async fn run<T, E, F>(
        &mut self,
        mut attempt: impl FnMut() -> F,
        mut failed: impl FnMut(&E, Failure) -> Next,
    ) -> Result<T, E>
    where
        F: Future<Output = Result<T, E>>,
    {
        loop {
            let began = Instant::now();
            let error = match attempt().await {
                Ok(done) => return Ok(done),
                Err(error) => error,
            };
            if !self.after(&error, began, &mut failed).await {
                return Err(error);
            }
        }
    }

    /// After a try begun at `began` failed with `error`: `failed` hears it with the
    /// wait before the next try, and answers what next; the wait is over. False to
    /// stop trying — it gave up, or `stop` cut the wait short. (For a loop whose try
    /// holds what a closure cannot lend it, a session; else see [`Retry::run`].)
    pub async fn after<E>(
        &mut self,
        error: &E,
        began: Instant,
        failed: impl FnOnce(&E, Failure) -> Next,
    ) -> bool {
        if self.steady.is_some_and(|steady| began.elapsed() >= steady) {
            self.reset();
        }
        self.failures += 1;
        let retry_in = match self.reconnects {
            true => self.reconnect_wait(),
            false => self.next_wait(),
        };
        let failure = Failure {
            times: self.failures,
            retry_in,
        };
        let wait = match failed(error, failure) {
            Next::Again => failure.retry_in,
            Next::After(wait) => wait,
            Next::GiveUp => return false,
        };
        self.sleep(wait).await
    }

    /// The wait before the next try: the backoff's, no longer than the ceiling.
    pub fn next_wait(&mut self) -> Duration {
        self.backoff.next_wait().min(self.ceiling)
    }

    /// The wait before reconnecting to a database that could not be reached or was
    /// lost: at most [`PROMPTLY`] (jittered) while it failed for less than
    /// [`LATELY`] — it is likely back soon, and then used at once — else the
    /// backoff's. The backoff doubles all the same, so a database that keeps failing
    /// past [`LATELY`] is tried at its long waits at once.
    pub fn reconnect_wait(&mut self) -> Duration {
        let backoff = self.next_wait();
        let since = *self.failing_since.get_or_insert_with(Instant::now);
        if since.elapsed() < LATELY {
            backoff.min(jitter(PROMPTLY.max(self.backoff.first())))
        } else {
            backoff
        }
    }

    /// Things went well: the next failure waits the first wait again.
    pub fn reset(&mut self) {
        self.backoff.reset();
        self.failures = 0;
        self.failing_since = None;
    }

    /// Sleeps for `wait` unless the stop comes first; false if it did.
    pub async fn sleep(&self, wait: Duration) -> bool {
        sleep_unless_stopped(self.stop, wait).await
    }
}

/// Sleeps for `wait` unless `stop` comes first. Returns false if it was stopped.
pub async fn sleep_unless_stopped(stop: &CancellationToken, wait: Duration) -> bool {
    tokio::select! {
        _ = stop.cancelled() => false,
        _ = tokio::time::sleep(wait) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// True if `wait` is a jittered `base`: between half of it and all of it.
    fn about(wait: Duration, base: u64) -> bool {
        let base = Duration::from_secs(base);
        wait >= base / 2 && wait <= base
    }

    /// `run` tries until the attempt succeeds, telling each failure with how many
    /// in a row; it stops at the caller's word, and when the stop cuts a wait short.
    #[tokio::test]
    async fn run_tries_until_success_or_told_otherwise() {
        let stop = CancellationToken::new();
        let mut retry = Retry::new(Duration::from_millis(2), &stop);
        let mut tries = 0;
        let mut heard = Vec::new();
        let attempt = || {
            tries += 1;
            let result = if tries < 3 { Err(tries) } else { Ok(tries) };
            async move { result }
        };
        let done = retry.run(attempt, |e: &i32, failure| {
            heard.push((*e, failure.times));
            Next::Again
        });
        assert_eq!(done.await, Ok(3));
        assert_eq!(heard, [(1, 1), (2, 2)]);
        let gave_up = retry.run(|| async { Err::<(), _>("no") }, |_, _| Next::GiveUp);
        assert_eq!(gave_up.await, Err("no"));
        stop.cancel();
        let stopped = retry.run(|| async { Err::<(), _>("down") }, |_, _| Next::Again);
        assert_eq!(stopped.await, Err("down"));
    }

    /// A database lost lately is tried again within two seconds however often it
    /// failed; one that keeps failing past [`LATELY`] waits the backoff's long waits.
    #[tokio::test(start_paused = true)]
    async fn a_database_lost_lately_is_tried_promptly() {
        let stop = CancellationToken::new();
        let mut retry = Retry::new(Duration::from_millis(500), &stop);
        for _ in 0..10 {
            assert!(retry.reconnect_wait() <= PROMPTLY);
        }
        tokio::time::advance(LATELY).await;
        assert!(about(retry.reconnect_wait(), 60));
        retry.reset();
        assert!(retry.reconnect_wait() <= Duration::from_millis(500));
        let mut patient = Retry::new(Duration::from_secs(10), &stop);
        patient.reconnect_wait();
        assert!(about(patient.reconnect_wait(), 10), "its own error_backoff");
    }

    /// A try that lasted `afresh_after` starts the count and the waits afresh.
    #[tokio::test]
    async fn a_steady_try_starts_afresh() {
        let stop = CancellationToken::new();
        let mut retry = Retry::new(Duration::from_secs(20), &stop).afresh_after(Duration::ZERO);
        let began = Instant::now();
        for _ in 0..3 {
            let next = retry.after(&(), began, |_, failure| {
                assert_eq!(failure.times, 1);
                assert!(about(failure.retry_in, 20));
                Next::After(Duration::ZERO)
            });
            assert!(next.await);
        }
    }
}
