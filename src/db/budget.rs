//! The process's connection budget: at most so many database connections at once,
//! across every queue — workers, lease pools, background counts — so that thousands
//! of queues never take every connection the server has. A session holds its place
//! for as long as it lives; a worker that finds the budget spent waits for a place.
//! (KILL and the quick side looks take none: they free what is held.)

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::warn;

/// `run --max-connections` when not given.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;

/// The budget, shared by every queue of the process.
#[derive(Debug)]
pub struct Budget {
    places: Arc<Semaphore>,
    size: usize,
    /// Connections waiting for a place now.
    waiting: AtomicUsize,
    /// Said once: the budget held a connection back.
    said: std::sync::atomic::AtomicBool,
}

/// A place in the budget, held by a connection for its life.
#[derive(Debug)]
pub struct Place(#[allow(dead_code)] OwnedSemaphorePermit);

impl Budget {
    pub fn new(size: usize) -> Budget {
        Budget {
            places: Arc::new(Semaphore::new(size)),
            size,
            waiting: AtomicUsize::new(0),
            said: Default::default(),
        }
    }

    /// A place for one more connection; waits while every place is taken.
    pub async fn place(&self) -> Place {
        if let Ok(permit) = self.places.clone().try_acquire_owned() {
            return Place(permit);
        }
        if !self.said.swap(true, Ordering::Relaxed) {
            warn!(max_connections = self.size,
                "the process's connection budget is spent: a connection waits for a place \
                 (raise --max-connections, or lower `workers` and `[lease] connections`); said once");
        }
        self.waiting.fetch_add(1, Ordering::Relaxed);
        let permit = self.places.clone().acquire_owned().await;
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        match permit {
            Ok(permit) => Place(permit),
            // The semaphore is never closed.
            Err(_) => unreachable!("the connection budget is never closed"),
        }
    }

    /// How many connections it allows at once.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Whether a connection waits for a place: an idle one should give its up.
    pub fn contended(&self) -> bool {
        self.waiting.load(Ordering::Relaxed) > 0
    }
}

impl Default for Budget {
    fn default() -> Self {
        Budget::new(DEFAULT_MAX_CONNECTIONS)
    }
}
