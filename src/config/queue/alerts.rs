//! `[alerts]`: a webhook told when the queue is in trouble — its oldest row waits too
//! long, too many items fail in a minute, rows give up — once per breach across
//! every copy of tableq (the database holds the breach's state: `engine::alerts`),
//! and again when it clears. The webhook goes by the http kind's rules: a private
//! or loopback address only with `allow_private_networks = true`.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::config::validate::validator::Validator;
use crate::config::value::address::check_literal;
use crate::config::value::duration::DurationText;
use crate::config::{interpolate_secret, SecretFile};

/// `[alerts]`: a webhook told once per breach, across every copy, and again when it
/// clears. At least one condition.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawAlerts {
    /// Where the alerts go: an http(s) URL, such as a Slack incoming webhook.
    /// ${NAME} comes from the environment, ${file:/PATH} from a file. Required.
    pub webhook: String,
    /// "json" (default): {"queue", "alert", "state", "value", "limit", "host",
    /// "at"}; "slack": {"text": "…"}, for a Slack incoming webhook.
    #[schemars(extend("enum" = ["json", "slack"]))]
    pub format: Option<String>,
    /// Fires while the oldest waiting row has waited longer than this, e.g. "5m"
    /// (needs `waiting_since`).
    #[serde(default, with = "humantime_serde")]
    #[schemars(with = "Option<DurationText>")]
    pub oldest_waiting: Option<Duration>,
    /// Fires while more than this many items failed in the last complete minute,
    /// summed over every copy (from the history tables).
    pub failed_per_minute: Option<u32>,
    /// true: fires while `[failed] select` returns rows (needs `[failed]`).
    pub gave_up: Option<bool>,
    /// Send to a loopback or private address (refused by default, as the http
    /// kind refuses them).
    #[serde(default)]
    pub allow_private_networks: bool,
}

/// `[alerts]`, validated.
#[derive(Clone, PartialEq)]
pub struct AlertsConfig {
    /// The URL, its `${…}` replaced: a secret (a Slack webhook's path is its key),
    /// which `Debug` does not show.
    pub webhook: String,
    pub format: AlertFormat,
    /// At least one.
    pub conditions: Vec<Condition>,
    pub allow_private_networks: bool,
}

impl std::fmt::Debug for AlertsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlertsConfig")
            .field("webhook", &"…")
            .field("format", &self.format)
            .field("conditions", &self.conditions)
            .field("allow_private_networks", &self.allow_private_networks)
            .finish()
    }
}

/// What an alert's message looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlertFormat {
    /// `{"queue":…, "alert":…, "state":…, "value":…, "limit":…, "host":…, "at":…}`
    Json,
    /// `{"text":"…"}`
    Slack,
}

/// One condition of `[alerts]`: each fires and clears on its own.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Condition {
    /// The oldest waiting row has waited longer than this.
    OldestWaiting(Duration),
    /// More than this many items failed in the last complete minute, every copy's.
    FailedPerMinute(u32),
    /// `[failed] select` returns rows.
    GaveUp,
}

impl Condition {
    /// Its key in `[alerts]`, which is also the alert's name in a message and in
    /// `tableq_alerts`.
    pub fn name(&self) -> &'static str {
        match self {
            Condition::OldestWaiting(_) => "oldest_waiting",
            Condition::FailedPerMinute(_) => "failed_per_minute",
            Condition::GaveUp => "gave_up",
        }
    }

    /// Its limit as a number: seconds, failures, or rows (0: any row).
    pub fn limit(&self) -> f64 {
        match self {
            Condition::OldestWaiting(limit) => limit.as_secs_f64(),
            Condition::FailedPerMinute(limit) => f64::from(*limit),
            Condition::GaveUp => 0.0,
        }
    }
}

/// What the rest of the queue file says that `[alerts]`' conditions need.
pub(crate) struct Needs {
    /// The queue sets `waiting_since` (for `oldest_waiting`).
    pub waiting_since: bool,
    /// The queue has `[failed]` (for `gave_up`).
    pub failed: bool,
}

