//! The copies of tableq running one queue against its database, as the server's
//! named locks show them ([`crate::db::named_lock`]): what makes `rate_limit` and
//! `max_in_flight` hold across every copy (`limits = "global"`, the default).
//!
//! Each copy keeps one connection of its own for the queue (outside its workers)
//! and holds a place on it: the first free of [`MAX_COPIES`] named locks. Every
//! [`COUNT_EVERY`] it counts the places held, and its share of `rate_limit` is the
//! rate divided by that count — a copy that joins lowers every share within a
//! count, and one that dies (its connection gone, its place freed by the server)
//! gives its share back as fast. `max_in_flight` is as many named locks, the
//! slots: an action runs holding one, taken on this connection and given back when
//! it ends; a copy that dies frees its slots with its connection.
//!
//! While the connection is down the copy keeps to the limits on its own: its last
//! share of the rate, and `max_in_flight` within the process.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;
use tracing::warn;

use crate::config::QueueConfig;
use crate::db::item::Columns;
use crate::db::key_lock::KeyLocks;
use crate::db::named_lock::{LockNames, LockSession, MAX_COPIES};
use crate::db::Item;
use crate::db::{Database, DbError};
use crate::engine::policy::retry::jitter;

/// How often a copy counts the copies.
pub const COUNT_EVERY: Duration = Duration::from_secs(1);

/// How long a copy waits before it looks again for a free `max_in_flight` slot.
const SLOT_POLL: Duration = Duration::from_millis(50);

/// One copy's link to the others.
#[derive(Debug)]
pub struct Copies {
    names: LockNames,
    /// `max_in_flight`, when the queue sets it.
    slots: Option<usize>,
    link: Mutex<Link>,
    /// The copies counted last (at least this one).
    counted: AtomicUsize,
}

/// The connection the copy's place and slots are held on.
#[derive(Debug, Default)]
struct Link {
    conn: Option<LockSession>,
    /// Which connection this is: a slot taken on an earlier one is not released on
    /// this one.
    generation: u64,
    /// The slots this copy holds now.
    held: BTreeSet<usize>,
    /// Lease mode's `[concurrency]` key slots, held on this connection for each
    /// lease's life (made at the first claim, which knows the select's columns).
    keys: Option<KeyLocks>,
}

/// A `max_in_flight` slot held while one action runs; dropping it gives it back.
#[derive(Debug)]
pub struct Slot {
    copies: Arc<Copies>,
    index: usize,
    generation: u64,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let (copies, index, generation) = (self.copies.clone(), self.index, self.generation);
        tokio::spawn(async move { copies.release(index, generation).await });
    }
}

impl Copies {
    pub fn new(database: &str, queue: &str, slots: Option<usize>) -> Copies {
        Copies {
            names: LockNames::for_queue(database, queue),
            slots,
            link: Mutex::default(),
            counted: AtomicUsize::new(1),
        }
    }

    /// The copies counted last, this one included.
    pub fn counted(&self) -> usize {
        self.counted.load(Ordering::Relaxed)
    }

    /// Connects when not connected (taking a place), then counts the copies: their
    /// number, or why the link is down.
    pub async fn count(&self, database: &Database) -> Result<usize, DbError> {
        let mut link = self.link.lock().await;
        let names: Vec<String> = (0..MAX_COPIES).map(|i| self.names.copy(i)).collect();
        let conn = match &mut link.conn {
            Some(conn) => conn,
            None => {
                let mut conn = LockSession::open(database).await?;
                self.take_place(&mut conn).await?;
                link.generation += 1;
                link.held.clear();
                if let Some(keys) = &mut link.keys {
                    keys.forget();
                }
                link.conn.insert(conn)
            }
        };
        match conn.count_held(&names).await {
            Ok(n) => {
                let n = n.max(1);
                self.counted.store(n, Ordering::Relaxed);
                Ok(n)
            }
            Err(e) => {
                link.conn = None;
                Err(e)
            }
        }
    }

    /// Takes the first free place.
    async fn take_place(&self, conn: &mut LockSession) -> Result<(), DbError> {
        for index in 0..MAX_COPIES {
            if conn.try_lock(&self.names.copy(index)).await? {
                return Ok(());
            }
        }
        warn!(
            "more than {MAX_COPIES} copies run the queue: this one is not counted in the limits' shares"
        );
        Ok(())
    }

    /// Closes the link: the place and slots go with it.
    pub async fn leave(&self) {
        if let Some(conn) = self.link.lock().await.conn.take() {
            conn.close().await;
        }
    }

