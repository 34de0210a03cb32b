//! WebSockets through tokio-tungstenite (rustls with the webpki roots for wss://).

use tether_driver::burst::CODEC_READ_BUFFER;
use tether_driver::url::parse_ws_url;
use tether_driver::{BoxFuture, BoxSocket, WsConnect, WsError};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::error::UrlError;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use crate::burst::BurstStream;

/// Opens ws:// and wss:// sockets on tokio.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TokioWs;

impl WsConnect for TokioWs {
    fn connect(&self, url: &str, max_message: usize) -> BoxFuture<Result<BoxSocket, WsError>> {
        let url = url.to_owned();
        // Frames past the core's limit are refused by tungstenite before they are buffered
        // whole, not just dropped by the core after.
        // The codec's own read buffer stays small; the socket below it is read through a
        // burst buffer, large only while data keeps coming (`tether_driver::burst`).
        let config = WebSocketConfig::default()
            .max_message_size(Some(max_message))
            .max_frame_size(Some(max_message))
            .read_buffer_size(CODEC_READ_BUFFER);
        Box::pin(async move {
            // The entry points checked the URL already; the rule's port is the one to dial.
            let target = parse_ws_url(&url)
                .map_err(|e| WsError::Url(UrlError::UnableToConnect(e.to_string())))?;
            let request = url.into_client_request()?;
            let host = target.host().trim_start_matches('[').trim_end_matches(']');
            let tcp = TcpStream::connect((host, target.port())).await?;
            tcp.set_nodelay(true)?;
            let (socket, _response) = tokio_tungstenite::client_async_tls_with_config(
                request,
                BurstStream::new(tcp),
                Some(config),
                None,
            )
            .await?;
            Ok(Box::pin(socket) as BoxSocket)
        })
    }
}
