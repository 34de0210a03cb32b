//! Relay identity for URLs that come from strangers' relay lists: one spelling per relay, and
//! refusal of what no client should dial.

use std::net::{Ipv4Addr, Ipv6Addr};

use url::{Host, Url};

/// Longest relay URL taken from a list (256 bytes): real ones are a few dozen.
pub const MAX_URL_LEN: usize = 256;

/// Why a URL from a relay list is not a relay to route to.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BadRelayUrl {
    /// Longer than [`MAX_URL_LEN`].
    TooLong,
    /// Not a URL, or not ws:// or wss://, or without a host.
    NotARelay,
    /// A loopback, private or link-local address, refused unless
    /// [`RouterConfig::allow_private_relays`](super::RouterConfig::allow_private_relays).
    Private,
}

/// One spelling per relay: the scheme and host in lower case, the scheme's default port left
/// out, a `/` path left out, the fragment dropped; user info, other paths and the query kept.
/// The same rule as the driver's `normalize_relay_url`, which a test holds it to.
///
/// # Errors
/// [`BadRelayUrl`].
pub fn normalize(url: &str, allow_private: bool) -> Result<String, BadRelayUrl> {
    if url.len() > MAX_URL_LEN {
        return Err(BadRelayUrl::TooLong);
    }
    let Ok(parsed) = Url::parse(url.trim()) else {
        return Err(BadRelayUrl::NotARelay);
    };
    if !matches!(parsed.scheme(), "ws" | "wss") {
        return Err(BadRelayUrl::NotARelay);
    }
    let Some(host) = parsed.host() else {
        return Err(BadRelayUrl::NotARelay);
    };
    if host_is_empty(&host) {
        return Err(BadRelayUrl::NotARelay);
    }
    if !allow_private && is_private(&host) {
        return Err(BadRelayUrl::Private);
    }
    let mut out = String::with_capacity(url.len());
    out.push_str(parsed.scheme());
    out.push_str("://");
    if !parsed.username().is_empty() || parsed.password().is_some() {
        out.push_str(parsed.username());
        if let Some(password) = parsed.password() {
            out.push(':');
            out.push_str(password);
        }
        out.push('@');
    }
    out.push_str(&host.to_string());
    // `Url` already leaves out the scheme's default port.
    if let Some(port) = parsed.port() {
        out.push(':');
        out.push_str(&port.to_string());
    }
    if parsed.path() != "/" {
        out.push_str(parsed.path());
    }
    if let Some(query) = parsed.query() {
        out.push('?');
        out.push_str(query);
    }
    Ok(out)
}

fn host_is_empty(host: &Host<&str>) -> bool {
    matches!(host, Host::Domain(d) if d.is_empty())
}

fn is_private(host: &Host<&str>) -> bool {
    match host {
        Host::Domain(d) => {
            let d = d.trim_end_matches('.');
            d == "localhost" || d.ends_with(".localhost") || d.ends_with(".local")
        }
        Host::Ipv4(ip) => v4_private(*ip),
        Host::Ipv6(ip) => v6_private(*ip),
    }
}

fn v4_private(ip: Ipv4Addr) -> bool {
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        // 100.64.0.0/10, carrier-grade NAT: inside someone's network too.
        || (ip.octets()[0] == 100 && (ip.octets()[1] & 0xc0) == 64)
}

fn v6_private(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return v4_private(v4);
    }
    let first = ip.segments()[0];
    ip.is_loopback()
        || ip.is_unspecified()
        // fc00::/7 unique local, fe80::/10 link local.
        || (first & 0xfe00) == 0xfc00
        || (first & 0xffc0) == 0xfe80
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_spelling_per_relay() {
        let cases = [
            ("wss://Relay.Example.com:443/", "wss://relay.example.com"),
            ("wss://relay.example.com", "wss://relay.example.com"),
            ("WSS://relay.example.com/#x", "wss://relay.example.com"),
            ("ws://relay.example.com:80", "ws://relay.example.com"),
            (
                "wss://relay.example.com:4848/",
                "wss://relay.example.com:4848",
            ),
            (
                "wss://relay.example.com/inbox",
                "wss://relay.example.com/inbox",
            ),
            (
                "wss://relay.example.com/?a=1",
                "wss://relay.example.com?a=1",
            ),
            (" wss://relay.example.com ", "wss://relay.example.com"),
        ];
        for (given, want) in cases {
            assert_eq!(normalize(given, false).as_deref(), Ok(want), "{given}");
        }
    }

    #[test]
    fn what_is_no_relay_is_refused() {
        for junk in [
            "https://relay.example.com",
            "relay.example.com",
            "wss://",
            "",
            "wss://:443",
        ] {
            assert_eq!(
                normalize(junk, false),
                Err(BadRelayUrl::NotARelay),
                "{junk}"
            );
        }
        let long = format!("wss://{}.example.com", "a".repeat(300));
        assert_eq!(normalize(&long, false), Err(BadRelayUrl::TooLong));
    }

    #[test]
    fn a_strangers_list_cannot_point_into_the_network() {
        for inside in [
            "ws://127.0.0.1:7777",
            "ws://localhost",
            "ws://10.1.2.3",
            "ws://192.168.1.1",
            "ws://172.16.0.1",
            "ws://169.254.1.1",
            "ws://[::1]:80",
            "ws://[fd00::1]",
            "ws://[::ffff:127.0.0.1]",
            "ws://printer.local",
            "ws://0.0.0.0",
        ] {
            assert_eq!(
                normalize(inside, false),
                Err(BadRelayUrl::Private),
                "{inside}"
            );
        }
        assert_eq!(
            normalize("ws://127.0.0.1:7777/", true).as_deref(),
            Ok("ws://127.0.0.1:7777")
        );
    }
}
