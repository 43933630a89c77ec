//! The claim, key first (the article's own pattern): lock the keys of up to `batch`
//! waiting rows, then read those rows — the ones that fit in a packet. A row larger
//! than the client takes in one packet (the server's `max_allowed_packet`) ends the
//! connection as it arrives, and with it the claim: claimed whole again and again,
//! the queue would be stuck behind one row. Claimed key first, such a row is never
//! sent: its key is claimed like any other, and it fails on its own
//! ([`TooLargeToRead`]).
//!
//! The key-first claim costs a second round trip, and the oversized row is rare: a
//! session claims whole (one statement) until a row is refused, then key first
//! for a while ([`KeyFirst`]; see `db::session::claim`).
//!
//! A select whose columns cannot be swapped for its key without changing its rows
//! (`DISTINCT`, `GROUP BY`, `UNION`, a `WITH` query, a computed key) is always
//! claimed whole.

use std::sync::Arc;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Params, Statement, Value};
use tokio::time::Instant;
use tracing::debug;

use super::error::DbError;
use super::item::{Columns, Item};
use crate::sql::lex::quote_identifier;
use crate::sql::shape::with_select_list;
use crate::sql::statement::ParsedStatement;

/// After a row too large to read, a session claims key first for this long (and
/// for this long after each such row it finds): the row may still wait, and every
/// whole claim that met it would cost a connection.
const KEY_FIRST_FOR: Duration = Duration::from_secs(60);

/// Whether a session claims key first for now: until a while after the last row
/// too large to read that it met.
#[derive(Debug, Default, Clone, Copy)]
pub struct KeyFirst {
    until: Option<Instant>,
}

impl KeyFirst {
    /// Whether to claim key first now.
    pub fn now(&self) -> bool {
        self.until.is_some_and(|until| Instant::now() < until)
    }

    /// A row too large to read was met: claim key first for [`KEY_FIRST_FOR`].
    pub fn met_oversized_row(&mut self) {
        self.until = Some(Instant::now() + KEY_FIRST_FOR);
    }
}

/// What a claim locked: the rows read, and the rows too large to read.
#[derive(Debug, Default)]
pub struct Claimed {
    pub items: Vec<Item>,
    pub unreadable: Vec<Unreadable>,
}

impl Claimed {
    /// How many rows the claim locked.
    pub fn len(&self) -> usize {
        self.items.len() + self.unreadable.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A claimed row that is not read: its key, every other column NULL, and why.
#[derive(Debug)]
pub struct Unreadable {
    pub item: Item,
    pub why: TooLargeToRead,
}

/// A row larger than one packet can carry.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "the row is about {size} bytes, more than the server's max_allowed_packet ({limit} bytes) \
     lets a client read in one packet: it was not read and its action did not run; raise \
     max_allowed_packet above the row's size (SET GLOBAL max_allowed_packet, and in the \
     server's configuration), or make the row smaller"
)]
pub struct TooLargeToRead {
    pub size: u64,
    pub limit: usize,
}

/// The statements of the key-first claim, prepared.
#[derive(Debug, Clone)]
pub struct KeyClaim {
    /// The claim with the key for its only column.
    pub keys: Statement,
    /// The rows of up to `limit` keys (the rest NULL) whose values fit in a packet.
    pub read: Statement,
    /// One row's size, by its key.
    pub size: Statement,
    /// The `?`s of the select itself (each `:queue`), before the keys.
    select_params: usize,
    limit: usize,
    /// The packet limit the read keeps under.
    pub max_packet: usize,
}

impl KeyClaim {
    /// Prepares the key-first claim of `select` on `conn`, beside its one-statement
    /// `claim` (`claim_text`), whose columns say where the key comes from. `None`
    /// when the select cannot be claimed key first (see the module's doc).
    pub async fn prepare(
        conn: &mut Conn,
        select: &ParsedStatement,
        (claim, claim_text): (&Statement, &str),
        key_index: usize,
        limit: usize,
        max_packet: usize,
    ) -> Result<Option<KeyClaim>, DbError> {
        let Some(sql) = KeySql::new(select, (claim, claim_text), key_index, limit, max_packet)
        else {
            debug!("the select is claimed whole: its key cannot be claimed alone");
            return Ok(None);
        };
        let (Some(keys), Some(read), Some(size)) = (
            prep(conn, &sql.keys).await?,
            prep(conn, &sql.read).await?,
            prep(conn, &sql.size).await?,
        ) else {
            return Ok(None);
        };
        Ok(Some(KeyClaim {
            keys,
            read,
            size,
            select_params: select.params.len(),
            limit,
            max_packet,
        }))
    }

    /// The read's parameters: the queue's name for the select's own, then `keys`,
    /// NULL for the places left.
    pub fn read_params(&self, queue: &str, keys: &[Value]) -> Params {
        let mut values = vec![Value::from(queue); self.select_params];
        values.extend(keys.iter().cloned());
        values.resize(self.select_params + self.limit, Value::NULL);
        Params::Positional(values)
    }

    /// The size query's parameters, for `key`.
    pub fn size_params(&self, queue: &str, key: &Value) -> Params {
        let mut values = vec![Value::from(queue); self.select_params];
        values.push(key.clone());
        Params::Positional(values)
    }

    /// A claimed row that is not read: `key`, every other column NULL.
    pub fn unread(columns: &Arc<Columns>, key_index: usize, key: Value) -> Item {
        let mut values = vec![Value::NULL; columns.names.len()];
        values[key_index] = key;
        Item::new(columns.clone(), values, key_index)
    }
}

/// `text` prepared; `None` if the server rejects it.
async fn prep(conn: &mut Conn, text: &str) -> Result<Option<Statement>, DbError> {
    match conn.prep(text).await.map_err(DbError::from) {
        Ok(statement) => Ok(Some(statement)),
        Err(e) if e.is_statement_error() => {
            debug!(error = %e, "the select is claimed whole: the server rejects its key-first claim");
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// The key-first claim's statements as text.
struct KeySql {
    keys: String,
    read: String,
    size: String,
}

impl KeySql {
    fn new(
        select: &ParsedStatement,
        (claim, claim_text): (&Statement, &str),
        key_index: usize,
        limit: usize,
        max_packet: usize,
    ) -> Option<KeySql> {
        let columns = claim.columns();
        let key = columns.get(key_index)?;
        let (table, column) = (key.table_str(), key.org_name_str());
        if table.is_empty() || column.is_empty() {
            return None;
        }
        let locked = format!("{}.{}", quote_identifier(&table), quote_identifier(&column));
        let keys = with_select_list(claim_text, &locked)?;
        let q = |name: &str| format!("q.{}", quote_identifier(name));
        let key = q(&key.name_str());
        // Each value's bytes as text (never fewer than it takes in a row packet, but
        // for a few bytes of header, counted per column).
        let sizes: Vec<String> = columns
            .iter()
            .map(|c| format!("COALESCE(LENGTH({}), 0)", q(&c.name_str())))
            .collect();
        let size = format!("({} + {})", sizes.join(" + "), 9 * columns.len());
        let fits = max_packet.saturating_sub(1024);
        let derived = format!("({}) AS q", select.positional);
        let places = vec!["?"; limit].join(", ");
        Some(KeySql {
            keys,
            read: format!(
                "SELECT q.* FROM {derived} WHERE {key} IN ({places}) AND {size} <= {fits}"
            ),
            size: format!("SELECT {size} FROM {derived} WHERE {key} = ?"),
        })
    }
}
