//! What the process tells about itself. What each queue counts and times is in
//! [`stats`]; what is both logged and counted is one type each in [`events`]; and
//! it goes out four ways: [`log`] (text or JSON lines, and the lines said once a
//! minute or once per key), [`metrics`] (what `/metrics` answers), [`http`] (the
//! endpoint's routes and the status page) and [`trace`] (OpenTelemetry spans over
//! OTLP).

pub mod events;
pub mod http;
pub mod log;
pub mod metrics;
pub mod stats;
pub mod trace;
