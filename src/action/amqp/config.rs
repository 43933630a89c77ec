//! `type = "amqp"`: the `[action]` table of a RabbitMQ publish (AMQP 0-9-1) — its
//! TOML keys, and what each must be. Publishing is `crate::action::amqp`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use lapin::uri::{AMQPScheme, AMQPUri};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::config::value::duration::DurationText;
use crate::config::action::kind::{ActionKind, Common, Samples};
use crate::action::message::config::{self as message, Message, RawMessage};
use crate::config::value::template::{Part, Template};
use crate::config::validate::validator::Validator;
use crate::config::Site;
use crate::diagnostic::{Finding, Severity};

/// `[action] timeout` when the file does not set it: as for HTTP.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// What a queue file may write in `type` meaning this kind, and what it is called
/// then: the registry answers `type = "webhook"` with "a webhook is `type = \"http\"`".
pub const WRITTEN_AS: (&str, &[&str]) = ("RabbitMQ", &["rabbitmq"]);

/// The longest exchange name or routing key AMQP can carry (a short string).
const SHORT_STRING: usize = 255;

/// type = "amqp": one persistent message per item to RabbitMQ (AMQP 0-9-1), done
/// once the broker confirmed it (publisher confirms).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawAmqpAction {
    /// amqp://user:password@host:port/vhost (%2f is the vhost "/"); amqps:// for TLS.
    /// ${NAME} and ${file:/PATH} are replaced.
    pub url: String,
    /// The exchange. Default "": the default exchange, which routes by queue name.
    pub exchange: Option<String>,
    /// The routing key; {column} placeholders allowed, as they are; at most 255 bytes.
    pub routing_key: Option<String>,
    /// The body: default, the row as a JSON object; or "{column}", a column that
    /// already holds the payload, as it is.
    pub body: Option<String>,
    /// The content_type property. Default application/json for the row as JSON,
    /// else none.
    pub content_type: Option<String>,
    /// AMQP headers; values take {column} placeholders.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// An unroutable message fails its row. Default true.
    pub mandatory: Option<bool>,
    /// The message_id property, with {column} placeholders. Default "<queue>_<key>".
    pub message_id: Option<String>,
    /// Connect, publish and confirm. Default "30s".
    #[serde(default, with = "humantime_serde")]
    #[schemars(with = "Option<DurationText>")]
    pub timeout: Option<Duration>,
    /// For amqps://: trust this CA too (PEM; relative to the queue file).
    pub ca_file: Option<PathBuf>,
}

/// `type = "amqp"`: one persistent message per item, confirmed by the broker.
#[derive(Debug, Clone, PartialEq)]
pub struct AmqpAction {
    /// The timeout, and the secrets and placeholders of the keys below.
    pub common: Common,
    /// `amqp://user:password@host:5672/vhost`, its `${ENV}` replaced: a secret.
    pub url: String,
    /// `host:port` and the vhost, for messages (never the password).
    pub server: String,
    /// `""`: the default exchange, which routes by queue name.
    pub exchange: String,
    pub routing_key: Template,
    pub message: Message,
    /// The `content_type` property: `application/json` for the row as JSON.
    pub content_type: Option<String>,
    /// An unroutable message comes back (basic.return) and fails its item.
    pub mandatory: bool,
    /// PEM certificates to trust for `amqps://`, besides the system's.
    pub ca_pem: Option<String>,
}

/// Validates `type = "amqp"`.
pub fn validate(raw: &RawAmqpAction, v: &mut Validator) -> AmqpAction {
    let mut common = Common::new(v, raw.timeout, DEFAULT_TIMEOUT);
    let (url, server) = url(raw, v, &mut common);
    let exchange = raw.exchange.clone().unwrap_or_default();
    check_exchange(&exchange, v);
    let routing_key = raw.routing_key.as_deref().unwrap_or("");
    let routing_key = common
        .template(v, &["action", "routing_key"], routing_key)
        .unwrap_or(Template { parts: vec![] });
    check_routing_key(&exchange, &routing_key, raw.routing_key.is_some(), v);
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
    let content_type = raw.content_type.clone().or_else(|| {
        message
            .body
            .is_none()
            .then(|| "application/json".to_string())
    });
    AmqpAction {
        url,
        server,
        exchange,
        routing_key,
        message,
        content_type,
        mandatory: raw.mandatory.unwrap_or(true),
        ca_pem: ca_pem(raw, v),
        common,
    }
}

impl ActionKind for AmqpAction {
    fn common(&self) -> &Common {
        &self.common
    }

    fn sends_each_item(&self) -> bool {
        true
    }

