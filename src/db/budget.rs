//! The process's connection budget: at most so many database connections at once,
//! across every queue — workers, lease pools, background counts — so that thousands
//! of queues never take every connection the server has.
//!
//! Who waits, and who gives a session up: a connection holds its place for as long
//! as it lives. One that finds every place taken waits for a place. While anyone
//! waits, an idle queue's watcher gives its session up between polls; sleeping
//! workers and finished counts give theirs up too. A connection given up is not
//! closed at once: it is kept, place and all, for the next one that needs a
//! connection to the same database ([`Seat::Handed`]), which resets it and sets it
//! up as its own — a queue waiting takes it at once. Kept unused for [`SPARE_FOR`],
//! or wanted for its place by another database's queue, it is closed. So a process
//! with more queues than places takes its turns on the same few connections,
//! rather than closing and opening one per poll. (KILL and the quick side looks
//! take no place: they free what is held.)

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mysql_async::{Conn, Opts};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tracing::warn;

use crate::lock::lock;

/// `run --max-connections` when not given.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;

/// How long a connection given up waits for someone to take it before it is closed
/// (and its place freed): long enough for the next queue's turn, far shorter than
/// any `wait_timeout`.
const SPARE_FOR: Duration = Duration::from_secs(2);

/// How long closing a spare (COM_QUIT) may take before it is simply dropped.
const CLOSE_WITHIN: Duration = Duration::from_secs(10);

/// The budget, shared by every queue of the process.
#[derive(Debug)]
pub struct Budget {
    places: Arc<Semaphore>,
    size: usize,
    /// Connections waiting for a place now.
    waiting: AtomicUsize,
    /// Said once: the budget held a connection back.
    said: AtomicBool,
    /// Connections given up while others waited, each for the next one waiting for
    /// its database.
    spare: Mutex<Vec<Spare>>,
    /// A connection was given up.
    handed: Notify,
    /// A sweep of the spares is due.
    sweeping: AtomicBool,
}

