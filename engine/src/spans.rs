//! `tracing` spans from runtime events: one span per job, a child per
//! partition, and a child of that per stage run and per wait. Exported by
//! whatever subscriber the host installs (OTLP to Jaeger, for the CLI).
//!
//! Stage spans carry `otel.name` = the node's name, so a trace viewer shows
//! `synth`, `gpu_ntt_msm`, ... with attributes job, partition, stage,
//! worker, device, backend and the stage's notes (points, constraints, ...).

use std::collections::HashMap;
use std::sync::Mutex;

use tracing::{Span, field};

use crate::job::JobId;
use crate::observer::{Event, EventKind, NodeRef, Observer, Wait};

/// The target of every span this observer creates (for subscriber filters).
pub const TARGET: &str = "cuzk::trace";

#[derive(Default)]
struct JobSpans {
    job: Option<Span>,
    partitions: HashMap<usize, Span>,
    /// Open stage and wait spans, by (partition, node).
    open: HashMap<(usize, String), Span>,
    waits: HashMap<(usize, String), Span>,
}

/// Creates and closes spans as items move through the graph.
#[derive(Default)]
pub struct SpanObserver {
    jobs: Mutex<HashMap<JobId, JobSpans>>,
}

impl SpanObserver {
    pub fn new() -> Self {
        Self::default()
    }

    fn partition_span(spans: &mut JobSpans, job: JobId, partition: usize) -> Span {
        let parent = spans.job.clone().unwrap_or_else(Span::none);
        spans
            .partitions
            .entry(partition)
            .or_insert_with(|| {
                tracing::info_span!(target: TARGET, parent: &parent, "partition", job = job, partition = partition)
            })
            .clone()
    }

    fn stage_span(parent: &Span, job: JobId, partition: usize, node: &NodeRef<'_>) -> Span {
        tracing::info_span!(
            target: TARGET,
            parent: parent,
            "stage",
            otel.name = node.name,
            job = job,
            partition = partition,
            stage = node.name,
            worker = node.worker.map(|w| w as i64).unwrap_or(-1),
            device = node.device.map(|d| d as i64).unwrap_or(-1),
            role = node.role.as_str(),
            backend = field::Empty,
            points = field::Empty,
            constraints = field::Empty,
            notes = field::Empty,
            device_ms = field::Empty,
            error = field::Empty,
            otel.status_code = field::Empty,
        )
    }
}

fn wait_name(wait: Wait<'_>) -> String {
    match wait {
        Wait::Arena => "wait arena".into(),
        Wait::Lease(l) => format!("wait lease {l}"),
        Wait::Resource(r) => format!("wait {r}"),
        Wait::Gate(g) => format!("wait {g}"),
    }
}

impl Observer for SpanObserver {
    fn on_event(&self, e: &Event<'_>) {
        let mut jobs = self.jobs.lock().unwrap();
        match &e.kind {
            EventKind::JobSubmitted {
                label,
                partitions,
                priority,
            } => {
                let span = tracing::info_span!(
                    target: TARGET,
                    parent: None,
                    "job",
                    otel.name = format!("job {label}"),
                    job = e.job,
                    label = *label,
                    partitions = *partitions,
                    priority = *priority,
                    error = field::Empty,
                    otel.status_code = field::Empty,
                );
                jobs.entry(e.job).or_default().job = Some(span);
            }
            EventKind::JobFinished { ok, error } => {
                if let Some(spans) = jobs.remove(&e.job)
                    && let (Some(job), Some(err)) = (&spans.job, error)
                {
                    job.record("error", *err);
                    job.record("otel.status_code", if *ok { "OK" } else { "ERROR" });
                }
                // Dropping closes the remaining partition, stage and job spans.
            }
            EventKind::StageStart { node } => {
                let (Some(p), Some(spans)) = (e.partition, jobs.get_mut(&e.job)) else {
                    return;
                };
                let parent = Self::partition_span(spans, e.job, p);
                let span = Self::stage_span(&parent, e.job, p, node);
                spans.open.insert((p, node.name.to_string()), span);
            }
            EventKind::StageEnd {
                node,
                error,
                notes,
                device_spans,
                ..
            } => {
                let (Some(p), Some(spans)) = (e.partition, jobs.get_mut(&e.job)) else {
                    return;
                };
                if let Some(span) = spans.open.remove(&(p, node.name.to_string())) {
                    let mut rest = vec![];
                    for (k, v) in notes.iter() {
                        match *k {
                            "backend" | "points" | "constraints" => {
                                span.record(*k, v.as_str());
                            }
                            _ => rest.push(format!("{k}={v}")),
                        }
                    }
                    if !rest.is_empty() {
                        span.record("notes", rest.join(" "));
                    }
                    if !device_spans.is_empty() {
                        let device: f64 = device_spans
                            .iter()
                            .map(|s| (s.end - s.start).as_secs_f64())
                            .sum();
                        span.record("device_ms", device * 1e3);
                    }
                    if let Some(err) = error {
                        span.record("error", *err);
                        span.record("otel.status_code", "ERROR");
                    }
                }
            }
            EventKind::WaitStart { node, wait } => {
                let (Some(p), Some(spans)) = (e.partition, jobs.get_mut(&e.job)) else {
                    return;
                };
                let parent = Self::partition_span(spans, e.job, p);
                let span = tracing::info_span!(
                    target: TARGET,
                    parent: &parent,
                    "wait",
                    otel.name = wait_name(*wait),
                    job = e.job,
                    partition = p,
                    stage = node.name,
                );
                spans.waits.insert((p, node.name.to_string()), span);
            }
            EventKind::WaitEnd { node, .. } => {
                let (Some(p), Some(spans)) = (e.partition, jobs.get_mut(&e.job)) else {
                    return;
                };
                spans.waits.remove(&(p, node.name.to_string()));
            }
            EventKind::PartitionDone => {
                let (Some(p), Some(spans)) = (e.partition, jobs.get_mut(&e.job)) else {
                    return;
                };
                spans.partitions.remove(&p);
            }
            EventKind::Queued { .. } => {
                // The partition's span opens when it enters the graph.
                let (Some(p), Some(spans)) = (e.partition, jobs.get_mut(&e.job)) else {
                    return;
                };
                Self::partition_span(spans, e.job, p);
            }
            EventKind::Retried { node, error, .. } => {
                let (Some(p), Some(spans)) = (e.partition, jobs.get_mut(&e.job)) else {
                    return;
                };
                if let Some(span) = spans.partitions.get(&p) {
                    tracing::warn!(target: TARGET, parent: span, device = node.device.map(|d| d as i64).unwrap_or(-1), %error, "device fault: retrying on another device");
                }
            }
            EventKind::Picked { .. } | EventKind::Dropped { .. } => {}
        }
    }
}
