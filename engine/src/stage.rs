//! The unit of work: a stage transforms one item in place.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::arena::ArenaLease;
use crate::job::JobId;
use crate::lease::{DeviceLease, DeviceSlot};
use crate::observer::DeviceSpan;

/// One step of the pipeline, run on one item (a partition) at a time.
///
/// `run` is called on the node's CPU pool (never on the async runtime), so it
/// may block and use the pool's threads for parallel work. It knows nothing of
/// channels, locks or other items: the runtime handles those around it.
pub trait Stage<T>: Send + Sync + 'static {
    fn run(&self, item: &mut T, cx: &mut StageContext<'_>) -> anyhow::Result<()>;

    /// Whether the stage times its own device work (`StageContext::device_span`).
    /// Timelines then bound the node's events by device time.
    fn device_timed(&self) -> bool {
        false
    }
}

impl<T, F> Stage<T> for F
where
    F: Fn(&mut T, &mut StageContext<'_>) -> anyhow::Result<()> + Send + Sync + 'static,
{
    fn run(&self, item: &mut T, cx: &mut StageContext<'_>) -> anyhow::Result<()> {
        self(item, cx)
    }
}

/// What a stage may know about where and for whom it runs.
pub struct StageContext<'a> {
    pub job: JobId,
    pub partition: usize,
    pub node: &'a str,
    pub worker: usize,
    /// The device this item is bound to, once a per-device node picked it up.
    pub device: Option<usize>,
    arena: Option<&'a mut ArenaLease>,
    leases: &'a mut [DeviceLease],
    cancelled: &'a AtomicBool,
    pub(crate) notes: Vec<(&'static str, String)>,
    pub(crate) device_spans: Vec<DeviceSpan>,
}

/// The job this item belongs to was cancelled or failed elsewhere.
#[derive(Debug, thiserror::Error)]
#[error("job was cancelled")]
pub struct Cancelled;

impl<'a> StageContext<'a> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        job: JobId,
        partition: usize,
        node: &'a str,
        worker: usize,
        device: Option<usize>,
        arena: Option<&'a mut ArenaLease>,
        leases: &'a mut [DeviceLease],
        cancelled: &'a AtomicBool,
    ) -> Self {
        Self {
            job,
            partition,
            node,
            worker,
            device,
            arena,
            leases,
            cancelled,
            notes: Vec::new(),
            device_spans: Vec::new(),
        }
    }

    /// The arena this item carries. Errors if the graph gave it none, which is
    /// a declaration bug (no node before this one `takes_arena`).
    pub fn arena(&mut self) -> anyhow::Result<&mut ArenaLease> {
        let node = self.node;
        self.arena.as_deref_mut().ok_or_else(|| {
            anyhow::anyhow!("stage `{node}` needs an arena but no node before it takes one")
        })
    }

    /// The device slot of type `S` this item carries (from the device lease a
    /// node before this one took). Errors if it carries none, which is a
    /// declaration bug (no earlier node `takes` a device lease).
    pub fn device_slot<S: DeviceSlot>(&mut self) -> anyhow::Result<&mut S> {
        let node = self.node;
        self.leases
            .iter_mut()
            .find_map(|l| l.slot_mut::<S>())
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "stage `{node}` needs a device lease but no node before it takes one"
                )
            })
    }

    /// The arena and the device slot of type `S` at once (a device stage
    /// uploads from one into the other).
    pub fn arena_and_device_slot<S: DeviceSlot>(
        &mut self,
    ) -> anyhow::Result<(&mut ArenaLease, &mut S)> {
        let node = self.node;
        let arena = self.arena.as_deref_mut().ok_or_else(|| {
            anyhow::anyhow!("stage `{node}` needs an arena but no node before it takes one")
        })?;
        let slot = self
            .leases
            .iter_mut()
            .find_map(|l| l.slot_mut::<S>())
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "stage `{node}` needs a device lease but no node before it takes one"
                )
            })?;
        Ok((arena, slot))
    }

    /// Whether the item carries a device lease.
    pub fn has_device_lease(&self) -> bool {
        !self.leases.is_empty()
    }

    /// A handle to poll cancellation while the arena is borrowed.
    pub fn cancel_flag(&self) -> CancelFlag<'a> {
        CancelFlag(self.cancelled)
    }

    /// True once the job is cancelled or failed; long stages poll it.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
    }

    /// Returns `Err(Cancelled)` once the job is cancelled.
    pub fn check_cancelled(&self) -> Result<(), Cancelled> {
        if self.is_cancelled() {
            Err(Cancelled)
        } else {
            Ok(())
        }
    }

    /// Attaches a detail to this stage's end event (`backend`, `points`, ...).
    pub fn note(&mut self, key: &'static str, value: impl ToString) {
        self.notes.push((key, value.to_string()));
    }

    /// Records device work measured by the stage itself (device events), so
    /// timelines show device time rather than time holding a lock.
    pub fn device_span(&mut self, label: &'static str, start: Instant, end: Instant) {
        self.device_spans.push(DeviceSpan { label, start, end });
    }
}

