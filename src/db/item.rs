//! One claimed row — the item — and the outcome its statements are bound with.

use std::sync::Arc;
use std::time::SystemTime;

use mysql_async::consts::ColumnType;
use mysql_async::Value;

use super::value::{temporal_text, value_bytes, value_text};
use crate::config::queue::recurring::{RecurringConfig, RowSchedule, RowScheduleError};
use crate::config::validate::names::find_column;
use crate::trace_context::{self, Parent};

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

    /// The value of the column called `name` as text (see [`value_text`]); `None`
    /// for a NULL or a column the select does not return.
    pub fn text_of(&self, name: &str) -> Option<String> {
        let value = &self.values[self.columns.find(name)?];
        (*value != Value::NULL).then(|| value_text(value))
    }

    /// The value of the column called `name` as a UTC time: a `DATETIME` read as
    /// UTC. `None` for a NULL, another type, or a column the select does not return.
    pub fn utc_time_of(&self, name: &str) -> Option<SystemTime> {
        let value = &self.values[self.columns.find(name)?];
        let text = match value {
            Value::Date(..) => temporal_text(value, ColumnType::MYSQL_TYPE_DATETIME),
            Value::Bytes(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            _ => return None,
        };
        crate::config::value::cron::parse_utc_datetime(&text)
    }

    /// The row's schedule under `[recurring]`: its cron column's expression, in its
    /// time zone column's zone (UTC when NULL or empty, or without the column).
    pub fn schedule(&self, recurring: &RecurringConfig) -> Result<RowSchedule, RowScheduleError> {
        let cron = self.text_of(&recurring.cron_column);
        let zone = recurring
            .timezone_column
            .as_deref()
            .and_then(|column| self.text_of(column));
        recurring.schedule(cron.as_deref(), zone.as_deref())
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

    /// The trace the row continues: its `traceparent` column, if the select returns
    /// one holding a valid value.
    pub fn trace_parent(&self) -> Option<Parent> {
        let column = trace_context::COLUMN;
        self.columns.find(column)?;
        trace_context::parse(&String::from_utf8_lossy(
            &self.placeholder_bytes(column, ""),
        ))
    }
}

#[cfg(test)]
impl Item {
    /// A row of one integer column, `id`, its key: an item for unit tests anywhere
    /// in the crate.
    pub fn with_id(id: i64) -> Item {
        let columns = Columns {
            names: vec!["id".to_string()],
            types: vec![ColumnType::MYSQL_TYPE_LONGLONG],
        };
        Item::new(Arc::new(columns), vec![Value::Int(id)], 0)
    }
}

/// What an item's action came to, as outcome SQL sees it: `:error`, `:status`,
/// `:output`, `:retry_after` (and `:next_run`, with `[recurring]`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutcomeParams<'a> {
    pub error: Option<&'a str>,
    pub status: Option<i64>,
    pub output: Option<&'a [u8]>,
    pub retry_after: Option<u64>,
    /// `:release_after`: how long a released row waits.
    pub release_after: Option<u64>,
    /// `:next_run`, with `[recurring]`: the row's next due time after now (bound
    /// as UTC `DATETIME(6)` text).
    pub next_run: Option<SystemTime>,
    /// `:skipped`, on a schedule: the due times a run passed over (0 when none).
    pub skipped: Option<u64>,
    /// `:retry_at`, on a schedule: a failed run's retry within its period.
    pub retry_at: Option<SystemTime>,
    /// Lease mode: `:lease_id`, `:worker` and `:progress`.
    pub lease: LeaseParams<'a>,
}

/// What a lease-mode statement knows of the lease: `:lease_id`, `:worker`,
/// `:progress` (NULL when not known).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LeaseParams<'a> {
    pub lease_id: Option<&'a str>,
    /// In a renewal: the token the lease gets (`None`: the same).
    pub new_lease_id: Option<&'a str>,
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
        release_after: None,
        next_run: None,
        skipped: None,
        retry_at: None,
        lease: LeaseParams {
            lease_id: None,
            new_lease_id: None,
            worker: None,
            progress: None,
        },
    };
}
