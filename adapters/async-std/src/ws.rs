//! WebSockets through async-tungstenite over async-net (rustls with the webpki roots for
//! wss://).

use std::io;

use async_tungstenite::tungstenite::client::IntoClientRequest;
use async_tungstenite::tungstenite::error::UrlError;
use async_tungstenite::tungstenite::protocol::WebSocketConfig;
use tether_driver::{BoxFuture, BoxSocket, WsConnect, WsError};

use crate::net;

/// Opens ws:// and wss:// sockets on async-io.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct AsyncIoWs;

impl WsConnect for AsyncIoWs {
    fn connect(&self, url: &str, max_message: usize) -> BoxFuture<Result<BoxSocket, WsError>> {
        let url = url.to_owned();
        // Frames past the core's limit are refused by tungstenite before they are buffered
        // whole, not just dropped by the core after.
        let config = WebSocketConfig::default()
            .max_message_size(Some(max_message))
            .max_frame_size(Some(max_message));
        Box::pin(async move {
            let request = url.into_client_request()?;
            let uri = request.uri();
            let tls = match uri.scheme_str() {
                Some("wss") => true,
                Some("ws") => false,
                _ => return Err(WsError::Url(UrlError::UnsupportedUrlScheme)),
            };
            let host = uri.host().ok_or(WsError::Url(UrlError::NoHostName))?;
            let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
            let conn = net::connect(host, port, tls).await.map_err(io_error)?;
            let (socket, _response) =
                async_tungstenite::client_async_with_config(request, conn, Some(config)).await?;
            Ok(Box::pin(socket) as BoxSocket)
        })
    }
}

fn io_error(error: io::Error) -> WsError {
    WsError::Io(error)
}
