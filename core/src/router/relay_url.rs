//! Relay identity for URLs that come from strangers' relay lists: one spelling per relay, and
//! refusal of what no client should dial.
//!
//! A URL's text is judged here ([`normalize`]); a host name's address is known only once a
//! driver resolves it, so the same rule is public as [`is_private_ip`], and
//! [`private_addresses_allowed`] says which routed relays it applies to.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use url::{Host, Url};

/// Longest relay URL taken from a list (256 bytes): real ones are a few dozen.
pub const MAX_URL_LEN: usize = 256;

/// Longest relay URL an application may give the pool (8 KiB): its own relays may carry a
/// long token in the query, which no stranger's list has any business naming.
pub const MAX_APPLICATION_URL_LEN: usize = 8192;

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
    spell(url, allow_private)
}

/// [`normalize`] for a URL the application gave (its own relays, private addresses
/// allowed), up to [`MAX_APPLICATION_URL_LEN`].
///
/// # Errors
/// [`BadRelayUrl::TooLong`], [`BadRelayUrl::NotARelay`].
pub fn normalize_application(url: &str) -> Result<String, BadRelayUrl> {
    if url.len() > MAX_APPLICATION_URL_LEN {
        return Err(BadRelayUrl::TooLong);
    }
    spell(url, true)
}

fn spell(url: &str, allow_private: bool) -> Result<String, BadRelayUrl> {
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
        Host::Ipv4(ip) => is_private_ip(IpAddr::V4(*ip)),
        Host::Ipv6(ip) => is_private_ip(IpAddr::V6(*ip)),
    }
}

/// Whether `ip` is inside someone's own network: loopback, private (RFC 1918, unique local),
/// link-local, carrier-grade NAT, unspecified, "this network" or broadcast, an IPv6 address
/// that carries such an IPv4 address (IPv4-mapped `::ffff:a.b.c.d`, IPv4-compatible
/// `::a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`) included.
///
/// The one rule for what a relay from a stranger's relay list may be dialed at: [`normalize`]
/// applies it to an address written in the URL, and a driver to each address a host name
/// resolves to (for the relays [`private_addresses_allowed`] does not exempt), so a name
/// that points into the network is refused as its address would be.
#[must_use]
pub fn is_private_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(ip) => v4_private(ip),
        IpAddr::V6(ip) => v6_private(ip),
    }
}

/// Whether a relay routing opened at `url` (normalised, as the pool names it) may be dialed
/// at a private address ([`is_private_ip`]): when `config` allows private relays, or when
/// `url` is one of its indexers, which the application chose itself. Every other routed
/// relay came from a stranger's relay list.
#[must_use]
pub fn private_addresses_allowed(config: &super::RouterConfig, url: &str) -> bool {
    config.allow_private_relays
        || config
            .indexers
            .iter()
            .any(|indexer| normalize(indexer, true).is_ok_and(|i| i == url))
}

fn v4_private(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        // 0.0.0.0/8, "this network": 0.0.0.0 itself reaches the local host on Linux.
        || a == 0
        // 100.64.0.0/10, carrier-grade NAT: inside someone's network too.
        || (a == 100 && (b & 0xc0) == 64)
}

fn v6_private(ip: Ipv6Addr) -> bool {
    // An IPv4 address inside an IPv6 one reaches that IPv4 address (a dual-stack socket, a
    // NAT64 gateway; compatible addresses are deprecated but still parsed and routed by
    // some stacks), so it is judged by the IPv4 rule.
    if let Some(v4) = embedded_v4(ip) {
        if v4_private(v4) {
            return true;
        }
    }
    let first = ip.segments()[0];
    ip.is_loopback()
        || ip.is_unspecified()
        // fc00::/7 unique local, fe80::/10 link local.
        || (first & 0xfe00) == 0xfc00
        || (first & 0xffc0) == 0xfe80
}

/// The IPv4 address an IPv6 address carries in its last 32 bits: IPv4-mapped
/// (`::ffff:0:0/96`), IPv4-compatible (`::/96`) or the NAT64 well-known prefix
/// (`64:ff9b::/96`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let prefix_is = |head: [u16; 6]| s[..6] == head;
    let carries = prefix_is([0, 0, 0, 0, 0, 0xffff])
        || prefix_is([0, 0, 0, 0, 0, 0])
        || prefix_is([0x64, 0xff9b, 0, 0, 0, 0]);
    carries.then(|| Ipv4Addr::from((u32::from(s[6]) << 16) | u32::from(s[7])))
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

    /// An IPv4 address written inside an IPv6 one is the IPv4 address it reaches.
    #[test]
    fn ipv4_inside_ipv6_is_judged_as_ipv4() {
        for inside in [
            // IPv4-compatible 127.0.0.1, 10.0.0.1, 192.168.1.1.
            "ws://[::7f00:1]",
            "ws://[::127.0.0.1]:7777",
            "ws://[::a00:1]",
            "ws://[::c0a8:101]",
            // IPv4-mapped, in hex and dotted.
            "ws://[::ffff:7f00:1]",
            "ws://[::ffff:10.1.2.3]",
            "ws://[::ffff:169.254.169.254]",
            // NAT64 of 127.0.0.1 and 192.168.0.1.
            "ws://[64:ff9b::7f00:1]",
            "ws://[64:ff9b::192.168.0.1]",
            // "This network" and carrier-grade NAT.
            "ws://0.1.2.3",
            "ws://100.64.0.1",
            "ws://[::ffff:100.127.255.254]",
        ] {
            assert_eq!(
                normalize(inside, false),
                Err(BadRelayUrl::Private),
                "{inside}"
            );
        }
        for outside in [
            "ws://[::ffff:8.8.8.8]",
            "ws://[::808:808]",
            "ws://[64:ff9b::808:808]",
            "ws://[2001:db8::7f00:1]",
            "ws://[2606:4700::1111]",
            "ws://100.128.0.1",
            "ws://8.8.8.8",
        ] {
            assert!(normalize(outside, false).is_ok(), "{outside}");
        }
    }

    #[test]
    fn the_address_rule_is_public_and_the_same() {
        let private = |ip: &str| is_private_ip(ip.parse().expect(ip));
        for ip in [
            "127.0.0.1",
            "127.1.2.3",
            "10.0.0.1",
            "172.31.255.255",
            "192.168.0.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "::1",
            "::",
            "fd12::1",
            "fe80::1",
            "::7f00:1",
            "::ffff:127.0.0.1",
            "64:ff9b::a00:1",
        ] {
            assert!(private(ip), "{ip}");
        }
        for ip in ["8.8.8.8", "1.1.1.1", "2606:4700::1111", "::ffff:1.1.1.1"] {
            assert!(!private(ip), "{ip}");
        }
    }

    #[test]
    fn only_the_indexers_and_a_private_config_may_dial_inside() {
        let mut config = super::super::RouterConfig::default();
        config.set_indexers(vec!["wss://Indexer.Example/".into()]);
        assert!(private_addresses_allowed(&config, "wss://indexer.example"));
        assert!(!private_addresses_allowed(&config, "wss://relay.example"));
        config.allow_private_relays = true;
        assert!(private_addresses_allowed(&config, "wss://relay.example"));
    }
}