/// Whether the job of the running stage was cancelled.
#[derive(Clone, Copy)]
pub struct CancelFlag<'a>(&'a AtomicBool);

impl CancelFlag<'_> {
    /// Returns `Err(Cancelled)` once the job is cancelled.
    pub fn check(self) -> Result<(), Cancelled> {
        if self.0.load(Ordering::Relaxed) {
            Err(Cancelled)
        } else {
            Ok(())
        }
    }
}

/// A failure that is the device's fault, not the partition's (a GPU error,
/// device memory exhausted): the runtime retries the partition on another
/// device, from the first node of its per-device run, and fails the job
/// only when every device has failed it.
#[derive(Debug, thiserror::Error)]
#[error("device {device} failed: {message}")]
pub struct DeviceFault {
    pub device: usize,
    pub message: String,
}

/// The device cannot take the partition *yet*: what the stage needs there
/// (device memory, say) is held by partitions in flight on the same device,
/// and will be free when they finish. Neither a fault nor a failure: the
/// runtime gives back the partition's device leases and locks, waits until
/// `freed` changes (or a second passes), and sends the partition back to
/// the first node of its per-device run on the same device, ahead of new
/// work. A stage must say busy only while other partitions hold what it
/// needs, so that the wait ends.
#[derive(Debug, thiserror::Error)]
#[error("device {device} is busy: {message}")]
pub struct DeviceBusy {
    pub device: usize,
    pub message: String,
    /// Changes when the device frees what the stage waits for; subscribed
    /// before the stage found it missing, so no release is lost.
    pub freed: Option<tokio::sync::watch::Receiver<u64>>,
}

/// Wraps a stage so that it fails with a [`DeviceFault`] on chosen devices:
/// a failure drill for operators and tests.
pub struct FailOnDevices<T> {
    pub inner: Arc<dyn Stage<T>>,
    pub devices: Vec<usize>,
}

impl<T: 'static> Stage<T> for FailOnDevices<T> {
    fn run(&self, item: &mut T, cx: &mut StageContext<'_>) -> anyhow::Result<()> {
        if let Some(d) = cx.device.filter(|d| self.devices.contains(d)) {
            return Err(DeviceFault {
                device: d,
                message: "injected fault (failure drill)".into(),
            }
            .into());
        }
        self.inner.run(item, cx)
    }

    fn device_timed(&self) -> bool {
        self.inner.device_timed()
    }
}

/// Stage implementations by name, for graph declarations to refer to.
pub struct StageRegistry<T> {
    stages: BTreeMap<String, Arc<dyn Stage<T>>>,
}

impl<T> Default for StageRegistry<T> {
    fn default() -> Self {
        Self {
            stages: BTreeMap::new(),
        }
    }
}

impl<T> StageRegistry<T> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn register(&mut self, name: &str, stage: Arc<dyn Stage<T>>) -> &mut Self {
        self.stages.insert(name.to_string(), stage);
        self
    }

    pub fn with(mut self, name: &str, stage: impl Stage<T>) -> Self {
        self.register(name, Arc::new(stage));
        self
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn Stage<T>>> {
        self.stages.get(name).cloned()
    }

    pub fn names(&self) -> Vec<&str> {
        self.stages.keys().map(String::as_str).collect()
    }

    /// Replaces the stage named `name` with `f(current)`, if there is one.
    pub fn wrap(
        &mut self,
        name: &str,
        f: impl FnOnce(Arc<dyn Stage<T>>) -> Arc<dyn Stage<T>>,
    ) -> &mut Self {
        if let Some(current) = self.stages.remove(name) {
            self.stages.insert(name.to_string(), f(current));
        }
        self
    }
}
