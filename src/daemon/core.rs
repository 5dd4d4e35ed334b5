//! The daemon's core, independent of the wire: submit (validate, dedupe,
//! queue), admission by memory, the engine, await, cancel and drain.
//!
//! A request is validated and its circuits built when it is submitted (so a
//! malformed one is refused at once, naming the field); it then waits in the
//! admission queue. Admission takes jobs in aged-priority order while their
//! partitions' bytes fit `memory.budget`; a job whose parameters are not
//! loaded yet has them loaded in the background and is passed over until
//! they are, so a seal's 47 GiB load never holds a WinningPoSt back. Inside
//! the engine, higher-priority partitions go first in every edge.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cuzk_config::Config;
use cuzk_engine::Role;
use cuzk_stages::partition::PartitionLayout;
use tokio::sync::Notify;

use super::circuit_id::CircuitId;
use super::jobs::{Ending, JobEntry, JobTable, Outcome, Phase, Timings};
use super::monitor::Monitor;
use super::proto::SubmitProofRequest;
use super::queue::PendingQueue;
use super::request;
use crate::engine::{Engine, EngineOptions, ProveError};
use crate::fil::{FilProof, FilProveError};
use crate::srs_cache::SrsCache;

/// How long the drain and the shutdown wait for the engine's stages to stop
/// once every job has ended.
pub const ENGINE_STOP: Duration = Duration::from_secs(30);

/// MiB of request bodies validated at once (a 256 MiB C1 output takes a
/// quarter); the rest wait their turn.
const PARSING_MIB: u32 = 1024;

/// Why a request was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// Malformed: names the field.
    #[error("{0}")]
    Invalid(String),
    /// The admission queue is full.
    #[error("{0}")]
    Exhausted(String),
    /// SIGTERM: no new work.
    #[error("the daemon is draining (shutting down) and accepts no new jobs")]
    Draining,
    #[error("{0}")]
    Internal(String),
}

pub use crate::host::{rss, total_memory};

/// The daemon, shared by the gRPC service, the status page and the
/// admission task.
pub struct Core {
    pub engine: Engine,
    pub config: Config,
    pub srs: Arc<SrsCache>,
    pub jobs: JobTable,
    pub monitor: Arc<Monitor>,
    pub queue: Mutex<PendingQueue>,
    /// Host bytes admission may hand out.
    pub budget: u64,
    /// Of `budget`, what only PoSt may take (`daemon.reserve_post`).
    reserve_post: u64,
    /// Host bytes admitted jobs hold.
    pub in_flight: AtomicU64,
    /// Of `in_flight`, what PoSt jobs hold.
    post_in_flight: AtomicU64,
    pub started: Instant,
    pub completed: AtomicU64,
    pub failed: AtomicU64,
    pub cancelled: AtomicU64,
    /// Parameter files by the circuit id that names them (`porep-2k`).
    pub circuit_ids: Mutex<HashMap<PathBuf, String>>,
    wake: Notify,
    loading: Mutex<HashSet<PathBuf>>,
    draining: AtomicBool,
    /// Held shared by each submit from its draining check to its insert,
    /// and exclusively by the drain once it has set `draining`: no submit
    /// can be accepted after the drain has counted the unfinished jobs.
    submit_gate: tokio::sync::RwLock<()>,
    /// MiB of request bodies being hashed and parsed at once: a parse holds
    /// several times its body, so this bounds what a burst of large
    /// requests can take before any of them is admitted.
    parsing: tokio::sync::Semaphore,
    /// Partitions of one job the engine holds at once at most.
    partitions_in_flight: usize,
    /// Fault drills at the daemon's own points (`daemon.admit`, `daemon.complete`).
    drills: Vec<crate::faults::Fault>,
    /// Whether jobs keep failing on device faults.
    pub health: super::health::Health,
    /// Threads that load parameters only bulk work waits for, niced as the
    /// bulk pools are (`threads.bulk_nice`); `None` where that is 0.
    bulk_loads: Option<Arc<rayon::ThreadPool>>,
}

