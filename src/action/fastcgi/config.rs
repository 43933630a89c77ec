//! `type = "fastcgi"`: the `[action]` table of a script run by a FastCGI server
//! (PHP-FPM) — where the server listens, the script, the timeout, signing. Sending
//! is `crate::action::fastcgi`.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::config::value::duration::DurationText;
use crate::config::interpolate;
use crate::config::action::kind::{ActionKind, Common, Samples};
use crate::action::http::config::{signing_secret, SigningKey};
use crate::config::validate::validator::Validator;
use crate::config::Site;
use crate::diagnostic::{Finding, Severity};

/// `[action] timeout` when the file does not set it.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// What a queue file may write in `type` meaning this kind, and what it is called
/// then: the registry answers `type = "webhook"` with "a webhook is `type = \"http\"`".
pub const WRITTEN_AS: (&str, &[&str]) = ("", &[]);

/// `[action] max_connections` when the file does not set it: PHP-FPM's own default
/// `pm.max_children`.
pub const DEFAULT_MAX_CONNECTIONS: usize = 5;

/// type = "fastcgi": one request per item to a FastCGI server (PHP-FPM), which runs
/// `script` with the row as a JSON POST body; TABLEQ_QUEUE and TABLEQ_KEY are
/// params. The script's Status decides as an HTTP answer does — any 2xx is success
/// — unless PHP died on the way (its fatal error in the answer: a failure whatever
/// the status) or `done_header` is set and the answer lacks it.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawFastcgiAction {
    /// Where the server listens: "unix:/run/php/php8.2-fpm.sock" or "127.0.0.1:9000".
    pub address: String,
    /// The script the server runs (SCRIPT_FILENAME): its absolute path on the
    /// server's host.
    pub script: String,
    /// Connect, send and the script's whole answer. Default "30s".
    #[serde(default, with = "humantime_serde")]
    #[schemars(with = "Option<DurationText>")]
    pub timeout: Option<Duration>,
    /// Standard Webhooks signing, as for type = "http": whsec_<base64> (several
    /// separated by spaces); the script finds the headers in $_SERVER
    /// (HTTP_WEBHOOK_ID, HTTP_WEBHOOK_TIMESTAMP, HTTP_WEBHOOK_SIGNATURE).
    pub signing_secret: Option<String>,
    /// A header the script sends when its work is done, e.g. "Tableq-Done": set,
    /// only an answer carrying it counts as done, so a script that stops anywhere
    /// before its end (exit(), die(), a fatal error) is never a success. Unset, any
    /// 2xx is (unless PHP's fatal error is in the answer).
    pub done_header: Option<String>,
    /// The most requests in PHP-FPM at once, across the queue's workers: the pool's
    /// pm.max_children, or fewer (a kept connection holds a child). Further items
    /// wait in tableq for a free connection, not counted against their timeout
    /// (unless a lease that is never renewed must cover the wait). Per queue and per
    /// copy: queues and copies on one pool add up. Default 5 (PHP-FPM's default
    /// pm.max_children).
    pub max_connections: Option<usize>,
}

/// `type = "fastcgi"`: one request per item, the row as its JSON body.
#[derive(Debug, Clone, PartialEq)]
pub struct FastcgiAction {
    /// The timeout, and the secrets of the keys below.
    pub common: Common,
    pub address: Address,
    /// SCRIPT_FILENAME.
    pub script: String,
    /// Standard Webhooks signing keys; one signature each.
    pub signing_keys: Vec<SigningKey>,
    /// The header that says the script is done, if the queue asks for one.
    pub done_header: Option<String>,
    /// The most requests in the server at once.
    pub max_connections: usize,
}

/// Where a FastCGI server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    /// `unix:/path`: a socket on this host.
    Unix(PathBuf),
    /// `host:port`.
    Tcp { host: String, port: u16 },
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Unix(path) => write!(f, "unix:{}", path.display()),
            Address::Tcp { host, port } if host.contains(':') => write!(f, "[{host}]:{port}"),
            Address::Tcp { host, port } => write!(f, "{host}:{port}"),
        }
    }
}

