//! Where the daemon listens (TCP or a unix socket), who may call it, and its
//! lifecycle: start, serve, drain on SIGTERM/SIGINT, stop.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::core::Core;
use super::proto::proving_engine_server::ProvingEngineServer;
use super::service::{Auth, Service};
use crate::engine::EngineOptions;
use cuzk_config::Config;

/// Largest request or response: curio sends PoRep C1 outputs of ~50 MiB and
/// allows 256 MiB (tonic's default of 4 MiB would refuse them).
pub const MAX_MESSAGE: usize = 256 << 20;

/// Calls one connection may have open at once (curio's client holds one
/// Prove per job on one connection; 64 is well above its concurrency).
pub const MAX_STREAMS: u32 = 64;

/// An address the daemon listens on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listen {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl Listen {
    /// `HOST:PORT`, `http://HOST:PORT` or `unix:///path/to.sock`.
    pub fn parse(s: &str) -> anyhow::Result<Self> {
        if let Some(path) = s.strip_prefix("unix://") {
            anyhow::ensure!(
                path.starts_with('/'),
                "daemon.listen: `{s}` needs an absolute path (unix:///run/cuzk.sock)"
            );
            return Ok(Self::Unix(PathBuf::from(path)));
        }
        let hostport = s.strip_prefix("http://").unwrap_or(s);
        use std::net::ToSocketAddrs;
        let addr = hostport
            .to_socket_addrs()
            .with_context(|| format!("daemon.listen: `{s}` is not HOST:PORT or unix:///path"))?
            .next()
            .with_context(|| format!("daemon.listen: `{s}` resolves to no address"))?;
        Ok(Self::Tcp(addr))
    }

    /// Whether only this host can reach it.
    pub fn is_local(&self) -> bool {
        match self {
            Self::Tcp(a) => a.ip().is_loopback(),
            Self::Unix(_) => true,
        }
    }
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Tcp(a) => write!(f, "{a}"),
            Self::Unix(p) => write!(f, "unix://{}", p.display()),
        }
    }
}

/// A running daemon.
pub struct Running {
    pub core: Arc<Core>,
    /// Where it listens (a TCP port of 0 resolved to the one bound).
    pub listen: Listen,
    /// Where the status page is, if it is served.
    pub status: Option<SocketAddr>,
    stop: Option<oneshot::Sender<()>>,
    server: JoinHandle<Result<(), tonic::transport::Error>>,
}

/// Binds and serves; returns once the daemon accepts calls. Inside a tokio
/// runtime. Refuses a non-loopback TCP address without `daemon.token`.
pub async fn start(config: Config, options: EngineOptions) -> anyhow::Result<Running> {
    let listen = Listen::parse(&config.daemon.listen)?;
    let token = config.daemon.token.clone();
    let allow_from = config
        .daemon
        .allow_from
        .iter()
        .map(|n| super::networks::Network::parse(n))
        .collect::<Result<Vec<_>, _>>()
        .map_err(anyhow::Error::msg)?;
    let tls = super::tls::Tls::from_config(&config.daemon)?;
    if tls.is_some() && matches!(listen, Listen::Unix(_)) {
        anyhow::bail!(
            "daemon.tls_cert is for a TCP listener; {listen} is a unix socket, which only local users with access to it can reach (unset the TLS settings, or listen on HOST:PORT)"
        );
    }
    let client_certs = tls
        .as_ref()
        .is_some_and(|t| t.requires_client_certificate());
    if !listen.is_local() && token.is_none() && allow_from.is_empty() && !client_certs {
        anyhow::bail!(
            "refusing to listen on {listen} without a token: a non-loopback address needs `daemon.token` (or CUZK_DAEMON__TOKEN), `daemon.allow_from` naming the client networks, or client certificates (`daemon.tls_client_ca`); use 127.0.0.1 or a unix socket for an unauthenticated local daemon"
        );
    }
    if !listen.is_local() && token.is_some() && tls.is_none() {
        tracing::warn!(
            "{listen} is not loopback and serves plain text: the token crosses the network in clear; set daemon.tls_cert and daemon.tls_key"
        );
    }
    crate::metrics::recorder()?;
    raise_fd_limit();
    let core = Core::start(config.clone(), options)?;
    let service = ProvingEngineServer::new(Service { core: core.clone() })
        .max_decoding_message_size(MAX_MESSAGE)
        .max_encoding_message_size(MAX_MESSAGE);
    let service = tonic::service::interceptor::InterceptedService::new(
        service,
        Auth::new(token.as_deref(), allow_from.clone()),
    );
    // Bounds before authentication and before a body is read: streams per
    // connection (hyper's default is none), and keepalives that close dead
    // peers' connections instead of holding them for ever.
    let mut builder = tonic::transport::Server::builder();
    if let Some(t) = &tls {
        builder = builder
            .tls_config(t.for_grpc())
            .context("daemon.tls_cert: the gRPC server's TLS")?;
    }
    let router = builder
        .max_concurrent_streams(MAX_STREAMS)
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(Duration::from_secs(20)))
        .add_service(super::grpc_health::serve(&core).await)
        .add_service(service);
    let (stop, stopped) = oneshot::channel::<()>();
    let shutdown = async {
        let _ = stopped.await;
    };
    let (listen, server) = match listen {
        Listen::Tcp(addr) => {
            let l = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("daemon.listen: binding {addr}"))?;
            let bound = l.local_addr()?;
            let incoming = tokio_stream::wrappers::TcpListenerStream::new(l);
            (
                Listen::Tcp(bound),
                tokio::spawn(router.serve_with_incoming_shutdown(incoming, shutdown)),
            )
        }
        Listen::Unix(path) => {
            let l = bind_unix(&path)?;
            let incoming = tokio_stream::wrappers::UnixListenerStream::new(l);
            (
                Listen::Unix(path),
                tokio::spawn(router.serve_with_incoming_shutdown(incoming, shutdown)),
            )
        }
    };
    let status = match config.daemon.status_listen {
        Some(addr) => Some(
            super::web::serve(
                core.clone(),
                addr,
                token.as_deref(),
                allow_from.clone(),
                tls.clone(),
            )
            .await?,
        ),
        None => None,
    };
    let auth = match (&token, &listen) {
        (Some(_), _) => "every call must carry `authorization: Bearer <token>`",
        (None, Listen::Tcp(_)) if !allow_from.is_empty() => {
            "no token: peers in daemon.allow_from and loopback may call"
        }
        (None, Listen::Unix(_)) => {
            "no token: only local users with access to the socket (mode 0660) can call"
        }
        (None, Listen::Tcp(_)) => "no token: loopback only, any local process can call",
    };
    let tls = match &tls {
        Some(t) if t.requires_client_certificate() => "TLS, client certificates required",
        Some(_) => "TLS",
        None => "plain text",
    };
    tracing::info!(%listen, status = ?status, "cuzk daemon listening ({tls}); {auth}");
    Ok(Running {
        core,
        listen,
        status,
        stop: Some(stop),
        server,
    })
}

