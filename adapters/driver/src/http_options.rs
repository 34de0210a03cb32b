//! How a runtime's own HTTP client reaches a server ([`HttpOptions`]): through which proxy,
//! from the configuration or the environment, with `NO_PROXY`'s exceptions ([`Proxies`]),
//! and trusting which roots ([`Roots`]). One rule for every runtime: tether-tokio hands
//! [`Proxies::for_target`] to reqwest, tether-async-std tunnels through what it returns.
//!
//! # The environment
//!
//! As curl reads it: `https_proxy` / `HTTPS_PROXY` for https:// targets, `http_proxy` /
//! `HTTP_PROXY` for http:// ones, `all_proxy` / `ALL_PROXY` for either when the specific one
//! is unset (lower case first), and `no_proxy` / `NO_PROXY`: a comma-separated list of `*`
//! (no proxy at all), host names (a name also covers its subdomains; a leading dot is
//! ignored), IP addresses and CIDR blocks (`10.0.0.0/8`, `::1/128`). A proxy URL is
//! `http://[user:password@]host[:port]` (port 1080 by default as curl's; a bare
//! `host:port` is taken as http://). The uppercase `HTTP_PROXY` is ignored in a CGI process
//! (`REQUEST_METHOD` set), where a request's `Proxy:` header would set it ("httpoxy").

use std::net::IpAddr;
use std::sync::Arc;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use percent_encoding::percent_decode_str;

/// What the runtime's HTTP client does beyond its defaults (see the [module docs](self)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HttpOptions {
    /// Which proxy, if any (default: from the environment).
    pub proxy: ProxyConfig,
    /// Which certificate authorities https:// servers are checked against.
    pub roots: Roots,
}

/// Where the proxy setting comes from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProxyConfig {
    /// `https_proxy`, `http_proxy`, `all_proxy` and `no_proxy` (see the [module docs](self)).
    #[default]
    FromEnv,
    /// Connect directly, whatever the environment says.
    Direct,
    /// This proxy for every target but those `no_proxy` lists (the `NO_PROXY` syntax).
    Url {
        /// `http://[user:password@]host[:port]`.
        url: String,
        /// Targets reached directly.
        no_proxy: Option<String>,
    },
}

/// The certificate authorities an https:// server's certificate may chain to.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Roots {
    /// Mozilla's roots as the `webpki-roots` crate ships them (default: on), the same on
    /// every machine.
    pub webpki: bool,
    /// The platform's trust store (`rustls-native-certs`: the system bundle on Linux, the
    /// keychain on macOS, the certificate store on Windows): what a corporate proxy's
    /// inspecting CA is installed in (default: off).
    pub native: bool,
    /// PEM certificates to trust besides (a private CA).
    pub extra_pem: Vec<Vec<u8>>,
}

impl Default for Roots {
    fn default() -> Self {
        Roots {
            webpki: true,
            native: false,
            extra_pem: Vec::new(),
        }
    }
}

/// A proxy to send through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyUrl {
    /// Its host (an IPv6 literal without brackets).
    pub host: String,
    /// Its port.
    pub port: u16,
    /// `Proxy-Authorization` for it (`Basic ...`), when the URL carried credentials.
    pub authorization: Option<String>,
    /// The URL as given, normalized (`http://host:port`, credentials included).
    pub url: String,
}

/// The proxy settings in force, resolved once (see the [module docs](self)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Proxies {
    http: Option<Arc<ProxyUrl>>,
    https: Option<Arc<ProxyUrl>>,
    no_proxy: NoProxy,
}

/// Why a proxy setting cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyError(String);

impl std::fmt::Display for ProxyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ProxyError {}

impl Proxies {
    /// The settings `config` says, reading the process environment for
    /// [`ProxyConfig::FromEnv`].
    ///
    /// # Errors
    /// A proxy URL that is not `http://host[:port]`.
    pub fn resolve(config: &ProxyConfig) -> Result<Proxies, ProxyError> {
        match config {
            ProxyConfig::FromEnv => Proxies::from_vars(|name| std::env::var(name).ok()),
            ProxyConfig::Direct => Ok(Proxies::default()),
            ProxyConfig::Url { url, no_proxy } => {
                let proxy = Some(Arc::new(parse_proxy(url)?));
                Ok(Proxies {
                    http: proxy.clone(),
                    https: proxy,
                    no_proxy: NoProxy::parse(no_proxy.as_deref().unwrap_or("")),
                })
            }
        }
    }