impl Core {
    /// Starts the engine and the admission task. Inside a tokio runtime.
    pub fn start(config: Config, mut options: EngineOptions) -> anyhow::Result<Arc<Self>> {
        let budget = match config.memory.budget.bytes() {
            0 => total_memory()
                .saturating_sub(config.memory.margin.bytes())
                .max(1 << 30),
            b => b,
        };
        let srs_budget = match config.daemon.srs_budget.bytes() {
            0 => budget / 2,
            b => b,
        };
        let drills = options
            .faults
            .iter()
            .filter(|f| f.stage.starts_with("daemon."))
            .cloned()
            .collect();
        let monitor = Arc::new(Monitor::new(Duration::from_secs(300)));
        options.observers.push(monitor.clone());
        options.observers.push(monitor.timeline());
        // Admission bounds the partitions' bytes; the engine's arenas only
        // need to be large enough for any one partition.
        let mut engine_config = config.clone();
        engine_config.memory.budget = cuzk_config::ByteSize(0);
        let engine = Engine::with_options(engine_config, options)?;
        // A job's partitions hold host memory only while they hold arenas.
        let partitions_in_flight = engine
            .graph()
            .max_in_flight(engine.backend().devices)
            .unwrap_or(usize::MAX)
            .min(engine.arena_stats().count)
            .max(1);
        let gpu = engine.backend().choice == crate::backend::BackendChoice::Gpu;
        let bulk_loads = bulk_load_pool(config.threads.bulk_nice_for(gpu))?;
        let core = Arc::new(Self {
            engine,
            srs: Arc::new(SrsCache::with_budget(srs_budget as usize)),
            jobs: JobTable::new(config.daemon.keep_finished),
            monitor,
            queue: Mutex::new(PendingQueue::new(Duration::from_secs(
                config.daemon.aging_s,
            ))),
            budget,
            reserve_post: config.daemon.reserve_post.bytes().min(budget / 4),
            in_flight: AtomicU64::new(0),
            post_in_flight: AtomicU64::new(0),
            started: Instant::now(),
            completed: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
            circuit_ids: Mutex::default(),
            wake: Notify::new(),
            loading: Mutex::default(),
            draining: AtomicBool::new(false),
            submit_gate: tokio::sync::RwLock::new(()),
            parsing: tokio::sync::Semaphore::new(PARSING_MIB as usize),
            partitions_in_flight,
            drills,
            health: Default::default(),
            bulk_loads,
            config,
        });
        // Parameters the SRS budget evicts take their device copies and
        // recordings with them.
        let weak = Arc::downgrade(&core);
        core.srs.on_evict(Box::new(move |srs| {
            if let Some(core) = weak.upgrade() {
                core.engine.evict_srs_from_devices(srs);
                core.engine.evict_recording(srs);
            }
        }));
        tokio::spawn(core.clone().admit_forever());
        tracing::info!(
            budget_gib = budget as f64 / (1u64 << 30) as f64,
            srs_budget_gib = srs_budget as f64 / (1u64 << 30) as f64,
            graph = %core.engine.graph().name,
            backend = core.engine.backend().name(),
            "daemon core started"
        );
        Ok(core)
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Validates and queues a request; the job and its place in the queue
    /// (0 once it left the queue). The same request id with the same inputs
    /// returns the same job; with other inputs it is a new job.
    pub async fn submit(
        self: &Arc<Self>,
        req: SubmitProofRequest,
        by_prove: bool,
    ) -> Result<(Arc<JobEntry>, u32), Refused> {
        if self.is_draining() {
            return Err(Refused::Draining);
        }
        let _gate = self.submit_gate.read().await;
        if self.is_draining() {
            return Err(Refused::Draining);
        }
        request::check_request_id(&req.request_id).map_err(Refused::Invalid)?;
        let body = req.vanilla_proof.len() + req.vanilla_proofs.iter().map(Vec::len).sum::<usize>();
        let _parsing = self
            .parsing
            .acquire_many(((body >> 20) as u32 + 1).min(PARSING_MIB))
            .await
            .map_err(|e| Refused::Internal(e.to_string()))?;
        // Hashing (and below, parsing) a large C1 output takes a while: off
        // the async workers.
        let (digest, req) = tokio::task::spawn_blocking(move || (request::digest(&req), req))
            .await
            .map_err(|e| Refused::Internal(format!("validating the request: {e}")))?;
        if !req.request_id.is_empty()
            && let Some(old) = self.jobs.existing(&req.request_id, &digest)
        {
            return Ok((old.clone(), self.position(&old)));
        }
        let max = self.config.daemon.max_queued;
        if self.queue.lock().unwrap().len() >= max {
            return Err(Refused::Exhausted(format!(
                "{max} jobs are already waiting for admission (`daemon.max_queued`); retry later"
            )));
        }
        let request_id = req.request_id.clone();
        let parsed = tokio::task::spawn_blocking(move || request::parse(&req))
            .await
            .map_err(|e| Refused::Internal(format!("validating the request: {e}")))?
            // Building the circuits is a function of the inputs and the
            // parameters: whatever fails there fails again on a retry, so
            // it is the request's fault (INVALID_ARGUMENT), not INTERNAL,
            // which clients retry for ever.
            .map_err(|e| match e {
                cuzk_filecoin::FilError::Other(e) => {
                    Refused::Invalid(format!("the request's inputs: {e:#}"))
                }
                e => Refused::Invalid(e.to_string()),
            })?;
        let request_id = if request_id.is_empty() {
            self.jobs.fresh_id(parsed.kind)
        } else {
            request_id
        };
        let mut fil = parsed.job;
        self.remember_circuit(
            CircuitId {
                kind: fil.kind,
                sector_size: fil.sector_size,
            },
            fil.params.clone(),
        );
        let (entry, fresh) = self.jobs.insert_or_existing(&request_id, &digest, |id| {
            // Timelines, traces and the status page name the job by its id.
            fil.label = id.clone();
            JobEntry::new(id, digest, fil, parsed.priority, by_prove, body as u64)
        });
        if fresh {
            self.queue.lock().unwrap().push(entry.clone());
            tracing::info!(job = %entry.id, kind = %entry.kind, priority = entry.priority, partitions = entry.partitions, "job queued");
            self.wake.notify_one();
        }
        let position = self.position(&entry);
        Ok((entry, position))
    }

    fn remember_circuit(&self, id: CircuitId, path: PathBuf) {
        self.circuit_ids
            .lock()
            .unwrap()
            .insert(path, id.to_string());
    }

    /// The circuit id of a parameter file, else its file name.
    pub fn circuit_name(&self, path: &std::path::Path) -> String {
        self.circuit_ids
            .lock()
            .unwrap()
            .get(path)
            .cloned()
            .unwrap_or_else(|| {
                path.file_name()
                    .map_or_else(String::new, |f| f.to_string_lossy().into_owned())
            })
    }

    /// The parameter file a circuit id (`porep-32g`) or a path names. A
    /// path must lead to a `.params` file inside the parameter cache.
    fn resolve(&self, circuit: &str) -> Result<PathBuf, String> {
        if circuit.contains('/') || circuit.ends_with(".params") {
            return cached_param_file(circuit, &cuzk_filecoin::params::cache_dir());
        }
        let id = CircuitId::parse(circuit)?;
        let path =
            cuzk_filecoin::params::require(id.kind, id.sector_size).map_err(|e| e.to_string())?;
        self.remember_circuit(id, path.clone());
        Ok(path)
    }

    /// Loads a circuit's parameters now (PreloadSRS): whether they were
    /// already loaded, and how long loading took.
    pub async fn preload(self: &Arc<Self>, circuit: &str) -> Result<(bool, Duration), String> {
        let core = self.clone();
        let circuit = circuit.to_string();
        tokio::task::spawn_blocking(move || {
            let path = core.resolve(&circuit)?;
            if core.srs.try_get(&path).is_some() {
                return Ok((true, Duration::ZERO));
            }
            let loaded = core.srs.get(&path).map_err(|e| format!("{e:#}"))?;
            core.wake.notify_one();
            Ok((loaded.load_time.is_zero(), loaded.load_time))
        })
        .await
        .map_err(|e| e.to_string())?
    }

    /// Forgets a circuit's parameters (EvictSRS), on the host and on the
    /// devices (freed once no job uses them): whether they were loaded and
    /// the bytes they held.
    pub async fn evict(self: &Arc<Self>, circuit: &str) -> Result<(bool, u64), String> {
        let core = self.clone();
        let circuit = circuit.to_string();
        tokio::task::spawn_blocking(move || {
            let path = core.resolve(&circuit)?;
            let Some(srs) = core.srs.evict(&path) else {
                return Ok((false, 0));
            };
            let device = core.engine.evict_srs_from_devices(&srs);
            core.engine.evict_recording(&srs);
            // Jobs still running hold the host copy: it is freed when the
            // last of them ends, and a load meanwhile takes it back.
            let host = if Arc::strong_count(&srs) == 1 {
                srs.memory_bytes()
            } else {
                0
            };
            Ok((true, (host + device) as u64))
        })
        .await
        .map_err(|e| e.to_string())?
    }

    fn position(&self, job: &JobEntry) -> u32 {
        self.queue.lock().unwrap().position(&job.id).unwrap_or(0) as u32
    }

    /// Cancels a job: true if it was running (its partitions stop at their
    /// next stage boundary and give their arenas and device memory back).
    pub fn cancel(&self, id: &str) -> Option<bool> {
        let job = self.jobs.get(id)?;
        job.cancel_requested.store(true, Ordering::SeqCst);
        let running = {
            let phase = job.phase.lock().unwrap();
            match &*phase {
                Phase::Running(c) => {
                    c.cancel();
                    true
                }
                Phase::Starting => true,
                _ => false,
            }
        };
        if !running && self.queue.lock().unwrap().remove(id).is_some() {
            self.end(
                &job,
                job.ended(Ending::Cancelled, "cancelled while queued".into()),
            );
        }
        Some(running)
    }

    /// Ends a job (if it has not ended) and counts it.
    fn end(&self, job: &Arc<JobEntry>, outcome: Outcome) {
        let ending = outcome.ending;
        if job.finish(outcome) {
            match ending {
                Ending::Completed => &self.completed,
                Ending::Failed => &self.failed,
                Ending::Cancelled => &self.cancelled,
            }
            .fetch_add(1, Ordering::SeqCst);
            self.monitor.finished(job);
            self.jobs.retire(&job.id);
        }
    }

    /// Admits jobs whenever something changes (a submit, a finish, a load),
    /// and every second so aging takes effect.
    async fn admit_forever(self: Arc<Self>) {
        loop {
            // A panic in a round of admission outside any one job (each
            // job's is caught and fails that job) must not leave a daemon
            // that accepts jobs and never runs them: it is logged and the
            // next round runs.
            let round = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.admit()));
            if let Err(panic) = round {
                tracing::error!(
                    "admission {}; it goes on with the next round",
                    cuzk_engine::pool::panic_message(&*panic)
                );
            }
            let _ = tokio::time::timeout(Duration::from_secs(1), self.wake.notified()).await;
        }
    }

    /// Of the memory budget, what partitions in flight may hold now: the
    /// rest is taken by loaded parameters (host copies), their pre-compiled
    /// constraint recordings and the inputs of queued jobs.
    pub fn partition_room(&self) -> u64 {
        let srs = self.srs.resident_bytes() as u64;
        let recordings = self.engine.recording_bytes() as u64;
        let queued = self.queue.lock().unwrap().input_bytes();
        self.budget.saturating_sub(srs + recordings + queued)
    }

    /// Host bytes one partition of `job` takes, if its parameters are loaded.
    fn partition_bytes(&self, job: &JobEntry) -> Option<(Arc<cuzk_stages::Srs>, u64)> {
        let srs = self.srs.try_get(&job.params)?;
        let bytes = PartitionLayout::new(srs.shape()).bytes as u64;
        Some((srs, bytes))
    }

    fn admit(self: &Arc<Self>) {
        let waiting = self.queue.lock().unwrap().ordered();
        // Once a job does not fit, only PoSt passes it: strict order keeps a
        // large PoRep from being starved by smaller ones, but a WinningPoSt
        // or WindowPoSt must never wait for a PoRep's memory.
        let mut blocked = false;
        for job in waiting {
            // A panic while admitting one job fails that job, naming the
            // panic, and admission goes on with the others.
            let considered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.consider(&job, &mut blocked)
            }));
            if let Err(panic) = considered {
                let why = format!(
                    "admitting this job {}",
                    cuzk_engine::pool::panic_message(&*panic)
                );
                tracing::error!(job = %job.id, "{why}");
                self.queue.lock().unwrap().remove(&job.id);
                self.end(&job, job.ended(Ending::Failed, why));
            }
        }
    }

    /// Admits `job` if it fits; `blocked` says a job ahead did not.
    fn consider(self: &Arc<Self>, job: &Arc<JobEntry>, blocked: &mut bool) {
        self.drill("daemon.admit", &job.id);
        let post = job.kind.is_post();
        if *blocked && !post {
            return;
        }
        let Some((srs, per_partition)) = self.partition_bytes(job) else {
            job.srs_wait_from
                .lock()
                .unwrap()
                .get_or_insert_with(Instant::now);
            let critical = usize::from(job.priority) >= cuzk_engine::CRITICAL;
            self.load_in_background(job.params.clone(), critical);
            return;
        };
        let bytes = per_partition * job.partitions.min(self.partitions_in_flight) as u64;
        if per_partition > self.budget {
            self.queue.lock().unwrap().remove(&job.id);
            let why = format!(
                "one partition needs {} MiB of host memory, more than `memory.budget` ({} MiB)",
                per_partition >> 20,
                self.budget >> 20
            );
            self.end(job, job.ended(Ending::Failed, why));
            return;
        }
        // One account: partitions get what loaded parameters and queued
        // inputs leave of the budget. PoSt may use all of it; other work
        // leaves `daemon.reserve_post` free for it.
        let room = self.partition_room();
        let limit = if post {
            room
        } else {
            room.saturating_sub(self.reserve_post)
        };
        let held = self.in_flight.load(Ordering::SeqCst);
        // PoSt also fits in the room held back for it, whatever else holds:
        // a PoRep admitted alone beyond the budget (32 GiB partitions on a
        // 128 GiB host) must not make a WinningPoSt wait for it to end.
        let in_reserve =
            post && self.post_in_flight.load(Ordering::SeqCst) + bytes <= self.reserve_post;
        if held > 0 && held + bytes > limit && !in_reserve {
            *blocked = true;
            return;
        }
        self.start_job(job.clone(), srs, bytes);
    }

    /// A fault drill at one of the daemon's own points (`daemon.admit`,
    /// `daemon.complete`): panics for the jobs it names.
    fn drill(&self, point: &str, job: &str) {
        if self
            .drills
            .iter()
            .any(|f| f.stage == point && job.contains(&f.job))
        {
            panic!("injected panic at {point} (fault drill)");
        }
    }

    /// Loads `path` off the async workers; for bulk work on the niced load
    /// threads (a PoRep's parameters decoded on every core must not take
    /// them from a WinningPoSt proving meanwhile). A CRITICAL job that
    /// finds its parameters already loading for bulk work waits for that
    /// load: WinningPoSt's parameters serve no other kind.
    fn load_in_background(self: &Arc<Self>, path: PathBuf, critical: bool) {
        if !self.loading.lock().unwrap().insert(path.clone()) {
            return;
        }
        let core = self.clone();
        tokio::task::spawn_blocking(move || {
            let result = run_load(core.bulk_loads.as_deref(), critical, || core.srs.get(&path));
            core.loading.lock().unwrap().remove(&path);
            if let Err(e) = result {
                let why = format!("loading the parameters {}: {e:#}", path.display());
                tracing::error!("{why}");
                // Taken out under one lock, ended after it is released
                // (ending a job takes other locks).
                let failed: Vec<_> = {
                    let mut queue = core.queue.lock().unwrap();
                    let ids: Vec<String> = queue
                        .ordered()
                        .iter()
                        .filter(|j| j.params == path)
                        .map(|j| j.id.clone())
                        .collect();
                    ids.iter().filter_map(|id| queue.remove(id)).collect()
                };
                for job in failed {
                    core.end(&job, job.ended(Ending::Failed, why.clone()));
                }
            }
            core.wake.notify_one();
        });
    }

    /// Hands an admitted job to the engine with the parameters admission
    /// found loaded (never a load here: admission must not block on one).
    fn start_job(self: &Arc<Self>, job: Arc<JobEntry>, srs: Arc<cuzk_stages::Srs>, bytes: u64) {
        if self.queue.lock().unwrap().remove(&job.id).is_none() {
            return; // cancelled meanwhile
        }
        let fil = {
            let mut phase = job.phase.lock().unwrap();
            match std::mem::replace(&mut *phase, Phase::Starting) {
                Phase::Pending(fil) => fil,
                other => {
                    *phase = other;
                    return;
                }
            }
        };
        let loaded = crate::srs_cache::Loaded {
            srs,
            load_time: Duration::ZERO,
        };
        let submitted = match crate::fil::submit_loaded(&self.engine, loaded, *fil, job.priority) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(job = %job.id, "refused by the engine: {e}");
                self.end(&job, job.ended(Ending::Failed, e.to_string()));
                self.wake.notify_one();
                return;
            }
        };
        let canceller = submitted.handle.canceller();
        *job.phase.lock().unwrap() = Phase::Running(canceller.clone());
        if job.cancel_requested.load(Ordering::SeqCst) {
            canceller.cancel();
        }
        *job.bytes.lock().unwrap() = bytes;
        self.in_flight.fetch_add(bytes, Ordering::SeqCst);
        if job.kind.is_post() {
            self.post_in_flight.fetch_add(bytes, Ordering::SeqCst);
        }
        let srs_load = job
            .srs_wait_from
            .lock()
            .unwrap()
            .map_or(Duration::ZERO, |t| t.elapsed());
        tracing::info!(job = %job.id, kind = %job.kind, mib = bytes >> 20, "job admitted");
        let admitted = Admitted {
            core: self.clone(),
            job: job.clone(),
            bytes,
        };
        tokio::spawn(async move {
            let result = submitted.finish().await;
            admitted.core.drill("daemon.complete", &job.id);
            let outcome = admitted.core.outcome(&job, result, srs_load);
            admitted.core.end(&job, outcome);
            // `admitted` goes here, handing the bytes back and waking admission.
        });
    }

    fn outcome(
        &self,
        job: &JobEntry,
        result: Result<FilProof, FilProveError>,
        srs_load: Duration,
    ) -> Outcome {
        match &result {
            Ok(_) => self.health.completed(),
            Err(FilProveError::Engine(ProveError::Partition {
                device: Some(d),
                message,
                ..
            })) => self.health.device_fault(*d, message),
            Err(_) => {}
        }
        match result {
            Ok(proof) => Outcome {
                ending: Ending::Completed,
                timings: timings(job, &proof, srs_load),
                proof: proof.bytes,
                error: String::new(),
            },
            Err(FilProveError::Engine(ProveError::Cancelled)) => {
                job.ended(Ending::Cancelled, "cancelled".into())
            }
            Err(e) => job.ended(Ending::Failed, e.to_string()),
        }
    }

    /// Stops taking jobs, lets accepted ones finish for up to `timeout`,
    /// then fails those still unfinished (their waiters hear why).
    pub async fn drain(&self, timeout: Duration) {
        self.draining.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + timeout;
        // Submits already past their draining check finish inserting first;
        // every later one sees `draining`.
        drop(self.submit_gate.write().await);
        let unfinished = || {
            self.jobs
                .all()
                .into_iter()
                .filter(|j| j.outcome().is_none())
                .collect::<Vec<_>>()
        };
        while !unfinished().is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let left = unfinished();
        if !left.is_empty() {
            tracing::warn!(jobs = left.len(), "drain timeout: failing unfinished jobs");
        }
        for job in left {
            self.queue.lock().unwrap().remove(&job.id);
            if let Phase::Running(c) = &*job.phase.lock().unwrap() {
                c.cancel();
            }
            let why = format!(
                "the daemon shut down before this job finished (daemon.drain_timeout_s = {})",
                timeout.as_secs()
            );
            self.end(&job, job.ended(Ending::Failed, why));
        }
        // Cancelled partitions stop at their next stage boundary; a stage that
        // never returns (a hung GPU) must not hold the exit for ever.
        if tokio::time::timeout(ENGINE_STOP, self.engine.idle())
            .await
            .is_err()
        {
            tracing::warn!(
                "the engine did not go idle within {} s after the drain; exiting anyway",
                ENGINE_STOP.as_secs()
            );
        }
    }
}

