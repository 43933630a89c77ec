//! `type = "nats"`: the `[action]` table of a NATS publish — core NATS, or a
//! JetStream stream with `jetstream = true` — its TOML keys, and what each must be.
//! Publishing is `crate::action::nats`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::config::value::duration::DurationText;
use crate::config::action::kind::{ActionKind, Common};
use crate::action::message::config::{self as message, Message, RawMessage};
use crate::config::value::template::{Part, Template};
use crate::config::validate::validator::Validator;
use crate::config::Site;
use crate::diagnostic::{Finding, Severity};

/// `[action] timeout` when the file does not set it: as for HTTP.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// What a queue file may write in `type` meaning this kind, and what it is called
/// then: the registry answers `type = "webhook"` with "a webhook is `type = \"http\"`".
pub const WRITTEN_AS: (&str, &[&str]) = ("", &[]);

/// type = "nats": one message per item to NATS; with jetstream = true acknowledged
/// by its stream, Nats-Msg-Id set.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawNatsAction {
    /// nats:// (tls:// for TLS), or several servers separated by commas; a
    /// user:password@ in the URL authenticates. ${NAME} and ${file:/PATH} are
    /// replaced.
    pub url: String,
    /// The subject; {column} placeholders; no spaces, no wildcards.
    pub subject: String,
    /// Publish to a stream and await its acknowledgement. Default false (core NATS:
    /// no acknowledgement; a message can be lost).
    #[serde(default)]
    pub jetstream: bool,
    /// The body: default, the row as a JSON object; or "{column}", a column that
    /// already holds the payload, as it is.
    pub body: Option<String>,
    /// NATS headers; values take {column} placeholders.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Nats-Msg-Id, with {column} placeholders. Default "<queue>_<key>".
    pub message_id: Option<String>,
    /// Publish and acknowledgement. Default "30s".
    #[serde(default, with = "humantime_serde")]
    #[schemars(with = "Option<DurationText>")]
    pub timeout: Option<Duration>,
    /// A token to authenticate with; ${NAME} and ${file:/PATH} are replaced.
    pub token: Option<String>,
    /// A .creds file (JWT and NKey seed), relative to the queue file.
    pub credentials_file: Option<PathBuf>,
    /// Trust this CA, and require TLS (PEM; relative to the queue file).
    pub ca_file: Option<PathBuf>,
}

/// `type = "nats"`: one message per item; with JetStream, acknowledged by its stream.
#[derive(Debug, Clone, PartialEq)]
pub struct NatsAction {
    /// The timeout, and the secrets and placeholders of the keys below.
    pub common: Common,
    /// `nats://host:4222` (or several, comma-separated), its `${ENV}` replaced.
    pub url: String,
    /// The servers as messages name them: no user, no password.
    pub servers: String,
    pub subject: Template,
    /// Publish to a stream and await its acknowledgement, `Nats-Msg-Id` set.
    pub jetstream: bool,
    pub message: Message,
    /// A secret: `token`, its `${ENV}` replaced.
    pub token: Option<String>,
    /// A `.creds` file (JWT and NKey seed), relative to the queue file.
    pub credentials_file: Option<PathBuf>,
    /// A PEM CA to trust (and TLS required), relative to the queue file.
    pub ca_file: Option<PathBuf>,
}

/// Validates `type = "nats"`.
pub fn validate(raw: &RawNatsAction, v: &mut Validator) -> NatsAction {
    let mut common = Common::new(v, raw.timeout, DEFAULT_TIMEOUT);
    let (url, servers) = url(raw, v, &mut common);
    let subject = common
        .template(v, &["action", "subject"], &raw.subject)
        .unwrap_or(Template { parts: vec![] });
    check_subject(&subject, v);
    let message = message::validate(
        RawMessage {
            body: raw.body.as_deref(),
            headers: &raw.headers,
            message_id: raw.message_id.as_deref(),
        },
        v,
        &mut common,
        header_problem,
    );
    let token = raw
        .token
        .as_deref()
        .and_then(|token| common.secret(v, &["action", "token"], token));
    NatsAction {
        url,
        servers,
        subject,
        jetstream: raw.jetstream,
        message,
        token,
        credentials_file: readable(v, "credentials_file", raw.credentials_file.as_ref()),
        ca_file: readable(v, "ca_file", raw.ca_file.as_ref()),
        common,
    }
}

