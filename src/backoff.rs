//! Waiting before trying again, one policy for every loop that does — the engine's
//! retries (`engine::policy::retry`), a broker's reconnections (`action::amqp`,
//! `action::nats`), a worker process started again: waits that double from a
//! first one up to a ceiling ([`Backoff`], [`doubled`]), each [`jitter`]ed so that
//! workers (of one copy or of many) that failed together do not all try again in
//! the same instant. The caller passes its own first wait and ceiling.

use std::time::Duration;

/// The waits between tries: doubling from the first, up to a ceiling, jittered.
#[derive(Debug, Clone)]
pub struct Backoff {
    first: Duration,
    next: Duration,
    most: Duration,
}

impl Backoff {
    /// Waits from `first`, doubling up to `most` (or `first`, if longer).
    pub fn new(first: Duration, most: Duration) -> Self {
        Backoff {
            first,
            next: first,
            most: most.max(first),
        }
    }

    /// The first wait, unjittered.
    pub fn first(&self) -> Duration {
        self.first
    }

    /// The wait to use now, jittered; the one after it is twice as long, up to the
    /// ceiling.
    pub fn next_wait(&mut self) -> Duration {
        let now = self.next;
        self.next = (self.next * 2).min(self.most);
        jitter(now)
    }

    /// Things went well: the next wait is the first again.
    pub fn reset(&mut self) {
        self.next = self.first;
    }
}

/// The `n`-th wait of a backoff from `first` up to `most`, unjittered: `first` for
/// the first (and for `n` = 0), twice as long for each after it.
pub fn doubled(first: Duration, n: u32, most: Duration) -> Duration {
    let doublings = n.saturating_sub(1).min(31);
    first.saturating_mul(1 << doublings).min(most)
}

/// "Equal jitter": half of `wait`, plus a random part of the other half. The waits
/// still grow as they double, never fall below half, and never pass `wait` (so a
/// ceiling stays one).
pub fn jitter(wait: Duration) -> Duration {
    let half = wait / 2;
    let random = fastrand::u64(0..=half.as_nanos().min(u64::MAX as u128) as u64);
    half + Duration::from_nanos(random)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// True if `wait` is a jittered `base`: between half of it and all of it.
    fn about(wait: Duration, base: u64) -> bool {
        let base = Duration::from_secs(base);
        wait >= base / 2 && wait <= base
    }

    #[test]
    fn doubles_up_to_the_ceiling_and_resets() {
        let mut b = Backoff::new(Duration::from_secs(20), Duration::from_secs(60));
        assert!(about(b.next_wait(), 20));
        assert!(about(b.next_wait(), 40));
        assert!(about(b.next_wait(), 60));
        assert!(about(b.next_wait(), 60));
        b.reset();
        assert!(about(b.next_wait(), 20));
        let mut longer = Backoff::new(Duration::from_secs(90), Duration::from_secs(60));
        longer.next_wait();
        assert!(
            about(longer.next_wait(), 90),
            "a first wait past the ceiling is one"
        );
    }

    #[test]
    fn the_nth_wait_doubles_to_the_ceiling() {
        let (first, most) = (Duration::from_millis(100), Duration::from_secs(5));
        assert_eq!(doubled(first, 0, most), first);
        assert_eq!(doubled(first, 1, most), first);
        assert_eq!(doubled(first, 3, most), Duration::from_millis(400));
        assert_eq!(doubled(first, 40, most), most);
    }

    #[test]
    fn jittered_waits_differ() {
        let waits: std::collections::BTreeSet<Duration> =
            (0..20).map(|_| jitter(Duration::from_secs(1))).collect();
        assert!(waits.len() > 10, "{waits:?}");
        assert!(waits.iter().all(|wait| about(*wait, 1)));
    }
}
