//! The OpenTelemetry spans of a turn, made once it committed: one per item (item
//! scope), from its claim to the commit, with the steps between as events — claimed,
//! action started and finished, outcome recorded, committed — or one per batch
//! (`scope = "batch"`), its items as events and the rows' own traces as links. A row
//! whose select returns a valid `traceparent` keeps its trace: the item's span is a
//! child of the span that wrote it. [`super::otlp`] sends them.

use std::borrow::Cow;
use std::time::SystemTime;

use opentelemetry::trace::{
    Event, Link, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};

use crate::trace_context::Parent;

/// What became of one item of a turn, as its span tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemTrace {
    pub key: String,
    /// The row's own `traceparent`, when the select returns a valid one.
    pub parent: Option<Parent>,
    /// The trace context its action sent (an HTTP `traceparent`): trace id, span id.
    pub sent: Option<(String, String)>,
    /// `done`, `failed` or `returned`, as `tableq_items_total` counts it.
    pub outcome: &'static str,
    /// Why it failed, or was returned, if it was said.
    pub error: Option<String>,
    /// When its action started and ended; `None` when it did not run.
    pub action: Option<(SystemTime, SystemTime)>,
    /// When its outcome was recorded (or it was left as claimed).
    pub recorded: SystemTime,
}

/// The spans of one committed turn of `queue`: claimed at `claimed`, committed at
/// `committed`. A row whose `traceparent` says "not sampled" is not exported.
pub fn of_turn(
    queue: &str,
    batch: bool,
    claimed: SystemTime,
    committed: SystemTime,
    items: &[ItemTrace],
) -> Vec<SpanData> {
    let times = Times { claimed, committed };
    if batch && !items.is_empty() {
        return vec![batch_span(queue, times, items)];
    }
    items
        .iter()
        .filter(|item| item.parent.as_ref().is_none_or(sampled))
        .map(|item| item_span(queue, times, item))
        .collect()
}

#[derive(Clone, Copy)]
struct Times {
    claimed: SystemTime,
    committed: SystemTime,
}

/// One item's span: in the row's trace if it has one, else in the trace its
/// action sent, else in a new one.
fn item_span(queue: &str, times: Times, item: &ItemTrace) -> SpanData {
    let parent = item.parent.as_ref().and_then(|p| {
        Some((
            TraceId::from_hex(&p.trace_id).ok()?,
            SpanId::from_hex(&p.span_id).ok()?,
        ))
    });
    let sent = item.sent.as_ref().and_then(|(trace, span)| {
        Some((TraceId::from_hex(trace).ok()?, SpanId::from_hex(span).ok()?))
    });
    let (trace_id, span_id) = match (sent, parent) {
        (Some(sent), _) => sent,
        (None, Some((trace_id, _))) => (trace_id, new_span_id()),
        (None, None) => (new_trace_id(), new_span_id()),
    };
    let parent_span_id = match parent {
        Some((parent_trace, parent_span)) if parent_trace == trace_id => parent_span,
        _ => SpanId::INVALID,
    };
    let mut events = vec![Event::new("claimed", times.claimed, Vec::new(), 0)];
    if let Some((started, ended)) = item.action {
        events.push(Event::new("action started", started, Vec::new(), 0));
        events.push(Event::new("action finished", ended, Vec::new(), 0));
    }
    events.push(Event::new(
        "outcome recorded",
        item.recorded,
        item_attributes(item),
        0,
    ));
    events.push(Event::new("committed", times.committed, Vec::new(), 0));
    let mut attributes = queue_attributes(queue);
    attributes.extend(item_attributes(item));
    SpanData {
        parent_span_id,
        parent_span_is_remote: parent_span_id != SpanId::INVALID,
        attributes,
        events: span_events(events),
        status: status(item.error.as_deref()),
        ..span(queue, trace_id, span_id, times)
    }
}

/// A batch's one span: each item an event, each row's own trace a link. In the
/// trace the batch's action sent (one HTTP request for the batch), else a new one.
fn batch_span(queue: &str, times: Times, items: &[ItemTrace]) -> SpanData {
    let (trace_id, span_id) = items
        .iter()
        .find_map(|item| {
            let (trace, span) = item.sent.as_ref()?;
            Some((TraceId::from_hex(trace).ok()?, SpanId::from_hex(span).ok()?))
        })
        .unwrap_or_else(|| (new_trace_id(), new_span_id()));
    let mut events = vec![Event::new("claimed", times.claimed, Vec::new(), 0)];
    events.extend(
        items
            .iter()
            .map(|item| Event::new("item", item.recorded, item_attributes(item), 0)),
    );
    events.push(Event::new("committed", times.committed, Vec::new(), 0));
    let mut links = SpanLinks::default();
    links.links = items.iter().filter_map(row_link).collect();
    let mut attributes = queue_attributes(queue);
    attributes.push(KeyValue::new(
        "messaging.batch.message_count",
        items.len() as i64,
    ));
    let failed = items.iter().find_map(|item| item.error.as_deref());
    SpanData {
        attributes,
        events: span_events(events),
        links,
        status: status(failed),
        ..span(queue, trace_id, span_id, times)
    }
}

