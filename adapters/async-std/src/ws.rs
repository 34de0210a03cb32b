//! WebSockets through async-tungstenite over async-net (rustls for wss://, with the roots
//! `Config::roots` names: the webpki roots by default).

use std::sync::Arc;

use tether_driver::tls::SocketTls;
use tether_driver::ws_dial::WsDial;
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
        let dial = WsDial::new(url, max_message, &self.tls);
        Box::pin(async move {
            let dial = dial?;
            let conn = net::connect(&dial.host, dial.port, dial.tls.as_ref())
                .await
                .map_err(WsError::Io)?;
            let (socket, _response) = async_tungstenite::client_async_with_config(
                dial.request,
                BurstStream::new(conn),
                Some(dial.config),
            )
            .await?;
            Ok(Box::pin(socket) as BoxSocket)
        })
    }
}
