//! What the status page shows that the engine's own status does not: which
//! job each device runs now, device busy time over the last minutes, the
//! last jobs to finish, and the TIMELINE events of the last few minutes
//! (for the live waterfall). Fed by the engine's events, like every other
//! observer.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use cuzk_engine::{Event, EventKind, JobId, Observer, TimelineWriter};

use super::jobs::{JobEntry, Timings};

/// Width of one utilisation bucket.
pub const BUCKET: Duration = Duration::from_secs(10);
/// Buckets kept (ten minutes).
const BUCKETS: usize = 60;
/// Finished jobs kept for the page.
const RECENT: usize = 50;

/// Device busy seconds in one bucket, by device.
struct Bucket {
    start: Instant,
    busy: BTreeMap<usize, f64>,
}

/// A finished job as the page lists it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RecentJob {
    pub id: String,
    pub kind: String,
    pub priority: u8,
    pub partitions: usize,
    pub result: String,
    pub error: String,
    /// Seconds since the epoch.
    pub submitted_unix: f64,
    pub timings_ms: TimingsMs,
}

/// [`Timings`] in milliseconds.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct TimingsMs {
    pub queue_wait: u64,
    pub srs_load: u64,
    pub synthesis: u64,
    pub gpu_compute: u64,
    pub total: u64,
}

impl From<&Timings> for TimingsMs {
    fn from(t: &Timings) -> Self {
        let ms = |d: Duration| d.as_millis() as u64;
        Self {
            queue_wait: ms(t.queue_wait),
            srs_load: ms(t.srs_load),
            synthesis: ms(t.synthesis),
            gpu_compute: ms(t.gpu_compute),
            total: ms(t.total),
        }
    }
}

/// TIMELINE lines of the last `window`, with the time each was written.
struct Ring {
    lines: VecDeque<(Instant, String)>,
    partial: Vec<u8>,
    window: Duration,
}

/// Writes TIMELINE output into the ring.
struct RingWriter(Arc<Mutex<Ring>>);

impl Write for RingWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut ring = self.0.lock().unwrap();
        ring.partial.extend_from_slice(buf);
        let now = Instant::now();
        while let Some(nl) = ring.partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = ring.partial.drain(..=nl).collect();
            let line = String::from_utf8_lossy(&line[..nl]).into_owned();
            ring.lines.push_back((now, line));
        }
        let window = ring.window;
        while ring
            .lines
            .front()
            .is_some_and(|(t, _)| now.saturating_duration_since(*t) > window)
        {
            ring.lines.pop_front();
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The daemon's observer.
pub struct Monitor {
    labels: Mutex<HashMap<JobId, String>>,
    /// Device -> the job whose device stage runs there now.
    on_device: Mutex<BTreeMap<usize, String>>,
    buckets: Mutex<VecDeque<Bucket>>,
    recent: Mutex<VecDeque<RecentJob>>,
    ring: Arc<Mutex<Ring>>,
    timeline: Arc<TimelineWriter>,
}

impl Monitor {
    /// Keeps `window` of TIMELINE events for the live waterfall.
    pub fn new(window: Duration) -> Self {
        let ring = Arc::new(Mutex::new(Ring {
            lines: VecDeque::new(),
            partial: vec![],
            window,
        }));
        Self {
            labels: Mutex::default(),
            on_device: Mutex::default(),
            buckets: Mutex::default(),
            recent: Mutex::default(),
            timeline: Arc::new(TimelineWriter::new(Box::new(RingWriter(ring.clone())))),
            ring,
        }
    }

    /// The observer writing TIMELINE lines into the ring.
    pub fn timeline(&self) -> Arc<TimelineWriter> {
        self.timeline.clone()
    }

    /// The TIMELINE log of the last few minutes.
    pub fn recent_log(&self) -> String {
        let ring = self.ring.lock().unwrap();
        let mut out = String::new();
        for (_, line) in &ring.lines {
            out.push_str(line);
            out.push('\n');
        }
        out
    }

    /// The job each device runs now (by daemon job id).
    pub fn on_device(&self) -> BTreeMap<usize, String> {
        self.on_device.lock().unwrap().clone()
    }

    /// Busy fraction of each device in every bucket of the last ten minutes,
    /// oldest first: (seconds ago at the bucket's start, device -> fraction).
    pub fn utilisation(&self, devices: usize) -> Vec<(u64, Vec<f64>)> {
        let now = Instant::now();
        self.buckets
            .lock()
            .unwrap()
            .iter()
            .map(|b| {
                let width = now
                    .saturating_duration_since(b.start)
                    .min(BUCKET)
                    .as_secs_f64()
                    .max(1e-3);
                let busy = (0..devices)
                    .map(|d| (b.busy.get(&d).copied().unwrap_or(0.0) / width).min(1.0))
                    .collect();
                (now.saturating_duration_since(b.start).as_secs(), busy)
            })
            .collect()
    }

    /// The last jobs to finish, newest first.
    pub fn recent(&self) -> Vec<RecentJob> {
        self.recent.lock().unwrap().iter().rev().cloned().collect()
    }

    /// Records a finished job for the page.
    pub fn finished(&self, job: &JobEntry) {
        let Some(o) = job.outcome() else { return };
        let mut recent = self.recent.lock().unwrap();
        recent.push_back(RecentJob {
            id: job.id.clone(),
            kind: job.kind.to_string(),
            priority: job.priority,
            partitions: job.partitions,
            result: format!("{:?}", o.ending).to_lowercase(),
            error: o.error.clone(),
            submitted_unix: job
                .submitted_at
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            timings_ms: (&o.timings).into(),
        });
        while recent.len() > RECENT {
            recent.pop_front();
        }
    }

    fn add_busy(&self, device: usize, seconds: f64) {
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap();
        if buckets
            .back()
            .is_none_or(|b| now.saturating_duration_since(b.start) >= BUCKET)
        {
            buckets.push_back(Bucket {
                start: now,
                busy: BTreeMap::new(),
            });
            while buckets.len() > BUCKETS {
                buckets.pop_front();
            }
        }
        *buckets
            .back_mut()
            .expect("pushed above")
            .busy
            .entry(device)
            .or_default() += seconds;
    }
}

impl Observer for Monitor {
    fn on_event(&self, e: &Event<'_>) {
        match &e.kind {
            EventKind::JobSubmitted { label, .. } => {
                self.labels.lock().unwrap().insert(e.job, label.to_string());
            }
            EventKind::JobFinished { .. } => {
                self.labels.lock().unwrap().remove(&e.job);
            }
            EventKind::StageStart { node } if node.role.on_device() => {
                if let (Some(d), Some(label)) =
                    (node.device, self.labels.lock().unwrap().get(&e.job))
                {
                    self.on_device.lock().unwrap().insert(d, label.clone());
                }
            }
            EventKind::StageEnd {
                node,
                elapsed,
                device_spans,
                ..
            } if node.role.on_device() => {
                let Some(d) = node.device else { return };
                let label = self.labels.lock().unwrap().get(&e.job).cloned();
                let mut on = self.on_device.lock().unwrap();
                if on.get(&d) == label.as_ref() {
                    on.remove(&d);
                }
                drop(on);
                let busy = cuzk_engine::device_time(*elapsed, device_spans).as_secs_f64();
                self.add_busy(d, busy);
            }
            _ => {}
        }
    }
}
