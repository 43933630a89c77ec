//! Log output: human-readable text or one JSON object per line, to stderr, with the
//! level filter from `TABLEQ_LOG` (tracing's EnvFilter syntax; default `info`).
//!
//! Text is coloured only when stderr is a terminal and `NO_COLOR` is unset, so
//! journald, `docker logs`, pipes and files get plain lines. When stderr is the
//! journal (systemd says so in `JOURNAL_STREAM`), lines carry no timestamp of their
//! own — the journal stamps each one — and each starts with its priority
//! ([`journal`]). JSON is flat: the spans' fields at the top level
//! ([`json_lines`]).
//!
//! Text lines escape every control character a value brings (CR, LF, ESC, the rest
//! of C0 and C1, DEL): a key or a command's stderr cannot start a forged line nor
//! send the terminal escape sequences. JSON escapes them by itself.

pub mod journal;
pub mod json_lines;
pub mod once;
pub mod throttle;

use std::fmt::{self, Write as _};
use std::io::IsTerminal;

use clap::ValueEnum;
use tracing::field::{Field, Visit};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::writer::BoxMakeWriter;
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::EnvFilter;

use journal::{stderr_is_journal, Prioritized};
use json_lines::FlatJson;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// The variable holding the log filter, e.g. `TABLEQ_LOG=tableq=debug`.
pub const LOG_ENV: &str = "TABLEQ_LOG";

/// Installs the global subscriber. A bad filter falls back to `info`, with a warning.
pub fn init(format: LogFormat) {
    let (filter, bad_filter) = match EnvFilter::try_from_env(LOG_ENV) {
        Ok(filter) => (filter, None),
        Err(e) => {
            let set = std::env::var(LOG_ENV).is_ok();
            (EnvFilter::new("info"), set.then(|| e.to_string()))
        }
    };
    let journal = stderr_is_journal();
    let writer = if journal {
        BoxMakeWriter::new(Prioritized)
    } else {
        BoxMakeWriter::new(std::io::stderr)
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(quiet(filter))
        .with_writer(writer)
        .with_target(false)
        .with_ansi(colour(std::env::var_os("NO_COLOR").as_deref()));
    match format {
        LogFormat::Text if journal => builder.fmt_fields(EscapedFields).without_time().init(),
        LogFormat::Text => builder.fmt_fields(EscapedFields).init(),
        // The spans' fields (queue, worker, key, trace_id) at the top level.
        LogFormat::Json => builder
            .fmt_fields(JsonFields::new())
            .event_format(FlatJson)
            .init(),
    }
    if let Some(error) = bad_filter {
        tracing::warn!(%error, "{LOG_ENV} is not a valid filter; logging at info");
    }
}

/// Log lines turned off whatever the filter says: lapin logs every message the
/// broker returns (unroutable) at warn level, body and all, and a row's values
/// must never reach the log — tableq says why the item failed instead.
const SILENCED: &[&str] = &["lapin::returned_messages=off"];

fn quiet(mut filter: EnvFilter) -> EnvFilter {
    for directive in SILENCED {
        if let Ok(directive) = directive.parse() {
            filter = filter.add_directive(directive);
        }
    }
    filter
}

/// The text format's fields, `name=value` as tracing's default has them, each value
/// with its control characters escaped ([`Escaped`]).
pub struct EscapedFields;

impl<'writer> FormatFields<'writer> for EscapedFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'writer>, fields: R) -> fmt::Result {
        let mut visitor = EscapingVisitor {
            writer,
            result: Ok(()),
            first: true,
        };
        fields.record(&mut visitor);
        visitor.result
    }
}

struct EscapingVisitor<'writer> {
    writer: Writer<'writer>,
    result: fmt::Result,
    first: bool,
}

impl Visit for EscapingVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            // The message as it is; another string field quoted, as tracing does.
            "message" => self.record_debug(field, &format_args!("{value}")),
            _ => self.record_debug(field, &value),
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if self.result.is_err() {
            return;
        }
        let separator = if std::mem::take(&mut self.first) {
            ""
        } else {
            " "
        };
        let name = field.name();
        let mut out = Escaped(&mut self.writer);
        self.result = match name {
            "message" => write!(out, "{separator}{value:?}"),
            name => write!(
                out,
                "{separator}{}={value:?}",
                name.trim_start_matches("r#")
            ),
        };
    }
}

/// Writes text with its control characters escaped: `\n`, `\r`, `\t`, and
/// `\u{1b}` for the others (C0, DEL, C1, and the Unicode line separators).
pub struct Escaped<W>(pub W);

impl<W: fmt::Write> fmt::Write for Escaped<W> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        for c in text.chars() {
            match c {
                '\n' => self.0.write_str("\\n")?,
                '\r' => self.0.write_str("\\r")?,
                '\t' => self.0.write_str("\\t")?,
                c if c.is_control() || c == '\u{2028}' || c == '\u{2029}' => {
                    write!(self.0, "\\u{{{:x}}}", c as u32)?
                }
                c => self.0.write_char(c)?,
            }
        }
        Ok(())
    }
}

/// Colour only for a person at a terminal who has not asked for none
/// (<https://no-color.org>: any non-empty `NO_COLOR`).
fn colour(no_color: Option<&std::ffi::OsStr>) -> bool {
    std::io::stderr().is_terminal() && no_color.is_none_or(|v| v.is_empty())
}

/// For unit tests: what is logged on this thread (at debug and above, as text
/// without colours or times) while the guard lives.
#[cfg(test)]
pub fn capture() -> (Captured, tracing::subscriber::DefaultGuard) {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .without_time()
        .with_writer(move || writer.clone())
        .finish();
    (captured, tracing::subscriber::set_default(subscriber))
}

/// What [`capture`] caught.
#[cfg(test)]
#[derive(Clone, Default)]
pub struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

#[cfg(test)]
impl Captured {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&crate::lock::lock(&self.0)).into_owned()
    }
}

#[cfg(test)]
impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        crate::lock::lock(&self.0).extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        let mut out = String::new();
        write!(Escaped(&mut out), "a\r\nb\x1b[2J\x07\u{9b}c\td").unwrap();
        assert_eq!(out, "a\\r\\nb\\u{1b}[2J\\u{7}\\u{9b}c\\td");
        let mut plain = String::new();
        write!(Escaped(&mut plain), "key=7 «ok»").unwrap();
        assert_eq!(plain, "key=7 «ok»");
    }
}
