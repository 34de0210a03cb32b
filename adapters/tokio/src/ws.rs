//! WebSockets through tokio-tungstenite (rustls with the webpki roots for wss://).

use tether_driver::{BoxFuture, BoxSocket, WsConnect, WsError};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

/// Opens ws:// and wss:// sockets on tokio.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TokioWs;

impl WsConnect for TokioWs {
    fn connect(&self, url: &str, max_message: usize) -> BoxFuture<Result<BoxSocket, WsError>> {
        let url = url.to_owned();
        // Frames past the core's limit are refused by tungstenite before they are buffered
        // whole, not just dropped by the core after.
        let config = WebSocketConfig::default()
            .max_message_size(Some(max_message))
            .max_frame_size(Some(max_message));
        Box::pin(async move {
            let (socket, _response) =
                tokio_tungstenite::connect_async_tls_with_config(url, Some(config), true, None)
                    .await?;
            Ok(Box::pin(socket) as BoxSocket)
        })
    }
}
