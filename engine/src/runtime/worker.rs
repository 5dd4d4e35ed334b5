//! One worker of one node: take an item, **acquire** what the node declares
//! (gates, pooled resources, held resources), **run** the stage on the
//! node's pool, **settle** the outcome (pass the item on, retry it on
//! another device, or fail its job).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::edge::{Edge, Prioritised};
use crate::graph::ResourceKind;
use crate::job::{JobError, PartitionOutput, StageTiming};
use crate::observer::{DeviceSpan, DropReason, EventKind, NodeRef, Wait};
use crate::pool::run_on;
use crate::resource::{GatePass, Held};
use crate::stage::{Cancelled, DeviceBusy, DeviceFault, StageContext};

use super::Shared;
use super::envelope::{EdgeTx, Envelope};

pub(super) struct Worker<T> {
    pub shared: Arc<Shared<T>>,
    pub node: usize,
    pub index: usize,
    pub device: Option<usize>,
    /// Takes only CRITICAL items (the express lane, see `crate::edge`).
    pub express: bool,
}

/// Which item a wait is for (without borrowing it across the wait).
#[derive(Clone, Copy)]
struct Who {
    job: crate::job::JobId,
    partition: usize,
    device: Option<usize>,
}

impl Who {
    fn of<T>(env: &Envelope<T>) -> Self {
        Self {
            job: env.job.id,
            partition: env.partition,
            device: env.device,
        }
    }
}

/// An item with everything its node declares.
struct Acquired<T> {
    env: Envelope<T>,
    held: Vec<Held>,
    /// Gate passes: used (dropped) once the stage has started.
    passes: Vec<GatePass>,
}

