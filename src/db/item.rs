//! One claimed row — the item — and the values its statements are bound with.

use std::sync::Arc;

use mysql_async::consts::ColumnType;
use mysql_async::{Params, Value};

/// Where a statement's `?` gets its value from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamSource {
    /// The item's column at this index.
    Column(usize),
    /// `:queue`, the queue's name.
    Queue,
    /// `:error`, why the action failed.
    Error,
    /// `:status`, the HTTP status or exit code.
    Status,
    /// `:output`, the response body or standard output.
    Output,
    /// `:retry_after`, seconds from an HTTP `Retry-After` header.
    RetryAfter,
}

impl ParamSource {
    /// The special parameter called `name`, if there is one; `outcome` says whether
    /// the statement runs after the action (where `:error` and friends exist).
    pub fn special(name: &str, outcome: bool) -> Option<ParamSource> {
        match name {
            "queue" => Some(ParamSource::Queue),
            "error" if outcome => Some(ParamSource::Error),
            "status" if outcome => Some(ParamSource::Status),
            "output" if outcome => Some(ParamSource::Output),
            "retry_after" if outcome => Some(ParamSource::RetryAfter),
            _ => None,
        }
    }
}

/// The names of the parameters every statement may use besides the columns.
pub const OUTCOME_PARAMS: &str = ":queue, :error, :status, :output, :retry_after";

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
        crate::config::names::find_column(&self.names, name)
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
    pub fn key(&self) -> &Value {
        &self.values[self.key_index]
    }

    /// The key as text for logs and messages.
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
            Some(index) => {
                crate::db::row_json::value_bytes(&self.values[index], self.columns.types[index])
                    .into_owned()
            }
            None => Vec::new(),
        }
    }
}

/// What happened to an item's action; bound as `:error`, `:status` and `:output`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    pub error: Option<String>,
    pub status: Option<i64>,
    pub output: Option<Vec<u8>>,
    pub retry_after: Option<u64>,
}

impl Outcome {
    pub fn success() -> Self {
        Outcome::default()
    }

    pub fn failure(error: impl Into<String>) -> Self {
        Outcome {
            error: Some(error.into()),
            ..Outcome::default()
        }
    }

    pub fn succeeded(&self) -> bool {
        self.error.is_none()
    }
}

/// The positional parameters for one statement of `item`.
pub fn bind(sources: &[ParamSource], item: &Item, queue: &str, outcome: &Outcome) -> Params {
    if sources.is_empty() {
        return Params::Empty;
    }
    let values = sources
        .iter()
        .map(|source| match source {
            ParamSource::Column(i) => item.values[*i].clone(),
            ParamSource::Queue => Value::from(queue),
            ParamSource::Error => outcome.error.as_deref().map_or(Value::NULL, Value::from),
            ParamSource::Status => outcome.status.map_or(Value::NULL, Value::from),
            ParamSource::Output => outcome.output.clone().map_or(Value::NULL, Value::Bytes),
            ParamSource::RetryAfter => outcome.retry_after.map_or(Value::NULL, Value::from),
        })
        .collect();
    Params::Positional(values)
}

/// A value as a person would write it: text as itself (invalid UTF-8 replaced),
/// anything else as its SQL literal.
pub fn value_text(value: &Value) -> String {
    match value {
        Value::Bytes(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        other => other.as_sql(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            ParamSource::Error,
            ParamSource::Column(0),
            ParamSource::Queue,
            ParamSource::Status,
        ];
        let params = bind(&sources, &item, "email", &Outcome::failure("boom"));
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
        assert_eq!(value_text(&Value::Bytes(vec![b'a', 0xff])), "a\u{fffd}");
    }

    #[test]
    fn outcome_parameters_exist_only_after_the_action() {
        assert_eq!(
            ParamSource::special("error", true),
            Some(ParamSource::Error)
        );
        assert_eq!(ParamSource::special("error", false), None);
        assert_eq!(
            ParamSource::special("queue", false),
            Some(ParamSource::Queue)
        );
    }
}
