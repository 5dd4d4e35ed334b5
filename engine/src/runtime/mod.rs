//! The running graph: node workers as tokio tasks, bounded priority edges
//! between them, stage work on CPU pools, and job fan-out / fan-in.
//!
//! Every transition of an item (queued, picked up, waiting, running, done,
//! dropped) happens in the worker loop (`worker.rs`) and is reported to the
//! observers from there: the single place timelines, traces and metrics come
//! from. `build.rs` turns a declaration into the running graph.

mod build;
mod envelope;
mod health;
mod source;
mod status;
mod worker;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::task::JoinHandle;

use crate::arena::ArenaPool;
use crate::edge::{Edge, EdgeSender};
use crate::graph::{Chain, GraphSpec, NodeSpec};
use crate::job::{JobCanceller, JobError, JobHandle, JobState, Settled};
use crate::lease::LeasePool;
use crate::observer::{EventKind, NodeRef, Observers};
use crate::resource::Resources;
use crate::stage::Stage;

pub use build::RuntimeBuilder;
use envelope::Envelope;
pub use health::Quarantine;
use source::Source;
pub use status::{NodeStatus, Status};

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
    /// The input edge (one per device for an edge between per-device nodes),
    /// kept to report queue depth.
    inputs: Vec<Edge<Envelope<T>>>,
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
    retry_tx: Vec<EdgeSender<Envelope<T>>>,
    retry_rx: Vec<Edge<Envelope<T>>>,
    stats: NodeStats,
}

struct Shared<T> {
    spec: GraphSpec,
    nodes: Vec<NodeRt<T>>,
    /// Flow order: indices into `nodes`.
    chain: Chain,
    resources: Resources,
    arenas: Option<ArenaPool>,
    /// The name of the graph's arena resource, if it declares one.
    arena_name: Option<String>,
    /// Device lease pools by resource, one per device.
    leases: HashMap<String, Vec<LeasePool>>,
    observers: Observers,
    devices: usize,
    live_items: Arc<AtomicUsize>,
    jobs_running: AtomicUsize,
    source: Arc<Source<T>>,
    /// Where express workers run their stages (None: their node's pool).
    express_pool: Option<Arc<rayon::ThreadPool>>,
    /// Express workers skip interlocks (see `RuntimeBuilder::express_past_interlocks`).
    express_past_interlocks: bool,
    health: health::DeviceHealth,
}

impl<T: 'static> Shared<T> {
    fn node_ref(&self, node: usize, worker: Option<usize>, device: Option<usize>) -> NodeRef<'_> {
        let spec = &self.nodes[node].spec;
        NodeRef {
            name: &spec.name,
            event: &spec.event,
            role: spec.role,
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

/// A running graph. Submit jobs, read status, shut down.
pub struct Runtime<T> {
    shared: Arc<Shared<T>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    next_job: AtomicU64,
    handle: Handle,
}

impl<T: Send + 'static> Runtime<T> {
    /// Submits a job of `items.len()` partitions at the default priority.
    pub fn submit(&self, label: &str, items: Vec<T>) -> JobHandle<T> {
        self.submit_with_priority(label, items, 0)
    }

    /// Submits a job. Its partitions enter the graph as the entry edge has
    /// room, the highest (aged) priority first, and go ahead of lower ones in
    /// every edge. The handle resolves to every partition's output, in
    /// order, or to the first error. A job waiting to enter counts as
    /// queued in [`Runtime::status`].
    pub fn submit_with_priority(&self, label: &str, items: Vec<T>, priority: u8) -> JobHandle<T> {
        let id = self.next_job.fetch_add(1, Ordering::SeqCst);
        let partitions = items.len();
        let (state, reply) = JobState::new(id, partitions, priority);
        let shared = &self.shared;
        shared.observers.emit(
            id,
            None,
            EventKind::JobSubmitted {
                label,
                partitions,
                priority,
            },
        );
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
            let settled = state.fail(JobError::Failed {
                node: "source".into(),
                partition: 0,
                message: "a job needs at least one partition".into(),
                error: Arc::new(anyhow::anyhow!("a job needs at least one partition")),
            });
            shared.settle(&state, settled);
            return handle;
        }
        if !shared.source.push(state.clone(), items) {
            let settled = state.fail(JobError::Shutdown);
            shared.settle(&state, settled);
        }
        handle
    }

    /// Jobs queued and running, and each node's queue and busy workers.
    pub fn status(&self) -> Status {
        status::of(&self.shared)
    }

    /// The declaration this runtime runs.
    pub fn spec(&self) -> &GraphSpec {
        &self.shared.spec
    }

    /// How many devices per-device nodes run on.
    pub fn devices(&self) -> usize {
        self.shared.devices
    }

    /// Waits until no item is in flight and every job has settled (every
    /// submitted partition finished or was dropped, its arena returned).
    pub async fn idle(&self) {
        while self.shared.live_items.load(Ordering::SeqCst) > 0
            || self.shared.source.queued() > 0
            || self.shared.jobs_running.load(Ordering::SeqCst) > 0
        {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Stops accepting jobs, lets queued and in-flight ones finish, and
    /// waits for every worker to exit.
    pub async fn shutdown(&self) {
        self.shared.source.close();
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap());
        for t in tasks {
            let _ = t.await;
        }
    }

    /// The tokio runtime the graph runs on.
    pub fn handle(&self) -> &Handle {
        &self.handle
    }
}

impl<T> Drop for Runtime<T> {
    fn drop(&mut self) {
        for t in self.tasks.lock().unwrap().drain(..) {
            t.abort();
        }
    }
}
