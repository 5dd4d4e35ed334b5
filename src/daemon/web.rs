//! The status endpoint: `/` (a self-contained page that refreshes itself),
//! `/status` (JSON), `/waterfall.svg` (the last minutes of TIMELINE events
//! drawn live) and `/metrics` (Prometheus text).
//!
//! It shows job ids (miners and sectors), errors and parameter paths, so it
//! is guarded as the gRPC service is: with `daemon.token` every request
//! carries it (`authorization: Bearer`, or `?token=` for a browser, which
//! the page passes on to its own requests), and without one it serves
//! loopback only and answers only loopback host names (a page on another
//! site cannot read it by DNS rebinding). Connections are capped and must
//! send their headers within [`HEADER_TIMEOUT`] (no slowloris).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;

use super::core::Core;
use super::networks::Network;
use super::service::token_matches;

/// How long a client may take to send a request's headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections served at once; more wait in the listen backlog.
const MAX_CONNECTIONS: usize = 256;

/// How long a drawn waterfall is reused: drawing parses minutes of events.
const WATERFALL_TTL: Duration = Duration::from_secs(5);

const PAGE: &str = include_str!("status.html");

async fn page() -> Html<&'static str> {
    Html(PAGE)
}

async fn status(State(web): State<Web>) -> impl IntoResponse {
    let core = web.core.clone();
    match tokio::task::spawn_blocking(move || core.snapshot()).await {
        Ok(snapshot) => axum::Json(snapshot).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn metrics(State(web): State<Web>) -> impl IntoResponse {
    let core = web.core.clone();
    let text = tokio::task::spawn_blocking(move || super::metrics_text(&core))
        .await
        .unwrap_or_default();
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text)
}

/// A host name a browser on this machine uses for a loopback address.
fn loopback_host(host: &str) -> bool {
    let name = match host.rsplit_once(':') {
        // `[::1]:9821`, `127.0.0.1:9821`, `localhost:9821`; not `::1` alone.
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    matches!(name, "localhost" | "127.0.0.1" | "[::1]")
}

/// The token a request carries: `authorization: Bearer` or `?token=`.
fn given_token(request: &Request) -> Option<String> {
    let header = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(super::service::bearer);
    let query = || {
        request.uri().query()?.split('&').find_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            (k == "token").then(|| v.to_string())
        })
    };
    header.map(str::to_string).or_else(query)
}

/// Refuses requests without the token (when one is set) and, on loopback,
/// requests for other host names.
async fn guard(State(web): State<Web>, request: Request, next: Next) -> Response {
    if web.loopback {
        let host = request
            .headers()
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if !loopback_host(host) {
            return (
                StatusCode::MISDIRECTED_REQUEST,
                "this status endpoint answers loopback host names only (localhost, 127.0.0.1, [::1])",
            )
                .into_response();
        }
    }
    if let Some(token) = &web.token
        && !given_token(&request).is_some_and(|g| token_matches(&g, token))
    {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "this daemon needs its token: `authorization: Bearer <token>` or `?token=<token>`",
        )
            .into_response();
    }
    next.run(request).await
}

/// The waterfall of the events the monitor kept (the last five minutes).
pub fn waterfall_svg(core: &Core) -> String {
    let log = core.monitor.recent_log();
    if log.is_empty() {
        return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"600\" height=\"40\"><text x=\"8\" y=\"24\" font-family=\"sans-serif\" font-size=\"13\" fill=\"#666\">no engine events in the last five minutes</text></svg>".into();
    }
    let w = crate::waterfall::from_log(&log, 1.0);
    crate::waterfall::svg::render(&w.timeline, &w.summary, "last five minutes")
}

/// The endpoint's state: the daemon and the last waterfall drawn.
#[derive(Clone)]
struct Web {
    core: Arc<Core>,
    waterfall: Arc<Mutex<Option<(Instant, String)>>>,
    token: Option<Arc<str>>,
    loopback: bool,
}

