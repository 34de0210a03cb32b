//! TCP (async-net, DNS on its blocking pool), TLS (futures-rustls, with the configuration
//! `tether_driver::tls` built from the roots asked for) and HTTP `CONNECT` tunnels through a
//! proxy, shared by WebSockets and HTTP.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use async_net::TcpStream;
use futures_io::{AsyncRead, AsyncWrite};
use futures_rustls::client::TlsStream;
use futures_rustls::pki_types::ServerName;
use futures_rustls::rustls::ClientConfig;
use futures_rustls::TlsConnector;
use futures_util::{AsyncReadExt, AsyncWriteExt};
use tether_driver::http_options::ProxyUrl;

/// A plain or TLS connection.
pub(crate) enum Conn {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

/// Open a TCP connection to the first of `addresses` (`host` resolved) that answers,
/// wrapped in TLS for `host` with `tls` when given.
pub(crate) async fn connect(
    addresses: &[SocketAddr],
    host: &str,
    tls: Option<&Arc<ClientConfig>>,
) -> io::Result<Conn> {
    let tcp = TcpStream::connect(addresses).await?;
    tcp.set_nodelay(true)?;
    secure(tcp, host, tls).await
}

/// Open a connection to `host:port`: directly, or through `proxy`. With `tls` (an https://
/// target) through a proxy, a `CONNECT` tunnel carries the TLS session end to end; without,
/// the connection is to the proxy itself, which the request then names in absolute form.
pub(crate) async fn connect_via(
    host: &str,
    port: u16,
    tls: Option<&Arc<ClientConfig>>,
    proxy: Option<&ProxyUrl>,
) -> io::Result<Conn> {
    // A URI keeps IPv6 literals in brackets; neither DNS nor a server name wants them.
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let mut tcp = match proxy {
        Some(proxy) => TcpStream::connect((proxy.host.as_str(), proxy.port)).await?,
        None => TcpStream::connect((host, port)).await?,
    };
    tcp.set_nodelay(true)?;
    if let (Some(proxy), Some(_)) = (proxy, tls) {
        tunnel(&mut tcp, host, port, proxy).await?;
    }
    secure(tcp, host, tls).await
}

/// `tcp` as a connection to `host`: in TLS with `tls` when given.
async fn secure(tcp: TcpStream, host: &str, tls: Option<&Arc<ClientConfig>>) -> io::Result<Conn> {
    let Some(config) = tls else {
        return Ok(Conn::Plain(tcp));
    };
    let name = ServerName::try_from(host.to_owned())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let stream = TlsConnector::from(Arc::clone(config))
        .connect(name, tcp)
        .await?;
    Ok(Conn::Tls(Box::new(stream)))
}

/// The longest `CONNECT` answer head read from a proxy.
const MAX_PROXY_HEAD: usize = 8 * 1024;

/// Ask `proxy` (already connected on `tcp`) for a tunnel to `host:port`. A refusal (any
/// status but 2xx, 407 included) is `ConnectionRefused`: nothing reached the server.
async fn tunnel(tcp: &mut TcpStream, host: &str, port: u16, proxy: &ProxyUrl) -> io::Result<()> {
    let authority = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let mut head = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n");
    if let Some(authorization) = &proxy.authorization {
        head.push_str(&format!("Proxy-Authorization: {authorization}\r\n"));
    }
    head.push_str("\r\n");
    tcp.write_all(head.as_bytes()).await?;
    // Byte by byte: the tunnel's first bytes after the head are the server's, not ours to
    // consume (and a head is a few dozen bytes).
    let mut answer = Vec::with_capacity(128);
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n\r\n") {
        if answer.len() >= MAX_PROXY_HEAD || tcp.read(&mut byte).await? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionRefused,
                "the proxy closed or overflowed its CONNECT answer",
            ));
        }
        answer.push(byte[0]);
    }
    let status_line = String::from_utf8_lossy(&answer);
    let status_line = status_line.lines().next().unwrap_or_default();
    let status = status_line.split_whitespace().nth(1).unwrap_or_default();
    if status.len() == 3 && status.starts_with('2') && status_line.starts_with("HTTP/1.") {
        return Ok(());
    }
    Err(io::Error::new(
        io::ErrorKind::ConnectionRefused,
        format!("the proxy refused the tunnel: {status_line}"),
    ))
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Conn::Tls(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Conn::Tls(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_flush(cx),
            Conn::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_close(cx),
            Conn::Tls(s) => Pin::new(s).poll_close(cx),
        }
    }
}
