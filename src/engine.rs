//! The engine host services embed: build it from a [`Config`], submit jobs
//! (partition circuits and the SRS to prove them with), await or cancel the
//! proofs, read its status.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bellperson::Circuit;
use bellperson::groth16::{Proof, verify_proof};
use blstrs::{Bls12, Scalar};
use cuzk_config::Config;
use cuzk_engine::{
    ArenaPool, CpuPools, GraphSpec, JobError, JobHandle, JobId, Observer, Runtime, RuntimeBuilder,
    StageTiming, Status,
};
use cuzk_pipelines::pools;
use cuzk_stages::circuit::{Native, NativeWitness};
use cuzk_stages::{PartitionWork, ProvableCircuit, Srs};

use crate::backend::{Backend, BackendChoice};

/// The engine could not start.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Config(#[from] cuzk_config::ConfigError),
    #[error(transparent)]
    Pipeline(#[from] cuzk_pipelines::PipelineError),
    #[error(transparent)]
    Graph(#[from] cuzk_engine::GraphError),
    #[error("{0}")]
    Backend(String),
    #[error("{0:#}")]
    Other(#[from] anyhow::Error),
}

/// A job did not produce its proofs.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProveError {
    #[error("partition {partition} failed in stage `{stage}`: {message}")]
    Partition {
        stage: String,
        partition: usize,
        message: String,
        /// The device whose fault failed it, when a device fault did (and
        /// no other device was left to retry it on).
        device: Option<usize>,
    },
    #[error("the job was cancelled")]
    Cancelled,
    #[error("the engine shut down before the job finished")]
    Shutdown,
    #[error("invalid job: {0}")]
    InvalidJob(String),
}

impl From<JobError> for ProveError {
    fn from(e: JobError) -> Self {
        match e {
            JobError::Failed {
                node,
                partition,
                message,
                error,
            } => Self::Partition {
                stage: node,
                partition,
                message,
                device: error
                    .downcast_ref::<cuzk_engine::DeviceFault>()
                    .map(|f| f.device),
            },
            JobError::Cancelled => Self::Cancelled,
            JobError::Shutdown => Self::Shutdown,
        }
    }
}

/// A proof request: one circuit per partition, all proven with one SRS.
pub struct Job {
    label: String,
    priority: u8,
    srs: Arc<Srs>,
    circuits: Vec<Box<dyn ProvableCircuit>>,
}

impl Job {
    pub fn new(srs: Arc<Srs>) -> Self {
        Self {
            label: "job".into(),
            priority: 0,
            srs,
            circuits: vec![],
        }
    }

    /// A name for logs, timelines and traces.
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }

    /// Its priority: higher goes first in every queue of the graph (with
    /// aging, so lower ones are not starved). 0 by default.
    pub fn priority(mut self, priority: u8) -> Self {
        self.priority = priority;
        self
    }

    /// Adds a partition: any bellperson circuit over BLS12-381 that is
    /// `Clone` (a graph with pre-compiled constraints synthesizes a copy
    /// again if the circuit does not fit its recording). A circuit that is
    /// not `Clone` goes in as `cuzk::stages::circuit::Once(circuit)` through
    /// [`Job::boxed_partition`].
    pub fn partition<C: Circuit<Scalar> + Clone + Send + 'static>(mut self, circuit: C) -> Self {
        self.circuits.push(Box::new(circuit));
        self
    }

    /// Adds a partition whose witness-only synthesis (the pre-compiled
    /// constraint graphs) runs natively ([`NativeWitness`]), as the
    /// built-in workloads' does.
    pub fn native_partition<C: NativeWitness>(self, circuit: C) -> Self {
        self.boxed_partition(Box::new(Native(circuit)))
    }

    /// Adds an already boxed partition.
    pub fn boxed_partition(mut self, circuit: Box<dyn ProvableCircuit>) -> Self {
        self.circuits.push(circuit);
        self
    }

    pub fn partitions(&self) -> usize {
        self.circuits.len()
    }
}

/// One partition's proof and how it was made.
#[derive(Debug)]
pub struct PartitionProof {
    pub proof: Proof<Bls12>,
    /// The public inputs the circuit allocated (without the leading one).
    pub public_inputs: Vec<Scalar>,
    pub constraints: usize,
    /// Time at each node, in flow order.
    pub timings: Vec<StageTiming>,
}

impl PartitionProof {
    /// bellperson's 192-byte serialization.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(192);
        self.proof
            .write(&mut out)
            .expect("writing to a Vec cannot fail");
        out
    }
}

