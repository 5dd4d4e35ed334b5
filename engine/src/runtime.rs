//! The running graph: node workers as tokio tasks, bounded flume edges
//! between them, stage work on CPU pools, and job fan-out / fan-in.
//!
//! Every transition of an item (queued, picked up, waiting, running, done,
//! dropped) happens in [`worker`] and is reported to the observers from there:
//! the single place timelines, traces and metrics come from.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::runtime::Handle;
use tokio::task::JoinHandle;

use crate::arena::{ArenaLease, ArenaPool, ArenaStats};
use crate::graph::{Chain, GraphError, GraphSpec, NodeSpec, Placement};
use crate::job::{
    JobCanceller, JobError, JobHandle, JobState, PartitionOutput, Settled, StageTiming,
};
use crate::observer::{DropReason, EventKind, NodeRef, Observer, Observers, Wait};
use crate::pool::{CpuPools, run_on};
use crate::resource::Resources;
use crate::stage::{Cancelled, DeviceFault, Stage, StageContext, StageRegistry};

/// One partition in flight, with what the runtime tracks about it.
struct Envelope<T> {
    job: Arc<JobState<T>>,
    partition: usize,
    device: Option<usize>,
    arena: Option<ArenaLease>,
    item: Option<T>,
    timings: Vec<StageTiming>,
    queued_at: Instant,
    live: Arc<AtomicUsize>,
    /// Devices that failed this partition (it is not given to them again).
    failed_on: Vec<usize>,
}

impl<T> Drop for Envelope<T> {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The sending side of an edge: one channel, or one per device when both ends
/// are per-device nodes (so items stay on their device).
enum EdgeTx<T> {
    Shared(flume::Sender<Envelope<T>>),
    PerDevice(Vec<flume::Sender<Envelope<T>>>),
}

impl<T> Clone for EdgeTx<T> {
    fn clone(&self) -> Self {
        match self {
            Self::Shared(s) => Self::Shared(s.clone()),
            Self::PerDevice(v) => Self::PerDevice(v.clone()),
        }
    }
}

impl<T> EdgeTx<T> {
    async fn send(&self, env: Envelope<T>) -> Result<(), Envelope<T>> {
        let tx = match self {
            Self::Shared(s) => s,
            Self::PerDevice(v) => &v[env.device.expect("per-device nodes bind items to a device")],
        };
        tx.send_async(env).await.map_err(|e| e.into_inner())
    }
}

/// Live counters of one node.
#[derive(Default)]
struct NodeStats {
    busy: AtomicUsize,
    done: AtomicU64,
    failed: AtomicU64,
    retried: AtomicU64,
}

struct NodeRt<T> {
    spec: NodeSpec,
    stage: Arc<dyn Stage<T>>,
    pool: Arc<rayon::ThreadPool>,
    /// Receivers of the input edge, to report queue depth.
    inputs: Vec<flume::Receiver<Envelope<T>>>,
    /// The next node in flow order, if any. Its edge's senders live only in
    /// this node's workers, so when they all exit the next node sees its
    /// input close: that is how shutdown cascades down the chain.
    next: Option<usize>,
    /// For per-device nodes: the first node of the run of per-device nodes
    /// this one belongs to, where a partition a device failed starts again.
    retry_at: Option<usize>,
    /// Per-device queues of partitions another device failed, for the node
    /// where they restart; its workers take from them first. Unbounded, but
    /// never longer than the partitions in flight.
    retry_tx: Vec<flume::Sender<Envelope<T>>>,
    retry_rx: Vec<flume::Receiver<Envelope<T>>>,
    stats: NodeStats,
}

struct Shared<T> {
    spec: GraphSpec,
    nodes: Vec<NodeRt<T>>,
    /// Flow order: indices into `nodes`.
    chain: Chain,
    resources: Resources,
    arenas: Option<ArenaPool>,
    observers: Observers,
    devices: usize,
    live_items: Arc<AtomicUsize>,
    jobs_feeding: AtomicUsize,
    jobs_running: AtomicUsize,
}

impl<T: 'static> Shared<T> {
    fn node_ref(&self, node: usize, worker: Option<usize>, device: Option<usize>) -> NodeRef<'_> {
        let spec = &self.nodes[node].spec;
        NodeRef {
            name: &spec.name,
            event: &spec.event,
            worker,
            device,
            device_timed: self.nodes[node].stage.device_timed(),
        }
    }

    fn settle(&self, job: &JobState<T>, settled: Settled) {
        if let Settled::Finished { ok, error } = settled {
            self.jobs_running.fetch_sub(1, Ordering::SeqCst);
            self.observers.emit(
                job.id,
                None,
                EventKind::JobFinished {
                    ok,
                    error: error.as_deref(),
                },
            );
        }
    }
}

