//! One partition in flight, with what the runtime tracks about it, and the
//! sending side of an edge.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use crate::arena::ArenaLease;
use crate::edge::{EdgeSender, Prioritised};
use crate::job::{JobState, StageTiming};
use crate::lease::DeviceLease;
use crate::resource::Held;

pub(crate) struct Envelope<T> {
    pub job: Arc<JobState<T>>,
    pub partition: usize,
    pub device: Option<usize>,
    pub arena: Option<ArenaLease>,
    /// Device leases carried, by the resource they came from.
    pub leases: Vec<DeviceLease>,
    pub item: Option<T>,
    pub timings: Vec<StageTiming>,
    pub queued_at: Instant,
    pub live: Arc<AtomicUsize>,
    /// Devices that failed this partition (it is not given to them again).
    pub failed_on: Vec<usize>,
    /// Locks a CRITICAL item keeps from one stage to the next that holds
    /// them too (by resource and device), so no PoRep stage slips in
    /// between its device stages.
    pub kept: Vec<(String, Option<usize>, Held)>,
}

impl<T> Envelope<T> {
    pub fn new(job: Arc<JobState<T>>, partition: usize, item: T, live: Arc<AtomicUsize>) -> Self {
        live.fetch_add(1, Ordering::SeqCst);
        Self {
            job,
            partition,
            device: None,
            arena: None,
            leases: Vec::new(),
            item: Some(item),
            timings: Vec::new(),
            queued_at: Instant::now(),
            live,
            failed_on: Vec::new(),
            kept: Vec::new(),
        }
    }

    /// Whether the item carries a lease of `resource`.
    pub fn carries_lease(&self, resource: &str) -> bool {
        self.leases.iter().any(|l| l.resource() == resource)
    }

    /// Gives back the pooled resource `name` (an arena or a device lease).
    pub fn release(&mut self, name: &str, arena: Option<&str>) {
        if arena == Some(name) {
            self.arena = None;
        } else {
            self.leases.retain(|l| l.resource() != name);
        }
    }
}

impl<T> Drop for Envelope<T> {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::SeqCst);
    }
}

impl<T> Prioritised for Envelope<T> {
    fn priority(&self) -> u8 {
        self.job.priority
    }
}

/// The sending side of an edge: one edge, or one per device when both ends
/// are per-device nodes (so items stay on their device).
pub(crate) enum EdgeTx<T> {
    Shared(EdgeSender<Envelope<T>>),
    PerDevice(Vec<EdgeSender<Envelope<T>>>),
}

impl<T> Clone for EdgeTx<T> {
    fn clone(&self) -> Self {
        match self {
            Self::Shared(s) => Self::Shared(s.clone()),
            Self::PerDevice(v) => Self::PerDevice(v.clone()),
        }
    }
}

// Sends give the envelope back when they cannot deliver it: that is their point.
#[allow(clippy::result_large_err)]
impl<T> EdgeTx<T> {
    fn sender(&self, env: &Envelope<T>) -> &EdgeSender<Envelope<T>> {
        match self {
            Self::Shared(s) => s,
            Self::PerDevice(v) => &v[env.device.expect("per-device nodes bind items to a device")],
        }
    }

    pub async fn send(&self, env: Envelope<T>) -> Result<(), Envelope<T>> {
        self.sender(&env).send(env).await
    }

    pub fn try_send(&self, env: Envelope<T>) -> Result<(), Envelope<T>> {
        self.sender(&env).try_send(env)
    }

    /// Whether a shared edge (the entry edge) is full for normal items.
    pub fn is_full(&self) -> bool {
        match self {
            Self::Shared(s) => s.is_full(),
            Self::PerDevice(_) => unreachable!("the entry edge is shared"),
        }
    }

    /// Waits for room in a shared edge (the entry edge).
    pub async fn wait_room(&self) {
        match self {
            Self::Shared(s) => s.wait_room().await,
            Self::PerDevice(_) => unreachable!("the entry edge is shared"),
        }
    }
}