/// The link from a batch's span to a row's own trace.
fn row_link(item: &ItemTrace) -> Option<Link> {
    let parent = item.parent.as_ref()?;
    let context = SpanContext::new(
        TraceId::from_hex(&parent.trace_id).ok()?,
        SpanId::from_hex(&parent.span_id).ok()?,
        flags(parent),
        true,
        TraceState::NONE,
    );
    Some(Link::new(
        context,
        vec![KeyValue::new("tableq.key", item.key.clone())],
        0,
    ))
}

/// A span of `queue` with no parent, events or attributes yet.
fn span(queue: &str, trace_id: TraceId, span_id: SpanId, times: Times) -> SpanData {
    SpanData {
        span_context: SpanContext::new(
            trace_id,
            span_id,
            TraceFlags::SAMPLED,
            false,
            TraceState::NONE,
        ),
        parent_span_id: SpanId::INVALID,
        parent_span_is_remote: false,
        span_kind: SpanKind::Consumer,
        name: Cow::Owned(format!("process {queue}")),
        start_time: times.claimed,
        end_time: times.committed.max(times.claimed),
        attributes: Vec::new(),
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links: SpanLinks::default(),
        status: Status::Unset,
        instrumentation_scope: InstrumentationScope::builder("tableq")
            .with_version(env!("CARGO_PKG_VERSION"))
            .build(),
    }
}

fn queue_attributes(queue: &str) -> Vec<KeyValue> {
    vec![
        KeyValue::new("messaging.system", "tableq"),
        KeyValue::new("messaging.operation.type", "process"),
        KeyValue::new("messaging.destination.name", queue.to_string()),
        KeyValue::new("tableq.queue", queue.to_string()),
    ]
}

fn item_attributes(item: &ItemTrace) -> Vec<KeyValue> {
    let mut attributes = vec![
        KeyValue::new("tableq.key", item.key.clone()),
        KeyValue::new("tableq.outcome", item.outcome),
    ];
    if let Some(error) = &item.error {
        attributes.push(KeyValue::new("tableq.error", error.clone()));
    }
    attributes
}

fn span_events(events: Vec<Event>) -> SpanEvents {
    let mut span_events = SpanEvents::default();
    span_events.events = events;
    span_events
}

fn status(error: Option<&str>) -> Status {
    match error {
        Some(error) => Status::error(error.to_string()),
        None => Status::Unset,
    }
}

fn flags(parent: &Parent) -> TraceFlags {
    TraceFlags::new(u8::from_str_radix(&parent.flags, 16).unwrap_or(0))
}

fn sampled(parent: &Parent) -> bool {
    flags(parent).is_sampled()
}

fn new_trace_id() -> TraceId {
    TraceId::from_bytes(fastrand::u128(1..).to_be_bytes())
}

fn new_span_id() -> SpanId {
    SpanId::from_bytes(fastrand::u64(1..).to_be_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(parent: Option<&str>, sent: Option<(&str, &str)>) -> ItemTrace {
        ItemTrace {
            key: "7".into(),
            parent: parent.map(|trace| Parent {
                trace_id: trace.into(),
                span_id: "00f067aa0ba902b7".into(),
                flags: "01".into(),
            }),
            sent: sent.map(|(t, s)| (t.into(), s.into())),
            outcome: "done",
            error: None,
            action: None,
            recorded: SystemTime::now(),
        }
    }

    #[test]
    fn an_item_span_continues_the_rows_trace_or_the_one_its_action_sent() {
        let now = SystemTime::now();
        let row = "4bf92f3577b34da6a3ce929d0e0e4736";
        let spans = of_turn("q", false, now, now, &[item(Some(row), None)]);
        assert_eq!(spans[0].span_context.trace_id().to_string(), row);
        assert_eq!(spans[0].parent_span_id.to_string(), "00f067aa0ba902b7");
        let sent = ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331");
        let spans = of_turn("q", false, now, now, &[item(Some(row), Some(sent))]);
        assert_eq!(spans[0].span_context.trace_id().to_string(), sent.0);
        assert_eq!(spans[0].span_context.span_id().to_string(), sent.1);
        assert_eq!(spans[0].parent_span_id, SpanId::INVALID);
        let mut unsampled = item(Some(row), None);
        if let Some(parent) = unsampled.parent.as_mut() {
            parent.flags = "00".into();
        }
        assert!(
            of_turn("q", false, now, now, &[unsampled]).is_empty(),
            "not sampled"
        );
        let batch = of_turn(
            "q",
            true,
            now,
            now,
            &[item(Some(row), None), item(None, None)],
        );
        assert_eq!(batch.len(), 1);
        assert_eq!(batch[0].links.len(), 1);
        assert_eq!(batch[0].events.len(), 4);
    }
}