/// A finished job.
#[derive(Debug)]
pub struct JobProofs {
    pub id: JobId,
    pub partitions: Vec<PartitionProof>,
    pub elapsed: Duration,
}

impl JobProofs {
    /// Verifies every proof with bellperson's verifier; errors naming the
    /// first partition that does not verify.
    pub fn verify(&self, srs: &Srs) -> anyhow::Result<()> {
        for (i, p) in self.partitions.iter().enumerate() {
            let ok = verify_proof(&srs.pvk, &p.proof, &p.public_inputs)
                .map_err(|e| anyhow::anyhow!("verifying partition {i}: {e}"))?;
            anyhow::ensure!(ok, "the proof of partition {i} does not verify");
        }
        Ok(())
    }
}

/// A submitted job: await it for the proofs, or cancel it.
pub struct ProofHandle {
    inner: JobHandle<PartitionWork>,
}

impl ProofHandle {
    pub fn id(&self) -> JobId {
        self.inner.id()
    }

    /// Stops the job; its partitions release their arenas at the next stage
    /// boundary and the handle resolves to [`ProveError::Cancelled`].
    pub fn cancel(&self) {
        self.inner.cancel()
    }

    /// A cancel handle that can outlive this one.
    pub fn canceller(&self) -> cuzk_engine::JobCanceller {
        self.inner.canceller()
    }
}

impl Future for ProofHandle {
    type Output = Result<JobProofs, ProveError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.inner).poll(cx).map(|r| {
            let out = r?;
            let partitions = out
                .partitions
                .into_iter()
                .enumerate()
                .map(|(i, p)| {
                    let w = p.item;
                    let proof = w.proof.ok_or_else(|| {
                        ProveError::InvalidJob(format!("partition {i} finished without a proof"))
                    })?;
                    Ok(PartitionProof {
                        proof,
                        public_inputs: w.public_inputs,
                        constraints: w.constraints,
                        timings: p.timings,
                    })
                })
                .collect::<Result<_, ProveError>>()?;
            Ok(JobProofs {
                id: out.id,
                partitions,
                elapsed: out.elapsed,
            })
        })
    }
}

/// The proving engine: a running graph of the configured variant.
pub struct Engine {
    runtime: Runtime<PartitionWork>,
    config: Config,
    backend: Backend,
    arenas: ArenaPool,
    gpu: Option<Arc<cuzk_stages::gpu::GpuContext>>,
    /// Pre-compiled constraint recordings, one per SRS.
    pce: Arc<cuzk_stages::pce::PceCache>,
}

/// Extra parts a host can plug in at start.
#[derive(Default)]
pub struct EngineOptions {
    pub observers: Vec<Arc<dyn Observer>>,
    /// Failure drill: the device stages fail with a device fault on these
    /// logical devices, so their partitions must be retried on the others.
    pub inject_device_faults: Vec<usize>,
    /// Failure drills by stage and job ([`crate::faults`]).
    pub faults: Vec<crate::faults::Fault>,
}

impl Engine {
    /// Starts an engine. Must be called inside a tokio runtime.
    pub fn from_config(config: Config) -> Result<Self, EngineError> {
        Self::with_options(config, EngineOptions::default())
    }

