//! Idling cheaply: while a queue is empty, only one of its workers polls it (the
//! watcher); the others sleep until the watcher finds a full batch — a sign that more
//! rows are waiting — and wakes them all, so a burst is spread over every worker
//! within one claim. An empty queue costs one claim per `poll_interval`, however
//! many workers it has.

use std::sync::atomic::{AtomicBool, Ordering};

use std::pin::Pin;
use std::time::Duration;

use tokio::sync::futures::Notified;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Default)]
pub struct Idle {
    watched: AtomicBool,
    wake: Notify,
    /// Raised when the binary log says the queue's tables changed: the watcher
    /// claims at once (if it is busy, the next time it would wait).
    nudged: Notify,
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

    /// The queue's tables changed: the watcher claims now, not at its next poll.
    pub fn nudge(&self) {
        self.nudged.notify_one();
    }

    /// The watcher's wait between polls: until `until`, cut short by a nudge.
    pub async fn poll_wait(&self, stop: &CancellationToken, until: Instant) -> Woke {
        tokio::select! {
            _ = stop.cancelled() => Woke::Stopped,
            _ = self.nudged.notified() => Woke::Nudged,
            _ = tokio::time::sleep_until(until) => Woke::Polled,
        }
    }

    /// After an empty claim: the watcher's role if nobody has it, else a sleep that
    /// ends when a full claim wakes the workers (or the watcher hands its role on).
    pub fn role(&self) -> Role<'_> {
        let mut woken = Box::pin(self.wake.notified());
        // Register before looking, so a wake-up between the two is not lost.
        woken.as_mut().enable();
        if self
            .watched
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            Role::Watch(Watch(self))
        } else {
            Role::Sleep(Sleep(woken))
        }
    }
}

/// How a watcher's wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woke {
    /// Its `poll_interval` passed.
    Polled,
    /// The binary log said the queue's tables changed.
    Nudged,
    Stopped,
}

/// After a nudge whose claim found nothing, the watcher looks again after these
/// waits: the binary log can announce a commit a moment before the commit is
/// visible to other sessions (the server writes the log, then commits in the
/// engine), and a claim that came too early would otherwise wait a whole poll. The
/// last is for a server too busy to commit within 100 ms (a loaded machine). Each
/// ends sooner when a row falls due by time first ([`crate::engine::wake::due`]).
pub const SECOND_LOOKS: [Duration; 3] = [
    Duration::from_millis(10),
    Duration::from_millis(100),
    Duration::from_secs(1),
];

/// What an idle worker does next: watch (poll every `poll_interval`), or sleep.
#[derive(Debug)]
pub enum Role<'a> {
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

    fn sleep(role: Role<'_>) -> Sleep<'_> {
        match role {
            Role::Sleep(sleep) => sleep,
            Role::Watch(_) => panic!("expected to sleep"),
        }
    }

    #[tokio::test]
    async fn one_watches_the_others_sleep_until_woken() {
        let idle = Idle::default();
        let stop = CancellationToken::new();
        let watch = idle.role();
        assert!(matches!(watch, Role::Watch(_)));
        let sleeper = sleep(idle.role()).until_woken(&stop);
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
            matches!(idle.role(), Role::Sleep(_)),
            "the role is still taken"
        );
    }

    #[tokio::test]
    async fn a_wake_up_between_registering_and_sleeping_is_not_lost() {
        let idle = Idle::default();
        let _watch = idle.role();
        let sleeper = sleep(idle.role());
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
        let watch = idle.role();
        let sleeper = sleep(idle.role()).until_woken(&stop);
        tokio::pin!(sleeper);
        assert!(
            tokio::time::timeout(Duration::from_millis(50), sleeper.as_mut())
                .await
                .is_err()
        );
        drop(watch);
        sleeper.await;
        assert!(
            matches!(idle.role(), Role::Watch(_)),
            "the role is free to take"
        );
    }
}
