//! Device leases: per-device pools of device state (device memory and a
//! stream, as the device layer defines it) that travel with a partition from
//! the node that takes one to the node that releases it, like host arenas.
//!
//! The engine knows nothing of what a slot holds: a [`LeaseProvider`] makes
//! slots on first use, and a stage reaches its partition's slot through
//! [`crate::StageContext::device_slot`]. Slots are reused, so device memory
//! is not allocated and freed per partition (on CUDA, freeing synchronises
//! the whole device), and the pool size bounds what a device holds.

use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::ranked::{RankedPermit, RankedSemaphore};

/// What one lease carries. `reset` runs when the lease goes back to its pool:
/// drop what belonged to the partition (its SRS handle, say), keep what can
/// be reused (buffers, the stream).
pub trait DeviceSlot: Any + Send {
    fn reset(&mut self) {}
}

/// Makes device slots: one per lease, created the first time a pool grows.
pub trait LeaseProvider: Send + Sync {
    /// A new slot of pool `resource` on `device`. An error fails the
    /// partition that asked (a [`crate::DeviceFault`] moves it to another device).
    fn create(&self, resource: &str, device: usize) -> anyhow::Result<Box<dyn DeviceSlot>>;
}

/// Slots with no device state: what a lease is on the CPU backend, where
/// the lease still bounds how many partitions a device section holds.
pub struct NoDeviceState;

impl DeviceSlot for NoDeviceState {}

impl LeaseProvider for NoDeviceState {
    fn create(&self, _: &str, _: usize) -> anyhow::Result<Box<dyn DeviceSlot>> {
        Ok(Box::new(NoDeviceState))
    }
}

/// Counters of one pool (one resource on one device).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LeaseStats {
    pub resource: String,
    pub device: usize,
    /// The pool's bound.
    pub size: usize,
    pub created: usize,
    pub in_use: usize,
    pub peak_in_use: usize,
}

struct PoolInner {
    resource: String,
    device: usize,
    size: usize,
    free: Mutex<Vec<Box<dyn DeviceSlot>>>,
    permits: RankedSemaphore,
    created: AtomicUsize,
    in_use: AtomicUsize,
    peak: AtomicUsize,
}

/// The lease pool of one resource on one device.
#[derive(Clone)]
pub(crate) struct LeasePool {
    inner: Arc<PoolInner>,
    provider: Arc<dyn LeaseProvider>,
}

impl LeasePool {
    pub(crate) fn new(
        resource: &str,
        device: usize,
        size: usize,
        provider: Arc<dyn LeaseProvider>,
    ) -> Self {
        Self {
            inner: Arc::new(PoolInner {
                resource: resource.into(),
                device,
                size,
                free: Mutex::new(Vec::new()),
                permits: RankedSemaphore::new(size),
                created: AtomicUsize::new(0),
                in_use: AtomicUsize::new(0),
                peak: AtomicUsize::new(0),
            }),
            provider,
        }
    }

    pub(crate) fn is_exhausted(&self) -> bool {
        self.inner.permits.available() == 0
    }

    /// Waits for a free lease (the highest `priority` waiting is served
    /// first), creating its slot on first use.
    pub(crate) async fn acquire(&self, priority: u8) -> anyhow::Result<DeviceLease> {
        let permit = self.inner.permits.acquire(priority).await;
        self.lease(Some(permit))
    }

    /// A lease at once, beyond the pool's bound if every lease is out: for
    /// express items where slots hold no device state (the CPU backend),
    /// whose bound only paces bulk partitions. Its slot joins the free ones
    /// when it comes back.
    pub(crate) fn acquire_beyond_bound(&self) -> anyhow::Result<DeviceLease> {
        self.lease(None)
    }

    fn lease(&self, permit: Option<RankedPermit>) -> anyhow::Result<DeviceLease> {
        let inner = &self.inner;
        let reused = inner.free.lock().unwrap().pop();
        let slot = match reused {
            Some(slot) => slot,
            None => {
                // The permit goes back if creating fails (it drops with the error).
                let slot = self.provider.create(&inner.resource, inner.device)?;
                inner.created.fetch_add(1, Ordering::SeqCst);
                slot
            }
        };
        let now = inner.in_use.fetch_add(1, Ordering::SeqCst) + 1;
        inner.peak.fetch_max(now, Ordering::SeqCst);
        Ok(DeviceLease {
            slot: Some(slot),
            pool: inner.clone(),
            _permit: permit,
        })
    }

    pub(crate) fn stats(&self) -> LeaseStats {
        let i = &self.inner;
        LeaseStats {
            resource: i.resource.clone(),
            device: i.device,
            size: i.size,
            created: i.created.load(Ordering::SeqCst),
            in_use: i.in_use.load(Ordering::SeqCst),
            peak_in_use: i.peak.load(Ordering::SeqCst),
        }
    }
}

/// A leased slot, bound to its device; back to its pool (reset) when dropped.
#[must_use = "a lease returns to its pool when dropped"]
pub struct DeviceLease {
    slot: Option<Box<dyn DeviceSlot>>,
    pool: Arc<PoolInner>,
    /// None for a lease beyond the bound (`acquire_beyond_bound`).
    _permit: Option<RankedPermit>,
}

impl DeviceLease {
    /// The pool (resource name) this lease came from.
    pub fn resource(&self) -> &str {
        &self.pool.resource
    }

    pub fn device(&self) -> usize {
        self.pool.device
    }

    /// The slot as its concrete type, if it is one.
    pub fn slot_mut<S: DeviceSlot>(&mut self) -> Option<&mut S> {
        let slot: &mut dyn Any = self.slot.as_deref_mut().expect("present until drop");
        slot.downcast_mut::<S>()
    }
}

impl std::fmt::Debug for DeviceLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceLease")
            .field("resource", &self.pool.resource)
            .field("device", &self.pool.device)
            .finish()
    }
}

impl Drop for DeviceLease {
    fn drop(&mut self) {
        if let Some(mut slot) = self.slot.take() {
            slot.reset();
            self.pool.free.lock().unwrap().push(slot);
            self.pool.in_use.fetch_sub(1, Ordering::SeqCst);
        }
        // The permit is released after the slot is back on the free list.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Counting(usize);
    impl DeviceSlot for Counting {
        fn reset(&mut self) {
            self.0 += 1;
        }
    }
    struct Provider;
    impl LeaseProvider for Provider {
        fn create(&self, _: &str, _: usize) -> anyhow::Result<Box<dyn DeviceSlot>> {
            Ok(Box::new(Counting(0)))
        }
    }

    #[tokio::test]
    async fn slots_are_bounded_reused_and_reset() {
        let pool = LeasePool::new("vram", 0, 2, Arc::new(Provider));
        let mut a = pool.acquire(0).await.unwrap();
        let b = pool.acquire(0).await.unwrap();
        assert!(pool.is_exhausted());
        assert_eq!(a.slot_mut::<Counting>().unwrap().0, 0);
        drop(a);
        let mut c = pool.acquire(0).await.unwrap();
        assert_eq!(
            c.slot_mut::<Counting>().unwrap().0,
            1,
            "reset on return, then reused"
        );
        assert!(c.slot_mut::<NoDeviceState>().is_none(), "typed access");
        drop((b, c));
        let s = pool.stats();
        assert_eq!((s.created, s.in_use, s.peak_in_use, s.size), (2, 0, 2, 2));
    }
}
