//! The TLS side of a wss:// [`TestRelay`](crate::server::TestRelay): rustls (ring) with a
//! certificate the test made.

use std::io;
use std::sync::Arc;

use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

/// An acceptor presenting the chain `cert_pem` with `key_pem`.
pub(crate) fn acceptor(cert_pem: &[u8], key_pem: &[u8]) -> io::Result<TlsAcceptor> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(invalid)?;
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(invalid)?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(invalid)?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(invalid)?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

fn invalid(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, e.to_string())
}
