//! The JSON log format: one object per line, flat. The event's fields and its
//! spans' fields (the worker's `queue` and `worker`, the item's `key` and
//! `trace_id`) all sit at the top level, so Loki, Elasticsearch or `jq .queue`
//! find them without digging through a list of spans:
//!
//! ```json
//! {"timestamp":"…","level":"WARN","message":"item failed","error":"…","key":"42","trace_id":"…","queue":"email","worker":0}
//! ```
//!
//! A name given twice keeps the innermost value: the event's own field, then the
//! item's span, then the worker's.

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// Writes each event as one flat JSON object. Spans' fields must be recorded as
/// JSON (`JsonFields`), as tracing-subscriber's JSON format records them.
pub struct FlatJson;

impl<S, N> FormatEvent<S, N> for FlatJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'w> FormatFields<'w> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut line = Map::new();
        let mut timestamp = String::new();
        SystemTime.format_time(&mut Writer::new(&mut timestamp))?;
        line.insert("timestamp".into(), timestamp.into());
        line.insert("level".into(), event.metadata().level().as_str().into());
        event.record(&mut JsonFieldsOf(&mut line));
        // Innermost span first: a name already there keeps its value.
        for span in ctx.event_scope().into_iter().flatten() {
            let extensions = span.extensions();
            let Some(fields) = extensions.get::<FormattedFields<N>>() else {
                continue;
            };
            if let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(fields) {
                for (name, value) in fields {
                    line.entry(name).or_insert(value);
                }
            }
        }
        let text = serde_json::to_string(&line).map_err(|_| fmt::Error)?;
        writeln!(writer, "{text}")
    }
}

/// Records an event's fields into a JSON object: numbers and booleans as such,
/// everything else as text.
struct JsonFieldsOf<'a>(&'a mut Map<String, Value>);

impl JsonFieldsOf<'_> {
    fn put(&mut self, field: &Field, value: Value) {
        let name = field.name().trim_start_matches("r#");
        self.0.insert(name.to_string(), value);
    }
}

impl Visit for JsonFieldsOf<'_> {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, value.into());
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, value.into());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, value.into());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, value.into());
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, value.into());
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, value.to_string().into());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, format!("{value:?}").into());
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::fmt::format::JsonFields;
    use tracing_subscriber::fmt::MakeWriter;

    use super::*;

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Captured {
        type Writer = Captured;

        fn make_writer(&'a self) -> Captured {
            self.clone()
        }
    }

    /// An item's line carries the worker's queue and number and the item's key at
    /// the top level, with no `spans` list; the item's key wins over the worker's.
    #[test]
    fn span_fields_sit_at_the_top_level_and_the_innermost_wins() {
        let captured = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(captured.clone())
            .fmt_fields(JsonFields::new())
            .event_format(FlatJson)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let worker = tracing::info_span!("worker", queue = "email", worker = 3, key = "outer");
            let _worker = worker.enter();
            let item = tracing::info_span!("item", key = "42");
            let _item = item.enter();
            tracing::warn!(error = "boom", r#type = "http", "item failed");
        });
        let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        let line: Value = serde_json::from_str(text.trim_end()).unwrap();
        assert_eq!(line["message"], "item failed", "{line}");
        assert_eq!(line["level"], "WARN");
        assert_eq!(line["error"], "boom");
        assert_eq!(line["type"], "http");
        assert_eq!(line["queue"], "email");
        assert_eq!(line["worker"], 3);
        assert_eq!(line["key"], "42", "the item's key, not the worker's");
        assert!(line.get("spans").is_none());
        assert!(line["timestamp"]
            .as_str()
            .is_some_and(|t| t.starts_with("20")));
    }
}
