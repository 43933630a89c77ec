//! The values a statement is bound with: its `?`s in order, each from the item's
//! columns, the queue, the outcome or the lease — or, run once for a batch, from
//! the batch's JSON.

use mysql_async::{Params, Value};

use super::item::{Item, OutcomeParams};
use super::row_json::batch_json;
use crate::config::validate::names::BuiltIn;
use crate::config::value::cron::utc_datetime;

/// Where a statement's `?` gets its value from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamSource {
    /// The item's column at this index.
    Column(usize),
    /// `:queue`, `:error`, …
    BuiltIn(BuiltIn),
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
            ParamSource::BuiltIn(BuiltIn::ReleaseAfter) => {
                outcome.release_after.map_or(Value::NULL, Value::from)
            }
            ParamSource::BuiltIn(BuiltIn::NextRun) => {
                text(outcome.next_run.map(utc_datetime).as_deref())
            }
            ParamSource::BuiltIn(BuiltIn::Skipped) => Value::from(outcome.skipped.unwrap_or(0)),
            ParamSource::BuiltIn(BuiltIn::RetryAt) => {
                text(outcome.retry_at.map(utc_datetime).as_deref())
            }
            ParamSource::BuiltIn(BuiltIn::LeaseId) => text(outcome.lease.lease_id),
            ParamSource::BuiltIn(BuiltIn::NewLeaseId) => {
                text(outcome.lease.new_lease_id.or(outcome.lease.lease_id))
            }
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use mysql_async::consts::ColumnType;

    use super::*;
    use crate::db::item::Columns;
    use crate::db::value::value_text;

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
}
