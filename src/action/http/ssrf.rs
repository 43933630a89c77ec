//! Refusing private destinations. When a row chooses where a webhook goes, it must
//! not be able to make tableq call loopback, the private network, link-local
//! addresses (cloud metadata at 169.254.169.254) or the unspecified address. The
//! check runs after DNS resolution, on every new connection, so a name that resolves
//! to 127.0.0.1 is refused as surely as the literal address.

use std::net::SocketAddr;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

pub use crate::config::value::address::{check_literal, is_public, PrivateDestination};

/// A resolver that drops private addresses, and fails when nothing public remains.
/// The `trusted` host — the one written in the queue file — resolves as it is.
#[derive(Debug, Default, Clone)]
pub struct PublicOnly {
    pub trusted: Option<String>,
}

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_string();
        let trusted = self.trusted.as_deref() == Some(host.as_str());
        Box::pin(async move {
            let all: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if trusted {
                return Ok(Box::new(all.into_iter()) as Addrs);
            }
            let public: Vec<SocketAddr> =
                all.iter().copied().filter(|a| is_public(a.ip())).collect();
            if public.is_empty() && !all.is_empty() {
                let addresses = all
                    .iter()
                    .map(|a| a.ip().to_string())
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(Box::new(PrivateDestination { host, addresses }) as Box<_>);
            }
            Ok(Box::new(public.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_numeric_forms_of_loopback() {
        // The URL parser turns numeric IPv4 forms into dotted ones before the check.
        for sneaky in [
            "http://2130706433/",
            "http://0x7f.1/",
            "http://017700000001/",
            "http://127.1/",
        ] {
            let url = reqwest::Url::parse(sneaky).unwrap();
            assert!(check_literal(url.host_str().unwrap()).is_err(), "{sneaky}");
        }
    }
}
