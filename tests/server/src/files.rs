//! Files a test makes for its peers: a [`TempDir`] removed when dropped, and a [`TestCa`]
//! (a CA and a leaf certificate for loopback, made with `openssl`) for the TLS peers: the
//! wss:// [`TestRelay`](crate::server::TestRelay), nginx, an https:// SSE server.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A certificate authority made for one test with `openssl` (Debian's package), and a leaf
/// certificate it signed for `localhost` and 127.0.0.1: what an https:// server on loopback
/// needs, and the root a client must be given to trust it.
#[derive(Debug)]
pub struct TestCa {
    dir: TempDir,
}

impl TestCa {
    /// Make the CA and the leaf (P-256 keys, valid two days).
    ///
    /// # Errors
    /// When `openssl` is missing or fails.
    pub fn new(openssl: &Path) -> io::Result<TestCa> {
        let dir = TempDir::new("ca")?;
        let d = dir.path();
        fs::write(
            d.join("leaf.ext"),
            "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n\
             extendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n",
        )?;
        let key = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        let steps: [&[&str]; 3] = [
            &[
                &["req", "-x509", "-days", "2", "-subj", "/CN=tether test CA"],
                &key[..],
                &[
                    "-addext",
                    "basicConstraints=critical,CA:TRUE",
                    "-addext",
                    "keyUsage=critical,keyCertSign,cRLSign",
                    "-keyout",
                    "ca.key",
                    "-out",
                    "ca.pem",
                ],
            ]
            .concat(),
            &[
                &["req", "-subj", "/CN=localhost"],
                &key[..],
                &["-keyout", "leaf.key", "-out", "leaf.csr"],
            ]
            .concat(),
            &[
                "x509",
                "-req",
                "-days",
                "2",
                "-in",
                "leaf.csr",
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-extfile",
                "leaf.ext",
                "-out",
                "leaf.pem",
            ],
        ];
        for args in steps {
            let out = Command::new(openssl).args(args).current_dir(d).output()?;
            if !out.status.success() {
                return Err(io::Error::other(format!(
                    "openssl {args:?}: {}",
                    String::from_utf8_lossy(&out.stderr)
                )));
            }
        }
        Ok(TestCa { dir })
    }

    /// The CA's certificate, PEM: the root to trust.
    ///
    /// # Errors
    /// When it cannot be read.
    pub fn root_pem(&self) -> io::Result<Vec<u8>> {
        fs::read(self.root_cert())
    }

    /// The CA certificate's PEM file.
    pub fn root_cert(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// The leaf certificate's PEM file.
    pub fn leaf_cert(&self) -> PathBuf {
        self.dir.path().join("leaf.pem")
    }

    /// The leaf key's PEM file.
    pub fn leaf_key(&self) -> PathBuf {
        self.dir.path().join("leaf.key")
    }
}

/// A directory under the system temp dir, removed with everything in it when dropped.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// A fresh, empty directory whose name starts with `tether-{label}-`.
    ///
    /// # Errors
    /// When it cannot be created.
    pub fn new(label: &str) -> io::Result<TempDir> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        // The time as well as the process: a stale directory of a reused pid is not this one.
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path =
            std::env::temp_dir().join(format!("tether-{label}-{}-{n}-{nanos}", std::process::id()));
        fs::create_dir_all(&path)?;
        Ok(TempDir { path })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}