/// Raises the soft limit on open files to the hard one: every connection
/// takes a descriptor, and running out of them fails parameter and recording
/// opens, so jobs would fail for idle clients (the soft limit is often 1024).
fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: get/setrlimit on a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            let was = lim.rlim_cur;
            lim.rlim_cur = lim.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0 {
                tracing::debug!(from = was, to = lim.rlim_max, "raised the open-file limit");
            }
        }
    }
}

/// A unix socket at `path` (a stale one from a previous run replaced), mode 0660.
fn bind_unix(path: &std::path::Path) -> anyhow::Result<tokio::net::UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("daemon.listen: creating {}", dir.display()))?;
    }
    if path.exists() {
        anyhow::ensure!(
            std::os::unix::net::UnixStream::connect(path).is_err(),
            "daemon.listen: {} is in use by a running daemon",
            path.display()
        );
        std::fs::remove_file(path)
            .with_context(|| format!("removing the stale socket {}", path.display()))?;
    }
    // The socket is created 0660 (not chmod-ed after bind), so no
    // connection can be made in between under a permissive umask.
    // SAFETY: umask only swaps this process's file-mode mask; restored below.
    let umask = unsafe { libc::umask(0o117) };
    let bound = tokio::net::UnixListener::bind(path);
    // SAFETY: as above.
    unsafe { libc::umask(umask) };
    let l = bound.with_context(|| format!("daemon.listen: binding {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))?;
    Ok(l)
}

impl Running {
    /// Drains (no new jobs; accepted ones finish, for up to `timeout`; the
    /// rest fail, their waiters told why), then stops serving.
    pub async fn shutdown(mut self, timeout: Duration) -> anyhow::Result<()> {
        tracing::info!(timeout_s = timeout.as_secs(), "draining");
        self.core.drain(timeout).await;
        // Let waiters read their answers before the server goes.
        tokio::time::sleep(Duration::from_millis(100)).await;
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let served = tokio::time::timeout(Duration::from_secs(10), &mut self.server).await;
        if tokio::time::timeout(super::core::ENGINE_STOP, self.core.engine.shutdown())
            .await
            .is_err()
        {
            tracing::warn!("the engine's stages did not stop in time; exiting anyway");
        }
        if let Listen::Unix(path) = &self.listen {
            let _ = std::fs::remove_file(path);
        }
        match served {
            Ok(Ok(Ok(()))) | Err(_) => Ok(()),
            Ok(Ok(Err(e))) => Err(e.into()),
            Ok(Err(e)) => Err(e.into()),
        }
    }

    /// Serves until SIGTERM or SIGINT, then shuts down (see [`Running::shutdown`]).
    pub async fn until_signal(self) -> anyhow::Result<()> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        let which = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        tracing::info!("{which}: stopping (a second signal exits at once)");
        let timeout = Duration::from_secs(self.core.config.daemon.drain_timeout_s);
        tokio::select! {
            done = self.shutdown(timeout) => done,
            _ = term.recv() => second_signal("SIGTERM"),
            _ = int.recv() => second_signal("SIGINT"),
        }
    }
}

/// An operator who signals twice wants the daemon gone now: unfinished jobs
/// are lost (their clients see the connection drop and retry).
fn second_signal(which: &str) -> anyhow::Result<()> {
    tracing::warn!("{which} again while draining: exiting now, unfinished jobs are lost");
    std::process::exit(130)
}
