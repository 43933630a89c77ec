//! A queue's limits: `rate_limit` (items started per second, minute or hour: a
//! token bucket that lets one through at a time) and `max_in_flight` (actions
//! running at once). With `limits = "global"` (the default) they hold across every
//! copy of tableq running the queue against its database: the rate is shared out
//! by the copies counted ([`crate::engine::policy::copies`]), and each action holds one of the
//! queue's `max_in_flight` slots on the server besides its place in the process.
//! With `"per_process"` each copy keeps to them on its own.

use std::sync::{Arc, Mutex};

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::queue::limits::Across;
use crate::config::{QueueConfig, Rate};
use crate::db::Database;
use crate::engine::policy::copies::{Copies, Slot};
use crate::lock::lock;

#[derive(Debug, Default)]
pub struct Limits {
    rate: Option<SharedRate>,
    in_flight: Option<Arc<Semaphore>>,
    /// The other copies, when the limits are shared with them.
    copies: Option<Arc<Copies>>,
}

/// `rate_limit`, and this copy's share of it.
#[derive(Debug)]
struct SharedRate {
    rate: Rate,
    /// The copies it is shared by, and this copy's bucket for its share.
    share: Mutex<(usize, Arc<DefaultDirectRateLimiter>)>,
}

impl SharedRate {
    fn new(rate: Rate) -> Option<SharedRate> {
        Some(SharedRate {
            rate,
            share: Mutex::new((1, Arc::new(bucket(rate, 1)?))),
        })
    }

    /// Shares the rate by `copies` from now on.
    fn share_by(&self, copies: usize) {
        let mut share = lock(&self.share);
        if share.0 == copies {
            return;
        }
        if let Some(bucket) = bucket(self.rate, copies) {
            *share = (copies, Arc::new(bucket));
        }
    }

    /// The share of each of `copies`, in words: `10/s`.
    fn share(&self, copies: usize) -> String {
        let per_second = f64::from(self.rate.count) / self.rate.per.as_secs_f64();
        format!("{:.3}/s", per_second / copies.max(1) as f64)
    }

    fn bucket(&self) -> Arc<DefaultDirectRateLimiter> {
        lock(&self.share).1.clone()
    }

    /// This copy's share, in items per second.
    fn per_second(&self) -> f64 {
        let copies = lock(&self.share).0.max(1);
        f64::from(self.rate.count) / self.rate.per.as_secs_f64() / copies as f64
    }
}

/// A bucket letting `rate` divided by `copies` through, one at a time.
fn bucket(rate: Rate, copies: usize) -> Option<DefaultDirectRateLimiter> {
    let period = rate.per * copies as u32 / rate.count;
    Quota::with_period(period).map(RateLimiter::direct)
}

/// Leave to run one action; the action holds it while it runs (dropping it frees
/// its `max_in_flight` slot, in the process and on the server).
#[derive(Debug)]
pub struct Admitted {
    _place: Option<OwnedSemaphorePermit>,
    _slot: Option<Slot>,
}

impl Limits {
    pub fn new(config: &QueueConfig, database: &Database) -> Limits {
        let limited = config.rate_limit.is_some() || config.max_in_flight.is_some();
        // Lease mode's [concurrency] keys are held on the same connection.
        let lease_keys = config.concurrency.is_some() && config.is_lease();
        let shared = (limited && config.limits_across == Across::Copies) || lease_keys;
        Limits {
            rate: config.rate_limit.and_then(SharedRate::new),
            in_flight: config.max_in_flight.map(|n| Arc::new(Semaphore::new(n))),
            copies: shared.then(|| {
                Arc::new(Copies::new(
                    database.name(),
                    &config.name,
                    config.max_in_flight,
                ))
            }),
        }
    }

    /// Waits until the queue may start one more action.
    pub async fn admit(&self) -> Admitted {
        let place = match &self.in_flight {
            Some(places) => places.clone().acquire_owned().await.ok(),
            None => None,
        };
        let slot = match &self.copies {
            Some(copies) => copies.slot().await,
            None => None,
        };
        if let Some(rate) = &self.rate {
            rate.bucket().until_ready().await;
        }
        Admitted {
            _place: place,
            _slot: slot,
        }
    }

    /// This copy's share of `rate_limit`, in items per second, if it has one.
    pub fn rate_share(&self) -> Option<f64> {
        self.rate.as_ref().map(SharedRate::per_second)
    }

    /// The copies the limits are shared by, when they are.
    pub fn copies(&self) -> Option<usize> {
        self.copies.as_ref().map(|c| c.counted())
    }

    /// The link to the other copies, when the limits are shared with them.
    pub fn shared(&self) -> Option<&Arc<Copies>> {
        self.copies.as_ref()
    }

    /// Shares the rate by `copies` from now on.
    pub fn share_by(&self, copies: usize) {
        if let Some(rate) = &self.rate {
            rate.share_by(copies);
        }
    }

    /// Each of `copies`' share of the rate, in words (`10.000/s`).
    pub fn share_of(&self, copies: usize) -> Option<String> {
        self.rate.as_ref().map(|rate| rate.share(copies))
    }
}