    pub fn with_options(config: Config, options: EngineOptions) -> Result<Self, EngineError> {
        let backend = Backend::select(&config).map_err(EngineError::Backend)?;
        let spec = cuzk_pipelines::graph(&config)?;
        let devices = backend.devices;
        let gpu = (backend.choice == BackendChoice::Gpu).then(|| backend.gpu_context(&config));
        let pools = Self::pools(&config, &spec, devices, gpu.is_some())?;
        let arenas = Self::arena_pool(&config, &spec, devices, gpu.is_some());
        let pce = Arc::new(cuzk_stages::pce::PceCache::new(config.pce.dir.clone()));
        let mut stages = match &gpu {
            None => cuzk_stages::cpu_stages(pce.clone()),
            Some(ctx) => cuzk_stages::gpu_stages(ctx.clone(), pce.clone()),
        };
        if !options.inject_device_faults.is_empty() {
            // The drill hits every stage a device node runs, whatever the graph calls it.
            let device_stages: std::collections::BTreeSet<&str> = spec
                .nodes
                .iter()
                .filter(|n| n.role.on_device())
                .map(|n| n.stage.as_str())
                .collect();
            for name in device_stages {
                let devices = options.inject_device_faults.clone();
                stages.wrap(name, |inner| {
                    Arc::new(cuzk_engine::FailOnDevices { inner, devices })
                });
            }
        }
        crate::faults::install(&mut stages, &options.faults);
        let metrics = crate::metrics::MetricsObserver::new(&spec.name, &arenas);
        // One aging for the daemon's admission and every edge of the graph.
        let aging = std::time::Duration::from_secs(config.daemon.aging_s.max(1));
        let mut builder = RuntimeBuilder::new(spec, stages, pools)
            .arenas(arenas.clone())
            .devices(devices)
            .aging(aging)
            .express_lane(config.engine.express_lane)
            // On the CPU backend the device lock only orders CPU work: a
            // WinningPoSt shares the cores rather than wait out a PoRep stage.
            .express_past_interlocks(gpu.is_none())
            .quarantine(cuzk_engine::Quarantine {
                after: config.gpu.quarantine_after,
                cooldown: std::time::Duration::from_secs(config.gpu.quarantine_s),
            })
            .observer(Arc::new(metrics));
        if let Some(ctx) = &gpu {
            builder = builder.leases(Arc::new(cuzk_stages::gpu::GpuLeases(ctx.clone())));
        }
        for o in options.observers {
            builder = builder.observer(o);
        }
        let runtime = builder.start()?;
        tracing::info!(
            graph = %runtime.spec().name,
            backend = backend.name(),
            devices,
            arenas = arenas.stats().count,
            "engine started"
        );
        Ok(Self {
            runtime,
            config,
            backend,
            arenas,
            gpu,
            pce,
        })
    }

