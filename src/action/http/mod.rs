//! `type = "http"`: deliver an item to a web endpoint, the way the careful webhook
//! senders do — the row as a JSON body, a signature when there is a secret, any 2xx
//! is success, and every failure explained in one line.

mod signing;
mod ssrf;
pub mod trace;

use std::error::Error as _;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use percent_encoding::{percent_encode, AsciiSet, NON_ALPHANUMERIC};
use reqwest::header::{HeaderName, HeaderValue, CONTENT_TYPE, LOCATION, RETRY_AFTER};
use reqwest::{redirect, Client, Method, Response, StatusCode, Url};

use super::capture::{clip_error, OUTPUT_LIMIT};
use crate::action::{ActionError, Blame, Outcome};
use crate::config::template::Part;
use crate::config::HttpAction;
use crate::db::row_json::{item_json, items_json};
use crate::db::Item;
use signing::signature;
use ssrf::{check_literal, PrivateDestination, PublicOnly};
use trace::Trace;

/// Placeholder values keep only RFC 3986's unreserved characters unencoded.
const PLACEHOLDER: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// An HTTP action with its client, shared by all the queue's workers.
#[derive(Debug, Clone)]
pub struct HttpDelivery {
    config: Arc<HttpAction>,
    client: Client,
    method: Method,
    /// Private destinations are refused (the row picks the host, and no opt-out).
    guarded: bool,
}

