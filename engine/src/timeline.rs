//! TIMELINE events in the seeds' format, one line per transition:
//!
//! ```text
//! TIMELINE,<offset_ms>,<event>,<job_id>,<detail>
//! ```
//!
//! `offset_ms` counts from the writer's creation (three decimals); `detail`
//! is `key=value` pairs joined by commas (`partition=3,worker=1,device=0,...`).
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

/// Writes TIMELINE lines to stderr or a file.
pub struct TimelineWriter {
    start: Instant,
    out: Mutex<Box<dyn Write + Send>>,
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}

fn node_detail(partition: Option<usize>, node: &NodeRef<'_>) -> String {
    let mut d = String::new();
    if let Some(p) = partition {
        let _ = write!(d, "partition={p},");
    }
    if let Some(w) = node.worker {
        let _ = write!(d, "worker={w},");
    }
    if let Some(dev) = node.device {
        let _ = write!(d, "device={dev},");
    }
    let _ = write!(d, "stage={}", node.name);
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
            Wait::Arena => ("ARENA_WAIT", String::new()),
            Wait::Resource(r) => ("LOCK_WAIT", format!(",lock={r}")),
            Wait::Gate(g) => ("GATE_WAIT", format!(",gate={g}")),
        }
    }
}

impl Observer for TimelineWriter {
    fn on_event(&self, e: &Event<'_>) {
        let (job, p) = (e.job, e.partition);
        match &e.kind {
            EventKind::JobSubmitted { label, partitions } => {
                self.line(
                    "JOB_SUBMIT",
                    job,
                    &format!("partitions={partitions},label={label}"),
                );
            }
            EventKind::JobFinished { ok, error } => {
                let mut d = format!("ok={ok}");
                if let Some(err) = error {
                    let _ = write!(d, ",error={}", err.replace(',', ";"));
                }
                self.line("JOB_END", job, &d);
            }
            EventKind::Queued { node } => {
                self.line(&format!("{}_QUEUE", node.event), job, &node_detail(p, node));
            }
            EventKind::Picked { node, queued } => {
                let d = format!("{},queued_ms={}", node_detail(p, node), ms(*queued));
                self.line(&format!("{}_PICKUP", node.event), job, &d);
            }
            EventKind::WaitStart { node, wait } => {
                let (name, extra) = Self::wait_names(*wait);
                self.line(
                    &format!("{name}_START"),
                    job,
                    &format!("{}{extra}", node_detail(p, node)),
                );
            }
            EventKind::WaitEnd { node, wait, waited } => {
                let (name, extra) = Self::wait_names(*wait);
                let d = format!("{}{extra},waited_ms={}", node_detail(p, node), ms(*waited));
                self.line(&format!("{name}_END"), job, &d);
            }
            EventKind::StageStart { node } => {
                let suffix = if node.device_timed {
                    "_HOST_START"
                } else {
                    "_START"
                };
                self.line(
                    &format!("{}{suffix}", node.event),
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
            } => {
                let base = node_detail(p, node);
                let mut d = base.clone();
                for (k, v) in notes.iter() {
                    let _ = write!(d, ",{k}={}", v.replace(',', ";"));
                }
                if let Some(err) = error {
                    let _ = write!(d, ",error={}", err.replace(',', ";"));
                }
                for span in device_spans.iter() {
                    let sd = format!("{base},span={}", span.label);
                    self.line_at(span.start, &format!("{}_START", node.event), job, &sd);
                    let sd = format!("{sd},duration_ms={}", ms(span.end - span.start));
                    self.line_at(span.end, &format!("{}_END", node.event), job, &sd);
                }
                let suffix = if node.device_timed {
                    "_HOST_END"
                } else {
                    "_END"
                };
                let _ = write!(d, ",duration_ms={}", ms(*elapsed));
                self.line(&format!("{}{suffix}", node.event), job, &d);
            }
            EventKind::Retried {
                node,
                error,
                failed_on,
            } => {
                let failed: Vec<String> = failed_on.iter().map(usize::to_string).collect();
                let d = format!(
                    "{},failed_on={},error={}",
                    node_detail(p, node),
                    failed.join("+"),
                    error.replace(',', ";")
                );
                self.line("DEVICE_FAULT", job, &d);
            }
            EventKind::PartitionDone => {
                self.line(
                    "PARTITION_END",
                    job,
                    &format!("partition={}", p.unwrap_or(0)),
                );
            }
            EventKind::Dropped { node, reason } => {
                let reason = match reason {
                    DropReason::Cancelled => "cancelled",
                    DropReason::JobFailed => "job_failed",
                };
                let d = format!("{},reason={reason}", node_detail(p, node));
                self.line(&format!("{}_DROP", node.event), job, &d);
            }
        }
    }
}
