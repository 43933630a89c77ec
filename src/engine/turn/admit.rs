//! From claimed rows to the items a turn works: one path for both modes, in one
//! order. Before the claim the worker has passed the write gate and the circuit
//! ([`crate::engine::worker`]) and found the queue not paused ([`crate::engine::turn::Turn::claiming`]);
//! the claim itself has set apart the rows too large to read. Here, what is left:
//! the rows too large to read are kept to be failed without their action; every
//! other row takes a slot of its `[concurrency]` key, and one whose key is at its
//! limit is handed back untouched. The global limits (`rate_limit`,
//! `max_in_flight`) are taken as each action starts ([`crate::engine::turn::execute`]).
//!
//! What a mode does differently — where the key slots are held — is behind
//! [`KeySlots`]; what it took, it gives back (see [`crate::engine::policy::concurrency`]).

use crate::db::{Claimed, DbError, Item, Unreadable};
use crate::engine::policy::concurrency::KeySlots;
use crate::engine::queue::QueueRuntime;
use crate::engine::turn::report::{BatchReport, Fate, Returned};
use crate::engine::turn::Turn;
use crate::telemetry::stats::limited::AtLimit;

/// What a claim brought, admitted.
pub struct Admitted<'q> {
    /// The rows whose action runs, each holding a slot of its key.
    pub items: Vec<Item>,
    /// The rows too large to read: each fails without its action running.
    pub unreadable: Vec<Unreadable>,
    /// What the turn did, so far: the rows handed back.
    pub report: BatchReport,
    /// The keys held at their limit, counted while this lives: keep it for the
    /// turn.
    pub at_limit: Option<AtLimit<'q>>,
}

impl Admitted<'_> {
    /// Whether the claim found nothing at all.
    pub fn is_empty(&self) -> bool {
        self.report.claimed == 0
    }
}

/// Admits what `claimed` brought, `turn` hearing of it; the rows whose key is at
/// its limit are settled as handed back.
pub async fn admit<'q>(
    queue: &'q QueueRuntime,
    turn: &Turn<'_>,
    claimed: Claimed,
    keys: &mut impl KeySlots,
) -> Result<Admitted<'q>, DbError> {
    let Claimed { items, unreadable } = claimed;
    turn.claimed(&items);
    let claimed = items.len() + unreadable.len();
    let mut report = match claimed {
        0 => BatchReport::default(),
        n => BatchReport::claimed(n),
    };
    let got = match items.is_empty() {
        true => Vec::new(),
        false => keys.take(&items).await?,
    };
    let mut admitted = Vec::with_capacity(items.len());
    for (item, got) in items.into_iter().zip(got) {
        match got {
            true => admitted.push(item),
            false => {
                let held_back = Fate::Returned(Returned::KeyAtLimit);
                queue.settle(&mut report, &item, held_back, None);
            }
        }
    }
    Ok(Admitted {
        items: admitted,
        unreadable,
        report,
        at_limit: keys.count_at_limit(&queue.stats.observed.limited),
    })
}
