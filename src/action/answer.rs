//! What an HTTP status says of an item, whoever answers with it — an HTTP receiver
//! (`action::http`) or a FastCGI script's `Status:` header (`action::fastcgi`):
//! any 2xx is success; 429, 502, 503 and 504 say "not now" rather than "not this
//! item" (the receiver is overloaded or its upstream is down: trouble downstream,
//! the circuit's business); any other status is the item's own failure. And when
//! to try again, from `Retry-After`.

use std::time::{Duration, SystemTime};

/// What a status says of the item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// A 2xx: done.
    Success,
    /// Not now: the receiver, or what is behind it, is in trouble.
    Downstream,
    /// Not this item.
    Item,
}

/// Statuses that say "not now" rather than "not this item".
const DOWNSTREAM_STATUSES: [u16; 4] = [429, 502, 503, 504];

impl Verdict {
    /// What `status` says of the item.
    pub fn of(status: u16) -> Verdict {
        match status {
            200..=299 => Verdict::Success,
            _ if DOWNSTREAM_STATUSES.contains(&status) => Verdict::Downstream,
            _ => Verdict::Item,
        }
    }
}

/// `Retry-After` as seconds from now: delay-seconds, or an HTTP date (at most
/// 136 years).
pub fn retry_after_seconds(value: &str) -> Option<u32> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(u32::try_from(seconds).unwrap_or(u32::MAX));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    let seconds = when
        .duration_since(SystemTime::now())
        .unwrap_or(Duration::ZERO)
        .as_secs();
    Some(u32::try_from(seconds).unwrap_or(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_retry_after_as_seconds_or_a_date() {
        assert_eq!(retry_after_seconds(" 120 "), Some(120));
        assert_eq!(
            retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(0)
        );
        let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(600));
        assert!(retry_after_seconds(&later).is_some_and(|s| (590..=600).contains(&s)));
        assert_eq!(retry_after_seconds("soon"), None);
    }

    #[test]
    fn a_status_is_success_trouble_downstream_or_the_items_failure() {
        assert_eq!(Verdict::of(204), Verdict::Success);
        assert_eq!(Verdict::of(503), Verdict::Downstream);
        assert_eq!(Verdict::of(429), Verdict::Downstream);
        assert_eq!(Verdict::of(500), Verdict::Item);
        assert_eq!(Verdict::of(302), Verdict::Item);
    }
}
