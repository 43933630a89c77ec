//! `[concurrency]` on the server: at most `limit` rows of one key in flight across
//! every copy, as named locks — a key's `limit` slots, each a lock named after the
//! queue and the key's hash. The claim skips the rows whose every slot is taken
//! (a condition added to the select's WHERE, tested row by row as the server reads,
//! so the rows of other keys behind a busy one are claimed instead, and no claim
//! comes back to the same blocked rows); the worker then takes a slot for each row
//! it claimed, on its own session, and a row whose key filled up in between (another
//! worker's claim ran at the same moment) is not started. The locks go with the
//! session's connection, so a crash frees its keys at once.

use std::collections::HashMap;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Value};

use super::connect::QUICK_TIMEOUT;
use super::deadline::within;
use super::error::DbError;
use super::item::{Columns, Item};
use super::named_lock::{LockNames, LockSession, NAMED_LOCK};
use super::value::value_text;
use crate::config::queue::limits::Concurrency;
use crate::config::value::template::Part;
use crate::config::QueueConfig;
use crate::diagnostic::{Finding, Severity};
use crate::sql::condition::{column_expression, with_condition};

/// Hex digits of the key's SHA-256 in its lock's name.
const HASH_DIGITS: usize = 16;

/// The select a `[concurrency]` queue claims with (`None` without one): its own,
/// with the key's condition — once the key's columns (the select's are
/// `columns`) are known to be among the select's.
pub fn claim_select(
    queue: &QueueConfig,
    columns: &Columns,
    database: &str,
) -> Result<Option<String>, Finding> {
    if queue.concurrency.is_none() {
        return Ok(None);
    }
    key_columns(queue, columns)?;
    with_key_condition(queue, database).map(Some)
}

/// The queue's select with `[concurrency]`'s condition in its WHERE. A select the
/// condition cannot be added to is refused.
fn with_key_condition(queue: &QueueConfig, database: &str) -> Result<String, Finding> {
    let select = &queue.select.positional;
    let Some(concurrency) = &queue.concurrency else {
        return Ok(select.clone());
    };
    let names = LockNames::for_queue(database, &queue.name);
    let key = key_sql(concurrency, &|column| column_expression(select, column));
    let free = (0..concurrency.limit)
        .map(|slot| {
            format!(
                "IS_FREE_LOCK({})",
                lock_name_sql(&names, &key, &slot.to_string())
            )
        })
        .collect::<Vec<_>>()
        .join(" OR ");
    with_condition(select, &format!("({free})")).map_err(|e| {
        queue.finding(
            Severity::Error,
            &["concurrency", "key"],
            format!(
                "`[concurrency]` needs the claim to skip the rows whose key is at its limit, \
                 with a condition in the select's WHERE, and `select` cannot take one: {e}; \
                 write it as one plain SELECT … FROM … WHERE …"
            ),
        )
    })
}

/// The key as SQL: `IFNULL(expr, '')` for each column (`column` gives its
/// expression), hex literals for the text between, in one CONCAT.
fn key_sql(concurrency: &Concurrency, column: &dyn Fn(&str) -> String) -> String {
    let parts: Vec<String> = concurrency
        .key
        .parts
        .iter()
        .map(|part| match part {
            Part::Literal(text) => format!("X'{}'", hex(text.as_bytes())),
            Part::Placeholder(name) => format!("IFNULL({}, '')", column(name)),
        })
        .collect();
    format!("CONCAT({})", parts.join(", "))
}

