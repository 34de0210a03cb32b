//! The one URL rule every entry point applies before anything is spawned: relay clients and
//! pools take ws:// and wss://, SSE streams http:// and https://, and all of them need a
//! host and, when a port is written, a port from 1 to 65535.
//!
//! URLs are parsed with [`http::Uri`], the parser the WebSocket and HTTP connectors use
//! themselves, so a URL that passes is one the sockets can open. The rule exists because
//! that parser does not check the port: `ws://127.0.0.1:99999/` parses, its port reads as
//! absent, and the connector silently dialled port 80 and retried forever.
//!
//! [`normalize_relay_url`] gives one spelling per relay, so the same relay written twice
//! (`wss://Relay.example.com:443/` and `wss://relay.example.com`) can be recognised as one.

use http::Uri;

use crate::ConnectError;

/// A URL that passed the rule, with what a connector needs from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckedUrl {
    uri: Uri,
    secure: bool,
    port: u16,
    explicit_port: bool,
}

impl CheckedUrl {
    /// Whether the scheme is the TLS one (wss:// or https://).
    pub fn secure(&self) -> bool {
        self.secure
    }

    /// The host as written in the URL (an IPv6 literal keeps its brackets).
    pub fn host(&self) -> &str {
        self.uri.host().unwrap_or_default()
    }

    /// The port: the one written, or the scheme's default (80, or 443 for wss:// and
    /// https://).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The authority as written (`user@host:port`), for a `Host` header.
    pub fn authority(&self) -> &str {
        self.uri.authority().map_or("", |a| a.as_str())
    }

    /// The path and query (`/` when the URL has none), for a request line.
    pub fn path_and_query(&self) -> &str {
        self.uri.path_and_query().map_or("/", |p| p.as_str())
    }
}

/// Check a relay URL: ws:// or wss://, a host, and a valid port if one is written.
///
/// Checked before anything is spawned, because a URL that can never connect would otherwise
/// surface only as an endless series of failed reconnects.
///
/// # Errors
/// [`ConnectError::InvalidUrl`] saying what is wrong.
pub fn check_ws_url(url: &str) -> Result<(), ConnectError> {
    parse_ws_url(url).map(drop)
}

/// Check an SSE URL: http:// or https://, a host, and a valid port if one is written.
///
/// # Errors
/// [`ConnectError::InvalidUrl`] saying what is wrong.
pub fn check_http_url(url: &str) -> Result<(), ConnectError> {
    parse_http_url(url).map(drop)
}

/// [`check_ws_url`], keeping what a WebSocket connector needs (TLS, host, port).
///
/// # Errors
/// As [`check_ws_url`].
pub fn parse_ws_url(url: &str) -> Result<CheckedUrl, ConnectError> {
    parse(url, Schemes::WebSocket)
}

/// [`check_http_url`], keeping what an HTTP connector needs (TLS, host, port, request
/// target).
///
/// # Errors
/// As [`check_http_url`].
pub fn parse_http_url(url: &str) -> Result<CheckedUrl, ConnectError> {
    parse(url, Schemes::Http)
}

/// One spelling per relay: `url` checked as [`check_ws_url`] does (so its scheme is already
/// lower case), with the host in lower case, the scheme's default port (80 for ws://, 443 for wss://) left out, an
/// empty or `/` path left out (`wss://relay.example.com`, never with a trailing `/`), and
/// the rest (user info, any other path, the query) kept as written. A fragment is dropped:
/// it never reaches the server.
///
/// Two URLs with the same normalised form reach the same relay, so a pool can take the
/// second as the first. The form is for comparing; connect with the URL as given, which
/// the relay may expect in NIP-42 `relay` tags.
///
/// # Errors
/// As [`check_ws_url`].
pub fn normalize_relay_url(url: &str) -> Result<String, ConnectError> {
    let checked = parse_ws_url(url)?;
    let scheme = if checked.secure { "wss" } else { "ws" };
    let authority = checked.authority();
    let userinfo = authority.rsplit_once('@').map(|(user, _)| user);
    let mut out = String::with_capacity(url.len());
    out.push_str(scheme);
    out.push_str("://");
    if let Some(user) = userinfo {
        out.push_str(user);
        out.push('@');
    }
    out.push_str(&checked.host().to_ascii_lowercase());
    if checked.explicit_port && checked.port != default_port(checked.secure) {
        out.push(':');
        out.push_str(&checked.port.to_string());
    }
    let path = checked.uri.path();
    if path != "/" {
        out.push_str(path);
    }
    if let Some(query) = checked.uri.query() {
        out.push('?');
        out.push_str(query);
    }
    Ok(out)
}

