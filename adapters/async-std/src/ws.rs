//! WebSockets through async-tungstenite over async-net (rustls for wss://, with the roots
//! `Config::roots` names: the webpki roots by default).

use std::sync::Arc;

use tether_driver::tls::SocketTls;
use tether_driver::ws_dial::WsDial;
use tether_driver::{Addresses, BoxFuture, BoxSocket, WsConnect, WsError};

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
            let resolved = async_net::resolve((dial.host.as_str(), dial.port))
                .await
                .map_err(WsError::Io)?;
            let admitted = dial.admit(resolved).map_err(WsError::Io)?;
            let conn = net::connect(&admitted, &dial.host, dial.tls.as_ref())
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

#[cfg(test)]
mod tests {
    use std::pin::pin;
    use std::time::Duration;

    use futures_util::future::{select, Either};
    use tether_driver::Roots;

    use super::*;

    /// `localhost` resolves to a loopback address: told to dial public addresses only, the
    /// connector refuses it before any connection is made; told any, it connects.
    #[test]
    fn a_name_that_resolves_into_the_network_is_not_dialed_when_only_public_is() {
        async_io::block_on(async {
            let listener = async_net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            let ws = AsyncIoWs::new(SocketTls::new(&Roots::default()).unwrap());
            let url = format!("ws://localhost:{port}");
            let Err(WsError::Io(refused)) = ws.connect(&url, 1 << 20, Addresses::Public).await
            else {
                panic!("a private address was dialed");
            };
            assert_eq!(refused.kind(), std::io::ErrorKind::PermissionDenied);
            assert!(
                refused.to_string().starts_with("localhost resolves to "),
                "{refused}"
            );
            let quiet = async_io::Timer::after(Duration::from_millis(200));
            let accept = pin!(listener.accept());
            let reached = select(accept, quiet).await;
            assert!(
                matches!(reached, Either::Right(_)),
                "nothing reached the listener"
            );

            // The handshake never ends (the listener speaks no WebSocket): the TCP
            // connection reaching it is the point.
            let any = ws.connect(&url, 1 << 20, Addresses::Any);
            let accept = pin!(listener.accept());
            let reached = select(any, accept).await;
            assert!(matches!(reached, Either::Right((Ok(_), _))));
        });
    }
}
