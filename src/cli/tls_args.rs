//! The TLS options of the commands that call a daemon (`cuzk client`,
//! `cuzk bench --addr`).

use std::path::PathBuf;

use cuzk::daemon::client::ClientTls;

#[derive(clap::Args, Clone, Debug, Default)]
pub struct TlsArgs {
    /// With an https:// address: the CA certificate (PEM) that issued the
    /// daemon's.
    #[arg(long, env = "CUZK_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
    /// This client's certificate (PEM), for a daemon that asks for one
    /// (daemon.tls_client_ca); with --tls-key.
    #[arg(long, env = "CUZK_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The key of --tls-cert (PEM).
    #[arg(long, env = "CUZK_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

impl TlsArgs {
    /// The client's TLS, when a CA is given.
    pub fn client(&self) -> Option<ClientTls> {
        self.tls_ca.clone().map(|ca| ClientTls {
            ca,
            identity: self.tls_cert.clone().zip(self.tls_key.clone()),
        })
    }
}