#[derive(Clone, Copy)]
enum Schemes {
    WebSocket,
    Http,
}

fn default_port(secure: bool) -> u16 {
    if secure {
        443
    } else {
        80
    }
}

fn parse(url: &str, schemes: Schemes) -> Result<CheckedUrl, ConnectError> {
    let invalid = |why: &str| ConnectError::InvalidUrl(format!("{url}: {why}"));
    let uri: Uri = url.parse().map_err(|e| invalid(&format!("{e}")))?;
    // The scheme is compared as written: the WebSocket connectors (tungstenite) accept
    // only lower-case `ws`/`wss`, so `WSS://` would pass here and then never connect.
    // http::Uri lower-cases `http`/`https` itself.
    let secure = match (schemes, uri.scheme_str()) {
        (Schemes::WebSocket, Some("ws")) | (Schemes::Http, Some("http")) => false,
        (Schemes::WebSocket, Some("wss")) | (Schemes::Http, Some("https")) => true,
        (Schemes::WebSocket, Some(s))
            if s.eq_ignore_ascii_case("ws") || s.eq_ignore_ascii_case("wss") =>
        {
            return Err(invalid("write the scheme in lower case (ws:// or wss://)"))
        }
        (Schemes::WebSocket, _) => return Err(invalid("expected ws:// or wss://")),
        (Schemes::Http, _) => return Err(invalid("expected http:// or https://")),
    };
    let Some(authority) = uri.authority() else {
        return Err(invalid("no host"));
    };
    if uri.host().is_none_or(str::is_empty) {
        return Err(invalid("no host"));
    }
    // http::Uri keeps any text after the host's `:` and reports the port as absent when it
    // is not a u16; the connectors then fall back to the default port. Read it ourselves.
    let host_port = authority
        .as_str()
        .rsplit_once('@')
        .map_or(authority.as_str(), |(_, rest)| rest);
    let port_text = if host_port.starts_with('[') {
        // An IPv6 literal: the port, if any, follows the closing bracket.
        host_port
            .split_once(']')
            .and_then(|(_, rest)| rest.strip_prefix(':'))
    } else {
        host_port.rsplit_once(':').map(|(_, port)| port)
    };
    let (port, explicit_port) = match port_text {
        None => (default_port(secure), false),
        Some(text) => (valid_port(text).map_err(|why| invalid(&why))?, true),
    };
    Ok(CheckedUrl {
        uri,
        secure,
        port,
        explicit_port,
    })
}

