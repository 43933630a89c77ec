//! One claimed row — the item — and the values its statements are bound with.

use std::sync::Arc;

use mysql_async::consts::ColumnType;
use mysql_async::{Params, Value};

use super::row_json::{batch_json, value_bytes};
use crate::config::names::{find_column, BuiltIn};

/// Where a statement's `?` gets its value from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamSource {
    /// The item's column at this index.
    Column(usize),
    /// `:queue`, `:error`, …
    BuiltIn(BuiltIn),
}

/// The select's columns: what every item of a queue looks like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Columns {
    pub names: Vec<String>,
    pub types: Vec<ColumnType>,
}

impl Columns {
    /// The index of the column called `name`: the exact name, else the only one
    /// that matches ignoring case (MySQL compares column names that way).
    pub fn find(&self, name: &str) -> Option<usize> {
        find_column(&self.names, name)
    }
}

/// A claimed row: its values, in the order of the select's columns.
#[derive(Debug, Clone)]
pub struct Item {
    pub columns: Arc<Columns>,
    pub values: Vec<Value>,
    pub key_index: usize,
}

impl Item {
    pub fn new(columns: Arc<Columns>, values: Vec<Value>, key_index: usize) -> Item {
        Item {
            columns,
            values,
            key_index,
        }
    }

    pub fn key(&self) -> &Value {
        &self.values[self.key_index]
    }

    /// The key as text — in logs and messages, `TABLEQ_KEY`, the default
    /// `webhook-id` and message ids — one distinct text per distinct key (see
    /// [`value_text`]).
    pub fn key_text(&self) -> String {
        value_text(self.key())
    }

    /// The text a `{name}` placeholder becomes: the queue's name for `{queue}`, else
    /// the column's value.
    pub fn placeholder_bytes(&self, name: &str, queue: &str) -> Vec<u8> {
        if name == "queue" {
            return queue.as_bytes().to_vec();
        }
        match self.columns.find(name) {
            Some(index) => value_bytes(&self.values[index], self.columns.types[index]).into_owned(),
            None => Vec::new(),
        }
    }
}

/// What an item's action came to, as outcome SQL sees it: `:error`, `:status`,
/// `:output`, `:retry_after`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutcomeParams<'a> {
    pub error: Option<&'a str>,
    pub status: Option<i64>,
    pub output: Option<&'a [u8]>,
    pub retry_after: Option<u64>,
    /// Lease mode: `:lease_id`, `:worker` and `:progress`.
    pub lease: LeaseParams<'a>,
}

/// What a lease-mode statement knows of the lease: `:lease_id`, `:worker`,
/// `:progress` (NULL when not known).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LeaseParams<'a> {
    pub lease_id: Option<&'a str>,
    pub worker: Option<&'a str>,
    pub progress: Option<&'a str>,
}

impl OutcomeParams<'_> {
    /// Before the action ran: every outcome parameter is NULL.
    pub const NONE: OutcomeParams<'static> = OutcomeParams {
        error: None,
        status: None,
        output: None,
        retry_after: None,
        lease: LeaseParams {
            lease_id: None,
            worker: None,
            progress: None,
        },
    };
}

/// The positional parameters for one statement of `item`.
pub fn bind(sources: &[ParamSource], item: &Item, queue: &str, outcome: &OutcomeParams) -> Params {
    if sources.is_empty() {
        return Params::Empty;
    }
    let values = sources
        .iter()
        .map(|source| match source {
            ParamSource::Column(i) => item.values[*i].clone(),
            ParamSource::BuiltIn(BuiltIn::Queue) => Value::from(queue),
            ParamSource::BuiltIn(BuiltIn::Error) => outcome.error.map_or(Value::NULL, Value::from),
            ParamSource::BuiltIn(BuiltIn::Status) => {
                outcome.status.map_or(Value::NULL, Value::from)
            }
            ParamSource::BuiltIn(BuiltIn::Output) => outcome
                .output
                .map_or(Value::NULL, |o| Value::Bytes(o.to_vec())),
            ParamSource::BuiltIn(BuiltIn::RetryAfter) => {
                outcome.retry_after.map_or(Value::NULL, Value::from)
            }
            ParamSource::BuiltIn(BuiltIn::LeaseId) => text(outcome.lease.lease_id),
            ParamSource::BuiltIn(BuiltIn::Worker) => text(outcome.lease.worker),
            ParamSource::BuiltIn(BuiltIn::Progress) => text(outcome.lease.progress),
            // Run for one item (a batch retried item by item): a one-element batch.
            ParamSource::BuiltIn(BuiltIn::Batch { outcomes }) => {
                Value::from(batch_json([(item, outcomes.then_some(*outcome))]))
            }
        })
        .collect();
    Params::Positional(values)
}

