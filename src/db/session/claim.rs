//! The claim on a session: it opens the transaction (autocommit is off) and locks
//! up to the session's limit of waiting rows — key first where the select allows it
//! (see [`crate::db::key_claim`]), so that a row too large to read fails on its own
//! instead of ending the connection.

use mysql_async::prelude::Queryable;
use mysql_async::{Row, Value};

use super::{answer, Session};
use crate::db::error::DbError;
use crate::db::key_claim::{Claimed, KeyClaim, TooLargeToRead, Unreadable};

impl Session {
    /// Claims up to the session's limit of waiting rows.
    pub async fn claim(&mut self, queue: &str) -> Result<Claimed, DbError> {
        let Some(keys) = self.prepared.keys.clone() else {
            let prepared = &self.prepared;
            let claim = self
                .conn
                .exec(&prepared.claim, prepared.claim_params(queue));
            let rows: Vec<Row> = answer(&self.watch, self.deadline, "the claim", claim).await?;
            let items = rows.into_iter().map(|row| prepared.item(row)).collect();
            return Ok(Claimed {
                items,
                unreadable: Vec::new(),
            });
        };
        let claim = self
            .conn
            .exec(&keys.keys, self.prepared.claim_params(queue));
        let rows: Vec<Row> = answer(&self.watch, self.deadline, "the claim", claim).await?;
        let locked: Vec<Value> = rows.into_iter().filter_map(first_value).collect();
        if locked.is_empty() {
            return Ok(Claimed::default());
        }
        self.read_claimed(&keys, queue, locked).await
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
