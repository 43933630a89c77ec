//! How a row's values leave the database as JSON: an object (the HTTP body, a
//! command's stdin), an array of them (a batch), `:batch` (with outcomes). Plain
//! text (`{column}` placeholders) is `crate::db::value`'s.
//!
//! | MySQL                         | JSON                                   |
//! |-------------------------------|----------------------------------------|
//! | integers                      | numbers                                |
//! | DECIMAL                       | strings, every digit kept ("12.50")    |
//! | FLOAT, DOUBLE                 | numbers                                |
//! | NULL                          | null                                   |
//! | DATE                          | "2024-05-01"                           |
//! | DATETIME, TIMESTAMP           | "2024-05-01T13:45:00" (".123456" when there are microseconds) |
//! | TIME                          | "13:45:00", "-838:59:59"               |
//! | text (CHAR, TEXT, ENUM…)      | strings                                |
//! | JSON (MySQL 8)                | the JSON value itself                  |
//! | JSON (MariaDB: text)          | strings                                |
//! | bytes that are not UTF-8      | base64 strings                         |

use base64::Engine;
use mysql_async::consts::ColumnType;
use mysql_async::Value;
use serde_json::{Map, Number, Value as Json};

use crate::db::item::{Item, OutcomeParams};
use crate::db::value::temporal_text;

/// The item as a JSON object, keyed by column name, in the select's column order.
pub fn item_json(item: &Item) -> Json {
    let mut object = Map::with_capacity(item.values.len());
    for (index, value) in item.values.iter().enumerate() {
        let column_type = item.columns.types[index];
        object.insert(
            item.columns.names[index].clone(),
            value_json(value, column_type),
        );
    }
    Json::Object(object)
}

/// The items as a JSON array of [`item_json`] objects: a batch's HTTP body, or a
/// command's stdin, in batch scope.
pub fn items_json(items: &[Item]) -> Json {
    Json::Array(items.iter().map(item_json).collect())
}

/// The items' keys as a JSON array, each typed as in [`item_json`].
pub fn keys_json(items: &[Item]) -> Json {
    let key = |item: &Item| value_json(item.key(), item.columns.types[item.key_index]);
    Json::Array(items.iter().map(key).collect())
}

/// `:batch` in batch scope: the items as a JSON array of [`item_json`] objects; with
/// outcomes, each object also has `error`, `status`, `output` (text, or base64 when
/// not UTF-8) and `retry_after`, which win over columns of the same names.
pub fn batch_json<'a>(
    items: impl IntoIterator<Item = (&'a Item, Option<OutcomeParams<'a>>)>,
) -> String {
    let array: Vec<Json> = items
        .into_iter()
        .map(|(item, outcome)| {
            let mut object = item_json(item);
            if let (Some(outcome), Json::Object(fields)) = (outcome, &mut object) {
                fields.insert("error".into(), outcome.error.map_or(Json::Null, Json::from));
                fields.insert(
                    "status".into(),
                    outcome.status.map_or(Json::Null, Json::from),
                );
                let output = outcome.output.map(|o| Value::Bytes(o.to_vec()));
                let output =
                    output.map_or(Json::Null, |o| value_json(&o, ColumnType::MYSQL_TYPE_BLOB));
                fields.insert("output".into(), output);
                let retry_after = outcome.retry_after.map_or(Json::Null, Json::from);
                fields.insert("retry_after".into(), retry_after);
            }
            object
        })
        .collect();
    Json::Array(array).to_string()
}

/// One value as JSON.
pub fn value_json(value: &Value, column_type: ColumnType) -> Json {
    match value {
        Value::NULL => Json::Null,
        Value::Int(i) => Json::from(*i),
        Value::UInt(u) => Json::from(*u),
        Value::Float(f) => Number::from_f64(f64::from(*f)).map_or(Json::Null, Json::Number),
        Value::Double(d) => Number::from_f64(*d).map_or(Json::Null, Json::Number),
        Value::Bytes(bytes) if column_type == ColumnType::MYSQL_TYPE_JSON => {
            serde_json::from_slice(bytes)
                .unwrap_or_else(|_| Json::String(String::from_utf8_lossy(bytes).into_owned()))
        }
        Value::Bytes(bytes) => match std::str::from_utf8(bytes) {
            Ok(text) => Json::String(text.to_string()),
            Err(_) => Json::String(base64::engine::general_purpose::STANDARD.encode(bytes)),
        },
        Value::Date(..) | Value::Time(..) => Json::String(temporal_text(value, column_type)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_every_kind_of_value() {
        use crate::db::value::value_bytes;
        use ColumnType::*;
        assert_eq!(value_json(&Value::Int(-7), MYSQL_TYPE_LONG), Json::from(-7));
        assert_eq!(
            value_json(&Value::UInt(u64::MAX), MYSQL_TYPE_LONGLONG),
            Json::from(u64::MAX)
        );
        assert_eq!(
            value_json(&Value::Bytes(b"12.50".to_vec()), MYSQL_TYPE_NEWDECIMAL),
            Json::from("12.50")
        );
        assert_eq!(
            value_json(&Value::Double(0.5), MYSQL_TYPE_DOUBLE),
            Json::from(0.5)
        );
        assert_eq!(value_json(&Value::NULL, MYSQL_TYPE_LONG), Json::Null);
        assert_eq!(
            value_json(&Value::Date(2024, 5, 1, 0, 0, 0, 0), MYSQL_TYPE_DATE),
            Json::from("2024-05-01")
        );
        assert_eq!(
            value_json(
                &Value::Date(2024, 5, 1, 13, 45, 0, 120),
                MYSQL_TYPE_DATETIME
            ),
            Json::from("2024-05-01T13:45:00.000120")
        );
        assert_eq!(
            value_json(&Value::Time(true, 34, 22, 59, 59, 0), MYSQL_TYPE_TIME),
            Json::from("-838:59:59")
        );
        assert_eq!(
            value_json(&Value::Bytes(vec![0xff, 0x00]), MYSQL_TYPE_BLOB),
            Json::from("/wA=")
        );
        assert_eq!(
            value_bytes(&Value::Int(42), MYSQL_TYPE_LONG).as_ref(),
            b"42"
        );
        assert_eq!(
            value_json(&Value::Bytes(br#"{"a":[1]}"#.to_vec()), MYSQL_TYPE_JSON),
            serde_json::json!({"a": [1]})
        );
    }
}