/// A key slot's lock name, as SQL.
fn lock_name_sql(names: &LockNames, key: &str, slot: &str) -> String {
    format!(
        "CONCAT('{}', LEFT(SHA2({key}, 256), {HASH_DIGITS}), ':', {slot})",
        names.key_prefix()
    )
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The select's columns `[concurrency] key` is made of, by index; a name the
/// select does not return is refused.
fn key_columns(queue: &QueueConfig, columns: &Columns) -> Result<Vec<usize>, Finding> {
    let Some(concurrency) = &queue.concurrency else {
        return Ok(Vec::new());
    };
    concurrency
        .columns()
        .map(|name| {
            columns.find(name).ok_or_else(|| {
                let message = format!(
                    "`[concurrency] key` = {:?} names `{name}`, which the select does not \
                     return; its columns are {}: add it to the select, or name one of them",
                    concurrency.written,
                    columns.names.join(", ")
                );
                queue.finding(Severity::Error, &["concurrency", "key"], message)
            })
        })
        .collect()
}

/// A worker session's key slots: how it takes them, and which it holds.
#[derive(Debug)]
pub struct KeyLocks {
    limit: usize,
    /// `GET_LOCK(<the slot's name>, 0)`, the key's columns and the slot bound.
    get: String,
    /// The slot's name, as SQL, the key's columns and the slot bound.
    name: String,
    /// The item's columns the key is made of, in order.
    columns: Vec<usize>,
    /// The slots held now, by the key's values as text.
    held: HashMap<String, Vec<usize>>,
}

impl KeyLocks {
    /// The key slots of `queue`'s items (whose columns are `columns`); `None`
    /// without `[concurrency]`. A key column the select does not return is refused.
    pub fn new(
        queue: &QueueConfig,
        columns: &Columns,
        database: &str,
    ) -> Result<Option<KeyLocks>, Finding> {
        let Some(concurrency) = &queue.concurrency else {
            return Ok(None);
        };
        let found = key_columns(queue, columns)?;
        let names = LockNames::for_queue(database, &queue.name);
        let key = key_sql(concurrency, &|_| "?".to_string());
        Ok(Some(KeyLocks {
            limit: concurrency.limit,
            get: format!("GET_LOCK({}, 0)", lock_name_sql(&names, &key, "?")),
            name: lock_name_sql(&names, &key, "?"),
            columns: found,
            held: HashMap::new(),
        }))
    }

    /// Whether this session holds any key slot.
    pub fn holding(&self) -> bool {
        !self.held.is_empty()
    }

    /// How many keys this session holds every slot of now.
    pub fn keys_at_limit(&self) -> usize {
        self.held.values().filter(|s| s.len() >= self.limit).count()
    }

    /// The values `item`'s key is made of, and them as text (this session's name
    /// for the key).
    fn key_of(&self, item: &Item) -> (Vec<Value>, String) {
        let values: Vec<Value> = self
            .columns
            .iter()
            .map(|i| item.values[*i].clone())
            .collect();
        let text: Vec<String> = values.iter().map(value_text).collect();
        (values, text.join("\0"))
    }

    /// Takes a free slot of each of `items`' keys on `conn`: whether it got one for
    /// each. One statement tries the first slot of every key the session holds none
    /// of; a key with more slots, or a second row of a key, is tried one by one.
    pub async fn take_all(
        &mut self,
        conn: &mut Conn,
        items: &[Item],
    ) -> Result<Vec<bool>, mysql_async::Error> {
        let keys: Vec<(Vec<Value>, String)> = items.iter().map(|i| self.key_of(i)).collect();
        let mut first: Vec<usize> = Vec::new();
        for (index, (_, text)) in keys.iter().enumerate() {
            let seen = first.iter().any(|f| keys[*f].1 == *text);
            if !seen && !self.held.contains_key(text) {
                first.push(index);
            }
        }
        let mut got = vec![false; items.len()];
        let mut tried = vec![false; items.len()];
        if !first.is_empty() {
            let each = format!("IFNULL({}, 0)", self.get);
            let sql = format!("SELECT CONCAT({})", vec![each; first.len()].join(", "));
            let mut params = Vec::new();
            for index in &first {
                params.extend(keys[*index].0.iter().cloned());
                params.push(Value::from(0u64));
            }
            let answer: Option<String> = conn.exec_first(sql, params).await?;
            let answer = answer.unwrap_or_default();
            for (index, took) in first.iter().zip(answer.bytes()) {
                tried[*index] = true;
                if took == b'1' {
                    got[*index] = true;
                    self.held.insert(keys[*index].1.clone(), vec![0]);
                }
            }
        }
        for (index, (values, text)) in keys.into_iter().enumerate() {
            let more = self.limit > 1 || !tried[index];
            if !got[index] && more {
                got[index] = self.take(conn, values, text).await?;
            }
        }
        Ok(got)
    }

    /// Takes a free slot of the key of `values` (`text`) on `conn`: false when
    /// every slot is taken (by others, or by this session's other rows of the key).
    async fn take(
        &mut self,
        conn: &mut Conn,
        values: Vec<Value>,
        text: String,
    ) -> Result<bool, mysql_async::Error> {
        let mine = self.held.get(&text).cloned().unwrap_or_default();
        let get = format!("SELECT {}", self.get);
        for slot in (0..self.limit).filter(|s| !mine.contains(s)) {
            let mut params = values.clone();
            params.push(Value::from(slot as u64));
            let got: Option<Option<i64>> = conn.exec_first(get.as_str(), params).await?;
            if got.flatten() == Some(1) {
                self.held.entry(text).or_default().push(slot);
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Gives back one slot of `item`'s key (the last taken), if this session holds
    /// one.
    pub async fn release_one(
        &mut self,
        conn: &mut Conn,
        item: &Item,
    ) -> Result<(), mysql_async::Error> {
        let (mut values, text) = self.key_of(item);
        let Some(slots) = self.held.get_mut(&text) else {
            return Ok(());
        };
        let Some(slot) = slots.pop() else {
            return Ok(());
        };
        if slots.is_empty() {
            self.held.remove(&text);
        }
        values.push(Value::from(slot as u64));
        conn.exec_drop(format!("DO RELEASE_LOCK({})", self.name), values)
            .await
    }

    /// As [`KeyLocks::take_all`], on a copy's own lock session (lease mode, whose
    /// rows hold their keys for the lease's life).
    pub async fn take_on(
        &mut self,
        session: &mut LockSession,
        items: &[Item],
    ) -> Result<Vec<bool>, DbError> {
        within(
            NAMED_LOCK,
            QUICK_TIMEOUT,
            self.take_all(session.conn(), items),
        )
        .await
    }

    /// As [`KeyLocks::release_one`], on a copy's own lock session.
    pub async fn release_on(
        &mut self,
        session: &mut LockSession,
        item: &Item,
    ) -> Result<(), DbError> {
        within(
            NAMED_LOCK,
            QUICK_TIMEOUT,
            self.release_one(session.conn(), item),
        )
        .await
    }

    /// Forgets every slot: the connection that held them is gone.
    pub fn forget(&mut self) {
        self.held.clear();
    }

    /// Gives back every slot this session holds.
    pub async fn release_all(&mut self, conn: &mut Conn) -> Result<(), mysql_async::Error> {
        if self.held.is_empty() {
            return Ok(());
        }
        self.held.clear();
        conn.query_drop("DO RELEASE_ALL_LOCKS()").await?;
        Ok(())
    }
}
