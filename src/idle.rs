//! Idling cheaply: while a queue is empty, only one of its workers polls it (the
//! watcher); the others sleep until the watcher finds a full batch — a sign that more
//! rows are waiting — and wakes them all, so a burst is spread over every worker
//! within one claim. An empty queue costs one claim per `poll_interval`, however
//! many workers it has.

use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Default)]
pub struct Idle {
    watched: AtomicBool,
    wake: Notify,
}

/// The watcher's role, held by one worker. Dropping it (the worker stopped, or
/// crashed) hands the role on: a sleeping worker is woken to take it.
#[derive(Debug)]
pub struct Watch<'a>(&'a Idle);

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        self.0.watched.store(false, Ordering::Release);
        self.0.wake.notify_one();
    }
}

impl Idle {
    /// Wakes every sleeping worker: a claim came back full.
    pub fn wake_all(&self) {
        self.wake.notify_waiters();
    }

    /// After an empty claim: becomes the watcher if nobody is (returning the role),
    /// or sleeps until woken or stopped (returning `None`).
    pub async fn watch_or_sleep(&self, stop: &CancellationToken) -> Option<Watch<'_>> {
        let woken = self.wake.notified();
        tokio::pin!(woken);
        // Register before looking, so a wake-up between the two is not lost.
        woken.as_mut().enable();
        if self
            .watched
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            return Some(Watch(self));
        }
        tokio::select! {
            _ = woken => {}
            _ = stop.cancelled() => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn one_watches_the_others_sleep_until_woken() {
        let idle = Idle::default();
        let stop = CancellationToken::new();
        let watch = idle.watch_or_sleep(&stop).await;
        assert!(watch.is_some());
        let sleeper = idle.watch_or_sleep(&stop);
        tokio::pin!(sleeper);
        assert!(
            tokio::time::timeout(Duration::from_millis(50), sleeper.as_mut())
                .await
                .is_err(),
            "it sleeps"
        );
        idle.wake_all();
        assert!(sleeper.await.is_none(), "woken, and the role is taken");
    }

    #[tokio::test]
    async fn a_dropped_watch_hands_the_role_on() {
        let idle = Idle::default();
        let stop = CancellationToken::new();
        let watch = idle.watch_or_sleep(&stop).await;
        let sleeper = idle.watch_or_sleep(&stop);
        tokio::pin!(sleeper);
        assert!(
            tokio::time::timeout(Duration::from_millis(50), sleeper.as_mut())
                .await
                .is_err()
        );
        drop(watch);
        assert!(sleeper.await.is_none(), "woken by the hand-over");
        assert!(
            idle.watch_or_sleep(&stop).await.is_some(),
            "and the role is free to take"
        );
    }
}