impl HttpDelivery {
    pub fn new(config: &HttpAction) -> Result<HttpDelivery, ActionError> {
        // reqwest is built without a default crypto provider: ring, as for MySQL.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let guarded = config.host_from_row && !config.allow_private_networks;
        // The host written in the file is trusted; every other host this client may
        // reach (one from the row, or a redirect's) must be public, unless allowed.
        let trusted = if config.host_from_row {
            None
        } else {
            literal_host(config)
        };
        let check_redirects = config.follow_redirects && !config.allow_private_networks;
        let redirects = if !config.follow_redirects {
            redirect::Policy::none()
        } else if check_redirects {
            let trusted = trusted.clone();
            redirect::Policy::custom(move |attempt| {
                if attempt.previous().len() >= 10 {
                    return attempt.error("more than 10 redirects");
                }
                let host = attempt.url().host_str().map(str::to_string);
                match host {
                    Some(host) if Some(&host) != trusted.as_ref() => match check_literal(&host) {
                        Err(refused) => attempt.error(refused),
                        Ok(()) => attempt.follow(),
                    },
                    _ => attempt.follow(),
                }
            })
        } else {
            redirect::Policy::limited(10)
        };
        let mut builder = Client::builder()
            .user_agent(concat!("tableq/", env!("CARGO_PKG_VERSION")))
            .redirect(redirects)
            .https_only(config.https_only)
            // A proxy would resolve names itself, past the private-address check.
            .no_proxy();
        if guarded || check_redirects {
            builder = builder.dns_resolver(Arc::new(PublicOnly { trusted }));
        }
        if let Some(pem) = &config.ca_pem {
            let certificates = reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| ActionError(format!("`action.ca_file`: {e}")))?;
            for certificate in certificates {
                builder = builder.add_root_certificate(certificate);
            }
        }
        let client = builder.build().map_err(|e| ActionError(client_error(&e)))?;
        let method = Method::from_bytes(config.method.as_bytes())
            .map_err(|e| ActionError(format!("`action.method`: {e}")))?;
        Ok(HttpDelivery {
            config: Arc::new(config.clone()),
            client,
            method,
            guarded,
        })
    }

    /// Delivers `item`; the outcome carries the status, the body and any Retry-After.
    /// Sends `trace` as its `traceparent`.
    pub async fn deliver(&self, item: &Item, queue: &str, trace: Option<&Trace>) -> Outcome {
        let id = match &self.config.message_id {
            Some(template) => String::from_utf8_lossy(
                &template.render(&|p| item.placeholder_bytes(p, queue), &|_, v| v),
            )
            .into_owned(),
            None => format!("{queue}_{}", item.key_text()),
        };
        self.send(item, queue, &item_json(item), id, trace).await
    }

    /// `scope = "batch"`: delivers every item of a batch in one request, the rows as
    /// a JSON array, signed once, its `webhook-id` derived from the batch's keys (the
    /// same batch, the same id). A 2xx means every item succeeded.
    pub async fn deliver_batch(
        &self,
        items: &[Item],
        queue: &str,
        trace: Option<&Trace>,
    ) -> Outcome {
        let Some(first) = items.first() else {
            return Outcome::success();
        };
        let id = batch_id(queue, items);
        // Only `{queue}` placeholders exist in batch scope: any item renders them.
        self.send(first, queue, &items_json(items), id, trace).await
    }

    /// Sends `body` to the URL rendered for `item`, as message `id`, with `trace` as
    /// its `traceparent`.
    async fn send(
        &self,
        item: &Item,
        queue: &str,
        body: &serde_json::Value,
        id: String,
        trace: Option<&Trace>,
    ) -> Outcome {
        let url = match self.url(item, queue) {
            Ok(url) => url,
            Err(error) => return Outcome::failure(error),
        };
        let body = match serde_json::to_vec(body) {
            Ok(body) => body,
            Err(e) => return Outcome::failure(format!("cannot encode the row as JSON: {e}")),
        };
        // GET and HEAD carry no body; their signature covers an empty one.
        let body = if self.method == Method::GET || self.method == Method::HEAD {
            Vec::new()
        } else {
            body
        };
        let mut request = self.client.request(self.method.clone(), url.clone());
        if !body.is_empty() && !self.sets_header("content-type") {
            request = request.header(CONTENT_TYPE, "application/json");
        }
        if let Some(trace) = trace {
            request = request.header(trace::COLUMN, trace.header());
        }
        for (name, template) in &self.config.headers {
            let value = template.render(&|p| item.placeholder_bytes(p, queue), &|_, v| v);
            match (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_bytes(&value)) {
                (Ok(name), Ok(value)) => request = request.header(name, value),
                _ => return Outcome::failure(format!("header `{name}` has a value that cannot be sent (a line break or control character)")),
            }
        }
        if !self.config.signing_keys.is_empty() {
            let timestamp = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            request = request
                .header("webhook-id", id.as_str())
                .header("webhook-timestamp", timestamp)
                .header(
                    "webhook-signature",
                    signature(&self.config.signing_keys, &id, timestamp, &body),
                );
        }
        if !body.is_empty() {
            request = request.body(body);
        }
        let timeout = self.config.timeout;
        match tokio::time::timeout(timeout, exchange(request)).await {
            Ok(Ok((response, output))) => self.judge(response, output),
            Ok(Err(e)) if refused_destination(&e) => Outcome::failure(describe(&e, &url)),
            Ok(Err(e)) => Outcome::downstream(describe(&e, &url)),
            Err(_) => Outcome::downstream(format!(
                "timed out after {}",
                humantime::format_duration(timeout)
            )),
        }
    }

    /// Renders the URL: placeholders percent-encoded, except one that begins the URL,
    /// which supplies the URL (or its start) as it is.
    fn url(&self, item: &Item, queue: &str) -> Result<Url, String> {
        let dot_segment = std::cell::RefCell::new(None);
        let parts = &self.config.url.parts;
        let rendered =
            self.config
                .url
                .render(&|p| item.placeholder_bytes(p, queue), &|index, value| {
                    if index == 0 {
                        return value;
                    }
                    if (value == b"." || value == b"..") && is_path_segment(parts, index) {
                        *dot_segment.borrow_mut() =
                            Some(String::from_utf8_lossy(&value).into_owned());
                    }
                    percent_encode(&value, PLACEHOLDER).to_string().into_bytes()
                });
        if let Some(dots) = dot_segment.into_inner() {
            return Err(format!(
                "refused: a placeholder in the URL's path is {dots:?}, which would move up the path"
            ));
        }
        // Messages name the scheme and host at most: the rest may hold secrets.
        let text = String::from_utf8(rendered)
            .map_err(|_| "the URL from the row is not valid UTF-8".to_string())?;
        let url = Url::parse(&text).map_err(|e| format!("the URL is not valid: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "refused: the URL is {}://…, not http:// or https://",
                url.scheme()
            ));
        }
        if self.config.https_only && url.scheme() != "https" {
            return Err("refused: the URL is http://…, and https_only = true".to_string());
        }
        if self.guarded {
            if let Some(host) = url.host_str() {
                check_literal(host).map_err(|e| e.to_string())?;
            }
        }
        Ok(url)
    }

    /// Whether tableq sends the trace context: unless the queue's `headers` set
    /// `traceparent` themselves.
    pub fn traces(&self) -> bool {
        !self.sets_header(trace::COLUMN)
    }

    /// Whether the queue's `headers` set `name`.
    fn sets_header(&self, name: &str) -> bool {
        self.config
            .headers
            .iter()
            .any(|(header, _)| header.eq_ignore_ascii_case(name))
    }

    fn judge(&self, response: Response, output: Vec<u8>) -> Outcome {
        let status = response.status();
        let mut outcome = Outcome {
            error: None,
            status: Some(i64::from(status.as_u16())),
            output: Some(output),
            retry_after: None,
            trace_id: None,
            blame: Blame::Item,
        };
        if status.is_success() {
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
        if DOWNSTREAM_STATUSES.contains(&status) {
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

/// A batch's `webhook-id`: the queue, then the first 16 bytes of the SHA-256 of the
/// batch's keys in order, as hex — the same for the same batch sent again.
fn batch_id(queue: &str, items: &[Item]) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    for item in items {
        hash.update(item.key_text().as_bytes());
        hash.update([0]);
    }
    let digest = hash.finalize();
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("{queue}_batch_{hex}")
}

/// True when the placeholder at part `index` is a whole segment of the URL's path:
/// no `?` or `#` before it, a `/` (or another placeholder) just before it, and a
/// `/`, `?`, `#`, the end or another placeholder just after it. Only there does
/// `.` or `..` move the request up the path; in the query or mid-segment it is text.
fn is_path_segment(parts: &[Part], index: usize) -> bool {
    let in_path = parts[..index]
        .iter()
        .all(|part| !matches!(part, Part::Literal(l) if l.contains(['?', '#'])));
    let starts = match parts[..index].last() {
        Some(Part::Literal(before)) => before.ends_with('/'),
        _ => true,
    };
    let ends = match parts.get(index + 1) {
        Some(Part::Literal(after)) => after.starts_with(['/', '?', '#']),
        _ => true,
    };
    in_path && starts && ends
}

/// The host of a URL written in full in the file (no placeholders before its host).
fn literal_host(config: &HttpAction) -> Option<String> {
    let Some(Part::Literal(prefix)) = config.url.parts.first() else {
        return None;
    };
    let end = prefix.find("://")? + 3;
    let authority_end = prefix[end..]
        .find(['/', '?', '#'])
        .map_or(prefix.len(), |i| end + i);
    let parsed = Url::parse(&format!("{}/", &prefix[..authority_end])).ok()?;
    parsed.host_str().map(str::to_string)
}

/// Sends the request and reads at most [`OUTPUT_LIMIT`] bytes of the response body.
async fn exchange(request: reqwest::RequestBuilder) -> Result<(Response, Vec<u8>), reqwest::Error> {
    let mut response = request.send().await?;
    let mut body = Vec::new();
    while body.len() < OUTPUT_LIMIT {
        match response.chunk().await? {
            Some(chunk) => {
                body.extend_from_slice(&chunk[..chunk.len().min(OUTPUT_LIMIT - body.len())])
            }
            None => break,
        }
    }
    Ok((response, body))
}

/// `Retry-After` as seconds from now: delay-seconds, or an HTTP date.
pub fn retry_after_seconds(value: &str) -> Option<u64> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(seconds);
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(
        when.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO)
            .as_secs(),
    )
}