/// Builds a [`Runtime`] from a declaration and what it refers to.
pub struct RuntimeBuilder<T> {
    spec: GraphSpec,
    stages: StageRegistry<T>,
    pools: CpuPools,
    arenas: Option<ArenaPool>,
    devices: usize,
    observers: Observers,
}

impl<T: Send + 'static> RuntimeBuilder<T> {
    pub fn new(spec: GraphSpec, stages: StageRegistry<T>, pools: CpuPools) -> Self {
        Self {
            spec,
            stages,
            pools,
            arenas: None,
            devices: 1,
            observers: Observers::default(),
        }
    }

    /// The arena pool nodes with `takes_arena` draw from.
    pub fn arenas(mut self, pool: ArenaPool) -> Self {
        self.arenas = Some(pool);
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

    /// Validates the declaration against the registry and pools, then starts
    /// every node's workers on the current tokio runtime.
    pub fn start(self) -> Result<Runtime<T>, GraphError> {
        let handle =
            Handle::try_current().expect("Runtime::start must be called inside a tokio runtime");
        let chain = self.spec.validate()?;
        let graph = || self.spec.name.clone();

        // Resolve stages and pools before creating any channel.
        let mut resolved = Vec::with_capacity(self.spec.nodes.len());
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
            if node.takes_arena && self.arenas.is_none() {
                return Err(GraphError::NoArenaPool {
                    graph: graph(),
                    node: node.name.clone(),
                });
            }
            resolved.push((stage, pool));
        }

        // One edge into each node of the chain, in flow order.
        let mut edge_tx: Vec<Option<EdgeTx<T>>> =
            (0..self.spec.nodes.len()).map(|_| None).collect();
        let mut edge_rx: Vec<Vec<flume::Receiver<Envelope<T>>>> =
            (0..self.spec.nodes.len()).map(|_| vec![]).collect();
        let mut prev: Option<usize> = None;
        for (pos, &node) in chain.order.iter().enumerate() {
            let capacity = chain.capacity_in[pos];
            let affine = prev.is_some_and(|p| self.spec.nodes[p].placement == Placement::PerDevice)
                && self.spec.nodes[node].placement == Placement::PerDevice;
            if affine {
                let (txs, rxs) = (0..self.devices).map(|_| flume::bounded(capacity)).unzip();
                edge_tx[node] = Some(EdgeTx::PerDevice(txs));
                edge_rx[node] = rxs;
            } else {
                let (tx, rx) = flume::bounded(capacity);
                edge_tx[node] = Some(EdgeTx::Shared(tx));
                edge_rx[node] = vec![rx];
            }
            prev = Some(node);
        }
        let entry = edge_tx[chain.order[0]].clone().expect("entry edge exists");

        // Where each per-device node's partitions restart after a device fault.
        let per_device = |i: usize| self.spec.nodes[i].placement == Placement::PerDevice;
        let mut retry_at: Vec<Option<usize>> = vec![None; self.spec.nodes.len()];
        let mut run_start = None;
        for &i in &chain.order {
            run_start = if per_device(i) {
                run_start.or(Some(i))
            } else {
                None
            };
            retry_at[i] = run_start;
        }

        let retry_queues: Vec<(Vec<_>, Vec<_>)> = (0..self.spec.nodes.len())
            .map(|i| {
                if retry_at[i] == Some(i) {
                    (0..self.devices).map(|_| flume::unbounded()).unzip()
                } else {
                    (vec![], vec![])
                }
            })
            .collect();
        let nodes = self
            .spec
            .nodes
            .iter()
            .zip(resolved)
            .enumerate()
            .map(|(i, (spec, (stage, pool)))| {
                let pos = chain
                    .order
                    .iter()
                    .position(|&n| n == i)
                    .expect("validated: all reachable");
                NodeRt {
                    spec: spec.clone(),
                    stage,
                    pool,
                    inputs: edge_rx[i].clone(),
                    next: chain.order.get(pos + 1).copied(),
                    retry_at: retry_at[i],
                    retry_tx: retry_queues[i].0.clone(),
                    retry_rx: retry_queues[i].1.clone(),
                    stats: NodeStats::default(),
                }
            })
            .collect();

        let shared = Arc::new(Shared {
            resources: Resources::new(&self.spec.resources, self.devices),
            spec: self.spec,
            nodes,
            chain,
            arenas: self.arenas,
            observers: self.observers,
            devices: self.devices,
            live_items: Arc::new(AtomicUsize::new(0)),
            jobs_feeding: AtomicUsize::new(0),
            jobs_running: AtomicUsize::new(0),
        });

        let mut tasks = Vec::new();
        for (i, node) in shared.nodes.iter().enumerate() {
            let per_device = node.spec.placement == Placement::PerDevice;
            let devices: Vec<Option<usize>> = if per_device {
                (0..self.devices).map(Some).collect()
            } else {
                vec![None]
            };
            let mut worker_index = 0;
            for device in devices {
                let rx = match (&node.inputs[..], device) {
                    ([one], _) => one.clone(),
                    (many, Some(d)) => many[d].clone(),
                    (_, None) => unreachable!("only per-device nodes have per-device inputs"),
                };
                for _ in 0..node.spec.workers {
                    let output = node
                        .next
                        .map(|next| edge_tx[next].clone().expect("every node has an input edge"));
                    let retries = device.and_then(|d| node.retry_rx.get(d).cloned());
                    tasks.push(handle.spawn(worker(
                        shared.clone(),
                        i,
                        worker_index,
                        device,
                        rx.clone(),
                        retries,
                        output,
                    )));
                    worker_index += 1;
                }
            }
        }
        // Only workers (and the entry, for the first node) hold senders now.
        drop(edge_tx);
        Ok(Runtime {
            shared,
            entry: Mutex::new(Some(entry)),
            tasks: Mutex::new(tasks),
            next_job: AtomicU64::new(1),
            handle,
        })
    }
}

