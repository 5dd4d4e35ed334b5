//! Turning a declaration into a running graph, in three steps as vector's
//! topology builder does: **resolve** (validate, look up stages, pools and
//! pooled resources), **wire** (one edge into each node, per device where
//! both ends are per-device; retry queues) and **spawn** (the workers and
//! the source task).

use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::runtime::Handle;

use crate::arena::ArenaPool;
use crate::edge::{self, DEFAULT_AGING, Edge};
use crate::graph::{Chain, GraphError, GraphSpec, Placement, ResourceKind};
use crate::lease::{LeasePool, LeaseProvider, NoDeviceState};
use crate::observer::{EventKind, Observer, Observers};
use crate::pool::CpuPools;
use crate::resource::Resources;
use crate::stage::{Stage, StageRegistry};

use super::envelope::{EdgeTx, Envelope};
use super::source::Source;
use super::{NodeRt, NodeStats, Runtime, Shared, worker};

/// Builds a [`Runtime`] from a declaration and what it refers to.
pub struct RuntimeBuilder<T> {
    spec: GraphSpec,
    stages: StageRegistry<T>,
    pools: CpuPools,
    arenas: Option<ArenaPool>,
    leases: Arc<dyn LeaseProvider>,
    devices: usize,
    observers: Observers,
    aging: Duration,
    express: bool,
    express_past_interlocks: bool,
    quarantine: super::Quarantine,
}

/// What resolving found for each node, and the pooled resources.
struct Resolved<T> {
    chain: Chain,
    stages: Vec<(Arc<dyn Stage<T>>, Arc<rayon::ThreadPool>)>,
    leases: HashMap<String, Vec<LeasePool>>,
}

/// The edges into each node, by node index.
struct Wiring<T> {
    tx: Vec<Option<EdgeTx<T>>>,
    rx: Vec<Vec<Edge<Envelope<T>>>>,
    retry_at: Vec<Option<usize>>,
}

