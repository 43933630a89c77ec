//! `[concurrency]`: at most `limit` items of one key run at once, across every
//! worker and copy. A slot of a key is a named lock on the server, so a copy that
//! dies frees its slots with its connection. Where the slots are held is the one
//! thing the modes do differently, behind [`KeySlots`]:
//!
//! - transaction mode, on the worker's own session ([`SessionKeys`]): held while
//!   the transaction lasts, given back once it ends (a lost session's go with its
//!   connection);
//! - lease mode, on the copy's own connection to the others ([`CopyKeys`]), so
//!   that a slot outlives the claim's short transaction: held for the lease's life
//!   by a [`KeyHold`], which gives it back when dropped — whatever ended the item:
//!   its outcome recorded, its lease lost or released, a shutdown, a panic.

use std::future::Future;
use std::sync::Arc;

use crate::db::item::Columns;
use crate::db::{DbError, Item, Session};
use crate::engine::policy::copies::Copies;
use crate::engine::queue::QueueRuntime;
use crate::telemetry::stats::limited::{AtLimit, Limited};
use crate::telemetry::stats::QueueStats;

/// Where a turn's `[concurrency]` key slots are taken.
pub trait KeySlots: Send {
    /// Takes a slot of each item's key: whether it got one for each (every one,
    /// without `[concurrency]`).
    fn take(&mut self, items: &[Item]) -> impl Future<Output = Result<Vec<bool>, DbError>> + Send;

    /// The keys these slots hold at their limit, counted in the
    /// `concurrency_keys_at_limit` gauge while the guard lives (`None` when the
    /// holder keeps the gauge itself).
    fn count_at_limit<'q>(&self, limited: &'q Limited) -> Option<AtLimit<'q>>;
}

/// Transaction mode: the slots are named locks of the worker's session.
pub struct SessionKeys<'s>(pub &'s mut Session);

impl KeySlots for SessionKeys<'_> {
    async fn take(&mut self, items: &[Item]) -> Result<Vec<bool>, DbError> {
        self.0.take_keys(items).await
    }

    fn count_at_limit<'q>(&self, limited: &'q Limited) -> Option<AtLimit<'q>> {
        Some(limited.at_limit(self.0.keys_at_limit()))
    }
}

/// Lease mode: the slots are named locks of the copy's link to the others, which
/// every worker of the queue shares; the gauge is set from it after each change.
pub struct CopyKeys<'q> {
    queue: &'q QueueRuntime,
    /// The select's columns, which the key is made of.
    columns: &'q Columns,
    /// The link's connection the last slots were taken on.
    generation: u64,
}

impl<'q> CopyKeys<'q> {
    pub fn new(queue: &'q QueueRuntime, columns: &'q Columns) -> Self {
        CopyKeys {
            queue,
            columns,
            generation: 0,
        }
    }

    /// The link the slots are held on, when the queue has `[concurrency]`.
    fn copies(&self) -> Option<&'q Arc<Copies>> {
        let queue = self.queue;
        queue
            .limits
            .shared()
            .filter(|_| queue.config.concurrency.is_some())
    }

    /// The hold of `item`'s slot, taken by [`CopyKeys::take`]: given back when
    /// dropped.
    pub fn hold(&self, item: &Item) -> Option<KeyHold> {
        Some(KeyHold {
            copies: self.copies()?.clone(),
            stats: self.queue.stats.clone(),
            item: Some(item.clone()),
            generation: self.generation,
        })
    }
}

impl KeySlots for CopyKeys<'_> {
    async fn take(&mut self, items: &[Item]) -> Result<Vec<bool>, DbError> {
        let Some(copies) = self.copies() else {
            return Ok(vec![true; items.len()]);
        };
        let queue = self.queue;
        let taken = copies.take_keys(&queue.config, self.columns, &queue.database, items);
        // The link down (or the question unanswered): no slot is taken, the rows wait.
        let got = match taken.await {
            Ok((got, generation)) => {
                self.generation = generation;
                got
            }
            Err(_) => vec![false; items.len()],
        };
        let at_limit = copies.keys_at_limit().await;
        queue.stats.observed.limited.set_held_by_copy(at_limit);
        Ok(got)
    }

    fn count_at_limit<'l>(&self, _: &'l Limited) -> Option<AtLimit<'l>> {
        None
    }
}

/// A lease's `[concurrency]` slot on the copy's link; dropping it gives it back.
#[derive(Debug)]
pub struct KeyHold {
    copies: Arc<Copies>,
    stats: Arc<QueueStats>,
    item: Option<Item>,
    /// The link's connection the slot was taken on.
    generation: u64,
}

impl KeyHold {
    /// Gives the slot back now, before the worker claims again.
    pub async fn release(mut self) {
        if let Some(item) = self.item.take() {
            give_back(&self.copies, &self.stats, &item, self.generation).await;
        }
    }
}

/// An item ended some other way (a panic, a cancelled turn): the slot is given
/// back from a task of its own.
impl Drop for KeyHold {
    fn drop(&mut self) {
        let Some(item) = self.item.take() else {
            return;
        };
        let (copies, stats, generation) =
            (self.copies.clone(), self.stats.clone(), self.generation);
        // A runtime shutting down has closed the link already: nothing to give back.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { give_back(&copies, &stats, &item, generation).await });
        }
    }
}

/// Gives back `item`'s slot on the copy's link, and counts the keys at their limit.
async fn give_back(copies: &Copies, stats: &QueueStats, item: &Item, generation: u64) {
    copies.release_key(item, generation).await;
    let at_limit = copies.keys_at_limit().await;
    stats.observed.limited.set_held_by_copy(at_limit);
}
