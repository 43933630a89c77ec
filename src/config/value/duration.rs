//! A duration key (`timeout = "30s"`): how the schema shows it, as humantime writes
//! it ([`DurationText`]), and what it must be ([`Validator::positive`]).

use std::borrow::Cow;
use std::time::Duration;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};

use crate::config::validate::validator::Validator;

/// The longest duration a queue file may give: a day.
const MAX_DURATION: Duration = Duration::from_secs(24 * 60 * 60);

/// A duration as the queue file writes it (humantime): `"250ms"`, `"5s"`, `"2m"`,
/// `"1h 30m"`.
pub struct DurationText;

impl JsonSchema for DurationText {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": r"^\s*([0-9]+\s*[a-zA-Zµ]+\s*)+$",
            "examples": ["250ms", "5s", "2m", "1h 30m"]
        })
    }
}

impl Validator<'_> {
    /// A duration above zero and at most a day; `default` when not given.
    pub fn positive(
        &mut self,
        path: &[&str],
        value: Option<Duration>,
        default: Duration,
    ) -> Duration {
        let value = value.unwrap_or(default);
        let key = path.join(".");
        if value.is_zero() {
            let example = humantime::format_duration(default);
            self.error(
                path,
                format!("`{key}` must be longer than zero, e.g. \"{example}\""),
            );
        } else if value > MAX_DURATION {
            let given = humantime::format_duration(value);
            self.error(path, format!("`{key}` = {given} is too long: at most 24h"));
            return default;
        }
        value
    }
}
