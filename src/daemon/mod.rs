//! `cuzk daemon`: the `cuzk.v1.ProvingEngine` gRPC service Curio's cuzk
//! client speaks (the proto is `daemon/proto/cuzk/v1/proving.proto`), over
//! one engine: Filecoin requests validated at submission, an admission queue
//! by aged priority bounded by `daemon.max_queued`, admission by a host
//! memory budget, parameters loaded on first use and kept within a budget
//! (LRU), a status page, and a drain on SIGTERM that loses no accepted job.
//!
//! - [`core`]: the daemon without the wire (submit, admit, await, cancel, drain);
//! - [`service`] and [`server`]: gRPC, authentication, listening, lifecycle;
//! - [`tls`]: TLS (and client certificates) for the TCP listeners;
//! - [`web`] and [`status`]: the status page and the snapshot behind it;
//! - [`client`]: the client `cuzk client` and `cuzk bench --addr` use.

pub mod circuit_id;
pub mod client;
pub mod core;
pub mod grpc_health;
pub mod health;
pub mod jobs;
pub mod monitor;
pub mod networks;
pub mod proto;
pub mod queue;
pub mod request;
pub mod server;
pub mod service;
pub mod status;
pub mod tls;
pub mod web;

pub use server::{Listen, Running, start};

/// The daemon's metrics in Prometheus' text format, its own gauges updated
/// first (queue, memory admitted, resident set).
pub fn metrics_text(core: &core::Core) -> String {
    use std::sync::atomic::Ordering;
    let (rss, _) = core::rss();
    metrics::gauge!("cuzk_daemon_rss_bytes").set(rss as f64);
    metrics::gauge!("cuzk_daemon_queued_jobs").set(core.queue.lock().unwrap().len() as f64);
    metrics::gauge!("cuzk_daemon_admitted_bytes").set(core.in_flight.load(Ordering::SeqCst) as f64);
    metrics::gauge!("cuzk_daemon_memory_budget_bytes").set(core.budget as f64);
    metrics::gauge!("cuzk_daemon_healthy").set(if core.health.unhealthy().is_some() {
        0.0
    } else {
        1.0
    });
    crate::metrics::render()
}
