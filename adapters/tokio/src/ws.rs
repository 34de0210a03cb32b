//! WebSockets through tokio-tungstenite (rustls for wss://, with the roots `Config::roots`
//! names: the webpki roots by default).

use std::sync::Arc;

use tether_driver::tls::SocketTls;
use tether_driver::ws_dial::WsDial;
use tether_driver::{BoxFuture, BoxSocket, WsConnect, WsError};
use tokio::net::TcpStream;
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
        let dial = WsDial::new(url, max_message, &self.tls);
        Box::pin(async move {
            let dial = dial?;
            let tcp = TcpStream::connect((dial.host.as_str(), dial.port)).await?;
            tcp.set_nodelay(true)?;
            let connector = match dial.tls {
                Some(config) => Connector::Rustls(config),
                None => Connector::Plain,
            };
            let (socket, _response) = tokio_tungstenite::client_async_tls_with_config(
                dial.request,
                BurstStream::new(tcp),
                Some(dial.config),
                Some(connector),
            )
            .await?;
            Ok(Box::pin(socket) as BoxSocket)
        })
    }
}
