//! A lease's token, `:lease_id`: fresh random bits for a lease column of the
//! queue's own, or — where the table's own reservation column is the lease
//! (Laravel's `reserved_at`, Symfony's `delivered_at`) — the time of the claim, then
//! of the last renewal, which moves it on (`:new_lease_id`).

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
}

impl Token {
    /// A fresh token for a claim now.
    pub fn claimed(kind: LeaseToken) -> Token {
        let held = match kind {
            LeaseToken::Random => (0, random()),
            time => {
                let now = unix_now();
                (now, format(time, now))
            }
        };
        Token {
            kind,
            held: Mutex::new(held),
        }
    }

    /// The token the lease is held under.
    pub fn held(&self) -> String {
        lock(&self.held).1.clone()
    }

    /// The token a renewal now gives: the same random one; or now, and always later
    /// than the one held (a renewal that writes the value already there changes no
    /// row, and would read as a lost lease).
    pub fn renewal(&self) -> Renewal {
        let (seconds, held) = &*lock(&self.held);
        match self.kind {
            LeaseToken::Random => Renewal(*seconds, held.clone()),
            time => {
                let later = unix_now().max(seconds + 1);
                Renewal(later, format(time, later))
            }
        }
    }

    /// The renewal matched the row: the lease is held under its token from now on.
    pub fn renewed(&self, renewal: Renewal) {
        *lock(&self.held) = (renewal.0, renewal.1);
    }
}

/// A renewal's token, `:new_lease_id`.
#[derive(Debug, Clone)]
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

/// `seconds` as the token `kind` says.
fn format(kind: LeaseToken, seconds: u64) -> String {
    kind.at(seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_token_says_the_claim_and_moves_on_at_each_renewal() {
        assert_eq!(format(LeaseToken::UtcDatetime, 0), "1970-01-01 00:00:00");
        assert_eq!(format(LeaseToken::UnixTime, 1_765_000_000), "1765000000");
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
    fn a_random_token_is_fresh_per_claim_and_kept_by_renewals() {
        let token = Token::claimed(LeaseToken::Random);
        assert_eq!(token.held().len(), 32);
        assert_ne!(token.held(), Token::claimed(LeaseToken::Random).held());
        assert_eq!(token.renewal().as_str(), token.held());
    }
}
