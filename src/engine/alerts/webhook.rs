//! Where alerts go: one POST of a JSON body to `[alerts] webhook`, with a client
//! built by the http kind's rules (its timeout, TLS, no proxy, no redirects, and
//! private addresses refused after DNS unless the section allows them). Any 2xx is
//! delivered.

use std::error::Error as _;

use reqwest::Client;

use crate::action::http::client::{client, Rules};
use crate::action::http::config::DEFAULT_TIMEOUT;
use crate::action::ActionError;
use crate::config::queue::alerts::AlertsConfig;

/// A queue's webhook, ready to send.
pub struct Webhook {
    client: Client,
    url: String,
}

impl Webhook {
    pub fn new(alerts: &AlertsConfig) -> Result<Webhook, ActionError> {
        let client = client(&Rules {
            trusted: None,
            guarded: !alerts.allow_private_networks,
            follow_redirects: false,
            allow_private_networks: alerts.allow_private_networks,
            https_only: false,
            timeout: DEFAULT_TIMEOUT,
            ca_pem: None,
        })?;
        Ok(Webhook {
            client,
            url: alerts.webhook.clone(),
        })
    }

    /// POSTs `body`; why it was not delivered, in one line (never the URL: its path
    /// may be the webhook's key).
    pub async fn send(&self, body: &serde_json::Value) -> Result<(), String> {
        let sent = self
            .client
            .post(&self.url)
            .timeout(DEFAULT_TIMEOUT)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string())
            .send()
            .await;
        match sent {
            Ok(answer) if answer.status().is_success() => Ok(()),
            Ok(answer) => Err(format!("the webhook answered HTTP {}", answer.status())),
            Err(e) => Err(format!("the webhook could not be reached: {}", causes(&e))),
        }
    }
}

/// A request's error with its causes, without the URL.
fn causes(error: &reqwest::Error) -> String {
    let first = if error.is_timeout() {
        format!(
            "timed out after {}",
            crate::duration::rounded(DEFAULT_TIMEOUT)
        )
    } else if error.is_connect() {
        "cannot connect".to_string()
    } else {
        "the request failed".to_string()
    };
    let mut said = vec![first];
    let mut source = error.source();
    while let Some(cause) = source {
        said.push(cause.to_string());
        source = cause.source();
    }
    said.dedup();
    said.join(": ")
}