/// A running graph. Submit jobs, read status, shut down.
pub struct Runtime<T> {
    shared: Arc<Shared<T>>,
    entry: Mutex<Option<EdgeTx<T>>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    next_job: AtomicU64,
    handle: Handle,
}

impl<T: Send + 'static> Runtime<T> {
    /// Submits a job of `items.len()` partitions. The returned handle resolves
    /// to every partition's output, in order, or to the first error.
    ///
    /// Partitions enter the graph as its entry edge has room; a job waiting
    /// for room counts as queued in [`Runtime::status`].
    pub fn submit(&self, label: &str, items: Vec<T>) -> JobHandle<T> {
        let id = self.next_job.fetch_add(1, Ordering::SeqCst);
        let partitions = items.len();
        let (state, reply) = JobState::new(id, partitions);
        let shared = &self.shared;
        shared
            .observers
            .emit(id, None, EventKind::JobSubmitted { label, partitions });
        let canceller = {
            let state = state.clone();
            let shared = shared.clone();
            JobCanceller::new(Arc::new(move || {
                let settled = state.fail(JobError::Cancelled);
                shared.settle(&state, settled);
            }))
        };
        let handle = JobHandle::new(id, canceller, reply);
        shared.jobs_running.fetch_add(1, Ordering::SeqCst);
        if partitions == 0 {
            // Nothing to run: finish at once with an empty output.
            let settled = state.fail(JobError::Failed {
                node: "source".into(),
                partition: 0,
                message: "a job needs at least one partition".into(),
                error: Arc::new(anyhow::anyhow!("a job needs at least one partition")),
            });
            shared.settle(&state, settled);
            return handle;
        }
        let Some(entry) = self.entry.lock().unwrap().clone() else {
            let settled = state.fail(JobError::Shutdown);
            shared.settle(&state, settled);
            return handle;
        };
        shared.jobs_feeding.fetch_add(1, Ordering::SeqCst);
        let shared = shared.clone();
        self.handle.spawn(async move {
            let first = shared.chain.order[0];
            for (partition, item) in items.into_iter().enumerate() {
                if state.is_cancelled() {
                    break;
                }
                shared.live_items.fetch_add(1, Ordering::SeqCst);
                let env = Envelope {
                    job: state.clone(),
                    partition,
                    device: None,
                    arena: None,
                    item: Some(item),
                    timings: Vec::new(),
                    queued_at: Instant::now(),
                    live: shared.live_items.clone(),
                    failed_on: Vec::new(),
                };
                shared.observers.emit(
                    id,
                    Some(partition),
                    EventKind::Queued {
                        node: shared.node_ref(first, None, None),
                    },
                );
                if entry.send(env).await.is_err() {
                    let settled = state.fail(JobError::Shutdown);
                    shared.settle(&state, settled);
                    break;
                }
            }
            shared.jobs_feeding.fetch_sub(1, Ordering::SeqCst);
        });
        handle
    }

    /// A snapshot of jobs and of each node's queue and workers.
    pub fn status(&self) -> Status {
        let s = &self.shared;
        Status {
            graph: s.spec.name.clone(),
            jobs_queued: s.jobs_feeding.load(Ordering::SeqCst),
            jobs_running: s.jobs_running.load(Ordering::SeqCst),
            items_in_flight: s.live_items.load(Ordering::SeqCst),
            nodes: s
                .chain
                .order
                .iter()
                .map(|&i| {
                    let n = &s.nodes[i];
                    NodeStatus {
                        name: n.spec.name.clone(),
                        stage: n.spec.stage.clone(),
                        workers: n.spec.workers
                            * if n.spec.placement == Placement::PerDevice {
                                s.devices
                            } else {
                                1
                            },
                        queued: n.inputs.iter().map(|r| r.len()).sum(),
                        busy: n.stats.busy.load(Ordering::SeqCst),
                        done: n.stats.done.load(Ordering::SeqCst),
                        failed: n.stats.failed.load(Ordering::SeqCst),
                        retried: n.stats.retried.load(Ordering::SeqCst),
                    }
                })
                .collect(),
            arenas: s.arenas.as_ref().map(ArenaPool::stats),
        }
    }

    /// The declaration this runtime runs.
    pub fn spec(&self) -> &GraphSpec {
        &self.shared.spec
    }

    /// Waits until no item is in flight (every submitted partition finished
    /// or was dropped and its arena returned).
    pub async fn idle(&self) {
        while self.shared.live_items.load(Ordering::SeqCst) > 0
            || self.shared.jobs_feeding.load(Ordering::SeqCst) > 0
        {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Stops accepting jobs, lets items in flight finish, and waits for every
    /// worker to exit.
    pub async fn shutdown(&self) {
        self.entry.lock().unwrap().take();
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap());
        for t in tasks {
            let _ = t.await;
        }
    }
}