    /// The CPU pools declarations name: synthesis, groth16, and the device
    /// stages' pool (driver threads on the GPU; the groth16 pool on the CPU,
    /// which does the device work there); and the express lane's.
    fn pools(
        config: &Config,
        spec: &GraphSpec,
        devices: usize,
        gpu: bool,
    ) -> anyhow::Result<CpuPools> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let or_cores = |n: usize| if n == 0 { cores } else { n };
        // Bulk work runs niced below the express lane's (see `threads.bulk_nice`).
        let nice = config.threads.bulk_nice_for(gpu);
        let mut pools = CpuPools::new();
        pools.add_niced(pools::SYNTH, or_cores(config.threads.synthesis), nice)?;
        pools.add_niced(pools::GROTH16, or_cores(config.threads.groth16), nice)?;
        if gpu {
            let drivers: usize = spec
                .nodes
                .iter()
                .filter(|n| n.pool == pools::DEVICE)
                .map(|n| n.total_workers(devices))
                .sum();
            pools.add(pools::DEVICE, drivers.max(1))?;
        } else {
            pools.alias(pools::DEVICE, pools::GROTH16)?;
        }
        // CRITICAL stages run here, not queued behind a busy pool's work
        // (idle unless a WinningPoSt is in flight).
        if config.engine.express_lane {
            pools.add(cuzk_engine::pool::EXPRESS, cores)?;
        }
        Ok(pools)
    }

    /// The arena pool: `arenas.count`, else the declared size, else the
    /// graph's in-flight bound, so arenas never hold the graph back.
    fn arena_pool(config: &Config, spec: &GraphSpec, devices: usize, pinned: bool) -> ArenaPool {
        let declared = spec.arena().and_then(|r| r.size).filter(|&n| n > 0);
        let count = match config.arenas.count {
            0 => declared
                .or_else(|| spec.max_in_flight(devices))
                .unwrap_or(1),
            n => n,
        };
        let max_bytes = Self::arena_max_bytes(config, count);
        // With a GPU, arenas are page-locked so uploads from them are DMA.
        let locker: Option<Arc<dyn cuzk_engine::PageLocker>> = pinned
            .then(|| Arc::new(cuzk_gpu::cuda::CudaPageLocker) as Arc<dyn cuzk_engine::PageLocker>);
        ArenaPool::new(count, max_bytes as usize, locker)
    }

    /// The largest arena: `arenas.max_bytes` (within `memory.budget` shared
    /// by `count` arenas), or, derived (0), the budget or else the host's
    /// memory, so whatever partition fits the host fits an arena.
    fn arena_max_bytes(config: &Config, count: usize) -> u64 {
        let explicit = config.arenas.max_bytes.bytes();
        let budget = config.memory.budget.bytes();
        match (explicit, budget) {
            (0, 0) => match crate::host::total_memory() {
                0 => u64::MAX >> 1,
                host => host,
            },
            (0, budget) => budget,
            (explicit, 0) => explicit,
            (explicit, budget) => explicit.min(budget / count as u64),
        }
    }

    /// Whether partitions proved against `srs` fit an arena; if not, the
    /// refusal names both sizes and the keys that set them.
    pub fn check_fits(&self, srs: &Srs) -> Result<(), ProveError> {
        let need = cuzk_stages::partition::PartitionLayout::new(srs.shape()).bytes;
        let max = self.arenas.max_bytes();
        if need <= max {
            return Ok(());
        }
        Err(ProveError::InvalidJob(format!(
            "a partition of this circuit (domain 2^{}) needs a {} arena but arenas are limited to {} (`arenas.max_bytes`{}); raise it or the memory budget",
            srs.shape().log_domain,
            crate::report::mib(need as u64),
            crate::report::mib(max as u64),
            if self.config.memory.budget.is_zero() {
                String::new()
            } else {
                format!(", `memory.budget` {}", self.config.memory.budget)
            }
        )))
    }

    /// Submits a job after [`Self::check_fits`]; the handle resolves to its
    /// proofs.
    pub fn try_submit(&self, job: Job) -> Result<ProofHandle, ProveError> {
        self.check_fits(&job.srs)?;
        Ok(self.submit(job))
    }

    /// Submits a job; the handle resolves to its proofs (a partition that
    /// does not fit an arena fails in synthesis: [`Self::try_submit`]
    /// refuses it up front).
    pub fn submit(&self, job: Job) -> ProofHandle {
        let self_verify = self.config.engine.self_verify;
        let label: Arc<str> = Arc::from(job.label.as_str());
        let items = job
            .circuits
            .into_iter()
            .map(|c| PartitionWork {
                job_label: label.clone(),
                ..PartitionWork::new(job.srs.clone(), c, self_verify)
            })
            .collect();
        ProofHandle {
            inner: self
                .runtime
                .submit_with_priority(&job.label, items, job.priority),
        }
    }

    /// Submits a job and waits for its proofs.
    pub async fn prove(&self, job: Job) -> Result<JobProofs, ProveError> {
        self.try_submit(job)?.await
    }

    /// Jobs queued and in flight, and each node's queue and busy workers.
    pub fn status(&self) -> Status {
        self.runtime.status()
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    pub fn arena_stats(&self) -> cuzk_engine::ArenaStats {
        self.arenas.stats()
    }

    /// Device bytes `srs` holds resident on the engine's GPUs (0 on the CPU).
    pub fn srs_device_bytes(&self, srs: &Arc<Srs>) -> usize {
        self.distinct_devices()
            .map(|d| d.resident_bytes_of(srs))
            .sum()
    }

    /// Device bytes of the MSM tables beside `srs` on the engine's GPUs.
    pub fn srs_table_bytes(&self, srs: &Arc<Srs>) -> usize {
        self.distinct_devices().map(|d| d.table_bytes_of(srs)).sum()
    }

    /// Frees `srs`'s resident device copies (once no partition uses them);
    /// the device bytes they held.
    pub fn evict_srs_from_devices(&self, srs: &Arc<Srs>) -> usize {
        self.distinct_devices().filter_map(|d| d.evict(srs)).sum()
    }

    /// Forgets `srs`'s pre-compiled constraint recording (freed once no
    /// partition uses it; its file stays, so the next use maps it again).
    pub fn evict_recording(&self, srs: &Srs) {
        self.pce.evict(srs)
    }

    /// Host bytes of the recordings held, for the daemon's memory account.
    pub fn recording_bytes(&self) -> usize {
        self.pce.resident_bytes()
    }

    /// Each GPU once (logical devices may share one).
    fn distinct_devices(&self) -> impl Iterator<Item = &Arc<cuzk_stages::gpu::GpuDevice>> {
        let devices = self.gpu.as_ref().map_or(&[][..], |g| &g.devices[..]);
        devices
            .iter()
            .enumerate()
            .filter(move |(i, d)| !devices[..*i].iter().any(|e| Arc::ptr_eq(d, e)))
            .map(|(_, d)| d)
    }

    /// The graph this engine runs.
    pub fn graph(&self) -> &GraphSpec {
        self.runtime.spec()
    }

    /// Waits until every submitted partition has left the graph.
    pub async fn idle(&self) {
        self.runtime.idle().await
    }

    /// Stops accepting jobs and waits for those in flight to finish.
    pub async fn shutdown(&self) {
        self.runtime.shutdown().await
    }
}
