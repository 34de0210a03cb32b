//! WebSockets through tokio-tungstenite (rustls for wss://, with the roots `Config::roots`
//! names: the webpki roots by default).

use std::sync::Arc;

use tether_driver::burst::CODEC_READ_BUFFER;
use tether_driver::tls::SocketTls;
use tether_driver::url::parse_ws_url;
use tether_driver::{BoxFuture, BoxSocket, WsConnect, WsError};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::error::UrlError;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::Connector;

use crate::burst::BurstStream;

/// Opens ws:// and wss:// sockets on tokio, every wss:// socket with the same rustls
/// configuration (without one, tokio-tungstenite builds a configuration with its own copy of
/// the root store for each socket, and the socket keeps it).
#[derive(Clone, Debug)]
pub(crate) struct TokioWs {
    tls: SocketTls,
}

impl TokioWs {
    /// A connector whose wss:// sockets use `tls`.
    pub(crate) fn new(tls: SocketTls) -> Arc<Self> {
        Arc::new(TokioWs { tls })
    }
}

impl WsConnect for TokioWs {
    fn connect(&self, url: &str, max_message: usize) -> BoxFuture<Result<BoxSocket, WsError>> {
        let url = url.to_owned();
        let tls = self.tls.clone();
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
            let connector = if target.secure() {
                Connector::Rustls(tls.config().map_err(WsError::Io)?)
            } else {
                Connector::Plain
            };
            let (socket, _response) = tokio_tungstenite::client_async_tls_with_config(
                request,
                BurstStream::new(tcp),
                Some(config),
                Some(connector),
            )
            .await?;
            Ok(Box::pin(socket) as BoxSocket)
        })
    }
}
