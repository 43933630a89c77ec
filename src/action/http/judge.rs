//! What an answer, or its absence, means: its status as `action::answer` judges
//! one (any 2xx success; 429, 502, 503, 504 failures downstream, the circuit's
//! business; any other status the item's failure), and a timeout or an unreachable
//! receiver failures downstream too. Every failure in one line.

use std::error::Error as _;
use reqwest::header::{LOCATION, RETRY_AFTER};
use reqwest::{Response, Url};

use super::ssrf::PrivateDestination;
use super::Http;
use crate::action::answer::{retry_after_seconds, Verdict};
use crate::action::capture::clip_error;
use crate::action::{Blame, Outcome};

impl Http {
    /// The outcome of `response`, whose body (the first 64 KiB) is `output`.
    pub(super) fn judge(&self, response: Response, output: Vec<u8>) -> Outcome {
        let status = response.status();
        let mut outcome = Outcome {
            error: None,
            status: Some(i64::from(status.as_u16())),
            output: Some(output),
            retry_after: None,
            release_after: None,
            rearmed: None,
            interrupted: false,
            kind: None,
            trace: None,
            blame: Blame::Item,
            each: None,
        };
        let verdict = Verdict::of(status.as_u16());
        if verdict == Verdict::Success {
            return outcome;
        }
        let reason = status.canonical_reason().unwrap_or("");
        let mut error = format!("HTTP {} {reason}", status.as_u16())
            .trim_end()
            .to_string();
        if status.is_redirection() {
            let location = response
                .headers()
                .get(LOCATION)
                .and_then(|l| l.to_str().ok())
                .unwrap_or("(no Location)");
            let hint = if self.config.follow_redirects {
                ""
            } else {
                " (set follow_redirects = true to follow it)"
            };
            error.push_str(&format!(": redirect to {location} not followed{hint}"));
        }
        outcome.error = Some(clip_error(error));
        if verdict == Verdict::Downstream {
            outcome.blame = Blame::Downstream;
        }
        outcome.retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(retry_after_seconds);
        outcome
    }
}

/// True when the request was refused before it left: its destination is a private
/// address the queue may not reach (the row's doing, not an outage).
pub(super) fn refused_destination(error: &reqwest::Error) -> bool {
    let mut source = error.source();
    while let Some(cause) = source {
        if cause.is::<PrivateDestination>() {
            return true;
        }
        source = cause.source();
    }
    false
}

/// One line for `:error`: "connection refused to 127.0.0.1:9", a TLS problem, a
/// refused private address, or the innermost cause.
pub(super) fn describe(error: &reqwest::Error, url: &Url) -> String {
    let target = format!(
        "{}:{}",
        url.host_str().unwrap_or(""),
        url.port_or_known_default().unwrap_or_default()
    );
    let mut source = error.source();
    // Never the error's own text: it holds the whole URL, which may carry a token.
    let mut innermost = if error.is_timeout() {
        "timed out"
    } else {
        "no further detail"
    }
    .to_string();
    while let Some(cause) = source {
        if let Some(private) = cause.downcast_ref::<PrivateDestination>() {
            return private.to_string();
        }
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            if let Some(tls) = tls_error(io) {
                return format!("TLS error with {target}: {tls}");
            }
            match io.kind() {
                std::io::ErrorKind::ConnectionRefused => {
                    return format!("connection refused to {target}")
                }
                std::io::ErrorKind::ConnectionReset => {
                    return format!("connection reset by {target}")
                }
                _ => {}
            }
        }
        if let Some(tls) = cause.downcast_ref::<rustls::Error>() {
            return format!("TLS error with {target}: {tls}");
        }
        innermost = cause.to_string();
        source = cause.source();
    }
    if error.is_connect() {
        format!("cannot connect to {target}: {innermost}")
    } else {
        format!("request to {target} failed: {innermost}")
    }
}

/// True when no connection could be made (refused, no route, a name that does not
/// resolve, a connect timeout): nothing was sent. A TLS handshake that failed is not
/// such an outage but a certificate to mend, and stays the failure it was.
pub(super) fn not_connected(error: &reqwest::Error) -> bool {
    let mut source = error.source();
    while let Some(cause) = source {
        let tls = cause.downcast_ref::<rustls::Error>().is_some()
            || cause.downcast_ref::<std::io::Error>().and_then(tls_error).is_some();
        if tls {
            return false;
        }
        source = cause.source();
    }
    error.is_connect()
}

/// The rustls error inside (possibly nested) io::Errors: an io::Error's `source()`
/// skips the error it wraps, so look inside with `get_ref()`.
fn tls_error(io: &std::io::Error) -> Option<&rustls::Error> {
    let inner = io.get_ref()?;
    if let Some(tls) = inner.downcast_ref::<rustls::Error>() {
        return Some(tls);
    }
    inner.downcast_ref::<std::io::Error>().and_then(tls_error)
}
