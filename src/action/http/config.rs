//! `type = "http"`: the `[action]` table of a webhook — its TOML keys, and what
//! each must be. The delivery itself is `crate::action::http`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use base64::Engine;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::config::value::duration::DurationText;
use crate::config::action::kind::{ActionKind, Common, Samples};
use crate::config::value::template::{Part, Template};
use crate::config::validate::validator::Validator;
use crate::config::Site;
use crate::diagnostic::{Finding, Severity};

/// `[action] timeout` when the file does not set it.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// What a queue file may write in `type` meaning this kind, and what it is called
/// then: the registry answers `type = "webhook"` with "a webhook is `type = \"http\"`".
pub const WRITTEN_AS: (&str, &[&str]) = ("a webhook", &["webhook", "https"]);

/// type = "http": one request per item; the body is the row as a JSON object. Any
/// 2xx is success.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawHttpAction {
    /// http(s) URL; {column} placeholders are percent-encoded, and one that begins
    /// the URL supplies it whole (a URL stored in the row). ${NAME} comes from the
    /// environment.
    pub url: String,
    /// The HTTP method. Default "POST".
    pub method: Option<String>,
    /// Request headers; values may use {column} placeholders, ${NAME} and
    /// ${file:/PATH}.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Connect, send and the whole response. Default "30s".
    #[serde(default, with = "humantime_serde")]
    #[schemars(with = "Option<DurationText>")]
    pub timeout: Option<Duration>,
    /// Standard Webhooks signing (webhook-id, webhook-timestamp, webhook-signature):
    /// whsec_<base64>; several separated by spaces sign with each (for rotation).
    pub signing_secret: Option<String>,
    /// The webhook-id, with {column} placeholders. Default "<queue>_<key>".
    pub message_id: Option<String>,
    /// Follow redirects; by default a 3xx is a failure naming its Location.
    #[serde(default)]
    pub follow_redirects: bool,
    /// When the row picks the host, private addresses are refused unless this is
    /// true.
    #[serde(default)]
    pub allow_private_networks: bool,
    /// Trust this CA too (PEM; relative to the queue file).
    pub ca_file: Option<PathBuf>,
    /// Refuse plain http://.
    #[serde(default)]
    pub https_only: bool,
}

/// `type = "http"`: one request per item, the row as its JSON body.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpAction {
    /// The timeout, and the secrets and placeholders of the keys below.
    pub common: Common,
    pub url: Template,
    pub method: String,
    pub headers: Vec<(String, Template)>,
    /// Standard Webhooks signing keys (decoded from `whsec_…`); one signature each.
    pub signing_keys: Vec<SigningKey>,
    pub message_id: Option<Template>,
    pub follow_redirects: bool,
    /// Whether the URL's host comes from the row, so private addresses are refused.
    pub host_from_row: bool,
    pub allow_private_networks: bool,
    /// PEM certificates to trust besides the system's.
    pub ca_pem: Option<Vec<u8>>,
    pub https_only: bool,
}

/// A signing key. Its `Debug` never shows the key (a reload compares keys with
/// `PartialEq`, so a rotated key file is seen as a change).
#[derive(Clone, PartialEq, Eq)]
pub struct SigningKey(pub Vec<u8>);

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningKey(…)")
    }
}

/// Validates `type = "http"`.
pub fn validate(raw: &RawHttpAction, v: &mut Validator) -> HttpAction {
    let mut common = Common::new(v, raw.timeout, DEFAULT_TIMEOUT);
    let url = url(raw, v, &mut common);
    let method = raw.method.as_deref().unwrap_or("POST").to_ascii_uppercase();
    if reqwest::Method::from_bytes(method.as_bytes()).is_err() {
        v.error(
            &["action", "method"],
            format!("`action.method` = {method:?} is not an HTTP method"),
        );
    }
    let signing_keys = signing_secret(raw.signing_secret.as_deref(), v, &mut common);
    let headers = headers(raw, v, &mut common);
    let message_id = raw
        .message_id
        .as_ref()
        .and_then(|id| common.template(v, &["action", "message_id"], id));
    HttpAction {
        host_from_row: host_from_row(&url),
        url,
        method,
        headers,
        signing_keys,
        message_id,
        follow_redirects: raw.follow_redirects,
        allow_private_networks: raw.allow_private_networks,
        ca_pem: ca_pem(raw, v),
        https_only: raw.https_only,
        common,
    }
}

impl ActionKind for HttpAction {
    fn common(&self) -> &Common {
        &self.common
    }

    fn batch_scope_refusals(&self, queue: &Site<'_>) -> Vec<Finding> {
        if self.message_id.is_none() {
            return Vec::new();
        }
        let message = "`action.message_id` names one item's message: with scope = \"batch\" one \
                       request carries the batch, and its webhook-id is derived from the batch's \
                       keys; remove `message_id`";
        vec![queue.finding(Severity::Error, &["action", "message_id"], message)]
    }

    fn samples(&self) -> Samples {
        Samples {
            success_status: Some(200),
            failure_status: Some(500),
            output: true,
        }
    }
}

