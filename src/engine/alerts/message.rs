//! An alert's message: `json` (one object a program reads) or `slack` (a line a
//! person reads, in Slack's incoming-webhook shape).

use std::time::{Duration, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::config::queue::alerts::AlertFormat;
use crate::duration::rounded;

/// What one message tells: a state of one alert of one queue.
#[derive(Debug, Clone, PartialEq)]
pub struct Message<'a> {
    pub queue: &'a str,
    /// `oldest_waiting`, `failed_per_minute` or `gave_up`.
    pub alert: &'a str,
    pub firing: bool,
    /// What was seen when the state changed, and the limit.
    pub value: f64,
    pub limit: f64,
    /// The host of the copy that saw it change.
    pub host: &'a str,
    /// When it changed: unix time, in seconds.
    pub at: f64,
}

impl Message<'_> {
    /// `firing` or `resolved`.
    pub fn state(&self) -> &'static str {
        match self.firing {
            true => "firing",
            false => "resolved",
        }
    }

    /// The body to POST, in `format`.
    pub fn body(&self, format: AlertFormat) -> Value {
        match format {
            AlertFormat::Json => json!({
                "queue": self.queue,
                "alert": self.alert,
                "state": self.state(),
                "value": self.value,
                "limit": self.limit,
                "host": self.host,
                "at": self.at_text(),
            }),
            AlertFormat::Slack => json!({ "text": self.text() }),
        }
    }

    /// When it changed, as RFC 3339 in UTC.
    fn at_text(&self) -> String {
        let at = UNIX_EPOCH + Duration::from_secs_f64(self.at.max(0.0));
        humantime::format_rfc3339_seconds(at).to_string()
    }

    /// One line a person reads.
    pub fn text(&self) -> String {
        let mark = match self.firing {
            true => ":rotating_light: firing",
            false => ":white_check_mark: resolved",
        };
        format!(
            "{mark}: tableq queue `{}`: {} (seen by {} at {})",
            self.queue,
            self.what(),
            self.host,
            self.at_text()
        )
    }

    /// What was seen, against the limit.
    fn what(&self) -> String {
        let (value, limit) = (self.value, self.limit);
        match (self.alert, self.firing) {
            ("oldest_waiting", true) => format!(
                "the oldest waiting row has waited {}, longer than {}",
                seconds(value),
                seconds(limit)
            ),
            ("oldest_waiting", false) => format!(
                "the oldest waiting row has waited {}, within {}",
                seconds(value),
                seconds(limit)
            ),
            ("failed_per_minute", true) => {
                format!("{value} items failed in a minute, more than {limit}")
            }
            ("failed_per_minute", false) => {
                format!("{value} items failed in the last minute, at most {limit}")
            }
            ("gave_up", true) => format!("{value} rows gave up (`[failed] select` returns them)"),
            ("gave_up", false) => "no row waits in `[failed] select` any more".to_string(),
            (other, _) => format!("{other} = {value} (limit {limit})"),
        }
    }
}

fn seconds(value: f64) -> String {
    rounded(Duration::from_secs_f64(value.max(0.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(firing: bool) -> Message<'static> {
        Message {
            queue: "email",
            alert: "oldest_waiting",
            firing,
            value: 362.0,
            limit: 300.0,
            host: "web-1",
            at: 1_796_000_000.0,
        }
    }

    #[test]
    fn says_it_as_json_and_for_slack() {
        let body = message(true).body(AlertFormat::Json);
        assert_eq!(body["state"], "firing");
        assert_eq!(body["alert"], "oldest_waiting");
        assert_eq!(body["limit"], 300.0);
        assert_eq!(body["at"], "2026-11-30T00:53:20Z");
        let slack = message(false).body(AlertFormat::Slack);
        assert_eq!(
            slack["text"],
            ":white_check_mark: resolved: tableq queue `email`: the oldest waiting row has \
             waited 6m 2s, within 5m (seen by web-1 at 2026-11-30T00:53:20Z)"
        );
    }
}