/// A parameter file PreloadSRS or EvictSRS names by path: only a regular
/// `.params` file inside the parameter cache `cache`, however it is spelled
/// (`..`, symlinks, relative to the cache), and under the spelling jobs use
/// (the cache's own path joined with the file's place in it), so one file is
/// one cache entry. Anything else gets one answer, whether it exists or not:
/// a caller learns nothing about files outside the cache, and the daemon
/// never opens them (no FIFO to hang on, no file to map that others write).
fn cached_param_file(given: &str, cache: &Path) -> Result<PathBuf, String> {
    let refused = || {
        format!(
            "circuit_id: `{given}` is not a .params file in the parameter cache {}; name a circuit (porep-32g, wpost-2k, ...) or a file there",
            cache.display()
        )
    };
    let path = cache.join(given); // an absolute `given` replaces the cache
    let real_cache = cache.canonicalize().map_err(|_| refused())?;
    let real = path.canonicalize().map_err(|_| refused())?;
    let inside = real.strip_prefix(&real_cache).map_err(|_| refused())?;
    let regular = std::fs::symlink_metadata(&real).is_ok_and(|m| m.file_type().is_file());
    if !regular || real.extension().is_none_or(|e| e != "params") {
        return Err(refused());
    }
    Ok(cache.join(inside))
}

