//! WebSockets through async-tungstenite over async-net (rustls for wss://, with the roots
//! `Config::roots` names: the webpki roots by default).

use std::io;
use std::sync::Arc;

use async_tungstenite::tungstenite::client::IntoClientRequest;
use async_tungstenite::tungstenite::error::UrlError;
use async_tungstenite::tungstenite::protocol::WebSocketConfig;
use tether_driver::burst::CODEC_READ_BUFFER;
use tether_driver::tls::SocketTls;
use tether_driver::url::parse_ws_url;
use tether_driver::{BoxFuture, BoxSocket, WsConnect, WsError};

use crate::burst::BurstStream;
use crate::net;

/// Opens ws:// and wss:// sockets on async-io, every wss:// socket with the same rustls
/// configuration.
#[derive(Clone, Debug)]
pub(crate) struct AsyncIoWs {
    tls: SocketTls,
}

impl AsyncIoWs {
    /// A connector whose wss:// sockets use `tls`.
    pub(crate) fn new(tls: SocketTls) -> Arc<Self> {
        Arc::new(AsyncIoWs { tls })
    }
}

impl WsConnect for AsyncIoWs {
    fn connect(&self, url: &str, max_message: usize) -> BoxFuture<Result<BoxSocket, WsError>> {
        let url = url.to_owned();
        let tls = self.tls.clone();
        // Frames past the core's limit are refused by tungstenite before they are buffered
        // whole, not just dropped by the core after.
        // The codec's own read buffer stays small; the connection below it is read through a
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
            let tls = if target.secure() {
                Some(tls.config().map_err(WsError::Io)?)
            } else {
                None
            };
            let conn = net::connect(target.host(), target.port(), tls.as_ref())
                .await
                .map_err(io_error)?;
            let (socket, _response) = async_tungstenite::client_async_with_config(
                request,
                BurstStream::new(conn),
                Some(config),
            )
            .await?;
            Ok(Box::pin(socket) as BoxSocket)
        })
    }
}

fn io_error(error: io::Error) -> WsError {
    WsError::Io(error)
}
