//! What a queue's limits do, for its metrics and status page: this copy's share of
//! a `rate_limit` shared by every copy (and by how many), and for `[concurrency]`
//! the rows held back because their key was at its limit, and the keys this copy
//! holds at their limit now.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::lock::lock;

#[derive(Debug, Default)]
pub struct Limited {
    /// Items per second this copy may start, and the copies sharing the rate.
    share: Mutex<Share>,
    /// Rows claimed and handed back: their key was at its limit.
    held_back: AtomicU64,
    /// Keys at their limit by this copy's rows now, on its workers' sessions.
    keys_at_limit: AtomicUsize,
    /// Keys at their limit by this copy's rows now, on its own link to the other
    /// copies (lease mode, whose leases hold their keys there).
    held_by_copy: AtomicUsize,
}

/// This copy's part in limits shared by every copy.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Share {
    /// Its share of `rate_limit`, in items per second.
    pub rate_per_second: Option<f64>,
    /// The copies counted on the database (this one included).
    pub copies: Option<usize>,
}

impl Limited {
    pub fn set_share(&self, share: Share) {
        *lock(&self.share) = share;
    }

    pub fn share(&self) -> Share {
        *lock(&self.share)
    }

    /// `rows` were claimed and handed back, their key at its limit.
    pub fn held_back(&self, rows: usize) {
        self.held_back.fetch_add(rows as u64, Ordering::Relaxed);
    }

    pub fn held_back_total(&self) -> u64 {
        self.held_back.load(Ordering::Relaxed)
    }

    /// `keys` more at their limit by this copy's rows; a guard that counts them
    /// no more when dropped.
    pub fn at_limit(&self, keys: usize) -> AtLimit<'_> {
        self.keys_at_limit.fetch_add(keys, Ordering::Relaxed);
        AtLimit {
            limited: self,
            keys,
        }
    }

    /// `keys` at their limit on the copy's own link now (lease mode).
    pub fn set_held_by_copy(&self, keys: usize) {
        self.held_by_copy.store(keys, Ordering::Relaxed);
    }

    pub fn keys_at_limit(&self) -> usize {
        self.keys_at_limit.load(Ordering::Relaxed) + self.held_by_copy.load(Ordering::Relaxed)
    }
}

/// Keys counted at their limit while this lives.
pub struct AtLimit<'a> {
    limited: &'a Limited,
    keys: usize,
}

impl Drop for AtLimit<'_> {
    fn drop(&mut self) {
        let keys = &self.limited.keys_at_limit;
        keys.fetch_sub(self.keys, Ordering::Relaxed);
    }
}
