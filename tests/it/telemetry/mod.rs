//! What tableq says about itself: the log lines, `/metrics`, the status page (in a
//! real browser too), OTLP traces, `[alerts]`' webhook, and what all of it costs.

mod alerts;
pub mod console_api;
mod console_browser;
mod console_history_browser;
mod console_pages;
mod history;
mod listener_headers;
mod log_escaping;
mod log_lines;
mod metrics;
mod metrics_flood;
mod observability;
mod otlp;
mod scrape_cost;
mod status_page;
mod status_percentiles;
