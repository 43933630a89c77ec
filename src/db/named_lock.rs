//! The server's named locks (`GET_LOCK`), which limits shared by every copy of
//! tableq are made of. A named lock belongs to the session that took it and goes
//! with its connection, so a copy that dies gives back what it held at once, as
//! its row locks. Names are server-wide: each is made from the queue's database
//! and name (hashed, as the server takes at most 64 characters), then what it is
//! for — a copy's place (`c`), a `max_in_flight` slot (`f`).

use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use sha2::{Digest, Sha256};

use super::connect::{Database, QUICK_TIMEOUT};
use super::deadline::within;
use super::error::DbError;

/// What a call on a lock session waits for, as its deadline says: it is given up
/// after [`QUICK_TIMEOUT`], as none of them waits for a lock.
pub const NAMED_LOCK: &str = "a named lock";

/// The most copies of one queue counted: each takes the first free place.
pub const MAX_COPIES: usize = 256;

/// The named locks of one queue on one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockNames {
    /// `tableq:` and 16 hex digits of the database and queue names' hash.
    prefix: String,
}

impl LockNames {
    pub fn for_queue(database: &str, queue: &str) -> LockNames {
        let mut hash = Sha256::new();
        hash.update(database.as_bytes());
        hash.update([0]);
        hash.update(queue.as_bytes());
        let hex: String = hash.finalize()[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        LockNames {
            prefix: format!("tableq:{hex}:"),
        }
    }

    /// Copy place `index`: held by one copy while it runs the queue.
    pub fn copy(&self, index: usize) -> String {
        format!("{}c{index}", self.prefix)
    }

    /// The start of a `[concurrency]` key slot's name: the key's hash and the slot
    /// follow.
    pub fn key_prefix(&self) -> String {
        format!("{}k", self.prefix)
    }

    /// `max_in_flight` slot `index`: held while one action runs.
    pub fn slot(&self, index: usize) -> String {
        format!("{}f{index}", self.prefix)
    }
}

/// A connection that holds named locks for a copy (outside its workers' sessions).
#[derive(Debug)]
pub struct LockSession {
    conn: Conn,
}

impl LockSession {
    pub async fn open(database: &Database) -> Result<LockSession, DbError> {
        Ok(LockSession {
            conn: database.connect().await?,
        })
    }

    /// The connection, for the other kinds of named lock (`super::key_lock`).
    pub(super) fn conn(&mut self) -> &mut Conn {
        &mut self.conn
    }

    /// Closes the connection: every lock it holds is freed.
    pub async fn close(self) {
        let _ = tokio::time::timeout(QUICK_TIMEOUT, self.conn.disconnect()).await;
    }

    /// Takes `name` if it is free, without waiting. True if this session holds it
    /// now (a session may take a name it holds again: the caller keeps count).
    pub async fn try_lock(&mut self, name: &str) -> Result<bool, DbError> {
        try_lock(&mut self.conn, name).await
    }

    /// Gives `name` back (once).
    pub async fn release(&mut self, name: &str) -> Result<(), DbError> {
        let release = self.conn.exec_drop("DO RELEASE_LOCK(?)", (name,));
        within(NAMED_LOCK, QUICK_TIMEOUT, release).await
    }

    /// How many of `names` some session holds (this one's included).
    pub async fn count_held(&mut self, names: &[String]) -> Result<usize, DbError> {
        Ok(self.free(names).await?.iter().filter(|f| !**f).count())
    }

    /// Whether each of `names` is free: held by no session, this one included.
    pub async fn free(&mut self, names: &[String]) -> Result<Vec<bool>, DbError> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT CONCAT({})",
            vec!["IF(IS_FREE_LOCK(?), '1', '0')"; names.len()].join(", ")
        );
        let answer: Option<String> = within(
            NAMED_LOCK,
            QUICK_TIMEOUT,
            self.conn.exec_first(sql, names.to_vec()),
        )
        .await?;
        Ok(answer
            .unwrap_or_default()
            .bytes()
            .map(|b| b == b'1')
            .collect())
    }
}

/// Takes `name` on `conn` if it is free, without waiting: true if it holds it now.
pub async fn try_lock(conn: &mut Conn, name: &str) -> Result<bool, DbError> {
    let got: Option<Option<i64>> = within(
        NAMED_LOCK,
        QUICK_TIMEOUT,
        conn.exec_first("SELECT GET_LOCK(?, 0)", (name,)),
    )
    .await?;
    Ok(got.flatten() == Some(1))
}
