//! The claim on a session: it opens the transaction (autocommit is off) and locks
//! up to the session's limit of waiting rows in one statement, the rows with their
//! values. A row too large to read ends the connection as it arrives (the driver
//! refuses it): the session then opens a new connection, and claims key first for
//! a while (see [`crate::db::key_claim`]), so that the row fails on its own.
//!
//! What the refused claim locked is never claimed twice: its connection is killed,
//! and the server rolls its transaction back (nothing was written in it); until it
//! has, the key-first claim skips those rows like any others locked
//! (`SKIP LOCKED`), and a later claim takes them.

use mysql_async::prelude::Queryable;
use mysql_async::{Row, Value};
use tracing::warn;

use super::{answer, OpenError, Session};
use crate::db::connect::{Kill, QUICK_TIMEOUT};
use crate::db::error::DbError;
use crate::db::key_claim::{Claimed, KeyClaim, TooLargeToRead, Unreadable};

impl Session {
    /// Claims up to the session's limit of waiting rows.
    pub async fn claim(&mut self, queue: &str) -> Result<Claimed, DbError> {
        if self.prepared.keys.is_none() {
            return self.claim_whole(queue).await;
        }
        if self.key_first.now() {
            return self.claim_key_first(queue).await;
        }
        match self.claim_whole(queue).await {
            Err(refused) if refused.is_packet_refused() => {
                warn!(
                    error = %refused,
                    "a claimed row is larger than max_allowed_packet lets the client read, \
                     and its connection is lost with it: the claim is made again key first \
                     on a new connection, and the row fails on its own"
                );
                self.key_first.met_oversized_row();
                self.reconnect(refused).await?;
                self.claim_key_first(queue).await
            }
            claimed => claimed,
        }
    }

    /// The claim in one statement, the rows with their values.
    async fn claim_whole(&mut self, queue: &str) -> Result<Claimed, DbError> {
        let prepared = &self.prepared;
        let claim = self
            .conn
            .exec(&prepared.claim, prepared.claim_params(queue));
        let rows: Vec<Row> = answer(&self.watch, self.deadline, "the claim", claim).await?;
        let items = rows.into_iter().map(|row| prepared.item(row)).collect();
        Ok(Claimed {
            items,
            unreadable: Vec::new(),
        })
    }

    /// The claim key first: the keys locked, then the rows that fit in a packet read.
    async fn claim_key_first(&mut self, queue: &str) -> Result<Claimed, DbError> {
        let Some(keys) = self.prepared.keys.clone() else {
            return self.claim_whole(queue).await;
        };
        let claim = self
            .conn
            .exec(&keys.keys, self.prepared.claim_params(queue));
        let rows: Vec<Row> = answer(&self.watch, self.deadline, "the claim", claim).await?;
        let locked: Vec<Value> = rows.into_iter().filter_map(first_value).collect();
        if locked.is_empty() {
            return Ok(Claimed::default());
        }
        let claimed = self.read_claimed(&keys, queue, locked).await?;
        if !claimed.unreadable.is_empty() {
            self.key_first.met_oversized_row();
        }
        Ok(claimed)
    }

    /// After `refused` lost the connection: the old one killed (the server rolls its
    /// claim back), and the session opened again on a new one, in the same place
    /// in the budget. If it cannot be, the error is `refused`'s, the session lost.
    async fn reconnect(&mut self, refused: DbError) -> Result<(), DbError> {
        let lost = self.conn.id();
        // Killed from aside now, not as the old session drops: its locks go sooner.
        let _ = self
            .database
            .kill_within(lost, Kill::Connection, QUICK_TIMEOUT)
            .await;
        self.watch.abandoned.answered();
        let (queue, unanswered) = (self.queue.clone(), self.watch.unanswered.clone());
        // In the lost connection's place in the budget: no seat to wait for.
        let opening = Session::opening(&queue, &self.database, self.limit, unanswered, None);
        let reopened =
            Session::within_deadline(queue.database_timeout, &self.watch.unanswered, opening);
        let mut reopened = match reopened.await {
            Ok(session) => session,
            Err(OpenError::Unreachable(e)) => return Err(e),
            Err(OpenError::Invalid(_)) => return Err(refused),
        };
        reopened._place = self._place.take();
        reopened.key_first = self.key_first;
        *self = reopened;
        Ok(())
    }

    /// Reads the rows of the `locked` keys, in their order: those that fit in a
    /// packet as items; the others as unreadable, with their size. A key whose row
    /// no longer matches the select is left out: it is not the queue's any more.
    async fn read_claimed(
        &mut self,
        keys: &KeyClaim,
        queue: &str,
        locked: Vec<Value>,
    ) -> Result<Claimed, DbError> {
        let read = self.conn.exec(&keys.read, keys.read_params(queue, &locked));
        let rows: Vec<Row> = answer(&self.watch, self.deadline, "the claim's rows", read).await?;
        let mut read: Vec<_> = rows.into_iter().map(|r| self.prepared.item(r)).collect();
        let mut claimed = Claimed::default();
        for key in locked {
            if let Some(at) = read.iter().position(|item| *item.key() == key) {
                claimed.items.push(read.swap_remove(at));
                continue;
            }
            let size = (self.conn)
                .exec_first::<Option<u64>, _, _>(&keys.size, keys.size_params(queue, &key));
            let size: Option<u64> = answer(&self.watch, self.deadline, "a row's size", size)
                .await?
                .flatten();
            let Some(size) = size.filter(|s| *s as usize > keys.max_packet.saturating_sub(1024))
            else {
                continue;
            };
            let prepared = &self.prepared;
            claimed.unreadable.push(Unreadable {
                item: KeyClaim::unread(&prepared.columns, prepared.key_index, key),
                why: TooLargeToRead {
                    size,
                    limit: keys.max_packet,
                },
            });
        }
        Ok(claimed)
    }
}

/// A row's first value (the key-first claim's only column).
fn first_value(row: Row) -> Option<Value> {
    row.unwrap().into_iter().next()
}