/// A written port: digits only, 1 to 65535.
fn valid_port(text: &str) -> Result<u16, String> {
    if text.is_empty() {
        return Err("empty port".to_owned());
    }
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("port {text:?} is not a number"));
    }
    match text.parse::<u16>() {
        Ok(port) if port > 0 => Ok(port),
        _ => Err(format!("port {text} is not in 1-65535")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The router reads strangers' relay lists with the core's URL rule; a relay it names
    /// must be the relay the pool dials, so the two spellings agree.
    #[test]
    fn the_router_spells_relays_as_the_pool_does() {
        for url in [
            "wss://Relay.Example.com:443/",
            "wss://relay.example.com",
            "ws://relay.example.com:80/",
            "wss://relay.example.com:4848",
            "wss://relay.example.com/inbox",
            "wss://relay.example.com/?a=1",
            "wss://user@relay.example.com/x?y",
            "ws://127.0.0.1:7777/",
            "ws://[::1]:7777",
            "wss://relay.example.com/#frag",
        ] {
            assert_eq!(
                tether_core::router::relay_url::normalize(url, true).ok(),
                normalize_relay_url(url).ok(),
                "{url}"
            );
        }
    }

    fn why(result: Result<impl std::fmt::Debug, ConnectError>) -> String {
        match result {
            Err(ConnectError::InvalidUrl(why)) => why,
            other => panic!("expected InvalidUrl, got {other:?}"),
        }
    }

    #[test]
    fn websocket_urls_pass_with_their_port() {
        let plain = parse_ws_url("ws://127.0.0.1:7777").unwrap();
        assert_eq!(
            (plain.secure(), plain.host(), plain.port()),
            (false, "127.0.0.1", 7777)
        );
        let tls = parse_ws_url("wss://relay.example.com/path?x=1").unwrap();
        assert_eq!((tls.secure(), tls.port()), (true, 443));
        assert_eq!(tls.path_and_query(), "/path?x=1");
        let v6 = parse_ws_url("ws://[::1]:8080/").unwrap();
        assert_eq!((v6.host(), v6.port()), ("[::1]", 8080));
        assert_eq!(parse_ws_url("ws://[::1]").unwrap().port(), 80);
        assert_eq!(parse_ws_url("ws://user@host:65535").unwrap().port(), 65535);
    }

    #[test]
    fn bad_ports_are_refused_not_read_as_the_default() {
        for (url, expected) in [
            ("ws://127.0.0.1:99999/", "port 99999 is not in 1-65535"),
            ("ws://127.0.0.1:65536", "port 65536 is not in 1-65535"),
            ("ws://127.0.0.1:0", "port 0 is not in 1-65535"),
            ("ws://127.0.0.1:abc/", "port \"abc\" is not a number"),
            ("wss://h:-1", "port \"-1\" is not a number"),
            ("ws://h:/", "empty port"),
            ("ws://[::1]:99999", "port 99999 is not in 1-65535"),
            (
                "http://127.0.0.1:99999/events",
                "port 99999 is not in 1-65535",
            ),
        ] {
            let checked = if url.starts_with("http") {
                why(parse_http_url(url))
            } else {
                why(parse_ws_url(url))
            };
            assert_eq!(checked, format!("{url}: {expected}"));
        }
    }

    #[test]
    fn schemes_and_hosts_are_checked() {
        for bad in [
            "http://relay.example.com",
            "WSS://relay.example.com",
            "relay.example.com",
            "",
            "ws://",
            "ws://:80/",
            "::",
        ] {
            assert!(
                matches!(check_ws_url(bad), Err(ConnectError::InvalidUrl(_))),
                "{bad:?}"
            );
        }
        assert_eq!(
            why(check_ws_url("http://relay.example.com")),
            "http://relay.example.com: expected ws:// or wss://"
        );
        assert_eq!(check_http_url("https://example.com/events"), Ok(()));
        assert_eq!(check_http_url("HTTP://example.com"), Ok(()));
        for bad in ["ws://127.0.0.1:1/events", "::", "http:///x", "https://:1/"] {
            assert!(
                matches!(check_http_url(bad), Err(ConnectError::InvalidUrl(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn one_spelling_per_relay() {
        for (url, normal) in [
            ("wss://relay.example.com", "wss://relay.example.com"),
            ("wss://relay.example.com/", "wss://relay.example.com"),
            ("wss://Relay.Example.COM:443/", "wss://relay.example.com"),
            ("wss://RELAY.example.com", "wss://relay.example.com"),
            ("ws://relay.example.com:80", "ws://relay.example.com"),
            ("ws://relay.example.com:443", "ws://relay.example.com:443"),
            ("wss://relay.example.com:0443", "wss://relay.example.com"),
            (
                "wss://relay.example.com/Nostr/",
                "wss://relay.example.com/Nostr/",
            ),
            (
                "wss://relay.example.com/?a=B",
                "wss://relay.example.com?a=B",
            ),
            ("wss://relay.example.com/#top", "wss://relay.example.com"),
            ("ws://User@[::1]:7777/", "ws://User@[::1]:7777"),
        ] {
            assert_eq!(normalize_relay_url(url).as_deref(), Ok(normal), "{url}");
        }
        assert!(normalize_relay_url("ws://127.0.0.1:99999/").is_err());
        assert_eq!(
            why(normalize_relay_url("WSS://relay.example.com")),
            "WSS://relay.example.com: write the scheme in lower case (ws:// or wss://)"
        );
    }
}
