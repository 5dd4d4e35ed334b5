//! The status endpoint: `/` (a self-contained page that refreshes itself),
//! `/status` (JSON), `/waterfall.svg` (the last minutes of TIMELINE events
//! drawn live) and `/metrics` (Prometheus text).

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use axum::extract::State;
use axum::http::header;
use axum::response::{Html, IntoResponse};
use axum::routing::get;

use super::core::Core;

const PAGE: &str = include_str!("status.html");

async fn page() -> Html<&'static str> {
    Html(PAGE)
}

async fn status(State(core): State<Arc<Core>>) -> impl IntoResponse {
    axum::Json(core.snapshot())
}

async fn metrics(State(core): State<Arc<Core>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        super::metrics_text(&core),
    )
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

async fn waterfall(State(core): State<Arc<Core>>) -> impl IntoResponse {
    let svg = tokio::task::spawn_blocking(move || waterfall_svg(&core))
        .await
        .unwrap_or_default();
    (
        [
            (header::CONTENT_TYPE, "image/svg+xml"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        svg,
    )
}

/// Serves the status endpoint on `addr`; the address bound.
pub async fn serve(core: Arc<Core>, addr: SocketAddr) -> anyhow::Result<SocketAddr> {
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, "the status page is read-only and unauthenticated; it now listens beyond loopback");
    }
    let app = axum::Router::new()
        .route("/", get(page))
        .route("/status", get(status))
        .route("/waterfall.svg", get(waterfall))
        .route("/metrics", get(metrics))
        .with_state(core);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("daemon.status_listen: binding {addr}"))?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!("the status endpoint stopped: {e}");
        }
    });
    Ok(bound)
}