impl<T: Send + 'static> RuntimeBuilder<T> {
    pub fn new(spec: GraphSpec, stages: StageRegistry<T>, pools: CpuPools) -> Self {
        Self {
            spec,
            stages,
            pools,
            arenas: None,
            leases: Arc::new(NoDeviceState),
            devices: 1,
            observers: Observers::default(),
            aging: DEFAULT_AGING,
            express: true,
            express_past_interlocks: false,
            quarantine: super::Quarantine::default(),
        }
    }

    /// When a device whose stages keep faulting stops taking partitions
    /// (see `Quarantine`).
    pub fn quarantine(mut self, policy: super::Quarantine) -> Self {
        self.quarantine = policy;
        self
    }

    /// Whether every node keeps an express worker for CRITICAL items (on
    /// the `express` CPU pool where there is one). On by default.
    pub fn express_lane(mut self, on: bool) -> Self {
        self.express = on;
        self
    }

    /// Whether express workers skip the graph's interlocks (the locks,
    /// semaphores and gates nodes hold or wait for) and take a device lease
    /// beyond the pool's bound when bulk partitions hold them all. Right where device
    /// work runs on CPU pools (the CPU backend): there an interlock only
    /// orders CPU work, and a WinningPoSt waiting for it waits out a whole
    /// PoRep stage, while sharing the cores costs it a fraction of that.
    /// Off by default: a GPU's lock and leases guard its memory and streams.
    pub fn express_past_interlocks(mut self, on: bool) -> Self {
        self.express_past_interlocks = on;
        self
    }

    /// The arena pool behind the graph's `arena` resource.
    pub fn arenas(mut self, pool: ArenaPool) -> Self {
        self.arenas = Some(pool);
        self
    }

    /// What makes the slots of the graph's device leases (by default slots
    /// without device state, as on the CPU backend).
    pub fn leases(mut self, provider: Arc<dyn LeaseProvider>) -> Self {
        self.leases = provider;
        self
    }

    /// How many devices per-device nodes and resources are instantiated for.
    pub fn devices(mut self, devices: usize) -> Self {
        self.devices = devices.max(1);
        self
    }

    pub fn observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observers.push(observer);
        self
    }

    /// How fast a waiting item gains a priority level (see `crate::edge`).
    pub fn aging(mut self, per_level: Duration) -> Self {
        self.aging = per_level;
        self
    }

    /// Validates the declaration against the registry, pools and pooled
    /// resources, then starts every node's workers and the source on the
    /// current tokio runtime.
    pub fn start(self) -> Result<Runtime<T>, GraphError> {
        let handle =
            Handle::try_current().expect("Runtime::start must be called inside a tokio runtime");
        let resolved = self.resolve()?;
        let wiring = wire(&self.spec, &resolved.chain, self.devices, self.aging);
        Ok(self.spawn(handle, resolved, wiring))
    }

    fn resolve(&self) -> Result<Resolved<T>, GraphError> {
        let chain = self.spec.validate()?;
        let graph = || self.spec.name.clone();
        let mut stages = Vec::with_capacity(self.spec.nodes.len());
        for node in &self.spec.nodes {
            let stage = self
                .stages
                .get(&node.stage)
                .ok_or_else(|| GraphError::UnknownStage {
                    graph: graph(),
                    node: node.name.clone(),
                    stage: node.stage.clone(),
                    known: self.stages.names().join(", "),
                })?;
            let pool = self
                .pools
                .get(&node.pool)
                .ok_or_else(|| GraphError::UnknownPool {
                    graph: graph(),
                    node: node.name.clone(),
                    pool: node.pool.clone(),
                    known: self.pools.names().join(", "),
                })?;
            stages.push((stage, pool));
        }
        if let Some(arena) = self.spec.arena()
            && self.arenas.is_none()
        {
            return Err(GraphError::NoPool {
                graph: graph(),
                resource: arena.name.clone(),
                kind: "arena",
            });
        }
        let mut leases = HashMap::new();
        for r in &self.spec.resources {
            if r.kind != ResourceKind::DeviceLease {
                continue;
            }
            let size = r
                .size
                .or_else(|| self.spec.lease_in_flight(&r.name))
                .unwrap_or(1);
            let pools = (0..self.devices)
                .map(|d| LeasePool::new(&r.name, d, size, self.leases.clone()))
                .collect();
            leases.insert(r.name.clone(), pools);
        }
        Ok(Resolved {
            chain,
            stages,
            leases,
        })
    }

    fn spawn(self, handle: Handle, resolved: Resolved<T>, wiring: Wiring<T>) -> Runtime<T> {
        let Resolved {
            chain,
            stages,
            leases,
        } = resolved;
        let Wiring { tx, rx, retry_at } = wiring;
        let entry = tx[chain.order[0]].clone().expect("entry edge exists");
        let nodes = self
            .spec
            .nodes
            .iter()
            .zip(stages)
            .enumerate()
            .map(|(i, (spec, (stage, pool)))| {
                let pos = chain.order.iter().position(|&n| n == i);
                let (retry_tx, retry_rx) = if retry_at[i] == Some(i) {
                    (0..self.devices)
                        .map(|_| edge::unbounded(self.aging))
                        .unzip()
                } else {
                    (vec![], vec![])
                };
                NodeRt {
                    spec: spec.clone(),
                    stage,
                    pool,
                    inputs: rx[i].clone(),
                    next: pos.and_then(|p| chain.order.get(p + 1).copied()),
                    retry_at: retry_at[i],
                    retry_tx,
                    retry_rx,
                    stats: NodeStats::default(),
                }
            })
            .collect();
        let shared = Arc::new(Shared {
            resources: Resources::new(&self.spec.resources, self.devices),
            arena_name: self.spec.arena().map(|r| r.name.clone()),
            spec: self.spec,
            nodes,
            chain,
            arenas: self.arenas,
            leases,
            observers: self.observers,
            devices: self.devices,
            live_items: Arc::new(AtomicUsize::new(0)),
            jobs_running: AtomicUsize::new(0),
            source: Arc::new(Source::new(self.aging)),
            express_pool: self
                .express
                .then(|| self.pools.get(crate::pool::EXPRESS))
                .flatten(),
            express_past_interlocks: self.express && self.express_past_interlocks,
            health: super::health::DeviceHealth::new(self.devices, self.quarantine),
        });
        let mut tasks = spawn_workers(&handle, &shared, &tx, self.express);
        // Only workers hold the senders of inner edges now, and the source
        // task the entry's: when it ends, shutdown cascades down the chain.
        drop(tx);
        tasks.push(spawn_source(&handle, &shared, entry));
        Runtime {
            shared,
            tasks: Mutex::new(tasks),
            next_job: std::sync::atomic::AtomicU64::new(1),
            handle,
        }
    }
}

