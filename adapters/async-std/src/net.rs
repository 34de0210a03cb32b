//! TCP (async-net, DNS on its blocking pool), TLS (futures-rustls with ring; the webpki
//! roots by default, or the roots an [`HttpOptions`] asks for) and HTTP `CONNECT` tunnels
//! through a proxy, shared by WebSockets and HTTP.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use async_net::TcpStream;
use futures_io::{AsyncRead, AsyncWrite};
use futures_rustls::client::TlsStream;
use futures_rustls::pki_types::pem::PemObject;
use futures_rustls::pki_types::{CertificateDer, ServerName};
use futures_rustls::rustls::{ClientConfig, RootCertStore};
use futures_rustls::TlsConnector;
use futures_util::{AsyncReadExt, AsyncWriteExt};
use tether_driver::http_options::{ProxyUrl, Roots};

/// A plain or TLS connection.
pub(crate) enum Conn {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

/// Open a TCP connection to `host:port`, wrapped in TLS (with the webpki roots) when `tls`
/// is set.
pub(crate) async fn connect(host: &str, port: u16, tls: bool) -> io::Result<Conn> {
    let config = tls.then(default_config);
    connect_via(host, port, config.as_ref(), None).await
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
    let Some(config) = tls else {
        return Ok(Conn::Plain(tcp));
    };
    if let Some(proxy) = proxy {
        tunnel(&mut tcp, host, port, proxy).await?;
    }
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

/// The rustls configuration `roots` asks for: ring, safe defaults, those roots.
///
/// # Errors
/// A PEM root that does not parse, or none at all to trust.
pub(crate) fn client_config(roots: &Roots) -> io::Result<Arc<ClientConfig>> {
    let mut store = RootCertStore::empty();
    if roots.webpki {
        store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    }
    if roots.native {
        // Unreadable entries of the platform's store are skipped, as browsers do.
        let native = rustls_native_certs::load_native_certs();
        store.add_parsable_certificates(native.certs);
    }
    for pem in &roots.extra_pem {
        for certificate in CertificateDer::pem_slice_iter(pem) {
            let certificate = certificate
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("a root: {e}")))?;
            store
                .add(certificate)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("a root: {e}")))?;
        }
    }
    if store.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "no root certificate to trust",
        ));
    }
    Ok(Arc::new(config_with(store)))
}

fn config_with(roots: RootCertStore) -> ClientConfig {
    let provider = Arc::new(futures_rustls::rustls::crypto::ring::default_provider());
    ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports rustls' default protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth()
}

/// One rustls configuration for the process's default connections: the webpki roots.
pub(crate) fn default_config() -> Arc<ClientConfig> {
    static CONFIG: OnceLock<Arc<ClientConfig>> = OnceLock::new();
    let config = CONFIG.get_or_init(|| {
        let roots = RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        Arc::new(config_with(roots))
    });
    Arc::clone(config)
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
