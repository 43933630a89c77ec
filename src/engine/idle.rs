//! Idling cheaply: while a queue is empty, only one of its workers polls it (the
//! watcher); the others sleep until the watcher finds a full batch — a sign that more
//! rows are waiting — and wakes them all, so a burst is spread over every worker
//! within one claim. An empty queue costs one claim per `poll_interval`, however
//! many workers it has.

use std::sync::atomic::{AtomicBool, Ordering};

use std::pin::Pin;

use tokio::sync::futures::Notified;
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

    /// After an empty claim: the watcher's role if nobody has it, else a sleep that
    /// ends when a full claim wakes the workers (or the watcher hands its role on).
    pub fn turn(&self) -> Turn<'_> {
        let mut woken = Box::pin(self.wake.notified());
        // Register before looking, so a wake-up between the two is not lost.
        woken.as_mut().enable();
        if self
            .watched
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            Turn::Watch(Watch(self))
        } else {
            Turn::Sleep(Sleep(woken))
        }
    }
}

/// What an idle worker does next: watch (poll every `poll_interval`), or sleep.
#[derive(Debug)]
pub enum Turn<'a> {
    Watch(Watch<'a>),
    Sleep(Sleep<'a>),
}

/// A sleep until woken, already registered for its wake-up.
#[derive(Debug)]
pub struct Sleep<'a>(Pin<Box<Notified<'a>>>);

impl Sleep<'_> {
    /// Sleeps until woken, or until `stop`.
    pub async fn until_woken(self, stop: &CancellationToken) {
        tokio::select! {
            _ = self.0 => {}
            _ = stop.cancelled() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn sleep(turn: Turn<'_>) -> Sleep<'_> {
        match turn {
            Turn::Sleep(sleep) => sleep,
            Turn::Watch(_) => panic!("expected to sleep"),
        }
    }

    #[tokio::test]
    async fn one_watches_the_others_sleep_until_woken() {
        let idle = Idle::default();
        let stop = CancellationToken::new();
        let watch = idle.turn();
        assert!(matches!(watch, Turn::Watch(_)));
        let sleeper = sleep(idle.turn()).until_woken(&stop);
        tokio::pin!(sleeper);
        assert!(
            tokio::time::timeout(Duration::from_millis(50), sleeper.as_mut())
                .await
                .is_err(),
            "it sleeps"
        );
        idle.wake_all();
        sleeper.await;
        assert!(
            matches!(idle.turn(), Turn::Sleep(_)),
            "the role is still taken"
        );
    }

    #[tokio::test]
    async fn a_wake_up_between_registering_and_sleeping_is_not_lost() {
        let idle = Idle::default();
        let _watch = idle.turn();
        let sleeper = sleep(idle.turn());
        idle.wake_all(); // before the sleeper awaits
        tokio::time::timeout(
            Duration::from_secs(1),
            sleeper.until_woken(&CancellationToken::new()),
        )
        .await
        .expect("the early wake-up counts");
    }

    #[tokio::test]
    async fn a_dropped_watch_hands_the_role_on() {
        let idle = Idle::default();
        let stop = CancellationToken::new();
        let watch = idle.turn();
        let sleeper = sleep(idle.turn()).until_woken(&stop);
        tokio::pin!(sleeper);
        assert!(
            tokio::time::timeout(Duration::from_millis(50), sleeper.as_mut())
                .await
                .is_err()
        );
        drop(watch);
        sleeper.await;
        assert!(
            matches!(idle.turn(), Turn::Watch(_)),
            "the role is free to take"
        );
    }
}
