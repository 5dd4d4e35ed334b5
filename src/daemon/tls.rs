//! TLS for the daemon's TCP listeners (rustls, with ring): the server's
//! certificate and key, and optionally the CAs whose client certificates
//! are required (mutual TLS). The files are read and checked at start, so a
//! missing or malformed one is an error naming it, not a failed handshake
//! later; the gRPC listener and the status page serve the same identity.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use cuzk_config::DaemonConfig;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{self, RootCertStore, ServerConfig};

/// The daemon's TLS, read from its configuration.
#[derive(Clone)]
pub struct Tls {
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    client_ca_pem: Option<Vec<u8>>,
    /// For the status page's connections.
    pub acceptor: tokio_rustls::TlsAcceptor,
}

impl Tls {
    /// `daemon.tls_cert` and `daemon.tls_key` (and `tls_client_ca`), or
    /// `None` when neither is set. Either alone, an unreadable file, a file
    /// with no certificate or key, or a key that is not the certificate's is
    /// an error naming the setting and the file.
    pub fn from_config(d: &DaemonConfig) -> anyhow::Result<Option<Self>> {
        let (cert, key) = match (&d.tls_cert, &d.tls_key) {
            (None, None) => {
                anyhow::ensure!(
                    d.tls_client_ca.is_none(),
                    "daemon.tls_client_ca needs daemon.tls_cert and daemon.tls_key (client certificates are asked for in a TLS handshake)"
                );
                return Ok(None);
            }
            (Some(_), None) => anyhow::bail!("daemon.tls_cert is set but daemon.tls_key is not"),
            (None, Some(_)) => anyhow::bail!("daemon.tls_key is set but daemon.tls_cert is not"),
            (Some(c), Some(k)) => (c, k),
        };
        let cert_pem = read("daemon.tls_cert", cert)?;
        let key_pem = read("daemon.tls_key", key)?;
        let client_ca_pem = d
            .tls_client_ca
            .as_ref()
            .map(|p| read("daemon.tls_client_ca", p))
            .transpose()?;
        let config = server_config(
            (cert, &cert_pem),
            (key, &key_pem),
            d.tls_client_ca.as_deref().zip(client_ca_pem.as_deref()),
        )?;
        Ok(Some(Self {
            cert_pem,
            key_pem,
            client_ca_pem,
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        }))
    }

    /// Whether clients must present a certificate from the configured CAs.
    pub fn requires_client_certificate(&self) -> bool {
        self.client_ca_pem.is_some()
    }

    /// The same identity for the gRPC server.
    pub fn for_grpc(&self) -> tonic::transport::ServerTlsConfig {
        let tls = tonic::transport::ServerTlsConfig::new().identity(
            tonic::transport::Identity::from_pem(&self.cert_pem, &self.key_pem),
        );
        match &self.client_ca_pem {
            Some(ca) => tls.client_ca_root(tonic::transport::Certificate::from_pem(ca)),
            None => tls,
        }
    }
}

fn read(setting: &str, path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("{setting}: reading {}", path.display()))
}

fn certificates(
    setting: &str,
    path: &Path,
    pem: &[u8],
) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("{setting}: {} is not PEM", path.display()))?;
    anyhow::ensure!(
        !certs.is_empty(),
        "{setting}: {} holds no certificate (-----BEGIN CERTIFICATE-----)",
        path.display()
    );
    Ok(certs)
}

/// The rustls configuration, which also checks that the files hold what
/// they should and that the key is the certificate's.
fn server_config(
    (cert_path, cert_pem): (&PathBuf, &[u8]),
    (key_path, key_pem): (&PathBuf, &[u8]),
    client_ca: Option<(&Path, &[u8])>,
) -> anyhow::Result<ServerConfig> {
    let certs = certificates("daemon.tls_cert", cert_path, cert_pem)?;
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| {
        anyhow::anyhow!(
            "daemon.tls_key: {} holds no private key in PEM ({e})",
            key_path.display()
        )
    })?;
    // ring, as tonic's `tls-ring`: no cmake or C++ toolchain in the build
    // (aws-lc's post-quantum key exchange is what its deprecation is about).
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("TLS: the protocol versions")?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some((path, pem)) => {
            let mut roots = RootCertStore::empty();
            for ca in certificates("daemon.tls_client_ca", path, pem)? {
                roots.add(ca).with_context(|| {
                    format!(
                        "daemon.tls_client_ca: a certificate in {} is not a usable CA",
                        path.display()
                    )
                })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .context("daemon.tls_client_ca: building the client verifier")?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(certs, key).with_context(|| {
        format!(
            "daemon.tls_key: {} is not the key of the certificate in {}",
            key_path.display(),
            cert_path.display()
        )
    })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}