    /// The settings the variables `get` returns describe (the process environment for
    /// [`Proxies::resolve`]; a map in tests).
    ///
    /// # Errors
    /// A proxy URL that is not `http://host[:port]`.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Proxies, ProxyError> {
        let set = |name: &str| get(name).filter(|v| !v.trim().is_empty());
        let either = |lower: &str, upper: &str| set(lower).or_else(|| set(upper));
        let all = either("all_proxy", "ALL_PROXY");
        let cgi = set("REQUEST_METHOD").is_some();
        let http = set("http_proxy")
            .or_else(|| set("HTTP_PROXY").filter(|_| !cgi))
            .or_else(|| all.clone());
        let https = either("https_proxy", "HTTPS_PROXY").or(all);
        let parse = |url: Option<String>| url.map(|u| parse_proxy(&u).map(Arc::new)).transpose();
        Ok(Proxies {
            http: parse(http)?,
            https: parse(https)?,
            no_proxy: NoProxy::parse(&either("no_proxy", "NO_PROXY").unwrap_or_default()),
        })
    }

    /// The proxy for a request to `host` over `scheme` (`http` or `https`); `None`: connect
    /// directly.
    pub fn for_target(&self, scheme: &str, host: &str) -> Option<&ProxyUrl> {
        let proxy = match scheme {
            "https" | "wss" => self.https.as_deref(),
            _ => self.http.as_deref(),
        }?;
        (!self.no_proxy.covers(host)).then_some(proxy)
    }

    /// Whether any target goes through a proxy.
    pub fn any(&self) -> bool {
        self.http.is_some() || self.https.is_some()
    }
}

/// `NO_PROXY`'s entries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct NoProxy {
    all: bool,
    names: Vec<String>,
    blocks: Vec<(IpAddr, u8)>,
}

impl NoProxy {
    fn parse(list: &str) -> NoProxy {
        let mut no_proxy = NoProxy::default();
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            if entry == "*" {
                no_proxy.all = true;
            } else if let Some(block) = parse_block(entry) {
                no_proxy.blocks.push(block);
            } else {
                let name = entry.trim_start_matches('.').trim_end_matches('.');
                no_proxy.names.push(name.to_ascii_lowercase());
            }
        }
        no_proxy
    }

    fn covers(&self, host: &str) -> bool {
        if self.all {
            return true;
        }
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = host.parse::<IpAddr>() {
            return self
                .blocks
                .iter()
                .any(|&(net, bits)| in_block(ip, net, bits));
        }
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.names.iter().any(|name| {
            host == *name
                || host
                    .strip_suffix(name.as_str())
                    .is_some_and(|rest| rest.ends_with('.'))
        })
    }
}

/// An IP address (a block of one) or `address/bits`.
fn parse_block(entry: &str) -> Option<(IpAddr, u8)> {
    let entry = entry.trim_start_matches('[').trim_end_matches(']');
    let (address, bits) = match entry.split_once('/') {
        Some((address, bits)) => (address, Some(bits.parse::<u8>().ok()?)),
        None => (entry, None),
    };
    let ip: IpAddr = address.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let bits = bits.unwrap_or(max);
    (bits <= max).then_some((ip, bits))
}

fn in_block(ip: IpAddr, net: IpAddr, bits: u8) -> bool {
    let (ip, net, width) = match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(b)) => (u128::from(a.to_bits()), u128::from(b.to_bits()), 32),
        (IpAddr::V6(a), IpAddr::V6(b)) => (a.to_bits(), b.to_bits(), 128),
        _ => return false,
    };
    let shift = width - u32::from(bits);
    shift >= width || (ip >> shift) == (net >> shift)
}

