//! [`connect_relay`]: everything a runtime's `RelayClient::connect` does except spawning, so
//! the URL rule ([`crate::url`]) and the driver's construction are written once for every
//! runtime.

use std::sync::Arc;

use crate::relay::{relay_driver, RelayDriver, RelayHandle};
use crate::runtime::{Runtime, WsConnect};
use crate::{Config, ConnectError};

/// The rule [`connect_relay`] applies, also at its old path.
pub use crate::url::check_ws_url;

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
