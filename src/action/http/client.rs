//! The HTTP client a queue's deliveries share: built once, with the redirect policy,
//! the private-address guard and the certificates its `[action]` table asks for.

use std::error::Error as _;
use std::sync::Arc;
use std::time::Duration;

use reqwest::{redirect, Client, Method, Url};

use super::ssrf::{check_literal, PublicOnly};
use crate::action::CONNECT_TIMEOUT;
use crate::action::ActionError;
use crate::config::value::template::Part;
use super::config::HttpAction;

/// The client, the method, and whether private destinations are refused (the row
/// picks the host, and no opt-out).
pub(super) struct Built {
    pub client: Client,
    pub method: Method,
    pub guarded: bool,
}

/// Builds the client for `config`.
pub(super) fn build(config: &HttpAction) -> Result<Built, ActionError> {
    let guarded = config.host_from_row && !config.allow_private_networks;
    // The host written in the file is trusted; every other host this client may
    // reach (one from the row, or a redirect's) must be public, unless allowed.
    let trusted = if config.host_from_row {
        None
    } else {
        literal_host(config)
    };
    let client = client(&Rules {
        trusted,
        guarded,
        follow_redirects: config.follow_redirects,
        allow_private_networks: config.allow_private_networks,
        https_only: config.https_only,
        timeout: config.common.timeout,
        ca_pem: config.ca_pem.as_deref(),
    })?;
    let method = Method::from_bytes(config.method.as_bytes())
        .map_err(|e| ActionError(format!("`action.method`: {e}")))?;
    Ok(Built {
        client,
        method,
        guarded,
    })
}

/// The http kind's rules for a client: a queue's deliveries follow them, and so
/// does any other sender of tableq's (`[alerts]`' webhook).
pub struct Rules<'a> {
    /// The host written in the file, resolved as it is; `None`: no host is trusted.
    pub trusted: Option<String>,
    /// Every host but the trusted one must resolve to public addresses.
    pub guarded: bool,
    pub follow_redirects: bool,
    pub allow_private_networks: bool,
    pub https_only: bool,
    /// The request's timeout: the connect is given at most this too.
    pub timeout: Duration,
    /// PEM certificates to trust besides the system's.
    pub ca_pem: Option<&'a [u8]>,
}

/// A client built by `rules`: the redirect policy, the private-address guard (after
/// DNS, on every connection), no proxy, the certificates.
pub fn client(rules: &Rules<'_>) -> Result<Client, ActionError> {
    // reqwest is built without a default crypto provider: ring, as for MySQL.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let trusted = rules.trusted.clone();
    let check_redirects = rules.follow_redirects && !rules.allow_private_networks;
    let redirects = if !rules.follow_redirects {
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
        .https_only(rules.https_only)
        // A proxy would resolve names itself, past the private-address check.
        .no_proxy()
        .connect_timeout(CONNECT_TIMEOUT.min(rules.timeout));
    if rules.guarded || check_redirects {
        builder = builder.dns_resolver(Arc::new(PublicOnly { trusted }));
    }
    if let Some(pem) = rules.ca_pem {
        let certificates = reqwest::Certificate::from_pem_bundle(pem)
            .map_err(|e| ActionError(format!("`action.ca_file`: {e}")))?;
        for certificate in certificates {
            builder = builder.add_root_certificate(certificate);
        }
    }
    builder.build().map_err(|e| ActionError(client_error(&e)))
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