/// The URL template. A URL the file writes out (placeholders after its start filled
/// with a sample) must parse; one that starts with a placeholder comes whole from
/// the row.
fn url(raw: &RawHttpAction, v: &mut Validator, common: &mut Common) -> Template {
    let url = common
        .template(v, &["action", "url"], &raw.url)
        .unwrap_or(Template { parts: vec![] });
    let Some(Part::Literal(_)) = url.parts.first() else {
        return url;
    };
    let rendered = url.render(&|_| b"1".to_vec(), &|_, value| value);
    let sample = String::from_utf8_lossy(&rendered).into_owned();
    let filled = if url.as_literal().is_some() {
        ""
    } else {
        " (with each placeholder filled in)"
    };
    match reqwest::Url::parse(&sample) {
        Ok(parsed) if !matches!(parsed.scheme(), "http" | "https") => v.error(
            &["action", "url"],
            format!(
                "`action.url` must be an http:// or https:// URL, not {}://",
                parsed.scheme()
            ),
        ),
        Ok(parsed) if raw.https_only && parsed.scheme() != "https" => v.error(
            &["action", "url"],
            "`action.url` is http:// but `https_only = true`: use https://",
        ),
        Ok(_) => {}
        Err(e) => v.error(
            &["action", "url"],
            format!("`action.url` is not a URL{filled}: {e}"),
        ),
    }
    url
}

fn headers(raw: &RawHttpAction, v: &mut Validator, common: &mut Common) -> Vec<(String, Template)> {
    let mut headers = Vec::new();
    for (name, value) in &raw.headers {
        if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
            v.error(
                &["action", "headers", name],
                format!("`{name}` is not a valid header name"),
            );
            continue;
        }
        let path = ["action", "headers", name];
        match common.secret_template(v, &path, value) {
            Ok(template) => headers.push((name.clone(), template)),
            Err(e) => v.error(&path, format!("header `{name}`: {e}")),
        }
    }
    headers
}

/// The certificates of `ca_file`, relative to the queue file's directory.
fn ca_pem(raw: &RawHttpAction, v: &mut Validator) -> Option<Vec<u8>> {
    v.ca_file(raw.ca_file.as_ref(), |pem| {
        reqwest::Certificate::from_pem_bundle(pem).is_ok_and(|c| !c.is_empty())
    })
}

/// True unless the URL's scheme and host are written out in full before any
/// placeholder: only then can the row not choose where the request goes.
pub fn host_from_row(url: &Template) -> bool {
    match url.parts.first() {
        Some(Part::Literal(literal)) if url.parts.len() > 1 => match literal.split_once("://") {
            Some((_, authority)) => !authority.contains(['/', '?', '#']),
            None => true,
        },
        Some(Part::Literal(_)) => false,
        Some(Part::Placeholder(_)) => true,
        None => false,
    }
}

/// The keys of `action.signing_secret` (its `${…}` replaced, kept secret), or none:
/// read alike by every kind that signs (http, fastcgi).
pub fn signing_secret(
    written: Option<&str>,
    v: &mut Validator,
    common: &mut Common,
) -> Vec<SigningKey> {
    let Some(written) = written else {
        return Vec::new();
    };
    let path = ["action", "signing_secret"];
    let Some(secret) = common.secret(v, &path, written) else {
        return Vec::new();
    };
    signing_keys(&secret).unwrap_or_else(|message| {
        v.error(&path, message);
        Vec::new()
    })
}

/// `whsec_<base64>`, or several separated by spaces (for rotation), its `${…}`
/// already replaced.
pub fn signing_keys(secret: &str) -> Result<Vec<SigningKey>, String> {
    let mut keys = Vec::new();
    for (index, one) in secret.split_whitespace().enumerate() {
        let nth = index + 1;
        let encoded = one.strip_prefix("whsec_").ok_or_else(|| {
            format!("`action.signing_secret`: secret #{nth} does not start with `whsec_`")
        })?;
        let key = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|_| {
                format!("`action.signing_secret`: secret #{nth} is not base64 after `whsec_`")
            })?;
        if key.is_empty() {
            return Err(format!("`action.signing_secret`: secret #{nth} is empty"));
        }
        keys.push(SigningKey(key));
    }
    if keys.is_empty() {
        return Err("`action.signing_secret` is empty".to_string());
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Template {
        Template::parse(text, &|_| None).unwrap()
    }

    #[test]
    fn knows_when_the_row_picks_the_host() {
        assert!(!host_from_row(&url("https://hooks.example.com/in/{id}")));
        assert!(!host_from_row(&url("https://hooks.example.com?id={id}")));
        assert!(!host_from_row(&url("https://hooks.example.com")));
        assert!(host_from_row(&url("{endpoint}")));
        assert!(host_from_row(&url("https://{tenant}.example.com/in")));
        assert!(host_from_row(&url("https://hooks.example.com:{port}/in")));
    }

    #[test]
    fn reads_rotated_signing_secrets() {
        let keys = signing_keys("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw whsec_dGVzdA==").unwrap();
        assert_eq!(keys.len(), 2);
        assert_eq!(keys[1].0, b"test");
        assert!(signing_keys("MfKQ9r8G").unwrap_err().contains("whsec_"));
        assert!(!format!("{:?}", keys[1]).contains("test"));
    }
}