impl<T> Drop for Runtime<T> {
    fn drop(&mut self) {
        for t in self.tasks.lock().unwrap().drain(..) {
            t.abort();
        }
    }
}

/// A node's queue and workers at one instant.
#[derive(Clone, Debug, serde::Serialize)]
pub struct NodeStatus {
    pub name: String,
    pub stage: String,
    pub workers: usize,
    /// Items waiting in the node's input edge.
    pub queued: usize,
    /// Workers running the stage now.
    pub busy: usize,
    pub done: u64,
    pub failed: u64,
    /// Partitions a device failed here and that went to another device.
    pub retried: u64,
}

/// The engine at one instant.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Status {
    pub graph: String,
    /// Jobs whose partitions are still entering the graph.
    pub jobs_queued: usize,
    /// Jobs submitted and not yet finished.
    pub jobs_running: usize,
    /// Partitions inside the graph.
    pub items_in_flight: usize,
    pub nodes: Vec<NodeStatus>,
    #[serde(skip)]
    pub arenas: Option<ArenaStats>,
}

/// One worker of one node: take an item, wait for what the node needs, run
/// the stage on the node's pool, pass the item on.
async fn worker<T: Send + 'static>(
    shared: Arc<Shared<T>>,
    node: usize,
    worker: usize,
    device: Option<usize>,
    input: flume::Receiver<Envelope<T>>,
    retries: Option<flume::Receiver<Envelope<T>>>,
    output: Option<EdgeTx<T>>,
) {
    let rt = &shared.nodes[node];
    let spec = &rt.spec;
    loop {
        // Partitions another device failed come first; the chain's input
        // closing (shutdown) ends the worker.
        let next = match &retries {
            Some(retries) => tokio::select! {
                biased;
                Ok(env) = retries.recv_async() => Some(env),
                r = input.recv_async() => r.ok(),
            },
            None => input.recv_async().await.ok(),
        };
        let Some(mut env) = next else { break };
        let picked = Instant::now();
        if device.is_some() {
            env.device = device;
        }
        let job = env.job.id;
        let index = env.partition;
        let partition = Some(index);
        let here = shared.node_ref(node, Some(worker), env.device);
        shared.observers.emit(
            job,
            partition,
            EventKind::Picked {
                node: here,
                queued: picked - env.queued_at,
            },
        );
        if env.job.is_cancelled() {
            shared.observers.emit(job, partition, dropped(here, &env));
            continue;
        }

        // Gates, then the arena, then held resources, each in declared order.
        for gate in &spec.waits_for {
            let wait = Wait::Gate(gate);
            if shared.resources.is_busy(gate, env.device) {
                let since = Instant::now();
                shared
                    .observers
                    .emit(job, partition, EventKind::WaitStart { node: here, wait });
                shared.resources.wait_open(gate, env.device).await;
                let waited = since.elapsed();
                shared.observers.emit(
                    job,
                    partition,
                    EventKind::WaitEnd {
                        node: here,
                        wait,
                        waited,
                    },
                );
            }
        }
        if spec.takes_arena && env.arena.is_none() {
            let pool = shared.arenas.as_ref().expect("validated at start");
            env.arena = Some(match pool.try_acquire() {
                Some(lease) => lease,
                None => {
                    let since = Instant::now();
                    let wait = Wait::Arena;
                    shared.observers.emit(
                        job,
                        partition,
                        EventKind::WaitStart { node: here, wait },
                    );
                    let lease = pool.acquire().await;
                    let waited = since.elapsed();
                    shared.observers.emit(
                        job,
                        partition,
                        EventKind::WaitEnd {
                            node: here,
                            wait,
                            waited,
                        },
                    );
                    lease
                }
            });
        }
        let mut held = Vec::with_capacity(spec.holds.len());
        for resource in &spec.holds {
            let wait = Wait::Resource(resource);
            if shared.resources.is_busy(resource, env.device) {
                let since = Instant::now();
                shared
                    .observers
                    .emit(job, partition, EventKind::WaitStart { node: here, wait });
                held.push(shared.resources.hold(resource, env.device).await);
                let waited = since.elapsed();
                shared.observers.emit(
                    job,
                    partition,
                    EventKind::WaitEnd {
                        node: here,
                        wait,
                        waited,
                    },
                );
            } else {
                held.push(shared.resources.hold(resource, env.device).await);
            }
        }
        if env.job.is_cancelled() {
            shared.observers.emit(job, partition, dropped(here, &env));
            continue;
        }

        // Run the stage on its CPU pool.
        let waited = picked.elapsed();
        let queued = picked - env.queued_at;
        rt.stats.busy.fetch_add(1, Ordering::SeqCst);
        shared
            .observers
            .emit(job, partition, EventKind::StageStart { node: here });
        let started = Instant::now();
        let stage = rt.stage.clone();
        let node_name: Arc<str> = Arc::from(spec.name.as_str());
        let name_for_stage = node_name.clone();
        let state = env.job.clone();
        let outcome = run_on(&rt.pool, move || {
            let Envelope {
                job,
                partition,
                device,
                arena,
                item,
                ..
            } = &mut env;
            let mut cx = StageContext::new(
                job.id,
                *partition,
                &name_for_stage,
                worker,
                *device,
                arena.as_mut(),
                job.cancelled_flag(),
            );
            let result = stage.run(
                item.as_mut().expect("present until the job collects it"),
                &mut cx,
            );
            let (notes, spans) = (
                std::mem::take(&mut cx.notes),
                std::mem::take(&mut cx.device_spans),
            );
            (env, result, notes, spans)
        })
        .await;
        let elapsed = started.elapsed();
        drop(held);
        rt.stats.busy.fetch_sub(1, Ordering::SeqCst);

        match outcome {
            Ok((mut env, Ok(()), notes, spans)) => {
                rt.stats.done.fetch_add(1, Ordering::SeqCst);
                shared.observers.emit(
                    job,
                    partition,
                    EventKind::StageEnd {
                        node: here,
                        elapsed,
                        error: None,
                        notes: &notes,
                        device_spans: &spans,
                    },
                );
                env.timings.push(StageTiming {
                    node: node_name,
                    queued,
                    waited,
                    ran: elapsed,
                    worker,
                    device: env.device,
                    notes,
                });
                forward(&shared, node, output.as_ref(), env).await;
            }
            Ok((env, Err(error), notes, spans)) => {
                let cancelled = error.is::<Cancelled>();
                let message = format!("{error:#}");
                shared.observers.emit(
                    job,
                    partition,
                    EventKind::StageEnd {
                        node: here,
                        elapsed,
                        error: Some(&message),
                        notes: &notes,
                        device_spans: &spans,
                    },
                );
                if cancelled {
                    shared.observers.emit(job, partition, dropped(here, &env));
                } else if let Some(fault) = error.downcast_ref::<DeviceFault>()
                    && rt.retry_at.is_some()
                    && env.failed_on.len() + 1 < shared.devices
                {
                    let mut env = env;
                    env.failed_on.push(fault.device);
                    shared.observers.emit(
                        job,
                        partition,
                        EventKind::Retried {
                            node: here,
                            error: &message,
                            failed_on: &env.failed_on,
                        },
                    );
                    rt.stats.retried.fetch_add(1, Ordering::SeqCst);
                    retry(&shared, node, env);
                } else {
                    rt.stats.failed.fetch_add(1, Ordering::SeqCst);
                    let settled = state.fail(JobError::failed(&spec.name, env.partition, error));
                    shared.settle(&state, settled);
                }
            }
            Err(panic) => {
                // The envelope unwound with the panic; its arena went back to the pool.
                rt.stats.failed.fetch_add(1, Ordering::SeqCst);
                let message = format!("stage `{}` {panic}", spec.stage);
                shared.observers.emit(
                    job,
                    partition,
                    EventKind::StageEnd {
                        node: here,
                        elapsed,
                        error: Some(&message),
                        notes: &[],
                        device_spans: &[],
                    },
                );
                let settled = state.fail(JobError::failed(
                    &spec.name,
                    index,
                    anyhow::anyhow!(message),
                ));
                shared.settle(&state, settled);
            }
        }
    }
}