/// What a stage run came to.
#[allow(clippy::large_enum_variant)] // one per worker at a time
enum Ran<T> {
    Finished {
        env: Envelope<T>,
        result: anyhow::Result<()>,
        notes: Vec<(&'static str, String)>,
        spans: Vec<DeviceSpan>,
        elapsed: Duration,
        /// In the input edge, and waiting after pickup.
        queued: Duration,
        waited: Duration,
    },
    /// The stage panicked; the envelope unwound with it (its arena and
    /// leases went back to their pools).
    Panicked {
        env_job: Arc<crate::job::JobState<T>>,
        partition: usize,
        message: String,
        elapsed: Duration,
    },
}

impl<T: Send + 'static> Worker<T> {
    fn here(&self, device: Option<usize>) -> NodeRef<'_> {
        self.shared.node_ref(self.node, Some(self.index), device)
    }

    pub async fn run(
        self,
        input: Edge<Envelope<T>>,
        retries: Option<Edge<Envelope<T>>>,
        output: Option<EdgeTx<T>>,
    ) {
        // The arena pool, if this node takes arenas.
        let spec = &self.shared.nodes[self.node].spec;
        let pool = self.shared.arenas.as_ref().filter(|_| {
            let arena = self.shared.arena_name.as_deref();
            arena.is_some_and(|a| spec.takes.iter().any(|t| t == a))
        });
        loop {
            self.sit_out_quarantine().await;
            // A node that takes arenas takes one before it picks an item, not
            // after: a worker that picked a PoRep partition and then waited
            // for an arena would hold it while a WinningPoSt that came later
            // waited behind it in the edge. With the arena in hand, the
            // worker picks whatever ranks first when one is free.
            let reserved = match pool {
                Some(pool) if self.express => Some(pool.reserve_express().await),
                Some(pool) => Some(pool.reserve(0).await),
                None => None,
            };
            // Partitions another device failed come first; the chain's input
            // closing (shutdown) ends the worker.
            let express = self.express;
            let next = match &retries {
                Some(retries) => tokio::select! {
                    biased;
                    Some(env) = retries.recv(express) => Some(env),
                    r = input.recv(express) => r,
                },
                None => input.recv(express).await,
            };
            let Some(mut env) = next else { break };
            // An item that already carries an arena gives the reserved one back.
            if let (Some(pool), Some(r), None) = (pool, reserved, &env.arena) {
                env.arena = Some(pool.lease_reserved(r));
            }
            let picked = Instant::now();
            let Some(Acquired { env, held, passes }) = self.acquire(env, picked).await else {
                continue;
            };
            let mut ran = self.run_stage(env, picked, passes).await;
            // The end is reported while the node still holds its resources,
            // so a timeline never shows a stage outside its lock.
            self.report_end(&ran);
            match &mut ran {
                Ran::Finished {
                    env,
                    result: Ok(()),
                    ..
                } => self.hand_over(env, held),
                _ => drop(held),
            }
            self.settle(ran, output.as_ref()).await;
        }
    }

    /// Binds the item to this worker's device and takes what the node
    /// declares, in order: pooled resources, held resources, then passes of
    /// the gates it waits for (last, so a pass is never held while waiting).
    /// `None` if the item left the graph instead (its job was cancelled or
    /// failed, or a pooled resource could not be had).
    async fn acquire(&self, mut env: Envelope<T>, picked: Instant) -> Option<Acquired<T>> {
        let shared = &self.shared;
        let spec = &shared.nodes[self.node].spec;
        if self.device.is_some() {
            env.device = self.device;
        }
        let (job, partition) = (env.job.id, Some(env.partition));
        let here = self.here(env.device);
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
            return None;
        }
        for name in &spec.takes {
            if let Err(e) = self.take(&mut env, name).await {
                self.fail_before_run(env, e);
                return None;
            }
        }
        let mut held = Vec::with_capacity(spec.holds.len());
        let mut kept = std::mem::take(&mut env.kept);
        // Interlocks a CRITICAL item skips (nothing held, nothing passed).
        let past = self.past_interlocks(&env);
        let (holds, gates): (&[String], &[String]) = if past {
            (&[], &[])
        } else {
            (&spec.holds, &spec.waits_for)
        };
        for resource in holds {
            let carried = kept
                .iter()
                .position(|(name, device, _)| name == resource && *device == env.device);
            if let Some(i) = carried {
                held.push(kept.swap_remove(i).2);
                continue;
            }
            let hold = shared
                .resources
                .hold(resource, env.device, env.job.priority);
            held.push(if shared.resources.is_busy(resource, env.device) {
                self.wait(Who::of(&env), Wait::Resource(resource), hold)
                    .await
            } else {
                hold.await
            });
        }
        // Kept for a node this one is not (it moved to another device).
        drop(kept);
        let mut passes = Vec::with_capacity(gates.len());
        for gate in gates {
            let pass = shared.resources.pass(gate, env.device);
            passes.push(if shared.resources.is_busy(gate, env.device) {
                self.wait(Who::of(&env), Wait::Gate(gate), pass).await
            } else {
                pass.await
            });
        }
        if env.job.is_cancelled() {
            shared.observers.emit(job, partition, dropped(here, &env));
            return None;
        }
        Some(Acquired { env, held, passes })
    }

    /// Where partitions are bound to a device (the first node of a run of
    /// per-device nodes), a worker of a quarantined device picks nothing
    /// until the device's cooldown ends or the engine shuts down. Workers
    /// further on drain the partitions already bound to it.
    async fn sit_out_quarantine(&self) {
        let Some(device) = self.device else { return };
        if self.shared.nodes[self.node].retry_at != Some(self.node) {
            return;
        }
        while let Some(left) = self.shared.health.quarantined_for(device) {
            if self.shared.source.is_closed() {
                return;
            }
            tokio::time::sleep(left.min(Duration::from_millis(500))).await;
        }
    }

    /// Whether `env` skips interlocks and lease bounds and runs on the
    /// express pool: a CRITICAL item where the runtime lets them past
    /// (`RuntimeBuilder::express_past_interlocks`), whichever worker picked
    /// it (an idle bulk worker may take one before the express worker does).
    fn past_interlocks(&self, env: &Envelope<T>) -> bool {
        // Express workers take CRITICAL items only: the item decides.
        self.shared.express_past_interlocks && env.is_critical()
    }

    /// Releases what the stage held, except that a CRITICAL item keeps the
    /// locks the next node holds too: released here, a lock goes to a PoRep
    /// partition already waiting for it before the item reaches the next
    /// node, and the WinningPoSt waits out a whole PoRep stage between two
    /// of its own (16 s of 42 in a soak on the CPU backend).
    fn hand_over(&self, env: &mut Envelope<T>, held: Vec<Held>) {
        let shared = &self.shared;
        let node = &shared.nodes[self.node];
        let next = node.next.map(|n| &shared.nodes[n].spec);
        let critical = env.is_critical();
        for (name, h) in node.spec.holds.iter().zip(held) {
            if critical && next.is_some_and(|n| n.holds.contains(name)) {
                env.kept.push((name.clone(), env.device, h));
            }
        }
    }

    /// Runs `fut`, bracketed by wait events for the item `who`.
    async fn wait<R>(&self, who: Who, wait: Wait<'_>, fut: impl Future<Output = R>) -> R {
        let (job, partition, here) = (who.job, Some(who.partition), self.here(who.device));
        let since = Instant::now();
        self.shared
            .observers
            .emit(job, partition, EventKind::WaitStart { node: here, wait });
        let r = fut.await;
        self.shared.observers.emit(
            job,
            partition,
            EventKind::WaitEnd {
                node: here,
                wait,
                waited: since.elapsed(),
            },
        );
        r
    }

    /// Takes one pooled resource unless the item already carries it.
    async fn take(&self, env: &mut Envelope<T>, name: &str) -> anyhow::Result<()> {
        let shared = &self.shared;
        let kind = shared.spec.resource_named(name).map(|r| r.kind);
        if kind == Some(ResourceKind::Arena) {
            if env.arena.is_some() {
                return Ok(());
            }
            let pool = shared.arenas.as_ref().expect("resolved at start");
            let lease = match pool.try_acquire() {
                Some(lease) => lease,
                None => {
                    let reserve = pool.reserve(env.job.priority);
                    let r = self.wait(Who::of(env), Wait::Arena, reserve).await;
                    pool.lease_reserved(r)
                }
            };
            env.arena = Some(lease);
            return Ok(());
        }
        if env.carries_lease(name) {
            return Ok(());
        }
        let device = env
            .device
            .expect("validated: leases are taken on per-device nodes");
        let pool = &shared.leases[name][device];
        let priority = env.job.priority;
        // Past interlocks, a CRITICAL item does not wait for bulk
        // partitions' leases either: they hold no device state there.
        let past = self.past_interlocks(env);
        let lease = if past && pool.is_exhausted() {
            pool.acquire_beyond_bound()
        } else if pool.is_exhausted() {
            self.wait(Who::of(env), Wait::Lease(name), pool.acquire(priority))
                .await
        } else {
            pool.acquire(priority).await
        }?;
        env.leases.push(lease);
        Ok(())
    }

    /// A pooled resource could not be had: the partition fails here as if
    /// its stage had (a device fault moves it to another device).
    fn fail_before_run(&self, env: Envelope<T>, error: anyhow::Error) {
        let shared = &self.shared;
        let here = self.here(env.device);
        let message = format!("{error:#}");
        shared.observers.emit(
            env.job.id,
            Some(env.partition),
            EventKind::StageEnd {
                node: here,
                elapsed: Duration::ZERO,
                error: Some(&message),
                notes: &[],
                device_spans: &[],
            },
        );
        self.failed(env, error, &message);
    }

    /// Runs the stage on the node's CPU pool.
    async fn run_stage(
        &self,
        mut env: Envelope<T>,
        picked: Instant,
        passes: Vec<GatePass>,
    ) -> Ran<T> {
        let shared = &self.shared;
        let rt = &shared.nodes[self.node];
        let waited = picked.elapsed();
        let queued = picked - env.queued_at;
        rt.stats
            .busy
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        shared.observers.emit(
            env.job.id,
            Some(env.partition),
            EventKind::StageStart {
                node: self.here(env.device),
            },
        );
        // Started: gates may close now.
        drop(passes);
        let (job, partition) = (env.job.clone(), env.partition);
        let started = Instant::now();
        let stage = rt.stage.clone();
        let node_name: Arc<str> = Arc::from(rt.spec.name.as_str());
        let worker = self.index;
        let express = self.express || self.past_interlocks(&env);
        let pool = match (&shared.express_pool, express) {
            (Some(express), true) => express,
            _ => &rt.pool,
        };
        let outcome = run_on(pool, move || {
            let Envelope {
                job,
                partition,
                device,
                arena,
                leases,
                item,
                ..
            } = &mut env;
            let mut cx = StageContext::new(
                job.id,
                *partition,
                &node_name,
                worker,
                *device,
                arena.as_mut(),
                leases,
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
        rt.stats
            .busy
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        match outcome {
            Ok((env, result, notes, spans)) => Ran::Finished {
                env,
                result,
                notes,
                spans,
                elapsed,
                queued,
                waited,
            },
            Err(panic) => Ran::Panicked {
                env_job: job,
                partition,
                message: format!("stage `{}` {panic}", rt.spec.stage),
                elapsed,
            },
        }
    }

    /// Reports the stage's end (with its error, notes and device spans).
    fn report_end(&self, ran: &Ran<T>) {
        let (job, partition, device, elapsed, error, notes, spans): (
            _,
            _,
            _,
            _,
            Option<String>,
            &[_],
            &[_],
        ) = match ran {
            Ran::Finished {
                env,
                result,
                notes,
                spans,
                elapsed,
                ..
            } => (
                env.job.id,
                env.partition,
                env.device,
                *elapsed,
                // A busy device is a wait, reported when it starts (below).
                result
                    .as_ref()
                    .err()
                    .filter(|e| !e.is::<DeviceBusy>())
                    .map(|e| format!("{e:#}")),
                notes,
                spans,
            ),
            Ran::Panicked {
                env_job,
                partition,
                message,
                elapsed,
            } => (
                env_job.id,
                *partition,
                self.device,
                *elapsed,
                Some(message.clone()),
                &[],
                &[],
            ),
        };
        self.shared.observers.emit(
            job,
            Some(partition),
            EventKind::StageEnd {
                node: self.here(device),
                elapsed,
                error: error.as_deref(),
                notes,
                device_spans: spans,
            },
        );
    }

    /// Passes the item on, retries it elsewhere, or fails its job.
    async fn settle(&self, ran: Ran<T>, output: Option<&EdgeTx<T>>) {
        let shared = &self.shared;
        let rt = &shared.nodes[self.node];
        let stats = &rt.stats;
        match ran {
            Ran::Finished {
                mut env,
                result: Ok(()),
                notes,
                elapsed,
                queued,
                waited,
                ..
            } => {
                stats.done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if let Some(device) = self.device {
                    shared.health.ok(device);
                }
                env.timings.push(StageTiming {
                    node: Arc::from(rt.spec.name.as_str()),
                    role: rt.spec.role,
                    started: std::time::Instant::now() - elapsed,
                    queued,
                    waited,
                    ran: elapsed,
                    worker: self.index,
                    device: env.device,
                    notes,
                });
                for name in &rt.spec.releases {
                    env.release(name, shared.arena_name.as_deref());
                }
                forward(shared, self.node, output, env).await;
            }
            Ran::Finished {
                env,
                result: Err(error),
                ..
            } => {
                let message = format!("{error:#}");
                self.failed(env, error, &message);
            }
            Ran::Panicked {
                env_job,
                partition,
                message,
                ..
            } => {
                stats
                    .failed
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let settled = env_job.fail(JobError::failed(
                    &rt.spec.name,
                    partition,
                    anyhow::anyhow!(message),
                ));
                shared.settle(&env_job, settled);
            }
        }
    }

    /// After a failed stage: dropped if its job was cancelled, retried on
    /// another device after a device fault while devices are left, else the
    /// job fails.
    fn failed(&self, mut env: Envelope<T>, error: anyhow::Error, message: &str) {
        let shared = &self.shared;
        let rt = &shared.nodes[self.node];
        let here = self.here(env.device);
        let (job, partition) = (env.job.id, Some(env.partition));
        if let Some(fault) = error.downcast_ref::<DeviceFault>() {
            shared.health.fault(fault.device, message);
        }
        if error.is::<Cancelled>() || env.job.is_cancelled() {
            shared.observers.emit(job, partition, dropped(here, &env));
        } else if let Some(busy) = error.downcast_ref::<DeviceBusy>()
            && rt.retry_at.is_some()
            && env.device == Some(busy.device)
        {
            self.defer(env, busy.freed.clone());
        } else if let Some(fault) = error.downcast_ref::<DeviceFault>()
            && rt.retry_at.is_some()
            && env.failed_on.len() + 1 < shared.devices
        {
            env.failed_on.push(fault.device);
            shared.observers.emit(
                job,
                partition,
                EventKind::Retried {
                    node: here,
                    error: message,
                    failed_on: &env.failed_on,
                },
            );
            rt.stats
                .retried
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            retry(shared, self.node, env);
        } else {
            rt.stats
                .failed
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let state = env.job.clone();
            let settled = state.fail(JobError::failed(&rt.spec.name, env.partition, error));
            shared.settle(&state, settled);
        }
    }
}

impl<T: Send + 'static> Worker<T> {
    /// After a [`DeviceBusy`]: gives back the partition's device leases and
    /// the locks it kept, waits (as a wait on `device memory`) until the
    /// device frees something or a second passes, and sends the partition
    /// to the start of its per-device run on the same device, where it
    /// comes before new work.
    fn defer(&self, mut env: Envelope<T>, freed: Option<tokio::sync::watch::Receiver<u64>>) {
        let shared = self.shared.clone();
        let start = shared.nodes[self.node]
            .retry_at
            .expect("checked by the caller");
        let device = env.device.expect("checked by the caller");
        env.leases.clear();
        env.kept.clear();
        let (node, worker) = (self.node, self.index);
        tokio::spawn(async move {
            let here = shared.node_ref(node, Some(worker), Some(device));
            let who = (env.job.id, Some(env.partition));
            let wait = Wait::Resource(DEVICE_MEMORY);
            shared
                .observers
                .emit(who.0, who.1, EventKind::WaitStart { node: here, wait });
            let since = Instant::now();
            let changed = async move {
                match freed {
                    Some(mut rx) => drop(rx.changed().await),
                    None => std::future::pending().await,
                }
            };
            let _ = tokio::time::timeout(BUSY_RECHECK, changed).await;
            shared.observers.emit(
                who.0,
                who.1,
                EventKind::WaitEnd {
                    node: here,
                    wait,
                    waited: since.elapsed(),
                },
            );
            env.queued_at = Instant::now();
            // Unbounded: never blocks, and holds at most the partitions in flight.
            if let Err(env) = shared.nodes[start].retry_tx[device].try_send(env) {
                let settled = env.job.fail(JobError::Shutdown);
                shared.settle(&env.job, settled);
            }
        });
    }
}

/// What a partition a busy device sent back waits for, in its events.
pub const DEVICE_MEMORY: &str = "device memory";

/// How long a partition a busy device sent back waits at most before it
/// tries again (a release it was told of ends the wait sooner).
const BUSY_RECHECK: Duration = Duration::from_secs(1);

/// Sends a partition a device failed to another device, at the start of its
/// run of per-device nodes: the healthy device with the shortest retry queue.
/// Its device leases stay with the device that failed.
fn retry<T: Send + 'static>(shared: &Arc<Shared<T>>, node: usize, mut env: Envelope<T>) {
    let start = &shared.nodes[shared.nodes[node].retry_at.expect("checked by the caller")];
    let target = (0..shared.devices)
        .filter(|d| !env.failed_on.contains(d))
        .min_by_key(|&d| start.retry_rx[d].len())
        .expect("checked by the caller: a device is left");
    env.device = None;
    env.leases.clear();
    env.queued_at = Instant::now();
    // Unbounded: never blocks, and holds at most the partitions in flight.
    if let Err(env) = start.retry_tx[target].try_send(env) {
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
            // The arena and leases go back to their pools here, before the job is told.
            drop(env);
            shared
                .observers
                .emit(job.id, Some(partition), EventKind::PartitionDone);
            let settled = job.complete(partition, output);
            shared.settle(&job, settled);
        }
    }
}