async fn waterfall(State(web): State<Web>) -> impl IntoResponse {
    let fresh = web
        .waterfall
        .lock()
        .unwrap()
        .as_ref()
        .filter(|(at, _)| at.elapsed() < WATERFALL_TTL)
        .map(|(_, svg)| svg.clone());
    let svg = match fresh {
        Some(svg) => svg,
        None => {
            let core = web.core.clone();
            let svg = tokio::task::spawn_blocking(move || waterfall_svg(&core))
                .await
                .unwrap_or_default();
            *web.waterfall.lock().unwrap() = Some((Instant::now(), svg.clone()));
            svg
        }
    };
    (
        [
            (header::CONTENT_TYPE, "image/svg+xml"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        svg,
    )
}

/// Serves the status endpoint on `addr`; the address bound. Refuses a
/// non-loopback address without `daemon.token`, as the gRPC service does.
pub async fn serve(
    core: Arc<Core>,
    addr: SocketAddr,
    token: Option<&str>,
    allow_from: Vec<Network>,
    tls: Option<super::tls::Tls>,
) -> anyhow::Result<SocketAddr> {
    let loopback = addr.ip().is_loopback();
    let client_certs = tls
        .as_ref()
        .is_some_and(|t| t.requires_client_certificate());
    anyhow::ensure!(
        loopback || token.is_some() || !allow_from.is_empty() || client_certs,
        "refusing to serve the status page on {addr} without a token: it shows job ids, errors and parameter paths; set `daemon.token`, `daemon.allow_from` or `daemon.tls_client_ca`, or use a loopback address"
    );
    let web = Web {
        core,
        waterfall: Arc::default(),
        token: token.map(Arc::from),
        loopback,
    };
    let app = axum::Router::new()
        .route("/", get(page))
        .route("/status", get(status))
        .route("/waterfall.svg", get(waterfall))
        .route("/metrics", get(metrics))
        .layer(axum::middleware::from_fn_with_state(web.clone(), guard))
        .with_state(web);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("daemon.status_listen: binding {addr}"))?;
    let bound = listener.local_addr()?;
    let acceptor = tls.map(|t| t.acceptor);
    tokio::spawn(accept_forever(listener, app, allow_from, acceptor));
    Ok(bound)
}

/// Serves each connection under the cap, with a deadline for its headers
/// (and its TLS handshake, with TLS). Peers outside `allow_from` (when set)
/// are disconnected at once.
async fn accept_forever(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    allow_from: Vec<Network>,
    tls: Option<tokio_rustls::TlsAcceptor>,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let stream = match listener.accept().await {
            Ok((_, peer))
                if !allow_from.is_empty()
                    && !peer.ip().is_loopback()
                    && !allow_from.iter().any(|n| n.contains(peer.ip())) =>
            {
                tracing::warn!(%peer, "refused a status connection from outside daemon.allow_from");
                continue;
            }
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of descriptors, most likely: back off rather than spin.
                tracing::warn!("the status endpoint could not accept a connection: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let app = app.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let _slot = slot;
            match tls {
                None => serve_connection(stream, app).await,
                Some(acceptor) => {
                    match tokio::time::timeout(HEADER_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(stream)) => serve_connection(stream, app).await,
                        Ok(Err(e)) => tracing::debug!("status connection: TLS handshake: {e}"),
                        Err(_) => tracing::debug!("status connection: no TLS handshake in time"),
                    }
                }
            }
        });
    }
}

/// One HTTP/1.1 connection, its headers read within the deadline.
async fn serve_connection<IO>(io: IO, app: axum::Router)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use hyper_util::rt::{TokioIo, TokioTimer};
    let service = hyper_util::service::TowerToHyperService::new(app);
    let served = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .serve_connection(TokioIo::new(io), service)
        .await;
    if let Err(e) = served {
        tracing::debug!("status connection: {e}");
    }
}
