//! Prometheus metrics from runtime events: proofs completed and failed by
//! workload and variant, stage durations, channel depth per edge, waits,
//! arenas in use and device busy time.

use std::collections::HashMap;

use std::sync::Mutex;

use cuzk_engine::{ArenaPool, Event, EventKind, JobId, Observer, Wait};

/// Records every event as metrics in the global `metrics` recorder (a no-op
/// until one is installed, e.g. by [`serve`]).
pub struct MetricsObserver {
    variant: String,
    workloads: Mutex<HashMap<JobId, String>>,
    depth: Mutex<HashMap<String, i64>>,
}

impl MetricsObserver {
    /// Also keeps the `cuzk_arenas_in_use` gauge of `arenas` current.
    pub fn new(variant: &str, arenas: &ArenaPool) -> Self {
        arenas.watch(|stats| metrics::gauge!("cuzk_arenas_in_use").set(stats.in_use as f64));
        Self {
            variant: variant.into(),
            workloads: Mutex::default(),
            depth: Mutex::default(),
        }
    }

    fn set_depth(&self, node: &str, delta: i64) {
        let mut depth = self.depth.lock().unwrap();
        let d = depth.entry(node.to_string()).or_default();
        *d += delta;
        metrics::gauge!("cuzk_channel_depth", "edge" => format!("into_{node}")).set(*d as f64);
    }
}

impl Observer for MetricsObserver {
    fn on_event(&self, e: &Event<'_>) {
        match &e.kind {
            EventKind::JobSubmitted { label, .. } => {
                self.workloads
                    .lock()
                    .unwrap()
                    .insert(e.job, label.to_string());
                metrics::counter!("cuzk_jobs_submitted_total", "variant" => self.variant.clone())
                    .increment(1);
            }
            EventKind::JobFinished { ok, .. } => {
                let workload = self
                    .workloads
                    .lock()
                    .unwrap()
                    .remove(&e.job)
                    .unwrap_or_default();
                let name = if *ok {
                    "cuzk_proofs_completed_total"
                } else {
                    "cuzk_proofs_failed_total"
                };
                metrics::counter!(name, "workload" => workload, "variant" => self.variant.clone())
                    .increment(1);
            }
            EventKind::Queued { node } => self.set_depth(node.name, 1),
            EventKind::Picked { node, .. } => self.set_depth(node.name, -1),
            EventKind::WaitEnd { node, wait, waited } => {
                let what = match wait {
                    Wait::Arena => "arena".to_string(),
                    Wait::Lease(r) | Wait::Resource(r) | Wait::Gate(r) => r.to_string(),
                };
                metrics::histogram!("cuzk_wait_seconds", "stage" => node.name.to_string(), "for" => what)
                    .record(waited.as_secs_f64());
            }
            EventKind::StageEnd {
                node,
                elapsed,
                error,
                device_spans,
                ..
            } => {
                let stage = node.name.to_string();
                metrics::histogram!("cuzk_stage_duration_seconds", "stage" => stage.clone())
                    .record(elapsed.as_secs_f64());
                if error.is_some() {
                    metrics::counter!("cuzk_stage_errors_total", "stage" => stage).increment(1);
                }
                if let Some(device) = node.device {
                    let busy = cuzk_engine::device_time(*elapsed, device_spans).as_secs_f64();
                    metrics::counter!("cuzk_device_busy_microseconds_total", "device" => device.to_string())
                        .increment((busy * 1e6) as u64);
                }
            }
            EventKind::Retried { node, .. } => {
                let device = node.device.map_or("-".to_string(), |d| d.to_string());
                metrics::counter!("cuzk_device_faults_total", "device" => device, "stage" => node.name.to_string())
                    .increment(1);
            }
            EventKind::PartitionDone => {
                metrics::counter!("cuzk_partitions_completed_total").increment(1);
            }
            EventKind::StageStart { .. }
            | EventKind::WaitStart { .. }
            | EventKind::Dropped { .. } => {}
        }
    }
}

static HANDLE: std::sync::OnceLock<metrics_exporter_prometheus::PrometheusHandle> =
    std::sync::OnceLock::new();

/// Installs the process's Prometheus recorder (once; later calls return the
/// same handle) and returns the handle that renders its text.
pub fn recorder() -> anyhow::Result<&'static metrics_exporter_prometheus::PrometheusHandle> {
    static INSTALLING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(h) = HANDLE.get() {
        return Ok(h);
    }
    // Durations from a millisecond to minutes, as histograms (aggregatable across hosts).
    const BUCKETS: [f64; 16] = [
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0,
        100.0,
    ];
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new()
        .set_buckets(&BUCKETS)
        .map_err(|e| anyhow::anyhow!("histogram buckets: {e}"))?
        .build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder)
        .map_err(|e| anyhow::anyhow!("installing the metrics recorder: {e}"))?;
    metrics::describe_counter!(
        "cuzk_device_busy_microseconds_total",
        metrics::Unit::Microseconds,
        "time each device spent on device stages (device-timed where the backend measures it)"
    );
    Ok(HANDLE.get_or_init(|| handle))
}

/// The metrics in Prometheus' text format.
pub fn render() -> String {
    HANDLE.get().map(|h| h.render()).unwrap_or_default()
}

/// Serves the global metrics in Prometheus' text format at `http://addr/metrics`.
/// Must run inside a tokio runtime.
#[cfg(feature = "daemon")]
pub fn serve(addr: std::net::SocketAddr) -> anyhow::Result<()> {
    recorder()?;
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, "metrics.listen is off loopback and unauthenticated: anyone who reaches it reads the metrics");
    }
    let listener = std::net::TcpListener::bind(addr)
        .map_err(|e| anyhow::anyhow!("serving metrics on {addr} (`metrics.listen`): {e}"))?;
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let app = axum::Router::new().route("/metrics", axum::routing::get(|| async { render() }));
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!("the metrics endpoint stopped: {e}");
        }
    });
    Ok(())
}