/// Validates `[alerts]`.
pub(crate) fn validate(v: &mut Validator, raw: &RawAlerts, needs: Needs) -> Option<AlertsConfig> {
    let webhook = webhook(v, raw);
    let format = match raw.format.as_deref() {
        None | Some("json") => AlertFormat::Json,
        Some("slack") => AlertFormat::Slack,
        Some(other) => {
            let message =
                format!("`alerts.format` = {other:?} is not a format: use \"json\" or \"slack\"");
            v.error(&["alerts", "format"], message);
            AlertFormat::Json
        }
    };
    let conditions = conditions(v, raw, &needs);
    Some(AlertsConfig {
        webhook: webhook?,
        format,
        conditions,
        allow_private_networks: raw.allow_private_networks,
    })
}

/// The conditions, each checked against what it needs; at least one.
fn conditions(v: &mut Validator, raw: &RawAlerts, needs: &Needs) -> Vec<Condition> {
    let mut conditions = Vec::new();
    if let Some(written) = raw.oldest_waiting {
        let at = ["alerts", "oldest_waiting"];
        let limit = v.positive(&at, Some(written), written);
        if !needs.waiting_since {
            let message = "`alerts.oldest_waiting` needs `waiting_since`: name the select's \
                           column that holds when a row started waiting, e.g. waiting_since = \
                           \"created_at\"";
            v.error(&at, message);
        }
        conditions.push(Condition::OldestWaiting(limit));
    }
    if let Some(limit) = raw.failed_per_minute {
        conditions.push(Condition::FailedPerMinute(limit));
    }
    if raw.gave_up == Some(true) {
        if !needs.failed {
            let message = "`alerts.gave_up` needs a `[failed]` table: its select names the rows \
                           that gave up";
            v.error(&["alerts", "gave_up"], message);
        }
        conditions.push(Condition::GaveUp);
    }
    if conditions.is_empty() {
        let message = "`[alerts]` names no condition: set `oldest_waiting` (e.g. \"5m\"), \
                       `failed_per_minute` (e.g. 10) or `gave_up = true`";
        v.error(&["alerts"], message);
    }
    conditions
}

/// `webhook`, its `${…}` replaced: an http(s) URL whose host is public, unless the
/// section allows private networks. The message names the host, never the whole
/// URL (its path may be the webhook's key).
fn webhook(v: &mut Validator, raw: &RawAlerts) -> Option<String> {
    let at = ["alerts", "webhook"];
    let url = match interpolate_secret(&raw.webhook, v.env) {
        Ok(url) => url,
        Err(e) => {
            v.error(&at, format!("`alerts.webhook`: {e}"));
            return None;
        }
    };
    let parsed = match reqwest::Url::parse(url.trim()) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => parsed,
        Ok(parsed) => {
            let message = format!(
                "`alerts.webhook` must be an http:// or https:// URL, not {}://",
                parsed.scheme()
            );
            v.error(&at, message);
            return None;
        }
        Err(e) => {
            let message = format!("`alerts.webhook` is not a URL ({e}): write it whole, e.g. \"https://hooks.slack.com/services/…\"");
            v.error(&at, message);
            return None;
        }
    };
    let host = parsed.host_str().unwrap_or_default();
    if !raw.allow_private_networks && is_private_host(host) {
        let message = format!(
            "`alerts.webhook` points at {host}, a loopback or private address: alerts go to \
             public addresses only, unless the section sets `allow_private_networks = true`"
        );
        v.error(&at, message);
    }
    Some(url.trim().to_string())
}

/// A host written as a private address, or a name for this machine (a name that
/// only resolves to private addresses is refused when the alert is sent).
fn is_private_host(host: &str) -> bool {
    let name = host.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost" || name.ends_with(".localhost") || check_literal(host).is_err()
}

/// The `${VARS}` the webhook names (a command must not be handed them).
pub(crate) fn secret_variables(raw: &RawAlerts) -> Vec<String> {
    crate::config::variables(&raw.webhook)
}

/// The `${file:…}`s the webhook is read from.
pub(crate) fn secret_files(raw: &RawAlerts) -> Vec<SecretFile> {
    crate::config::files(&raw.webhook)
        .into_iter()
        .map(|path| SecretFile {
            path,
            key: vec!["alerts".into(), "webhook".into()],
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knows_private_hosts() {
        for private in [
            "127.0.0.1",
            "localhost",
            "api.localhost",
            "[::1]",
            "10.0.0.8",
        ] {
            assert!(is_private_host(private), "{private}");
        }
        for public in ["hooks.slack.com", "93.184.216.34"] {
            assert!(!is_private_host(public), "{public}");
        }
    }
}