/// An admitted job's hold on the memory budget. Dropped when its
/// completion task ends, however it ends: a panic there fails the job (its
/// waiters hear why) rather than leaving it unanswered and its bytes held.
struct Admitted {
    core: Arc<Core>,
    job: Arc<JobEntry>,
    bytes: u64,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.core.in_flight.fetch_sub(self.bytes, Ordering::SeqCst);
        if self.job.kind.is_post() {
            self.core
                .post_in_flight
                .fetch_sub(self.bytes, Ordering::SeqCst);
        }
        if self.job.outcome().is_none() {
            let why = "the daemon's completion task for this job stopped unexpectedly (a panic; see the daemon's log)";
            tracing::error!(job = %self.job.id, "{why}");
            self.core
                .end(&self.job, self.job.ended(Ending::Failed, why.into()));
        }
        self.core.wake.notify_one();
    }
}

/// Where a job's time went, from the engine's own stage timings.
fn timings(job: &JobEntry, proof: &FilProof, srs_load: Duration) -> Timings {
    let all = proof.partitions.iter().flat_map(|p| p.timings.iter());
    let first_start = all.clone().map(|t| t.started).min();
    let synth: Vec<_> = all.clone().filter(|t| t.role == Role::Synth).collect();
    let synthesis = match (
        synth.iter().map(|t| t.started).min(),
        synth.iter().map(|t| t.started + t.ran).max(),
    ) {
        (Some(a), Some(b)) => b - a,
        _ => Duration::ZERO,
    };
    let gpu_compute = all.filter(|t| t.role.on_device()).map(|t| t.ran).sum();
    let queue_wait = first_start
        .map_or(Duration::ZERO, |s| {
            s.saturating_duration_since(job.submitted)
        })
        .saturating_sub(srs_load);
    Timings {
        queue_wait,
        srs_load,
        synthesis,
        gpu_compute,
        total: job.submitted.elapsed(),
    }
}

