//! W3C Trace Context, `traceparent`: the value a row's `traceparent` column may
//! hold (read as the item's [`Parent`], `db::item`), continued by what tableq
//! does with the item — an HTTP delivery's `traceparent` header (`action::http`),
//! the committed turn's spans (`telemetry::trace`), the item's log span — so that
//! an item can be followed from the code that queued it into the receiver's logs.
//! Text only: it names no module of tableq, so every layer may build on it.

/// The column a select may return to continue a trace.
pub const COLUMN: &str = "traceparent";

/// A valid `traceparent` a row holds: the trace it belongs to and the span that
/// wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parent {
    /// 32 lowercase hex digits.
    pub trace_id: String,
    /// 16 lowercase hex digits.
    pub span_id: String,
    /// 2 hex digits (`01`: sampled).
    pub flags: String,
}

/// The trace context one delivery sends, as its `traceparent` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Traceparent {
    /// 32 lowercase hex digits.
    pub trace_id: String,
    /// This delivery's span: 16 lowercase hex digits.
    pub span_id: String,
    /// The trace flags, 2 hex digits (`01`: sampled).
    pub flags: String,
}

impl Traceparent {
    /// A delivery's trace: under `parent` (the row's `traceparent`) if there is one,
    /// else a new trace.
    pub fn under(parent: Option<Parent>) -> Traceparent {
        match parent {
            Some(Parent {
                trace_id, flags, ..
            }) => Traceparent {
                trace_id,
                span_id: random_hex(8),
                flags,
            },
            None => Traceparent::new(),
        }
    }

    /// The root of a new trace (a batch-scope request: one for all its rows).
    pub fn new() -> Traceparent {
        Traceparent {
            trace_id: random_hex(16),
            span_id: random_hex(8),
            flags: "01".to_string(),
        }
    }

    /// The `traceparent` header's value.
    pub fn header(&self) -> String {
        format!("00-{}-{}-{}", self.trace_id, self.span_id, self.flags)
    }
}

/// A valid `traceparent` (version 00, or a later one read as 00 allows); `None` for
/// anything else.
pub fn parse(text: &str) -> Option<Parent> {
    let mut parts = text.trim().split('-');
    let (version, trace_id, parent_id, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, len: usize| {
        s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    let valid = hex(version, 2)
        && version != "ff"
        && (version != "00" || parts.next().is_none())
        && hex(trace_id, 32)
        && trace_id.bytes().any(|b| b != b'0')
        && hex(parent_id, 16)
        && parent_id.bytes().any(|b| b != b'0')
        && hex(flags, 2);
    valid.then(|| Parent {
        trace_id: trace_id.to_string(),
        span_id: parent_id.to_string(),
        flags: flags.to_string(),
    })
}

/// `bytes` random bytes as lowercase hex, never all zero.
fn random_hex(bytes: usize) -> String {
    loop {
        let hex: String = (0..bytes)
            .map(|_| format!("{:02x}", fastrand::u8(..)))
            .collect();
        if hex.bytes().any(|b| b != b'0') {
            return hex;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_valid_traceparent_and_refuses_the_rest() {
        let valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(
            parse(valid),
            Some(Parent {
                trace_id: "4bf92f3577b34da6a3ce929d0e0e4736".into(),
                span_id: "00f067aa0ba902b7".into(),
                flags: "01".into(),
            })
        );
        for invalid in [
            "",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        ] {
            assert_eq!(parse(invalid), None, "{invalid}");
        }
        let sent = Traceparent {
            trace_id: "4bf92f3577b34da6a3ce929d0e0e4736".into(),
            span_id: random_hex(8),
            flags: "01".into(),
        };
        let header = sent.header();
        assert_eq!(header.len(), 55);
        assert!(header.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"));
    }
}
