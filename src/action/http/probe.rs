//! What `check` can tell of an HTTP action from a sample row: where the row chooses
//! the host, whether that host is one tableq would refuse (a private address), so
//! that the mistake shows in `check` rather than as every row failing at run time.

use std::net::IpAddr;

use super::ssrf::is_public;
use super::Http;
use futures::future::BoxFuture;

use crate::action::deadline;
use crate::action::{Probe, Probed};
use crate::db::Item;

/// The sample row's destination, when the row chooses the host and private
/// networks are refused: a warning if every address it resolves to is private.
impl Probe for Http {
    fn probe<'a>(&'a self, queue: &'a str, sample: Option<&'a Item>) -> BoxFuture<'a, Vec<Probed>> {
        let unanswered = Probed::error("url", "no answer from downstream");
        Box::pin(deadline::probe(self.config.common.timeout, look(self, queue, sample), unanswered))
    }
}

async fn look(http: &Http, queue: &str, sample: Option<&Item>) -> Vec<Probed> {
    let Some(item) = sample.filter(|_| http.guarded) else {
        return Vec::new();
    };
    let key = item.key_text();
    let url = match http.url(item, queue) {
        Ok(url) => url,
        Err(why) => {
            return vec![Probed::warning(
                "url",
                format!("the sample row ({key}) cannot be sent: {why}"),
            )]
        }
    };
    let Some(host) = url.host_str() else {
        return Vec::new();
    };
    let port = url.port_or_known_default().unwrap_or(443);
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addresses: Vec<IpAddr> = match tokio::net::lookup_host((bare, port)).await {
        Ok(found) => found.map(|a| a.ip()).collect(),
        Err(_) => return Vec::new(), // the run will say so for its rows
    };
    if addresses.is_empty() || addresses.iter().any(|ip| is_public(*ip)) {
        return Vec::new();
    }
    let listed: Vec<String> = addresses.iter().map(IpAddr::to_string).collect();
    vec![Probed::warning(
        "url",
        format!(
            "the sample row ({key}) sends to {host}, a private address ({}): the row chooses \
             the host, and tableq refuses private networks then, so such rows fail; set \
             allow_private_networks = true if the receivers are on your own network",
            listed.join(", ")
        ),
    )]
}
