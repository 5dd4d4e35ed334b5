//! TIMELINE events in the seeds' format, one line per transition:
//!
//! ```text
//! TIMELINE,<offset_ms>,<event>,<job_id>,<detail>
//! ```
//!
//! `offset_ms` counts from the writer's creation (three decimals); `detail`
//! is `key=value` pairs joined by commas (`partition=3,worker=1,device=0,
//! stage=gpu_ntt_msm,role=device,...`). Names and keys come from
//! [`crate::vocab`], which readers share.
//! Each node's declared event prefix names its events: `SYNTH_START`,
//! `GPU_QUEUE`, `GPU_PICKUP`, `B_G2_END` and so on. For a stage that times
//! its own device work, `<PREFIX>_START/END` bound each device span and
//! `<PREFIX>_HOST_START/END` bound the whole stage, so GPU time in a timeline
//! is device time, not time holding a lock.

use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::job::JobId;
use crate::observer::{DropReason, Event, EventKind, NodeRef, Observer, Wait};
use crate::vocab::{event, key, suffix};

/// Writes TIMELINE lines to stderr or a file.
pub struct TimelineWriter {
    start: Instant,
    out: Mutex<Box<dyn Write + Send>>,
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}

/// A detail value without the separators of the format.
fn clean(v: &str) -> String {
    v.replace([',', '\n'], ";")
}

fn node_detail(partition: Option<usize>, node: &NodeRef<'_>) -> String {
    let mut d = String::new();
    if let Some(p) = partition {
        let _ = write!(d, "{}={p},", key::PARTITION);
    }
    if let Some(w) = node.worker {
        let _ = write!(d, "{}={w},", key::WORKER);
    }
    if let Some(dev) = node.device {
        let _ = write!(d, "{}={dev},", key::DEVICE);
    }
    let _ = write!(
        d,
        "{}={},{}={}",
        key::STAGE,
        node.name,
        key::ROLE,
        node.role
    );
    d
}

impl TimelineWriter {
    pub fn new(out: Box<dyn Write + Send>) -> Self {
        Self {
            start: Instant::now(),
            out: Mutex::new(out),
        }
    }

    pub fn stderr() -> Self {
        Self::new(Box::new(std::io::stderr()))
    }

    /// Writes to `path` (created or truncated), flushing every line so the
    /// file can be followed while the engine runs.
    pub fn file(path: &Path) -> std::io::Result<Self> {
        let file = std::fs::File::create(path)?;
        Ok(Self::new(Box::new(std::io::LineWriter::new(file))))
    }

    /// The instant offsets count from.
    pub fn start(&self) -> Instant {
        self.start
    }

    /// Writes one line stamped now: taking the time under the lock keeps
    /// offsets in file order when workers emit concurrently.
    fn line(&self, event: &str, job: JobId, detail: &str) {
        let mut out = self.out.lock().unwrap();
        let offset = ms(self.start.elapsed());
        let _ = writeln!(out, "TIMELINE,{offset},{event},{job},{detail}");
    }

    /// Writes one line stamped `at`, for device spans measured earlier.
    fn line_at(&self, at: Instant, event: &str, job: JobId, detail: &str) {
        let offset = ms(at.saturating_duration_since(self.start));
        let mut out = self.out.lock().unwrap();
        let _ = writeln!(out, "TIMELINE,{offset},{event},{job},{detail}");
    }

    fn wait_names(wait: Wait<'_>) -> (&'static str, String) {
        match wait {
            Wait::Arena => (event::ARENA_WAIT, String::new()),
            Wait::Lease(l) => (event::LEASE_WAIT, format!(",{}={l}", key::POOL)),
            Wait::Resource(r) => (event::LOCK_WAIT, format!(",{}={r}", key::LOCK)),
            Wait::Gate(g) => (event::GATE_WAIT, format!(",{}={g}", key::GATE)),
        }
    }

    fn stage_end(&self, e: &Event<'_>, node: &NodeRef<'_>, end: StageEnd<'_>) {
        let (job, p) = (e.job, e.partition);
        let base = node_detail(p, node);
        let mut d = base.clone();
        for (k, v) in end.notes {
            let _ = write!(d, ",{k}={}", clean(v));
        }
        if let Some(err) = end.error {
            let _ = write!(d, ",{}={}", key::ERROR, clean(err));
        }
        for span in end.device_spans {
            let sd = format!("{base},{}={}", key::SPAN, span.label);
            self.line_at(
                span.start,
                &format!("{}{}", node.event, suffix::START),
                job,
                &sd,
            );
            let sd = format!("{sd},{}={}", key::DURATION_MS, ms(span.end - span.start));
            self.line_at(
                span.end,
                &format!("{}{}", node.event, suffix::END),
                job,
                &sd,
            );
        }
        let _ = write!(d, ",{}={}", key::DURATION_MS, ms(end.elapsed));
        self.line(&stage_event(node, suffix::END), job, &d);
    }
}

