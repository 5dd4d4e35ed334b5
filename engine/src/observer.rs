//! Events the runtime emits at every transition of an item, from one place.
//!
//! Observers turn them into TIMELINE lines, tracing spans and metrics. Stages
//! never emit these themselves; they only attach notes (like which backend
//! ran) and device-timed spans to their [`crate::StageContext`].

use std::time::{Duration, Instant};

use crate::job::JobId;
use crate::vocab::Role;

/// The node an event concerns.
#[derive(Clone, Copy, Debug)]
pub struct NodeRef<'a> {
    pub name: &'a str,
    /// Timeline event prefix (`SYNTH`, `GPU`, ...).
    pub event: &'a str,
    pub role: Role,
    /// None for events before a worker took the item (`Queued`).
    pub worker: Option<usize>,
    pub device: Option<usize>,
    /// The stage reports device spans of its own.
    pub device_timed: bool,
}

/// What an item is waiting for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait<'a> {
    Arena,
    /// A device lease of the named pool.
    Lease(&'a str),
    Resource(&'a str),
    Gate(&'a str),
}

/// Why an item left the graph without finishing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    Cancelled,
    JobFailed,
}

/// A span of device work a stage measured itself (with device events), in
/// host time.
#[derive(Clone, Debug)]
pub struct DeviceSpan {
    pub label: &'static str,
    pub start: Instant,
    pub end: Instant,
}

/// Time a stage kept its device busy: the spans it measured on the device,
/// else (a stage that does not time its device work, or the CPU backend) the
/// whole stage.
pub fn device_time(elapsed: Duration, spans: &[DeviceSpan]) -> Duration {
    if spans.is_empty() {
        elapsed
    } else {
        spans.iter().map(|s| s.end - s.start).sum()
    }
}

#[derive(Clone, Debug)]
pub enum EventKind<'a> {
    JobSubmitted {
        label: &'a str,
        partitions: usize,
        priority: u8,
    },
    JobFinished {
        ok: bool,
        error: Option<&'a str>,
    },
    /// The item entered the node's input edge.
    Queued {
        node: NodeRef<'a>,
    },
    /// A worker took the item off its input edge.
    Picked {
        node: NodeRef<'a>,
        queued: Duration,
    },
    WaitStart {
        node: NodeRef<'a>,
        wait: Wait<'a>,
    },
    WaitEnd {
        node: NodeRef<'a>,
        wait: Wait<'a>,
        waited: Duration,
    },
    StageStart {
        node: NodeRef<'a>,
    },
    StageEnd {
        node: NodeRef<'a>,
        elapsed: Duration,
        error: Option<&'a str>,
        /// Notes the stage attached (`backend=cpu`, `points=65536`, ...).
        notes: &'a [(&'static str, String)],
        /// Device work the stage timed itself, if any.
        device_spans: &'a [DeviceSpan],
    },
    Dropped {
        node: NodeRef<'a>,
        reason: DropReason,
    },
    /// The partition left the last node and was handed to its job.
    PartitionDone,
    /// A device failed the partition; it goes back to the first node of its
    /// per-device run, to be taken by another device.
    Retried {
        node: NodeRef<'a>,
        error: &'a str,
        /// Devices that have failed this partition so far.
        failed_on: &'a [usize],
    },
}

#[derive(Clone, Debug)]
pub struct Event<'a> {
    pub at: Instant,
    pub job: JobId,
    pub partition: Option<usize>,
    pub kind: EventKind<'a>,
}

/// Receives every event. Called on the runtime's tasks: keep it cheap.
pub trait Observer: Send + Sync {
    fn on_event(&self, event: &Event<'_>);
}

/// Fans events out to several observers.
#[derive(Clone, Default)]
pub struct Observers(Vec<std::sync::Arc<dyn Observer>>);

impl Observers {
    pub fn push(&mut self, o: std::sync::Arc<dyn Observer>) {
        self.0.push(o);
    }

    pub fn emit(&self, job: JobId, partition: Option<usize>, kind: EventKind<'_>) {
        if self.0.is_empty() {
            return;
        }
        let event = Event {
            at: Instant::now(),
            job,
            partition,
            kind,
        };
        for o in &self.0 {
            o.on_event(&event);
        }
    }
}