    /// Waits for a free `max_in_flight` slot and holds it; `None` while the link is
    /// down (the process keeps to `max_in_flight` alone) or without `max_in_flight`.
    pub async fn slot(self: &Arc<Self>) -> Option<Slot> {
        let slots = self.slots?;
        loop {
            match self.try_slot(slots).await {
                Look::Got(slot) => return Some(slot),
                Look::NoneFree => tokio::time::sleep(jitter(SLOT_POLL)).await,
                Look::Down(None) => return None,
                Look::Down(Some(e)) => {
                    warn!(error = %e, "lost the connection that shares max_in_flight with the \
                        other copies: this copy keeps to it on its own until it is back");
                    return None;
                }
            }
        }
    }

    /// One look for a free slot: the free ones, then the first that is still free.
    async fn try_slot(self: &Arc<Self>, slots: usize) -> Look {
        let mut link = self.link.lock().await;
        let Link {
            conn,
            generation,
            held,
            ..
        } = &mut *link;
        let Some(session) = conn.as_mut() else {
            return Look::Down(None);
        };
        let names: Vec<String> = (0..slots).map(|i| self.names.slot(i)).collect();
        let got = match session.free(&names).await {
            Ok(free) => first_free(session, &names, &free, held).await,
            Err(e) => Err(e),
        };
        match got {
            Ok(Some(index)) => {
                held.insert(index);
                Look::Got(Slot {
                    copies: self.clone(),
                    index,
                    generation: *generation,
                })
            }
            Ok(None) => Look::NoneFree,
            Err(e) => {
                *conn = None;
                Look::Down(Some(e))
            }
        }
    }

    /// Takes a `[concurrency]` key slot for each of `items` (lease mode, see
    /// [`crate::engine::policy::concurrency`]) on this copy's connection, so that it outlives the
    /// claim: whether it got one for each. With the connection down, none is taken:
    /// the rows wait.
    pub async fn take_keys(
        &self,
        queue: &QueueConfig,
        columns: &Columns,
        database: &Database,
        items: &[Item],
    ) -> Result<(Vec<bool>, u64), DbError> {
        let mut link = self.link.lock().await;
        let Link {
            conn,
            keys,
            generation,
            ..
        } = &mut *link;
        let generation = *generation;
        let Some(session) = conn.as_mut() else {
            return Ok((vec![false; items.len()], generation));
        };
        if keys.is_none() {
            // The queue's sessions opened only once its key's columns were found.
            *keys = KeyLocks::new(queue, columns, database.name())
                .ok()
                .flatten();
        }
        let Some(keys) = keys.as_mut() else {
            return Ok((vec![true; items.len()], generation));
        };
        let taken = keys.take_on(session, items).await;
        if taken.is_err() {
            *conn = None;
        }
        taken.map(|got| (got, generation))
    }

    /// Gives back `item`'s key slot (its lease's outcome is recorded, or the lease
    /// is lost), taken on connection `generation`: one taken on an earlier
    /// connection went with it (and the key's slots held now are other leases').
    pub async fn release_key(&self, item: &Item, generation: u64) {
        let mut link = self.link.lock().await;
        if link.generation != generation {
            return;
        }
        let Link { conn, keys, .. } = &mut *link;
        if let (Some(session), Some(keys)) = (conn.as_mut(), keys.as_mut()) {
            if keys.release_on(session, item).await.is_err() {
                *conn = None;
            }
        }
    }

    /// How many keys this copy holds every slot of now (lease mode).
    pub async fn keys_at_limit(&self) -> usize {
        let link = self.link.lock().await;
        link.keys.as_ref().map_or(0, KeyLocks::keys_at_limit)
    }

    /// Gives slot `index` back, if it was taken on the connection still open.
    async fn release(&self, index: usize, generation: u64) {
        let mut link = self.link.lock().await;
        if link.generation != generation || !link.held.remove(&index) {
            return;
        }
        let name = self.names.slot(index);
        if let Some(conn) = link.conn.as_mut() {
            if conn.release(&name).await.is_err() {
                link.conn = None;
            }
        }
    }
}

/// What one look for a `max_in_flight` slot found.
enum Look {
    Got(Slot),
    NoneFree,
    /// The link is down (and why, when this look found it so).
    Down(Option<DbError>),
}

/// Takes the first of the `free` slots this copy does not hold already; its index.
async fn first_free(
    conn: &mut LockSession,
    names: &[String],
    free: &[bool],
    held: &BTreeSet<usize>,
) -> Result<Option<usize>, DbError> {
    let candidates = (0..names.len()).filter(|i| free.get(*i) == Some(&true) && !held.contains(i));
    for index in candidates {
        if conn.try_lock(&names[index]).await? {
            return Ok(Some(index));
        }
    }
    Ok(None)
}