/// Sends a partition a device failed to another device, at the start of its
/// run of per-device nodes: the healthy device with the shortest retry queue.
fn retry<T: Send + 'static>(shared: &Arc<Shared<T>>, node: usize, mut env: Envelope<T>) {
    let start = &shared.nodes[shared.nodes[node].retry_at.expect("checked by the caller")];
    let target = (0..shared.devices)
        .filter(|d| !env.failed_on.contains(d))
        .min_by_key(|&d| start.retry_tx[d].len())
        .expect("checked by the caller: a device is left");
    env.device = None;
    env.queued_at = Instant::now();
    // Unbounded: never blocks, and holds at most the partitions in flight.
    if let Err(e) = start.retry_tx[target].send(env) {
        let env = e.into_inner();
        let settled = env.job.fail(JobError::Shutdown);
        shared.settle(&env.job, settled);
    }
}

fn dropped<'a, T>(node: NodeRef<'a>, env: &Envelope<T>) -> EventKind<'a> {
    let reason = if env.job.is_cancelled() {
        DropReason::Cancelled
    } else {
        DropReason::JobFailed
    };
    EventKind::Dropped { node, reason }
}

/// Passes an item to the next node, or hands it to its job after the last.
async fn forward<T: Send + 'static>(
    shared: &Arc<Shared<T>>,
    node: usize,
    output: Option<&EdgeTx<T>>,
    mut env: Envelope<T>,
) {
    let job = env.job.clone();
    match (output, shared.nodes[node].next) {
        (Some(tx), Some(next)) => {
            env.queued_at = Instant::now();
            shared.observers.emit(
                job.id,
                Some(env.partition),
                EventKind::Queued {
                    node: shared.node_ref(next, None, env.device),
                },
            );
            if tx.send(env).await.is_err() {
                let settled = job.fail(JobError::Shutdown);
                shared.settle(&job, settled);
            }
        }
        _ => {
            let partition = env.partition;
            let output = PartitionOutput {
                item: env.item.take().expect("present until collected"),
                timings: std::mem::take(&mut env.timings),
            };
            // The arena goes back to its pool here, before the job is told.
            drop(env);
            shared
                .observers
                .emit(job.id, Some(partition), EventKind::PartitionDone);
            let settled = job.complete(partition, output);
            shared.settle(&job, settled);
        }
    }
}