/// The positional parameters for one statement run once for a whole batch, whose
/// `:batch` is `batch` (from [`batch_json`]). Batch scope has no column parameters
/// (the loader refuses them), nor the outcome ones: those are in the JSON.
pub fn bind_batch(sources: &[ParamSource], batch: &str, queue: &str) -> Params {
    if sources.is_empty() {
        return Params::Empty;
    }
    let values = sources
        .iter()
        .map(|source| match source {
            ParamSource::BuiltIn(BuiltIn::Queue) => Value::from(queue),
            ParamSource::BuiltIn(BuiltIn::Batch { .. }) => Value::from(batch),
            _ => Value::NULL,
        })
        .collect();
    Params::Positional(values)
}

fn text(value: Option<&str>) -> Value {
    value.map_or(Value::NULL, Value::from)
}

/// What [`value_text`] puts before the hex digits of bytes it cannot show as text.
pub const HEX_PREFIX: &str = "hex:";

/// A value as a person would write it, and never two values as the same text: text
/// as itself; bytes that are not UTF-8, or hold a NUL (which no environment
/// variable or argument can carry), or begin with `hex:` themselves, as `hex:` and
/// their bytes in lowercase hex (a BINARY(16) UUID: `hex:00a1…`); anything else as
/// its SQL literal.
pub fn value_text(value: &Value) -> String {
    match value {
        Value::Bytes(bytes) => match std::str::from_utf8(bytes) {
            Ok(text) if !text.contains('\0') && !text.starts_with(HEX_PREFIX) => text.to_string(),
            _ => {
                let mut hex = String::with_capacity(HEX_PREFIX.len() + bytes.len() * 2);
                hex.push_str(HEX_PREFIX);
                for byte in bytes {
                    hex.push_str(&format!("{byte:02x}"));
                }
                hex
            }
        },
        other => other.as_sql(false),
    }
}

/// A key as an operator writes it — as tableq prints it: text, or `hex:` and the
/// bytes in hex for a key that is not text ([`value_text`]'s inverse).
pub fn key_from_text(text: &str) -> Value {
    let hex = text.strip_prefix(HEX_PREFIX).filter(|h| h.len() % 2 == 0);
    let bytes = hex.and_then(|h| {
        h.as_bytes()
            .chunks(2)
            .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
            .collect::<Option<Vec<u8>>>()
    });
    Value::Bytes(bytes.unwrap_or_else(|| text.as_bytes().to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_written_as_tableq_prints_it_is_the_same_value() {
        for value in [
            Value::Bytes(b"42".to_vec()),
            Value::Bytes(vec![0, 0xff, 7]),
            Value::Bytes("héllo".as_bytes().to_vec()),
        ] {
            assert_eq!(key_from_text(&value_text(&value)), value);
        }
        assert_eq!(key_from_text("hex:zz"), Value::Bytes(b"hex:zz".to_vec()));
        assert_eq!(
            key_from_text("hex:aéb"),
            Value::Bytes("hex:aéb".as_bytes().to_vec())
        );
    }

    #[test]
    fn binds_columns_and_outcome_in_statement_order() {
        let item = Item {
            columns: Arc::new(Columns {
                names: vec!["id".to_string(), "to".to_string()],
                types: vec![
                    ColumnType::MYSQL_TYPE_LONG,
                    ColumnType::MYSQL_TYPE_VAR_STRING,
                ],
            }),
            values: vec![Value::Int(7), Value::Bytes(b"a@b".to_vec())],
            key_index: 0,
        };
        let sources = [
            ParamSource::BuiltIn(BuiltIn::Error),
            ParamSource::Column(0),
            ParamSource::BuiltIn(BuiltIn::Queue),
            ParamSource::BuiltIn(BuiltIn::Status),
        ];
        let failed = OutcomeParams {
            error: Some("boom"),
            ..OutcomeParams::NONE
        };
        let params = bind(&sources, &item, "email", &failed);
        assert_eq!(
            params,
            Params::Positional(vec![
                Value::from("boom"),
                Value::Int(7),
                Value::from("email"),
                Value::NULL
            ])
        );
        assert_eq!(item.key_text(), "7");
        assert_eq!(value_text(&Value::Bytes(vec![b'a', 0xff])), "hex:61ff");
    }

    /// Distinct keys give distinct texts: bytes that are not text, a NUL, and text
    /// that looks like the encoding itself.
    #[test]
    fn keys_that_are_not_text_are_hex() {
        let text = |bytes: &[u8]| value_text(&Value::Bytes(bytes.to_vec()));
        assert_eq!(text(b"order-7"), "order-7");
        assert_eq!(text(&[0x00, 0x11, 0xab]), "hex:0011ab");
        assert_ne!(text(&[0xfe]), text(&[0xff]));
        assert_eq!(text(b"hex:ff"), "hex:6865783a6666");
        assert_ne!(text(b"hex:ff"), text(&[0xff]));
        assert_eq!(value_text(&Value::Int(7)), "7");
    }
}