impl ActionKind for NatsAction {
    fn common(&self) -> &Common {
        &self.common
    }

    fn sends_each_item(&self) -> bool {
        true
    }

    fn warnings(&self, queue: &Site<'_>) -> Vec<Finding> {
        if self.jetstream {
            return Vec::new();
        }
        let message = "core NATS (no `jetstream = true`) acknowledges nothing: a message is lost \
                       when no subscriber is listening, or when the server fails before it \
                       passes it on, and its row is marked done all the same; publish to a \
                       JetStream stream with `jetstream = true` for acknowledged messages";
        let at = match queue.line_of(&["action", "jetstream"]) {
            Some(_) => vec!["action", "jetstream"],
            None => vec!["action"],
        };
        vec![queue.finding(Severity::Warning, &at, message)]
    }
}

/// The URL with its `${ENV}` replaced, each server in it checked, and the servers
/// as messages name them.
fn url(raw: &RawNatsAction, v: &mut Validator, common: &mut Common) -> (String, String) {
    let Some(url) = common.secret(v, &["action", "url"], &raw.url) else {
        return (String::new(), String::new());
    };
    let mut shown = Vec::new();
    for one in url.split(',').map(str::trim) {
        match server(one) {
            Ok(server) => shown.push(server),
            Err(why) => {
                let message = format!(
                    "`action.url`: {why}: write nats://host:4222 (tls:// for TLS), or several \
                     separated by commas"
                );
                v.error(&["action", "url"], message);
            }
        }
    }
    (url, shown.join(", "))
}

/// One server of the URL as messages name it (`nats://host:4222`), or why it is not
/// one. Never the user or password it may hold.
pub fn server(url: &str) -> Result<String, String> {
    let addr = url
        .parse::<async_nats::ServerAddr>()
        .map_err(|_| "not a NATS server URL".to_string())?;
    let scheme = addr.into_inner();
    match scheme.scheme() {
        "nats" | "tls" => {}
        other => return Err(format!("{other}:// is not served (nats:// or tls://)")),
    }
    let host = scheme.host_str().unwrap_or("");
    let port = scheme.port().unwrap_or(4222);
    Ok(format!("{}://{host}:{port}", scheme.scheme()))
}

/// A subject is tokens separated by `.`; no spaces, and no wildcards to publish to.
fn check_subject(subject: &Template, v: &mut Validator) {
    if subject.parts.is_empty() {
        v.error(&["action", "subject"], "`action.subject` is empty");
    }
    for part in &subject.parts {
        let Part::Literal(text) = part else { continue };
        if let Some(why) = subject_problem(text) {
            v.error(&["action", "subject"], format!("`action.subject`: {why}"));
            return;
        }
    }
}

/// Why `text` (a subject, or the literal part of one) cannot be published to.
pub fn subject_problem(text: &str) -> Option<String> {
    if text.chars().any(char::is_whitespace) {
        return Some("a subject has no spaces or line breaks".to_string());
    }
    text.split('.')
        .any(|token| token == "*" || token == ">")
        .then(|| "`*` and `>` are wildcards, for subscribers: publish to a whole subject".into())
}

/// Why `name` cannot be a NATS header's name, if it cannot.
fn header_problem(name: &str) -> Option<String> {
    name.parse::<async_nats::HeaderName>()
        .err()
        .map(|_| format!("`{name}` is not a valid header name"))
}

/// `key`'s file, relative to the queue file's directory, if it can be read.
fn readable(v: &mut Validator, key: &str, file: Option<&PathBuf>) -> Option<PathBuf> {
    let path = v.dir.join(file?);
    if let Err(e) = std::fs::metadata(&path).and_then(|_| std::fs::File::open(&path)) {
        let message = format!("`action.{key}`: cannot read {}: {e}", path.display());
        v.error(&["action", key], message);
    }
    Some(path)
}