impl Address {
    /// `unix:/path`, `host:port` or `[v6]:port`; `Err` says what is wrong and what
    /// would be right.
    pub fn parse(text: &str) -> Result<Address, String> {
        let example = "write \"unix:/run/php/php8.2-fpm.sock\" or \"127.0.0.1:9000\"";
        if let Some(path) = text.strip_prefix("unix:") {
            if !path.starts_with('/') {
                return Err(format!(
                    "`action.address` = {text:?}: a socket's path must be absolute; {example}"
                ));
            }
            return Ok(Address::Unix(PathBuf::from(path)));
        }
        let Some((host, port)) = text.rsplit_once(':') else {
            return Err(format!(
                "`action.address` = {text:?} names no port; {example}"
            ));
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        match port.parse::<u16>() {
            Ok(port) if port > 0 && !host.is_empty() && !host.contains('/') => Ok(Address::Tcp {
                host: host.to_string(),
                port,
            }),
            _ => Err(format!(
                "`action.address` = {text:?} is neither a unix socket nor host:port; {example}"
            )),
        }
    }

    /// True when the server is on this host (a socket, or a loopback address), so
    /// that `check` can look for the script itself.
    pub fn is_local(&self) -> bool {
        match self {
            Address::Unix(_) => true,
            Address::Tcp { host, .. } => {
                host == "localhost"
                    || host
                        .parse::<std::net::IpAddr>()
                        .is_ok_and(|ip| ip.is_loopback())
            }
        }
    }
}

/// Validates `type = "fastcgi"`.
pub fn validate(raw: &RawFastcgiAction, v: &mut Validator) -> FastcgiAction {
    let mut common = Common::new(v, raw.timeout, DEFAULT_TIMEOUT);
    let address = plain(v, "address", &raw.address).and_then(|text| {
        Address::parse(&text)
            .map_err(|message| v.error(&["action", "address"], message))
            .ok()
    });
    let script = plain(v, "script", &raw.script).unwrap_or_default();
    if !script.is_empty() && !script.starts_with('/') {
        v.error(
            &["action", "script"],
            format!(
                "`action.script` = {script:?} must be the script's absolute path on the \
                 FastCGI server's host (PHP-FPM's SCRIPT_FILENAME), e.g. \"/srv/app/jobs/send_email.php\""
            ),
        );
    }
    let signing_keys = signing_secret(raw.signing_secret.as_deref(), v, &mut common);
    FastcgiAction {
        common,
        address: address.unwrap_or_else(|| Address::Unix(PathBuf::from("/"))),
        script,
        signing_keys,
        done_header: done_header(v, raw.done_header.as_deref()),
        max_connections: max_connections(v, raw.max_connections),
    }
}

/// `done_header`, a header's name (letters, digits and `-`).
fn done_header(v: &mut Validator, name: Option<&str>) -> Option<String> {
    let name = name?.trim();
    let valid = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if !valid {
        v.error(
            &["action", "done_header"],
            format!(
                "`action.done_header` = {name:?} is not a header's name: use letters, digits \
                 and `-`, such as \"Tableq-Done\" (the script sends `header('Tableq-Done: 1')`)"
            ),
        );
    }
    Some(name.to_string())
}

/// `max_connections`, at least 1.
fn max_connections(v: &mut Validator, max: Option<usize>) -> usize {
    match max {
        None => DEFAULT_MAX_CONNECTIONS,
        Some(0) => {
            v.error(
                &["action", "max_connections"],
                "`action.max_connections` = 0: at least 1; set it to the pool's \
                 pm.max_children (or fewer), or leave it out for 5",
            );
            DEFAULT_MAX_CONNECTIONS
        }
        Some(max) => max,
    }
}

/// The value of `key`, its `${NAME}` replaced; `None` after saying why not.
fn plain(v: &mut Validator, key: &str, text: &str) -> Option<String> {
    interpolate(text, v.env)
        .map_err(|e| v.error(&["action", key], format!("`action.{key}`: {e}")))
        .ok()
}

impl ActionKind for FastcgiAction {
    fn common(&self) -> &Common {
        &self.common
    }

    fn reports_progress(&self) -> bool {
        true
    }

    fn warnings(&self, queue: &Site<'_>) -> Vec<Finding> {
        let (at_once, max) = (queue.actions_at_once, self.max_connections);
        if at_once <= max {
            return Vec::new();
        }
        let message = format!(
            "the queue runs up to {at_once} requests at once (workers × batch, within \
             max_in_flight), but `action.max_connections` = {max}: \
             {} of them wait in tableq for a free connection (not counted against the timeout). \
             Raise max_connections to the pool's pm.max_children if it has more children, or \
             lower workers or batch",
            at_once - max
        );
        vec![queue.finding(Severity::Warning, &["action", "max_connections"], message)]
    }

    fn samples(&self) -> Samples {
        Samples {
            success_status: Some(200),
            failure_status: Some(500),
            output: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_socket_or_a_host_and_port() {
        assert_eq!(
            Address::parse("unix:/run/php/fpm.sock"),
            Ok(Address::Unix(PathBuf::from("/run/php/fpm.sock")))
        );
        let tcp = Address::parse("127.0.0.1:9000").unwrap();
        assert_eq!(tcp.to_string(), "127.0.0.1:9000");
        assert!(tcp.is_local());
        let v6 = Address::parse("[::1]:9000").unwrap();
        assert_eq!(v6.to_string(), "[::1]:9000");
        assert!(v6.is_local());
        assert!(!Address::parse("fpm.internal:9000").unwrap().is_local());
        for wrong in [
            "unix:run/fpm.sock",
            "127.0.0.1",
            "host:0",
            "host:http",
            ":9000",
        ] {
            let error = Address::parse(wrong).unwrap_err();
            assert!(
                error.contains("unix:/run/php/php8.2-fpm.sock"),
                "{wrong}: {error}"
            );
        }
    }
}