/// Answers that say "not now" rather than "not this item": the receiver is
/// overloaded or its upstream is down.
const DOWNSTREAM_STATUSES: [StatusCode; 4] = [
    StatusCode::TOO_MANY_REQUESTS,
    StatusCode::BAD_GATEWAY,
    StatusCode::SERVICE_UNAVAILABLE,
    StatusCode::GATEWAY_TIMEOUT,
];

/// True when the request was refused before it left: its destination is a private
/// address the queue may not reach (the row's doing, not an outage).
fn refused_destination(error: &reqwest::Error) -> bool {
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
fn describe(error: &reqwest::Error, url: &Url) -> String {
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

/// Why the HTTP client could not be built, with its causes: reqwest's own words are
/// only "builder error". A machine without root certificates is the usual one.
fn client_error(error: &reqwest::Error) -> String {
    let mut causes = Vec::new();
    let mut source = error.source();
    while let Some(cause) = source {
        causes.push(cause.to_string());
        source = cause.source();
    }
    let detail = causes.join(": ");
    let lower = detail.to_ascii_lowercase();
    if lower.contains("certificate") || lower.contains("root") {
        return format!(
            "cannot set up the HTTP client: no root certificates found ({detail}): install \
             ca-certificates, or set `ca_file`"
        );
    }
    match causes.is_empty() {
        true => format!("cannot set up the HTTP client: {error}"),
        false => format!("cannot set up the HTTP client: {detail}"),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dots_are_refused_only_as_a_whole_path_segment() {
        let parts = |url: &str| {
            crate::config::template::Template::parse(url, &|_| None)
                .unwrap()
                .parts
        };
        let url = parts("https://h.example/files/{name}/raw?v={v}#{f}");
        assert!(is_path_segment(&url, 1), "/files/{{name}}/");
        assert!(!is_path_segment(&url, 3), "in the query");
        assert!(!is_path_segment(&url, 5), "in the fragment");
        let mid = parts("https://h.example/v{n}/x");
        assert!(!is_path_segment(&mid, 1), "mid-segment");
        let last = parts("https://h.example/a/{n}");
        assert!(is_path_segment(&last, 1), "the last segment");
    }

    #[test]
    fn reads_retry_after_as_seconds_or_a_date() {
        assert_eq!(retry_after_seconds(" 120 "), Some(120));
        assert_eq!(
            retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(0)
        );
        let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(600));
        assert!(retry_after_seconds(&later).is_some_and(|s| (590..=600).contains(&s)));
        assert_eq!(retry_after_seconds("soon"), None);
    }
}
