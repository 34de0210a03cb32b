//! WebSockets through tokio-tungstenite (rustls for wss://, with the roots `Config::roots`
//! names: the webpki roots by default).

use std::sync::Arc;

use tether_driver::tls::SocketTls;
use tether_driver::ws_dial::WsDial;
use tether_driver::{Addresses, BoxFuture, BoxSocket, WsConnect, WsError};
use tokio::net::{lookup_host, TcpStream};
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
    fn connect(
        &self,
        url: &str,
        max_message: usize,
        addresses: Addresses,
    ) -> BoxFuture<Result<BoxSocket, WsError>> {
        let dial = WsDial::new(url, max_message, addresses, &self.tls);
        Box::pin(async move {
            let dial = dial?;
            // Resolved once and checked: what is dialed is what was checked.
            let resolved = lookup_host((dial.host.as_str(), dial.port)).await?;
            let admitted = dial.admit(resolved)?;
            let tcp = TcpStream::connect(&admitted[..]).await?;
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tether_driver::Roots;
    use tokio::net::TcpListener;

    use super::*;

    /// `localhost` resolves to a loopback address: told to dial public addresses only, the
    /// connector refuses it before any connection is made; told any, it connects.
    #[tokio::test]
    async fn a_name_that_resolves_into_the_network_is_not_dialed_when_only_public_is() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let ws = TokioWs::new(SocketTls::new(&Roots::default()).unwrap());
        let url = format!("ws://localhost:{port}");
        let Err(WsError::Io(refused)) = ws.connect(&url, 1 << 20, Addresses::Public).await else {
            panic!("a private address was dialed");
        };
        assert_eq!(refused.kind(), std::io::ErrorKind::PermissionDenied);
        assert!(
            refused.to_string().starts_with("localhost resolves to "),
            "{refused}"
        );
        let accepted = tokio::time::timeout(Duration::from_millis(200), listener.accept());
        assert!(accepted.await.is_err(), "nothing reached the listener");

        // The handshake never ends (the listener speaks no WebSocket): the TCP connection
        // reaching it is the point.
        let any = tokio::spawn(ws.connect(&url, 1 << 20, Addresses::Any));
        let accepted = tokio::time::timeout(Duration::from_secs(5), listener.accept());
        assert!(accepted.await.is_ok_and(|a| a.is_ok()));
        any.abort();
    }
}