    fn warnings(&self, queue: &Site<'_>) -> Vec<Finding> {
        if self.mandatory {
            return Vec::new();
        }
        let message = "`action.mandatory = false`: a message no queue is bound for is dropped by \
                       the broker and its row marked done all the same; leave `mandatory` out \
                       (true) so that it fails its row instead";
        vec![queue.finding(Severity::Warning, &["action", "mandatory"], message)]
    }

    fn samples(&self) -> Samples {
        // A returned message's reply code (312 NO_ROUTE) is its `:status`.
        Samples {
            success_status: None,
            failure_status: Some(312),
            output: false,
        }
    }
}

/// The URL with its `${ENV}` replaced, and the server it names (for messages).
fn url(raw: &RawAmqpAction, v: &mut Validator, common: &mut Common) -> (String, String) {
    let Some(url) = common.secret(v, &["action", "url"], &raw.url) else {
        return (String::new(), String::new());
    };
    match amqp_uri(&url) {
        Ok(parsed) => {
            let server = server_of(&parsed);
            (url, server)
        }
        Err(e) => {
            let message = format!(
                "`action.url` is not an AMQP URL like amqp://user:password@host:5672/vhost \
                 (amqps:// for TLS): {e}"
            );
            v.error(&["action", "url"], message);
            (url, String::new())
        }
    }
}

/// `url` read as lapin reads it — except the host: lapin's parser takes only a
/// domain name, and an IP address (`amqp://10.0.0.5`) would become `localhost`.
/// Its words never repeat the URL, which holds a password.
pub fn amqp_uri(url: &str) -> Result<AMQPUri, String> {
    let mut parsed = url.parse::<AMQPUri>().map_err(|e| e.replace(url, "…"))?;
    // An IPv6 address without its brackets: lapin resolves (host, port).
    let host = reqwest::Url::parse(url).ok().and_then(|u| {
        u.host_str()
            .map(|h| h.trim_start_matches('[').trim_end_matches(']').to_string())
    });
    if let Some(host) = host.filter(|h| !h.is_empty()) {
        parsed.authority.host = host;
    }
    Ok(parsed)
}

/// `host:port` (and the vhost unless it is `/`), as messages name the broker.
pub fn server_of(uri: &AMQPUri) -> String {
    let scheme = match uri.scheme {
        AMQPScheme::AMQP => "amqp",
        AMQPScheme::AMQPS => "amqps",
    };
    let host = format!("{scheme}://{}:{}", uri.authority.host, uri.authority.port);
    match uri.vhost.as_str() {
        "/" => host,
        vhost => format!("{host} (vhost {vhost:?})"),
    }
}

/// RabbitMQ's rule for names: letters, digits, `-`, `_`, `.` and `:`.
fn check_exchange(exchange: &str, v: &mut Validator) {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':');
    if exchange.len() > SHORT_STRING || !exchange.chars().all(allowed) {
        v.error(
            &["action", "exchange"],
            format!(
                "`action.exchange` = {exchange:?} is not an exchange name: at most 255 letters, \
                 digits, `-`, `_`, `.` and `:`"
            ),
        );
    }
}

/// The default exchange routes by queue name: a routing key is needed there.
fn check_routing_key(exchange: &str, routing_key: &Template, written: bool, v: &mut Validator) {
    let literal: usize = routing_key
        .parts
        .iter()
        .map(|part| match part {
            Part::Literal(text) => text.len(),
            Part::Placeholder(_) => 0,
        })
        .sum();
    if literal > SHORT_STRING {
        let message = "`action.routing_key` is longer than 255 bytes, the most AMQP carries";
        v.error(&["action", "routing_key"], message);
    }
    if exchange.is_empty() && routing_key.parts.is_empty() {
        let at: &[&str] = match written {
            true => &["action", "routing_key"],
            false => &["action"],
        };
        v.error(
            at,
            "`action.routing_key` is empty, and the default exchange (`exchange = \"\"`) routes \
             by queue name: set `routing_key` to the queue's name, or name an `exchange`",
        );
    }
}

/// Why `name` cannot be an AMQP header's name, if it cannot.
fn header_problem(name: &str) -> Option<String> {
    (name.is_empty() || name.len() > SHORT_STRING)
        .then(|| format!("header `{name}`: a header name is 1 to 255 bytes"))
}

/// The certificates of `ca_file`, relative to the queue file's directory.
fn ca_pem(raw: &RawAmqpAction, v: &mut Validator) -> Option<String> {
    let is_pem = |pem: &[u8]| {
        std::str::from_utf8(pem).is_ok_and(|text| text.contains("-----BEGIN CERTIFICATE-----"))
    };
    let pem = v.ca_file(raw.ca_file.as_ref(), is_pem)?;
    String::from_utf8(pem).ok()
}
