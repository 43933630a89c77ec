//! One request: the URL rendered from the row (placeholders percent-encoded, dot
//! segments refused), the headers, the Standard Webhooks signature, the body, sent
//! and its answer read (the first 64 KiB).

use std::time::{SystemTime, UNIX_EPOCH};

use percent_encoding::{percent_encode, AsciiSet, NON_ALPHANUMERIC};
use reqwest::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use reqwest::{Method, RequestBuilder, Response, Url};

use super::judge::{describe, not_connected, refused_destination};
use super::signing::signature;
use super::ssrf::check_literal;
use crate::trace_context;
use super::{Delivery, Http};
use crate::action::capture::OUTPUT_LIMIT;
use crate::action::Outcome;
use crate::config::value::template::Part;
use crate::db::Item;

/// Placeholder values keep only RFC 3986's unreserved characters unencoded.
const PLACEHOLDER: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

impl Http {
    /// Sends `delivery`; the outcome carries the status, the body and any
    /// Retry-After. Dropped at the deadline, the request is aborted.
    pub(super) async fn send(&self, delivery: Delivery<'_>) -> Outcome {
        let url = match self.url(delivery.item, delivery.queue) {
            Ok(url) => url,
            Err(error) => return Outcome::failure(error),
        };
        let request = match self.request(&url, &delivery) {
            Ok(request) => request,
            Err(refused) => return Outcome::failure(refused),
        };
        match exchange(request).await {
            Ok((response, output)) => self.judge(response, output),
            Err(e) if refused_destination(&e) => Outcome::failure(describe(&e, &url)),
            // No connection to the queue's own receiver: nothing was sent, it cannot
            // have acted. (A host the row names is the row's.)
            Err(e) if not_connected(&e) && !self.config.host_from_row => {
                Outcome::unreached(describe(&e, &url))
            }
            Err(e) => Outcome::downstream(describe(&e, &url)),
        }
    }

    /// The request for `delivery` to `url`: its body (none for GET and HEAD, whose
    /// signature covers an empty one), headers, trace context and signature.
    fn request(&self, url: &Url, delivery: &Delivery<'_>) -> Result<RequestBuilder, String> {
        let body = match serde_json::to_vec(&delivery.body) {
            Ok(body) if self.method != Method::GET && self.method != Method::HEAD => body,
            Ok(_) => Vec::new(),
            Err(e) => return Err(format!("cannot encode the row as JSON: {e}")),
        };
        let mut request = self.client.request(self.method.clone(), url.clone());
        if !body.is_empty() && !self.sets_header("content-type") {
            request = request.header(CONTENT_TYPE, "application/json");
        }
        if let Some(sent) = &delivery.traceparent {
            request = request.header(trace_context::COLUMN, sent.header());
        }
        let (item, queue) = (delivery.item, delivery.queue);
        for (name, template) in &self.config.headers {
            let value = template.render(&|p| item.placeholder_bytes(p, queue), &|_, v| v);
            match (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_bytes(&value)) {
                (Ok(name), Ok(value)) => request = request.header(name, value),
                _ => return Err(format!("header `{name}` has a value that cannot be sent (a line break or control character)")),
            }
        }
        // The row's identity, signed or not: receivers deduplicate on it.
        let id = delivery.id.as_str();
        request = request.header("webhook-id", id);
        if !self.config.signing_keys.is_empty() {
            let timestamp = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            let signed = signature(&self.config.signing_keys, id, timestamp, &body);
            request = request
                .header("webhook-timestamp", timestamp)
                .header("webhook-signature", signed);
        }
        if !body.is_empty() {
            request = request.body(body);
        }
        Ok(request)
    }

    /// Renders the URL: placeholders percent-encoded, except one that begins the URL,
    /// which supplies the URL (or its start) as it is.
    pub(super) fn url(&self, item: &Item, queue: &str) -> Result<Url, String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dots_are_refused_only_as_a_whole_path_segment() {
        let parts = |url: &str| {
            crate::config::value::template::Template::parse(url, &|_| None)
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
}
