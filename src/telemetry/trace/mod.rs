//! OpenTelemetry: a span per item of each committed turn ([`spans`]), exported
//! over OTLP ([`otlp`]).

pub mod otlp;
pub mod spans;
