//! Shared resources nodes hold while they run: locks, semaphores and gates,
//! global or one per device. Interlock variants are built from these.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::ranked::{RankedPermit, RankedSemaphore};

use crate::graph::{ResourceKind, ResourceSpec, Scope};

/// Closed while any holder runs; waiters start only while it is open.
///
/// Exact: a waiter *passes* the open gate and keeps its pass until its stage
/// has started; a closer first shuts the gate to new passes, then waits for
/// the passes already given to be used. So no waiter's stage starts while a
/// holder's runs, and a pass is only ever held for the instant between the
/// last acquisition and the stage's start (never while waiting for anything).
#[derive(Default)]
pub struct Gate {
    state: Mutex<GateState>,
    changed: Notify,
}

#[derive(Default)]
struct GateState {
    closers: usize,
    passing: usize,
}

impl Gate {
    async fn until(&self, mut f: impl FnMut(&mut GateState) -> bool) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if f(&mut self.state.lock().unwrap()) {
                return;
            }
            changed.await;
        }
    }

    /// Closes the gate once the passes already given are used.
    async fn close(self: &Arc<Self>) -> GateGuard {
        self.state.lock().unwrap().closers += 1;
        let guard = GateGuard(self.clone());
        self.until(|s| s.passing == 0).await;
        guard
    }

    /// Waits until the gate is open and passes it.
    async fn pass(self: &Arc<Self>) -> GatePass {
        self.until(|s| {
            let open = s.closers == 0;
            if open {
                s.passing += 1;
            }
            open
        })
        .await;
        GatePass(self.clone())
    }

    /// How many holders currently keep the gate closed.
    pub fn closers(&self) -> usize {
        self.state.lock().unwrap().closers
    }
}

pub(crate) struct GateGuard(Arc<Gate>);

impl Drop for GateGuard {
    fn drop(&mut self) {
        let mut s = self.0.state.lock().unwrap();
        s.closers -= 1;
        if s.closers == 0 {
            drop(s);
            self.0.changed.notify_waiters();
        }
    }
}

/// Leave to start past an open gate; drop it once the stage has started.
#[must_use = "the gate stays shut to closers until the pass is dropped"]
pub(crate) struct GatePass(Arc<Gate>);

impl Drop for GatePass {
    fn drop(&mut self) {
        let mut s = self.0.state.lock().unwrap();
        s.passing -= 1;
        if s.passing == 0 {
            drop(s);
            self.0.changed.notify_waiters();
        }
    }
}

#[derive(Clone)]
enum Instance {
    Semaphore(RankedSemaphore),
    Gate(Arc<Gate>),
}

impl Instance {
    /// The held kinds; pooled ones (arenas, leases) live elsewhere.
    fn new(spec: &ResourceSpec) -> Option<Self> {
        match spec.kind {
            ResourceKind::Lock => Some(Self::Semaphore(RankedSemaphore::new(1))),
            ResourceKind::Semaphore => Some(Self::Semaphore(RankedSemaphore::new(
                spec.size.unwrap_or(1),
            ))),
            ResourceKind::Gate => Some(Self::Gate(Arc::default())),
            ResourceKind::Arena | ResourceKind::DeviceLease => None,
        }
    }
}

/// Something held; released on drop.
pub(crate) enum Held {
    // Fields are held for their Drop.
    Permit(#[allow(dead_code)] RankedPermit),
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

    /// Acquires a lock or semaphore permit (the highest `priority` waiting
    /// is served first), or closes a gate.
    pub(crate) async fn hold(&self, name: &str, device: Option<usize>, priority: u8) -> Held {
        match self.instance(name, device) {
            Instance::Semaphore(s) => Held::Permit(s.acquire(priority).await),
            Instance::Gate(g) => Held::Gate(g.close().await),
        }
    }

    /// Whether acquiring would have to wait right now (for wait events).
    pub(crate) fn is_busy(&self, name: &str, device: Option<usize>) -> bool {
        match self.instance(name, device) {
            Instance::Semaphore(s) => s.available() == 0,
            Instance::Gate(g) => g.closers() > 0,
        }
    }

    /// Waits until a gate is open and passes it.
    pub(crate) async fn pass(&self, name: &str, device: Option<usize>) -> GatePass {
        match self.instance(name, device) {
            Instance::Gate(g) => g.pass().await,
            Instance::Semaphore(_) => unreachable!("validated: nodes wait only for gates"),
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
        let held = r.hold("g", None, 0).await;
        assert!(r.is_busy("g", None));
        let r2 = r.clone();
        let waiter = tokio::spawn(async move {
            let _pass = r2.pass("g", None).await;
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "a closed gate holds waiters");
        drop(held);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("opening the gate wakes waiters")
            .unwrap();
    }

    #[tokio::test]
    async fn a_closer_waits_for_passes_already_given() {
        let r = Arc::new(Resources::new(&[ResourceSpec::gate("g")], 1));
        let pass = r.pass("g", None).await;
        let r2 = r.clone();
        let closer = tokio::spawn(async move {
            let _held = r2.hold("g", None, 0).await;
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!closer.is_finished(), "a pass in use keeps the closer out");
        assert!(r.is_busy("g", None), "but no new pass is given meanwhile");
        drop(pass);
        tokio::time::timeout(Duration::from_secs(5), closer)
            .await
            .expect("the closer goes once the pass is used")
            .unwrap();
    }

    #[tokio::test]
    async fn per_device_locks_are_independent() {
        let r = Resources::new(&[ResourceSpec::lock("gpu").per_device()], 2);
        let _d0 = r.hold("gpu", Some(0), 0).await;
        assert!(r.is_busy("gpu", Some(0)));
        assert!(!r.is_busy("gpu", Some(1)));
    }
}
