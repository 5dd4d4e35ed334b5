//! Shared resources nodes hold while they run: locks, semaphores and gates,
//! global or one per device. Interlock variants are built from these.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use crate::graph::{ResourceKind, ResourceSpec, Scope};

/// Closed while any holder runs; waiters start only while it is open.
#[derive(Default)]
pub struct Gate {
    closers: AtomicUsize,
    opened: Notify,
}

impl Gate {
    fn close(self: &Arc<Self>) -> GateGuard {
        self.closers.fetch_add(1, Ordering::SeqCst);
        GateGuard(self.clone())
    }

    async fn wait_open(&self) {
        loop {
            let opened = self.opened.notified();
            tokio::pin!(opened);
            opened.as_mut().enable();
            if self.closers.load(Ordering::SeqCst) == 0 {
                return;
            }
            opened.await;
        }
    }

    /// How many holders currently keep the gate closed.
    pub fn closers(&self) -> usize {
        self.closers.load(Ordering::SeqCst)
    }
}

pub(crate) struct GateGuard(Arc<Gate>);

impl Drop for GateGuard {
    fn drop(&mut self) {
        if self.0.closers.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.opened.notify_waiters();
        }
    }
}

#[derive(Clone)]
enum Instance {
    Semaphore(Arc<Semaphore>),
    Gate(Arc<Gate>),
}

impl Instance {
    /// The held kinds; pooled ones (arenas, leases) live elsewhere.
    fn new(spec: &ResourceSpec) -> Option<Self> {
        match spec.kind {
            ResourceKind::Lock => Some(Self::Semaphore(Arc::new(Semaphore::new(1)))),
            ResourceKind::Semaphore => Some(Self::Semaphore(Arc::new(Semaphore::new(
                spec.size.unwrap_or(1),
            )))),
            ResourceKind::Gate => Some(Self::Gate(Arc::default())),
            ResourceKind::Arena | ResourceKind::DeviceLease => None,
        }
    }
}

/// Something held; released on drop.
pub(crate) enum Held {
    // Fields are held for their Drop.
    Permit(#[allow(dead_code)] OwnedSemaphorePermit),
    Gate(#[allow(dead_code)] GateGuard),
}

/// All of a graph's resources, instantiated for `devices` devices.
pub(crate) struct Resources {
    by_name: HashMap<String, Vec<Instance>>,
}

impl Resources {
    pub(crate) fn new(specs: &[ResourceSpec], devices: usize) -> Self {
        let by_name = specs
            .iter()
            .filter_map(|r| {
                let n = match r.scope {
                    Scope::Global => 1,
                    Scope::PerDevice => devices.max(1),
                };
                let instances = (0..n)
                    .map(|_| Instance::new(r))
                    .collect::<Option<Vec<_>>>()?;
                Some((r.name.clone(), instances))
            })
            .collect();
        Self { by_name }
    }

    fn instance(&self, name: &str, device: Option<usize>) -> &Instance {
        let set = &self.by_name[name];
        if set.len() == 1 {
            &set[0]
        } else {
            &set[device.expect("validated: per-device resources are used by per-device nodes")]
        }
    }

    /// Acquires a lock or semaphore permit, or closes a gate.
    pub(crate) async fn hold(&self, name: &str, device: Option<usize>) -> Held {
        match self.instance(name, device) {
            Instance::Semaphore(s) => Held::Permit(
                s.clone()
                    .acquire_owned()
                    .await
                    .expect("resource semaphores are never closed"),
            ),
            Instance::Gate(g) => Held::Gate(g.close()),
        }
    }

    /// Whether acquiring would have to wait right now (for wait events).
    pub(crate) fn is_busy(&self, name: &str, device: Option<usize>) -> bool {
        match self.instance(name, device) {
            Instance::Semaphore(s) => s.available_permits() == 0,
            Instance::Gate(g) => g.closers() > 0,
        }
    }

    /// Waits until a gate is open.
    pub(crate) async fn wait_open(&self, name: &str, device: Option<usize>) {
        if let Instance::Gate(g) = self.instance(name, device) {
            g.wait_open().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn gate_blocks_waiters_while_closed() {
        let r = Arc::new(Resources::new(&[ResourceSpec::gate("g")], 1));
        let held = r.hold("g", None).await;
        assert!(r.is_busy("g", None));
        let r2 = r.clone();
        let waiter = tokio::spawn(async move { r2.wait_open("g", None).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "a closed gate holds waiters");
        drop(held);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("opening the gate wakes waiters")
            .unwrap();
    }

    #[tokio::test]
    async fn per_device_locks_are_independent() {
        let r = Resources::new(&[ResourceSpec::lock("gpu").per_device()], 2);
        let _d0 = r.hold("gpu", Some(0)).await;
        assert!(r.is_busy("gpu", Some(0)));
        assert!(!r.is_busy("gpu", Some(1)));
    }
}