/// A place in the budget, held by a connection for its life.
#[derive(Debug)]
pub struct Place(#[allow(dead_code)] OwnedSemaphorePermit);

/// What a connection about to open gets from the budget.
#[derive(Debug)]
pub enum Seat {
    /// A place: connect.
    Fresh(Place),
    /// Another queue's connection to the same database, given up: reset it and use
    /// it.
    Handed(Conn, Place),
}

/// A connection given up, waiting to be taken.
#[derive(Debug)]
struct Spare {
    opts: Opts,
    conn: Conn,
    place: Place,
    since: Instant,
}

impl Budget {
    pub fn new(size: usize) -> Budget {
        Budget {
            places: Arc::new(Semaphore::new(size)),
            size,
            waiting: AtomicUsize::new(0),
            said: AtomicBool::new(false),
            spare: Mutex::new(Vec::new()),
            handed: Notify::new(),
            sweeping: AtomicBool::new(false),
        }
    }

    /// A place for one more connection to the database of `opts`: a connection to it
    /// given up by another, or a free place; waits while every place is taken.
    pub async fn seat(&self, opts: &Opts) -> Seat {
        let mut counted = None;
        loop {
            let handed = self.handed.notified();
            tokio::pin!(handed);
            // Registered before looking, so a connection given up meanwhile is seen.
            handed.as_mut().enable();
            if let Some(seat) = self.take(opts) {
                return seat;
            }
            if counted.is_none() {
                self.say_spent();
                counted = Some(Waiting::new(&self.waiting));
            }
            tokio::select! {
                permit = self.places.clone().acquire_owned() => match permit {
                    Ok(permit) => return Seat::Fresh(Place(permit)),
                    Err(_) => unreachable!("the connection budget is never closed"),
                },
                () = handed => {}
            }
        }
    }

    /// A spare connection to `opts`'s database, a free place, or a spare to another
    /// database closed for its place; `None` if there is none of these.
    fn take(&self, opts: &Opts) -> Option<Seat> {
        let (mine, other) = {
            let mut spare = lock(&self.spare);
            let mine = spare.iter().position(|s| s.opts == *opts);
            match mine {
                Some(at) => (Some(spare.swap_remove(at)), None),
                None => (None, self.free_or(&mut spare)),
            }
        };
        match (mine, other) {
            (Some(spare), _) => Some(Seat::Handed(spare.conn, spare.place)),
            (None, Some(place)) => Some(Seat::Fresh(place)),
            (None, None) => None,
        }
    }

    /// A free place, or the place of the oldest spare (of another database), whose
    /// connection is closed.
    fn free_or(&self, spare: &mut Vec<Spare>) -> Option<Place> {
        if let Ok(permit) = self.places.clone().try_acquire_owned() {
            return Some(Place(permit));
        }
        if spare.is_empty() {
            return None;
        }
        let oldest = spare.remove(0);
        tokio::spawn(close(oldest.conn));
        Some(oldest.place)
    }

    /// Takes `conn` (to the database of `opts`, holding `place`) given up: kept, place
    /// and all, for the next one that needs a connection to that database — at once
    /// if one waits. Kept at most [`SPARE_FOR`]: then closed, and its place freed.
    pub async fn give_up(self: &Arc<Self>, opts: &Opts, conn: Conn, place: Place) {
        let stale = {
            let mut spare = lock(&self.spare);
            let stale = take_stale(&mut spare);
            spare.push(Spare {
                opts: opts.clone(),
                conn,
                place,
                since: Instant::now(),
            });
            stale
        };
        self.handed.notify_waiters();
        if !self.sweeping.swap(true, Ordering::AcqRel) {
            tokio::spawn(sweep(self.clone()));
        }
        close_all(stale).await;
    }

    /// How many connections it allows at once.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Whether a connection waits for a place: an idle one should give its up.
    pub fn contended(&self) -> bool {
        self.waiting.load(Ordering::Relaxed) > 0
    }

    fn say_spent(&self) {
        if !self.said.swap(true, Ordering::Relaxed) {
            warn!(
                max_connections = self.size,
                "the process's connection budget is spent: a connection waits for a place, and \
                 idle queues pass theirs on between polls (raise --max-connections, or lower \
                 `workers` and `[lease] connections`); said once"
            );
        }
    }
}

/// One connection counted as waiting for a place while it lives.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(waiting: &'a AtomicUsize) -> Self {
        waiting.fetch_add(1, Ordering::Relaxed);
        Waiting(waiting)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The spares given up longer than [`SPARE_FOR`] ago, taken out of `spare`.
fn take_stale(spare: &mut Vec<Spare>) -> Vec<Spare> {
    let (stale, kept) = std::mem::take(spare)
        .into_iter()
        .partition(|s| s.since.elapsed() > SPARE_FOR);
    *spare = kept;
    stale
}

/// Closes each spare, and only then frees its place: the server never sees more
/// connections than the budget.
async fn close_all(spares: Vec<Spare>) {
    for old in spares {
        close(old.conn).await;
    }
}

/// Closes the spares nobody took, until there are none.
async fn sweep(budget: Arc<Budget>) {
    loop {
        tokio::time::sleep(SPARE_FOR).await;
        let (stale, left) = {
            let mut spare = lock(&budget.spare);
            let stale = take_stale(&mut spare);
            (stale, !spare.is_empty())
        };
        close_all(stale).await;
        if !left {
            budget.sweeping.store(false, Ordering::Release);
            // A spare given up just now schedules no sweep of its own: look again.
            if lock(&budget.spare).is_empty() || budget.sweeping.swap(true, Ordering::AcqRel) {
                return;
            }
        }
    }
}

/// Closes `conn` politely (COM_QUIT), without waiting long for it.
async fn close(conn: Conn) {
    let _ = tokio::time::timeout(CLOSE_WITHIN, conn.disconnect()).await;
}

impl Default for Budget {
    fn default() -> Self {
        Budget::new(DEFAULT_MAX_CONNECTIONS)
    }
}
