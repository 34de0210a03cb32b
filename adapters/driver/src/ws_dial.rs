//! [`WsDial`]: what a runtime's WebSocket connector dials, decided once for every runtime:
//! the codec's limits and buffer, the upgrade request, the host and port the URL rule gives,
//! the addresses it may be dialed at, and the TLS configuration for wss://. A runtime only
//! resolves the host, opens the TCP connection to the addresses [`WsDial::admit`] lets
//! through and runs the handshake over it.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use tungstenite::client::IntoClientRequest;
use tungstenite::error::UrlError;
use tungstenite::handshake::client::Request;
use tungstenite::protocol::WebSocketConfig;

use crate::burst::CODEC_READ_BUFFER;
use crate::runtime::{Addresses, WsError};
use crate::tls::{rustls::ClientConfig, SocketTls};
use crate::url::parse_ws_url;

/// One WebSocket connect, ready to dial.
#[derive(Debug)]
pub struct WsDial {
    /// The codec's configuration: frames past the core's limit are refused by tungstenite
    /// before they are buffered whole (not just dropped by the core after), and its own read
    /// buffer stays small (the socket below is read through `crate::burst`).
    pub config: WebSocketConfig,
    /// The upgrade request for the URL.
    pub request: Request,
    /// The host to connect to, an IPv6 literal without its brackets.
    pub host: String,
    /// The port the URL rule gives (the scheme's default when none is written).
    pub port: u16,
    /// Which addresses the host may be dialed at ([`WsDial::admit`]).
    pub addresses: Addresses,
    /// The TLS configuration for a wss:// URL, `None` for ws://.
    pub tls: Option<Arc<ClientConfig>>,
}

impl WsDial {
    /// What dialing `url` takes, with frames up to `max_message` bytes, at the `addresses`
    /// allowed, and `tls` for wss://.
    ///
    /// # Errors
    /// A URL the rule refuses (the entry points checked it already), or roots that cannot be
    /// used for a wss:// URL (reported as a rejected certificate).
    // The connector's own error type (tungstenite's), returned at most once per connect.
    #[allow(clippy::result_large_err)]
    pub fn new(
        url: &str,
        max_message: usize,
        addresses: Addresses,
        tls: &SocketTls,
    ) -> Result<WsDial, WsError> {
        let target = parse_ws_url(url)
            .map_err(|e| WsError::Url(UrlError::UnableToConnect(e.to_string())))?;
        let tls = if target.secure() {
            Some(tls.config().map_err(WsError::Io)?)
        } else {
            None
        };
        Ok(WsDial {
            config: WebSocketConfig::default()
                .max_message_size(Some(max_message))
                .max_frame_size(Some(max_message))
                .read_buffer_size(CODEC_READ_BUFFER),
            request: url.into_client_request()?,
            host: target
                .host()
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
            port: target.port(),
            addresses,
            tls,
        })
    }

    /// The addresses the host resolved to (`resolved`) that may be dialed
    /// ([`Addresses::admit`]).
    ///
    /// # Errors
    /// `PermissionDenied` for a host of a relay list that resolves to a private address.
    pub fn admit(
        &self,
        resolved: impl IntoIterator<Item = SocketAddr>,
    ) -> io::Result<Vec<SocketAddr>> {
        self.addresses.admit(&self.host, resolved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http_options::Roots;

    #[test]
    fn a_dial_takes_the_rules_port_and_tls_only_for_wss() {
        let tls = SocketTls::new(&Roots::default()).expect("default roots");
        let plain = WsDial::new("ws://[::1]/r1", 1 << 20, Addresses::Any, &tls).expect("ws");
        assert_eq!((plain.host.as_str(), plain.port), ("::1", 80));
        assert!(plain.tls.is_none());
        assert_eq!(plain.config.max_message_size, Some(1 << 20));
        assert_eq!(plain.config.read_buffer_size, CODEC_READ_BUFFER);
        let secure =
            WsDial::new("wss://relay.example:7447", 1 << 20, Addresses::Public, &tls).expect("wss");
        assert_eq!((secure.host.as_str(), secure.port), ("relay.example", 7447));
        assert!(secure.tls.is_some());
        assert_eq!(secure.request.uri(), "wss://relay.example:7447/");
        assert_eq!(secure.addresses, Addresses::Public);
    }
}