/// What a stage's end carries, for [`TimelineWriter::stage_end`].
struct StageEnd<'a> {
    elapsed: Duration,
    error: Option<&'a str>,
    notes: &'a [(&'static str, String)],
    device_spans: &'a [crate::observer::DeviceSpan],
}

/// `<PREFIX>_START/_END`, or `<PREFIX>_HOST_START/_END` for a stage that
/// reports its device time separately.
fn stage_event(node: &NodeRef<'_>, end: &str) -> String {
    let host = if node.device_timed { suffix::HOST } else { "" };
    format!("{}{host}{end}", node.event)
}

impl Observer for TimelineWriter {
    fn on_event(&self, e: &Event<'_>) {
        let (job, p) = (e.job, e.partition);
        match &e.kind {
            EventKind::JobSubmitted {
                label,
                partitions,
                priority,
            } => {
                self.line(
                    event::JOB_SUBMIT,
                    job,
                    &format!(
                        "{}={partitions},{}={priority},{}={}",
                        key::PARTITIONS,
                        key::PRIORITY,
                        key::LABEL,
                        clean(label)
                    ),
                );
            }
            EventKind::JobFinished { ok, error } => {
                let mut d = format!("{}={ok}", key::OK);
                if let Some(err) = error {
                    let _ = write!(d, ",{}={}", key::ERROR, clean(err));
                }
                self.line(event::JOB_END, job, &d);
            }
            EventKind::Queued { node } => {
                self.line(
                    &format!("{}{}", node.event, suffix::QUEUE),
                    job,
                    &node_detail(p, node),
                );
            }
            EventKind::Picked { node, queued } => {
                let d = format!(
                    "{},{}={}",
                    node_detail(p, node),
                    key::QUEUED_MS,
                    ms(*queued)
                );
                self.line(&format!("{}{}", node.event, suffix::PICKUP), job, &d);
            }
            EventKind::WaitStart { node, wait } => {
                let (name, extra) = Self::wait_names(*wait);
                self.line(
                    &format!("{name}{}", suffix::START),
                    job,
                    &format!("{}{extra}", node_detail(p, node)),
                );
            }
            EventKind::WaitEnd { node, wait, waited } => {
                let (name, extra) = Self::wait_names(*wait);
                let d = format!(
                    "{}{extra},{}={}",
                    node_detail(p, node),
                    key::WAITED_MS,
                    ms(*waited)
                );
                self.line(&format!("{name}{}", suffix::END), job, &d);
            }
            EventKind::StageStart { node } => {
                self.line(
                    &stage_event(node, suffix::START),
                    job,
                    &node_detail(p, node),
                );
            }
            EventKind::StageEnd {
                node,
                elapsed,
                error,
                notes,
                device_spans,
            } => self.stage_end(
                e,
                node,
                StageEnd {
                    elapsed: *elapsed,
                    error: *error,
                    notes,
                    device_spans,
                },
            ),
            EventKind::Retried {
                node,
                error,
                failed_on,
            } => {
                let failed: Vec<String> = failed_on.iter().map(usize::to_string).collect();
                let d = format!(
                    "{},{}={},{}={}",
                    node_detail(p, node),
                    key::FAILED_ON,
                    failed.join("+"),
                    key::ERROR,
                    clean(error)
                );
                self.line(event::DEVICE_FAULT, job, &d);
            }
            EventKind::PartitionDone => {
                self.line(
                    event::PARTITION_END,
                    job,
                    &format!("{}={}", key::PARTITION, p.unwrap_or(0)),
                );
            }
            EventKind::Dropped { node, reason } => {
                let reason = match reason {
                    DropReason::Cancelled => "cancelled",
                    DropReason::JobFailed => "job_failed",
                };
                let d = format!("{},{}={reason}", node_detail(p, node), key::REASON);
                self.line(&format!("{}{}", node.event, suffix::DROP), job, &d);
            }
        }
    }
}
