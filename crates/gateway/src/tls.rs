//! HTTPS for the S3 endpoint: rustls (with aws-lc-rs) serving a certificate chain and key
//! read from PEM files, read again when either file changes so that a renewed certificate
//! takes effect on new connections without a restart.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

/// How often the files are checked for a change.
const RELOAD_CHECK: Duration = Duration::from_secs(2);

/// The endpoint's certificate and key, and the files they come from.
#[derive(Debug)]
pub struct Certificates {
    cert: PathBuf,
    key: PathBuf,
    /// What is served, and the files' modification times when it was read.
    current: RwLock<(Arc<CertifiedKey>, [Option<SystemTime>; 2])>,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Reads a PEM certificate chain and private key; errors name the file and the problem.
fn read(cert: &Path, key: &Path) -> io::Result<Arc<CertifiedKey>> {
    let bad =
        |path: &Path, what: String| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {what}", path.display()));
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| bad(cert, e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| bad(cert, e.to_string()))?;
    if chain.is_empty() {
        return Err(bad(cert, "no CERTIFICATE in the file".into()));
    }
    let private = PrivateKeyDer::from_pem_file(key).map_err(|e| bad(key, e.to_string()))?;
    let signing = provider().key_provider.load_private_key(private).map_err(|e| bad(key, e.to_string()))?;
    let certified = CertifiedKey::new(chain, signing);
    certified.keys_match().map_err(|e| bad(key, format!("the key does not match the certificate: {e}")))?;
    Ok(Arc::new(certified))
}

impl Certificates {
    /// Reads `cert` (PEM chain, leaf first) and `key` (PEM private key).
    pub fn load(cert: &Path, key: &Path) -> io::Result<Arc<Certificates>> {
        let current = read(cert, key)?;
        let times = [modified(cert), modified(key)];
        Ok(Arc::new(Certificates {
            cert: cert.to_owned(),
            key: key.to_owned(),
            current: RwLock::new((current, times)),
        }))
    }

    /// Reads the files again if either changed since they were read; a pair that does
    /// not load is logged and the old one kept. Whether a new pair is served.
    pub fn reload_if_changed(&self) -> bool {
        let times = [modified(&self.cert), modified(&self.key)];
        if self.current.read().is_ok_and(|c| c.1 == times) {
            return false;
        }
        match read(&self.cert, &self.key) {
            Ok(fresh) => {
                if let Ok(mut current) = self.current.write() {
                    *current = (fresh, times);
                }
                tracing::info!(cert = %self.cert.display(), "TLS certificate reloaded");
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "the changed TLS certificate does not load; serving the previous one");
                if let Ok(mut current) = self.current.write() {
                    current.1 = times;
                }
                false
            }
        }
    }

    /// Checks the files every few seconds, forever.
    pub async fn watch(self: Arc<Self>) {
        loop {
            tokio::time::sleep(RELOAD_CHECK).await;
            self.reload_if_changed();
        }
    }

    /// A TLS acceptor serving these certificates (HTTP/1.1).
    pub fn acceptor(self: &Arc<Self>) -> io::Result<tokio_rustls::TlsAcceptor> {
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(io::Error::other)?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
    }
}

impl ResolvesServerCert for Certificates {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current.read().ok().map(|c| c.0.clone())
    }
}
