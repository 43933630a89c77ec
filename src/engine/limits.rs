//! A queue's own limits, per process: `rate_limit` (items started per second, minute
//! or hour: a token bucket that lets one through at a time) and `max_in_flight`
//! (actions running at once across the queue's workers). With K copies of tableq the
//! limits are K times larger: divide them by K.

use std::sync::Arc;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::QueueConfig;

#[derive(Debug, Default)]
pub struct Limits {
    rate: Option<DefaultDirectRateLimiter>,
    in_flight: Option<Arc<Semaphore>>,
}

/// Leave to run one action; the action holds it while it runs (dropping it frees the
/// `max_in_flight` slot).
#[derive(Debug)]
pub struct Admitted {
    _slot: Option<OwnedSemaphorePermit>,
}

impl Limits {
    pub fn new(config: &QueueConfig) -> Limits {
        let rate = config.rate_limit.and_then(|rate| {
            let period = rate.per / rate.count;
            Quota::with_period(period).map(RateLimiter::direct)
        });
        Limits {
            rate,
            in_flight: config.max_in_flight.map(|n| Arc::new(Semaphore::new(n))),
        }
    }

    /// Waits until the queue may start one more action.
    pub async fn admit(&self) -> Admitted {
        let permit = match &self.in_flight {
            Some(slots) => slots.clone().acquire_owned().await.ok(),
            None => None,
        };
        if let Some(rate) = &self.rate {
            rate.until_ready().await;
        }
        Admitted { _slot: permit }
    }
}
