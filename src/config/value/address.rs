//! Whether an address is public: loopback, the private networks, link-local
//! addresses (cloud metadata at 169.254.169.254) and the unspecified address are
//! not. The one rule the http kind's guard (`action::http`) and `[alerts] webhook`
//! share.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// True for addresses a row may send tableq to.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_public_v4(v4),
            None => is_public_v6(v6),
        },
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    let shared = a == 100 && (64..128).contains(&b); // 100.64.0.0/10, carrier-grade NAT
    let benchmarking = a == 198 && (b == 18 || b == 19); // 198.18.0.0/15
    let reserved = a >= 240; // 240.0.0.0/4
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || shared
        || benchmarking
        || reserved
        || a == 0)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let segments = ip.segments();
    let first = segments[0];
    let unique_local = first & 0xfe00 == 0xfc00; // fc00::/7
    let link_local = first & 0xffc0 == 0xfe80; // fe80::/10
    let site_local = first & 0xffc0 == 0xfec0; // fec0::/10
                                               // Addresses that carry an IPv4 address: judge that one.
    let embedded = if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        Some(Ipv4Addr::new(
            (segments[6] >> 8) as u8,
            segments[6] as u8,
            (segments[7] >> 8) as u8,
            segments[7] as u8,
        )) // NAT64
    } else if first == 0x2002 {
        Some(Ipv4Addr::new(
            (segments[1] >> 8) as u8,
            segments[1] as u8,
            (segments[2] >> 8) as u8,
            segments[2] as u8,
        )) // 6to4
    } else {
        None
    };
    if let Some(v4) = embedded {
        return is_public_v4(v4);
    }
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || unique_local
        || link_local
        || site_local)
}

/// Why a destination was refused; it ends up in the item's `:error`.
#[derive(Debug, thiserror::Error)]
#[error("refused: {host} is a private address ({addresses}); set allow_private_networks = true to allow it")]
pub struct PrivateDestination {
    pub host: String,
    pub addresses: String,
}

/// Refuses an IP-literal host that is not public (resolvers never see those).
pub fn check_literal(host: &str) -> Result<(), PrivateDestination> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<IpAddr>() {
        Ok(ip) if !is_public(ip) => Err(PrivateDestination {
            host: host.to_string(),
            addresses: ip.to_string(),
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_public_from_private() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in [
            "93.184.216.34",
            "1.1.1.1",
            "2606:4700::1111",
            "64:ff9b::101:101",
        ] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
        assert!(check_literal("[::1]").is_err());
        assert!(check_literal("example.com").is_ok());
    }
}
