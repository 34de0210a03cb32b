//! The rustls client configuration a runtime's connections use: which roots ([`Roots`]),
//! ring as the crypto provider, rustls' safe default protocol versions. Built once per
//! setting and shared by every connection: a configuration holds its whole root store
//! (Mozilla's roots are about 150 certificates), so one per socket would cost every idle
//! wss:// connection tens of kilobytes.

use std::io;
use std::sync::{Arc, OnceLock};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};

use crate::http_options::Roots;
use crate::ConnectError;

/// The rustls these configurations are of (a runtime names its types through it).
pub use rustls;

/// The TLS configuration a client's or pool's WebSocket connector shares among its sockets:
/// built once from `Config::roots`, or why those roots cannot be used.
#[derive(Clone, Debug)]
pub struct SocketTls(Result<Arc<ClientConfig>, Arc<str>>);

impl SocketTls {
    /// For an entry point that can refuse its configuration (a relay client, a restored
    /// pool).
    ///
    /// # Errors
    /// [`ConnectError::Tls`] when `roots` cannot be used.
    pub fn new(roots: &Roots) -> Result<Self, ConnectError> {
        client_config(roots)
            .map(|config| SocketTls(Ok(config)))
            .map_err(|e| ConnectError::Tls(e.to_string()))
    }

    /// For an entry point that cannot fail (`pool`): roots that cannot be used fail every
    /// wss:// connect instead ([`SocketTls::config`]), reported as a TLS failure, and are
    /// logged once here.
    pub fn or_failing(roots: &Roots) -> Self {
        match client_config(roots) {
            Ok(config) => SocketTls(Ok(config)),
            Err(error) => {
                tracing::error!(%error, "the configured roots cannot be used: wss:// connects fail");
                SocketTls(Err(Arc::from(error.to_string())))
            }
        }
    }

    /// The configuration for a wss:// connect.
    ///
    /// # Errors
    /// Why the roots cannot be used, as the invalid data a rejected certificate is: the
    /// drivers report it as `tls_rejected`.
    pub fn config(&self) -> io::Result<Arc<ClientConfig>> {
        self.0.clone().map_err(|why| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the root certificates cannot be used: {why}"),
            )
        })
    }
}

/// The configuration `roots` asks for; the default roots share one configuration per
/// process.
///
/// # Errors
/// A PEM root that does not parse, or none at all to trust.
pub fn client_config(roots: &Roots) -> io::Result<Arc<ClientConfig>> {
    if *roots == Roots::default() {
        return Ok(default_config());
    }
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
            let certificate = certificate.map_err(|e| invalid(format!("a root: {e}")))?;
            store
                .add(certificate)
                .map_err(|e| invalid(format!("a root: {e}")))?;
        }
    }
    if store.is_empty() {
        return Err(invalid("no root certificate to trust".to_owned()));
    }
    Ok(Arc::new(config_with(store)))
}

/// One configuration for the process's default connections: the webpki roots.
pub fn default_config() -> Arc<ClientConfig> {
    static CONFIG: OnceLock<Arc<ClientConfig>> = OnceLock::new();
    let config = CONFIG.get_or_init(|| {
        let roots = RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        Arc::new(config_with(roots))
    });
    Arc::clone(config)
}

fn config_with(roots: RootCertStore) -> ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports rustls' default protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth()
}

fn invalid(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_roots_share_one_configuration() {
        let a = client_config(&Roots::default()).expect("default");
        let b = client_config(&Roots::default()).expect("default");
        assert!(Arc::ptr_eq(&a, &b));
    }

    #[test]
    fn a_root_that_is_not_pem_or_no_root_at_all_is_refused() {
        let mut roots = Roots {
            webpki: false,
            ..Roots::default()
        };
        let none = client_config(&roots).expect_err("nothing to trust");
        assert_eq!(none.to_string(), "no root certificate to trust");
        roots.extra_pem =
            vec![b"-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n".to_vec()];
        let bad = client_config(&roots).expect_err("not a certificate");
        assert!(bad.to_string().starts_with("a root: "), "{bad}");
    }

    #[test]
    fn roots_that_cannot_be_used_fail_each_wss_connect_as_a_rejected_certificate() {
        let roots = Roots {
            webpki: false,
            ..Roots::default()
        };
        assert_eq!(
            SocketTls::new(&roots).map(|_| ()),
            Err(ConnectError::Tls("no root certificate to trust".to_owned()))
        );
        let error = SocketTls::or_failing(&roots)
            .config()
            .expect_err("no roots");
        let loss = crate::wire::socket_loss(&tungstenite::Error::Io(error));
        assert_eq!(loss, tether_core::link::SocketLoss::TlsRejected);
    }
}