/// Every node's workers (per device for per-device nodes), each with its
/// input edge, its retry queue and the sender of the next node's edge.
fn spawn_workers<T: Send + 'static>(
    handle: &Handle,
    shared: &Arc<Shared<T>>,
    tx: &[Option<EdgeTx<T>>],
    express: bool,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = Vec::new();
    for (i, node) in shared.nodes.iter().enumerate() {
        let devices: Vec<Option<usize>> = match node.spec.placement {
            Placement::PerDevice => (0..shared.devices).map(Some).collect(),
            Placement::Shared => vec![None],
        };
        let mut index = 0;
        for device in devices {
            let input = match (&node.inputs[..], device) {
                ([one], _) => one.clone(),
                (many, Some(d)) => many[d].clone(),
                (_, None) => unreachable!("only per-device nodes have per-device inputs"),
            };
            // The declared workers, then the express worker.
            let workers = node.spec.workers + usize::from(express);
            for w in 0..workers {
                let output = node
                    .next
                    .map(|next| tx[next].clone().expect("every node has an input edge"));
                let retries = device.and_then(|d| node.retry_rx.get(d).cloned());
                let w = worker::Worker {
                    shared: shared.clone(),
                    node: i,
                    index,
                    device,
                    express: w == node.spec.workers,
                };
                tasks.push(handle.spawn(w.run(input.clone(), retries, output)));
                index += 1;
            }
        }
    }
    tasks
}

/// The task that feeds queued jobs into the entry edge.
fn spawn_source<T: Send + 'static>(
    handle: &Handle,
    shared: &Arc<Shared<T>>,
    entry: EdgeTx<T>,
) -> tokio::task::JoinHandle<()> {
    let shared = shared.clone();
    handle.spawn(async move {
        let first = shared.chain.order[0];
        let lost = shared
            .source
            .clone()
            .feed(entry, shared.live_items.clone(), |env| {
                shared.observers.emit(
                    env.job.id,
                    Some(env.partition),
                    EventKind::Queued {
                        node: shared.node_ref(first, None, None),
                    },
                );
            })
            .await;
        if let Some(env) = lost {
            let settled = env.job.fail(crate::job::JobError::Shutdown);
            shared.settle(&env.job, settled);
        }
    })
}

/// One edge into each node of the chain, in flow order; per device where
/// both ends are per-device nodes. Also where each per-device node's
/// partitions restart after a device fault: the first node of its run of
/// per-device nodes.
fn wire<T>(spec: &GraphSpec, chain: &Chain, devices: usize, aging: Duration) -> Wiring<T> {
    let n = spec.nodes.len();
    let mut tx: Vec<Option<EdgeTx<T>>> = (0..n).map(|_| None).collect();
    let mut rx: Vec<Vec<Edge<Envelope<T>>>> = (0..n).map(|_| vec![]).collect();
    let per_device = |i: usize| spec.nodes[i].placement == Placement::PerDevice;
    let mut prev: Option<usize> = None;
    for (pos, &node) in chain.order.iter().enumerate() {
        let capacity = chain.capacity_in[pos];
        if prev.is_some_and(per_device) && per_device(node) {
            let (txs, rxs) = (0..devices).map(|_| edge::bounded(capacity, aging)).unzip();
            tx[node] = Some(EdgeTx::PerDevice(txs));
            rx[node] = rxs;
        } else {
            let (t, r) = edge::bounded(capacity, aging);
            tx[node] = Some(EdgeTx::Shared(t));
            rx[node] = vec![r];
        }
        prev = Some(node);
    }
    let mut retry_at = vec![None; n];
    let mut run_start = None;
    for &i in &chain.order {
        run_start = if per_device(i) {
            run_start.or(Some(i))
        } else {
            None
        };
        retry_at[i] = run_start;
    }
    Wiring { tx, rx, retry_at }
}