/// The load threads for bulk work: every core, `nice` levels below the
/// process; none where `nice` is 0 (loads then run at the caller's level).
fn bulk_load_pool(nice: u8) -> anyhow::Result<Option<Arc<rayon::ThreadPool>>> {
    if nice == 0 {
        return Ok(None);
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut pools = cuzk_engine::CpuPools::new();
    pools.add_niced("srs-load", cores, nice)?;
    Ok(pools.get("srs-load"))
}

/// Runs a parameter load (its parallel decode included) on `pool` unless
/// it is for CRITICAL work or there is no pool.
fn run_load<T: Send>(
    pool: Option<&rayon::ThreadPool>,
    critical: bool,
    load: impl FnOnce() -> T + Send,
) -> T {
    match pool {
        Some(pool) if !critical => pool.install(load),
        _ => load(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a load for bulk work decodes on runs niced, its parallel parts
    /// included; a load for CRITICAL work runs at the caller's level.
    #[test]
    fn bulk_parameter_loads_run_niced_and_critical_ones_do_not() {
        use cuzk_engine::pool::thread_nice;
        use rayon::prelude::*;
        let base = thread_nice();
        let niced = (base + 7).min(19);
        let pool = bulk_load_pool(7).unwrap().expect("a pool at nice 7");
        assert_eq!(run_load(Some(&pool), false, thread_nice), niced);
        let parts: Vec<i32> = run_load(Some(&pool), false, || {
            (0..64).into_par_iter().map(|_| thread_nice()).collect()
        });
        assert!(parts.iter().all(|&n| n == niced), "{parts:?}");
        assert_eq!(run_load(Some(&pool), true, thread_nice), base);
        assert_eq!(run_load(None, false, thread_nice), base);
        assert!(bulk_load_pool(0).unwrap().is_none());
    }

    #[test]
    fn preload_paths_stay_inside_the_parameter_cache() {
        let root = tempfile::tempdir().unwrap();
        let cache = root.path().join("cache");
        std::fs::create_dir(&cache).unwrap();
        std::fs::write(cache.join("v28-a.params"), b"x").unwrap();
        std::fs::write(cache.join("v28-a.vk"), b"x").unwrap();
        std::fs::write(root.path().join("outside.params"), b"x").unwrap();
        std::os::unix::fs::symlink(
            root.path().join("outside.params"),
            cache.join("link.params"),
        )
        .unwrap();
        std::os::unix::fs::symlink(cache.join("v28-a.params"), cache.join("alias.params")).unwrap();
        let fifo = cache.join("fifo.params");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a C string that lives through the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        std::fs::create_dir(cache.join("dir.params")).unwrap();

        let want = cache.join("v28-a.params");
        let outside = root.path().join("outside.params");
        let dotdot = format!("{}/../cache/v28-a.params", cache.display());
        for (given, ok) in [
            ("v28-a.params", true),
            (want.to_str().unwrap(), true),
            (dotdot.as_str(), true),
            ("alias.params", true),
            (outside.to_str().unwrap(), false),
            ("link.params", false),
            ("../outside.params", false),
            ("v28-a.vk", false),
            ("fifo.params", false),
            ("dir.params", false),
            ("missing.params", false),
            ("/etc/passwd", false),
        ] {
            match cached_param_file(given, &cache) {
                Ok(p) => {
                    assert!(ok, "{given} was accepted");
                    assert_eq!(p, want, "{given}: one spelling per file");
                }
                Err(e) => {
                    assert!(!ok, "{given}: {e}");
                    assert!(
                        e.contains("is not a .params file in the parameter cache"),
                        "{e}"
                    );
                }
            }
        }
    }
}
