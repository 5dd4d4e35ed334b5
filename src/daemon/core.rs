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
use std::path::PathBuf;
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

/// Total host memory, from /proc/meminfo (0 if unknown).
pub fn total_memory() -> u64 {
    read_kib("/proc/meminfo", "MemTotal:") * 1024
}

/// This process's resident set and its peak, in bytes.
pub fn rss() -> (u64, u64) {
    (
        read_kib("/proc/self/status", "VmRSS:") * 1024,
        read_kib("/proc/self/status", "VmHWM:") * 1024,
    )
}

fn read_kib(file: &str, key: &str) -> u64 {
    std::fs::read_to_string(file)
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

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
    /// Host bytes admitted jobs hold.
    pub in_flight: AtomicU64,
    pub started: Instant,
    pub completed: AtomicU64,
    pub failed: AtomicU64,
    pub cancelled: AtomicU64,
    /// Parameter files by the circuit id that names them (`porep-2k`).
    pub circuit_ids: Mutex<HashMap<PathBuf, String>>,
    wake: Notify,
    loading: Mutex<HashSet<PathBuf>>,
    draining: AtomicBool,
    /// Partitions of one job the engine holds at once at most.
    partitions_in_flight: usize,
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
        let monitor = Arc::new(Monitor::new(Duration::from_secs(300)));
        options.observers.push(monitor.clone());
        options.observers.push(monitor.timeline());
        // Admission bounds the partitions' bytes; the engine's arenas only
        // need to be large enough for any one partition.
        let mut engine_config = config.clone();
        engine_config.memory.budget = cuzk_config::ByteSize(0);
        let engine = Engine::with_options(engine_config, options)?;
        let partitions_in_flight = engine
            .graph()
            .max_in_flight(engine.backend().devices)
            .unwrap_or(usize::MAX)
            .max(1);
        let core = Arc::new(Self {
            engine,
            srs: Arc::new(SrsCache::with_budget(srs_budget as usize)),
            jobs: JobTable::new(config.daemon.keep_finished),
            monitor,
            queue: Mutex::new(PendingQueue::new(Duration::from_secs(
                config.daemon.aging_s,
            ))),
            budget,
            in_flight: AtomicU64::new(0),
            started: Instant::now(),
            completed: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
            circuit_ids: Mutex::default(),
            wake: Notify::new(),
            loading: Mutex::default(),
            draining: AtomicBool::new(false),
            partitions_in_flight,
            config,
        });
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
    /// (0 once it left the queue). The same request id returns the same job.
    pub async fn submit(
        self: &Arc<Self>,
        mut req: SubmitProofRequest,
        by_prove: bool,
    ) -> Result<(Arc<JobEntry>, u32), Refused> {
        if self.is_draining() {
            return Err(Refused::Draining);
        }
        if let Some(old) = self.jobs.get(&req.request_id)
            && old.outcome().is_none_or(|o| o.ending == Ending::Completed)
        {
            return Ok((old.clone(), self.position(&old)));
        }
        let max = self.config.daemon.max_queued;
        if self.queue.lock().unwrap().len() >= max {
            return Err(Refused::Exhausted(format!(
                "{max} jobs are already waiting for admission (`daemon.max_queued`); retry later"
            )));
        }
        let parse_req = std::mem::take(&mut req.vanilla_proof);
        let vanilla_proofs = std::mem::take(&mut req.vanilla_proofs);
        let request_id = req.request_id.clone();
        let parsed = tokio::task::spawn_blocking(move || {
            req.vanilla_proof = parse_req;
            req.vanilla_proofs = vanilla_proofs;
            request::parse(&req)
        })
        .await
        .map_err(|e| Refused::Internal(format!("validating the request: {e}")))?
        .map_err(|e| match e {
            cuzk_filecoin::FilError::Other(e) => Refused::Internal(format!("{e:#}")),
            e => Refused::Invalid(e.to_string()),
        })?;
        let id = if request_id.is_empty() {
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
        // Timelines, traces and the status page name the job by its id.
        fil.label = id.clone();
        let entry = JobEntry::new(id, fil, parsed.priority, by_prove);
        let (entry, fresh) = self.jobs.insert_or_existing(entry);
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

    /// The parameter file a circuit id (`porep-32g`) or a path names.
    fn resolve(&self, circuit: &str) -> Result<PathBuf, String> {
        if circuit.contains('/') || circuit.ends_with(".params") {
            let path = PathBuf::from(circuit);
            return if path.is_file() {
                Ok(path)
            } else {
                Err(format!(
                    "circuit_id: the parameter file {circuit} does not exist"
                ))
            };
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
            let freed = srs.memory_bytes() + core.engine.evict_srs_from_devices(&srs);
            Ok((true, freed as u64))
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
            self.admit();
            let _ = tokio::time::timeout(Duration::from_secs(1), self.wake.notified()).await;
        }
    }

    /// Host bytes one partition of `job` takes, if its parameters are loaded.
    fn partition_bytes(&self, job: &JobEntry) -> Option<(Arc<cuzk_stages::Srs>, u64)> {
        let srs = self.srs.try_get(&job.params)?;
        let bytes = PartitionLayout::new(srs.shape()).bytes as u64;
        Some((srs, bytes))
    }

    fn admit(self: &Arc<Self>) {
        let waiting = self.queue.lock().unwrap().ordered();
        for job in waiting {
            let Some((_, per_partition)) = self.partition_bytes(&job) else {
                job.srs_wait_from
                    .lock()
                    .unwrap()
                    .get_or_insert_with(Instant::now);
                self.load_in_background(job.params.clone());
                continue;
            };
            let bytes = per_partition * job.partitions.min(self.partitions_in_flight) as u64;
            if per_partition > self.budget {
                self.queue.lock().unwrap().remove(&job.id);
                let why = format!(
                    "one partition needs {} MiB of host memory, more than `memory.budget` ({} MiB)",
                    per_partition >> 20,
                    self.budget >> 20
                );
                self.end(&job, job.ended(Ending::Failed, why));
                continue;
            }
            let held = self.in_flight.load(Ordering::SeqCst);
            if held > 0 && held + bytes > self.budget {
                // Strict order: nothing behind the head overtakes it for memory.
                return;
            }
            self.start_job(job, bytes);
        }
    }

    fn load_in_background(self: &Arc<Self>, path: PathBuf) {
        if !self.loading.lock().unwrap().insert(path.clone()) {
            return;
        }
        let core = self.clone();
        tokio::task::spawn_blocking(move || {
            let result = core.srs.get(&path);
            core.loading.lock().unwrap().remove(&path);
            if let Err(e) = result {
                let why = format!("loading the parameters {}: {e:#}", path.display());
                tracing::error!("{why}");
                for job in core.queue.lock().unwrap().ordered() {
                    if job.params == path {
                        core.queue.lock().unwrap().remove(&job.id);
                        core.end(&job, job.ended(Ending::Failed, why.clone()));
                    }
                }
            }
            core.wake.notify_one();
        });
    }

    fn start_job(self: &Arc<Self>, job: Arc<JobEntry>, bytes: u64) {
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
        let submitted = match crate::fil::submit(&self.engine, &self.srs, *fil, job.priority) {
            Ok(s) => s,
            Err(e) => {
                self.end(&job, job.ended(Ending::Failed, e.to_string()));
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
        let srs_load = job
            .srs_wait_from
            .lock()
            .unwrap()
            .map_or(Duration::ZERO, |t| t.elapsed());
        tracing::info!(job = %job.id, kind = %job.kind, mib = bytes >> 20, "job admitted");
        let core = self.clone();
        tokio::spawn(async move {
            let result = submitted.finish().await;
            core.in_flight.fetch_sub(bytes, Ordering::SeqCst);
            let outcome = core.outcome(&job, result, srs_load);
            core.end(&job, outcome);
            core.wake.notify_one();
        });
    }

    fn outcome(
        &self,
        job: &JobEntry,
        result: Result<FilProof, FilProveError>,
        srs_load: Duration,
    ) -> Outcome {
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
        self.engine.idle().await;
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