/// `http://[user:password@]host[:port]` (or `host:port`) as a [`ProxyUrl`].
fn parse_proxy(text: &str) -> Result<ProxyUrl, ProxyError> {
    let text = text.trim();
    let with_scheme = if text.contains("://") {
        text.to_owned()
    } else {
        format!("http://{text}")
    };
    let bad = |why: &str| ProxyError(format!("proxy {text:?}: {why}"));
    let url = ::url::Url::parse(&with_scheme).map_err(|e| bad(&e.to_string()))?;
    if url.scheme() != "http" {
        return Err(bad("only http:// proxies are supported"));
    }
    let host = url.host_str().ok_or_else(|| bad("no host"))?;
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = url.port().unwrap_or(1080);
    let authorization = (!url.username().is_empty()).then(|| {
        let decode = |s: &str| percent_decode_str(s).decode_utf8_lossy().into_owned();
        let user = decode(url.username());
        let password = decode(url.password().unwrap_or(""));
        let credentials = STANDARD.encode(format!("{user}:{password}"));
        format!("Basic {credentials}")
    });
    let mut normalized = url.clone();
    normalized.set_path("");
    let _ = normalized.set_port(Some(port));
    Ok(ProxyUrl {
        host,
        port,
        authorization,
        url: normalized.as_str().trim_end_matches('/').to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> Proxies {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Proxies::from_vars(|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
            .unwrap()
    }

    fn via<'a>(proxies: &'a Proxies, scheme: &str, host: &str) -> Option<&'a str> {
        proxies.for_target(scheme, host).map(|p| p.url.as_str())
    }

    #[test]
    fn the_environment_picks_a_proxy_per_scheme() {
        let p = env(&[
            ("HTTPS_PROXY", "http://secure:3128"),
            ("http_proxy", "plain:8080"),
        ]);
        assert_eq!(via(&p, "https", "a.example"), Some("http://secure:3128"));
        assert_eq!(via(&p, "http", "a.example"), Some("http://plain:8080"));
        let p = env(&[("ALL_PROXY", "http://all")]);
        assert_eq!(via(&p, "https", "a.example"), Some("http://all:1080"));
        assert_eq!(via(&p, "http", "a.example"), Some("http://all:1080"));
        let cgi = env(&[("HTTP_PROXY", "http://evil:1"), ("REQUEST_METHOD", "GET")]);
        assert_eq!(via(&cgi, "http", "a.example"), None, "httpoxy");
        assert!(!env(&[]).any());
    }

    #[test]
    fn no_proxy_covers_names_subdomains_addresses_and_blocks() {
        let p = env(&[
            ("https_proxy", "http://proxy:3128"),
            (
                "NO_PROXY",
                " .internal.example, localhost,10.0.0.0/8, ::1,192.168.1.7",
            ),
        ]);
        for direct in [
            "internal.example",
            "api.internal.example",
            "LOCALHOST",
            "10.1.2.3",
            "[::1]",
            "192.168.1.7",
        ] {
            assert_eq!(via(&p, "https", direct), None, "{direct}");
        }
        for proxied in [
            "notinternal.example",
            "11.0.0.1",
            "192.168.1.8",
            "example.com",
        ] {
            assert_eq!(
                via(&p, "https", proxied),
                Some("http://proxy:3128"),
                "{proxied}"
            );
        }
        let all = env(&[("https_proxy", "http://proxy:3128"), ("no_proxy", "*")]);
        assert_eq!(via(&all, "https", "a.example"), None);
    }

    #[test]
    fn credentials_become_a_basic_authorization() {
        let p = parse_proxy("http://user%40corp:p%3Ass@proxy.corp:8080").unwrap();
        assert_eq!((p.host.as_str(), p.port), ("proxy.corp", 8080));
        // base64("user@corp:p:ss")
        assert_eq!(
            p.authorization.as_deref(),
            Some("Basic dXNlckBjb3JwOnA6c3M=")
        );
        assert!(parse_proxy("https://proxy:443").is_err());
        assert!(parse_proxy("socks5://proxy:1080").is_err());
        let v6 = parse_proxy("http://[::1]:3128").unwrap();
        assert_eq!(v6.host, "::1");
    }
}
