//! [`connect_relay`]: everything a runtime's `RelayClient::connect` does except spawning, so
//! the URL rule and the driver's construction are written once for every runtime.

use std::sync::Arc;

use tungstenite::client::IntoClientRequest;

use crate::relay::{relay_driver, RelayDriver, RelayHandle};
use crate::runtime::{Runtime, WsConnect};
use crate::{Config, ConnectError};

/// Check `url` and build the handle and driver for it; the caller spawns the driver on the
/// runtime that `rt` and `ws` belong to.
///
/// # Errors
/// [`ConnectError::InvalidUrl`] when `url` is not a ws:// or wss:// URL (see
/// [`check_ws_url`]).
pub fn connect_relay<R: Runtime>(
    url: &str,
    config: Config,
    rt: R,
    ws: Arc<dyn WsConnect>,
) -> Result<(RelayHandle, RelayDriver<R>), ConnectError> {
    check_ws_url(url)?;
    Ok(relay_driver(url, config, rt, ws))
}

/// Whether `url` can be opened as a WebSocket: it parses as a request URI with a host and its
/// scheme is `ws` or `wss`.
///
/// Checked before anything is spawned, because a URL that can never connect would otherwise
/// surface only as an endless series of failed reconnects.
///
/// # Errors
/// [`ConnectError::InvalidUrl`] saying what is wrong.
pub fn check_ws_url(url: &str) -> Result<(), ConnectError> {
    let request = url
        .into_client_request()
        .map_err(|e| ConnectError::InvalidUrl(e.to_string()))?;
    if !matches!(request.uri().scheme_str(), Some("ws" | "wss")) {
        return Err(ConnectError::InvalidUrl(format!(
            "{url}: expected ws:// or wss://"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_websocket_urls_pass() {
        assert_eq!(check_ws_url("ws://127.0.0.1:7777"), Ok(()));
        assert_eq!(check_ws_url("wss://relay.example.com/path"), Ok(()));
        for bad in ["http://relay.example.com", "relay.example.com", "", "ws://"] {
            assert!(
                matches!(check_ws_url(bad), Err(ConnectError::InvalidUrl(_))),
                "{bad:?}"
            );
        }
    }
}
