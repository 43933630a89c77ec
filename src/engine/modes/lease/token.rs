//! A lease's token, `:lease_id`: fresh random bits for a lease column of the
//! queue's own, or — where the table's own reservation column is the lease
//! (Laravel's `reserved_at`, Symfony's `delivered_at`) — the time of the claim, then
//! of the last renewal, which moves it on (`:new_lease_id`).
//!
//! A renewal whose end is not heard — cut off when the action finished, or its
//! COMMIT's answer lost — may have moved the row on all the same: its token is kept
//! as pending, and a statement that finds the row gone from the held token tries
//! the pending ones before it calls the lease lost.

use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::config::queue::lease::LeaseToken;
use crate::lock::lock;

/// The token a lease is held under now.
#[derive(Debug)]
pub struct Token {
    kind: LeaseToken,
    /// The token, and for a time its unix seconds.
    held: Mutex<(u64, String)>,
    /// Renewals sent whose end was not heard, oldest first (time tokens only).
    pending: Mutex<Vec<Renewal>>,
}

impl Token {
    /// A fresh token for a claim now.
    pub fn claimed(kind: LeaseToken) -> Token {
        let held = match kind {
            LeaseToken::Random => (0, random()),
            time => {
                let now = unix_now();
                (now, time.at(now))
            }
        };
        Token {
            kind,
            held: Mutex::new(held),
            pending: Mutex::new(Vec::new()),
        }
    }

    /// The token the lease is held under.
    pub fn held(&self) -> String {
        lock(&self.held).1.clone()
    }

    /// The token a renewal now gives: the same random one; or now, and always later
    /// than the held token and the pending ones, so that each renewal's is its own.
    /// A time renewal is pending until [`Token::renewed`] or [`Token::missed`].
    pub fn renewal(&self) -> Renewal {
        let (seconds, held) = &*lock(&self.held);
        if self.kind == LeaseToken::Random {
            return Renewal(*seconds, held.clone());
        }
        let mut pending = lock(&self.pending);
        let last = pending.last().map_or(*seconds, |r| r.0);
        let later = unix_now().max(last + 1);
        let renewal = Renewal(later, self.kind.at(later));
        if pending.len() == MOST_PENDING {
            pending.remove(0);
        }
        pending.push(renewal.clone());
        renewal
    }

    /// The renewal matched the row: the lease is held under its token from now on.
    pub fn renewed(&self, renewal: Renewal) {
        lock(&self.pending).clear();
        *lock(&self.held) = (renewal.0, renewal.1);
    }

    /// The renewal was committed and matched no row: the row does not hold it.
    pub fn missed(&self, renewal: &Renewal) {
        lock(&self.pending).retain(|r| r != renewal);
    }

    /// A statement under the held token matched no row: the newest pending
    /// renewal becomes the held token, and true to try again under it; false when
    /// none is left (the lease is lost).
    pub fn adopt_pending(&self) -> bool {
        let Some(renewal) = lock(&self.pending).pop() else {
            return false;
        };
        *lock(&self.held) = (renewal.0, renewal.1);
        true
    }
}

/// The most renewals kept pending: each is a renewal whose end was not heard, and
/// renewals stop once the lease would have run out.
const MOST_PENDING: usize = 8;

/// A renewal's token, `:new_lease_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Renewal(u64, String);

impl Renewal {
    pub fn as_str(&self) -> &str {
        &self.1
    }
}

/// 128 random bits as hex.
pub fn random() -> String {
    format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..))
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_token_says_the_claim_and_moves_on_at_each_renewal() {
        assert_eq!(LeaseToken::UtcDatetime.at(0), "1970-01-01 00:00:00");
        assert_eq!(LeaseToken::UnixTime.at(1_765_000_000), "1765000000");
        let token = Token::claimed(LeaseToken::UnixTime);
        let first: u64 = token.held().parse().unwrap();
        assert!(first.abs_diff(unix_now()) <= 1);
        // Renewed twice within the same second: each renewal is later still.
        for later in [first + 1, first + 2] {
            let renewal = token.renewal();
            assert!(renewal.as_str().parse::<u64>().unwrap() >= later);
            token.renewed(renewal);
        }
        let datetime = Token::claimed(LeaseToken::UtcDatetime).held();
        assert_eq!((datetime.len(), &datetime[10..11]), (19, " "), "{datetime}");
    }

    #[test]
    fn a_renewal_not_heard_of_is_tried_before_the_lease_is_called_lost() {
        let token = Token::claimed(LeaseToken::UnixTime);
        let claimed = token.held();
        // Cut off: its end not heard; then one that matched nothing.
        let unheard = token.renewal();
        let missed = token.renewal();
        token.missed(&missed);
        assert_eq!(token.held(), claimed);
        assert!(token.adopt_pending(), "the unheard renewal is tried");
        assert_eq!(token.held(), unheard.as_str());
        assert!(!token.adopt_pending(), "none left: the lease is lost");
        let random = Token::claimed(LeaseToken::Random);
        let _ = random.renewal();
        assert!(!random.adopt_pending(), "a random token's renewal keeps it");
    }

    #[test]
    fn a_random_token_is_fresh_per_claim_and_kept_by_renewals() {
        let token = Token::claimed(LeaseToken::Random);
        assert_eq!(token.held().len(), 32);
        assert_ne!(token.held(), Token::claimed(LeaseToken::Random).held());
        assert_eq!(token.renewal().as_str(), token.held());
    }
}
