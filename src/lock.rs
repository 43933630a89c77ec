//! A mutex's guard, even after a holder panicked. tableq's shared state behind a
//! mutex is counters, small maps and queues that each update leaves whole, so a
//! holder's panic (a bug, already logged by the worker's restart) is no reason for
//! every other worker to stop.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, taking its value as it is if a holder panicked.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
