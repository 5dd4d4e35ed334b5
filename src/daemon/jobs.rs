//! The daemon's jobs: what each request became, where it is, and how it ended.
//! A job is named by curio's request id together with the digest of what the
//! request asks for: the same id and inputs are the same job (idempotent
//! resubmission); the same id with other inputs is a new job, with an id of
//! its own (`<request id>@<digest prefix>`), and never the first one's proof.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use cuzk_engine::JobCanceller;
use cuzk_filecoin::{FilJob, ProofKind};
use tokio::sync::watch;

/// How a job ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    Completed,
    Failed,
    Cancelled,
}

/// Where the time of a job went (`AwaitProofResponse`'s timing fields).
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct Timings {
    /// From submission to its first partition's first stage, less `srs_load`.
    pub queue_wait: Duration,
    /// Waiting for its parameters to be loaded.
    pub srs_load: Duration,
    /// From its first partition entering synthesis to its last leaving it.
    pub synthesis: Duration,
    /// Device-stage time, summed over its partitions.
    pub gpu_compute: Duration,
    pub total: Duration,
}

/// A finished job.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub ending: Ending,
    /// Filecoin's proof bytes (empty unless completed).
    pub proof: Vec<u8>,
    pub error: String,
    pub timings: Timings,
}

/// Where a job is.
pub enum Phase {
    /// Waiting for admission, its partitions' circuits built.
    Pending(Box<FilJob>),
    /// Admitted, being handed to the engine.
    Starting,
    /// Handed to the engine.
    Running(JobCanceller),
    Finished(Arc<Outcome>),
}

impl Phase {
    pub fn name(&self) -> &'static str {
        match self {
            Self::Pending(_) => "pending",
            Self::Starting => "running",
            Self::Running(_) => "running",
            Self::Finished(o) => match o.ending {
                Ending::Completed => "completed",
                Ending::Failed => "failed",
                Ending::Cancelled => "cancelled",
            },
        }
    }
}

/// One job.
pub struct JobEntry {
    pub id: String,
    /// SHA-256 of what the request asks for ([`super::request::digest`]).
    pub digest: [u8; 32],
    /// Bytes of its request's inputs, counted against the memory budget
    /// while it waits (its built circuits hold about as much).
    pub input_bytes: u64,
    pub kind: ProofKind,
    pub sector_size: u64,
    pub priority: u8,
    pub partitions: usize,
    pub params: PathBuf,
    pub submitted: Instant,
    pub submitted_at: SystemTime,
    pub phase: Mutex<Phase>,
    /// When admission first found its parameters not loaded.
    pub srs_wait_from: Mutex<Option<Instant>>,
    /// Host bytes its partitions hold while it runs (set at admission).
    pub bytes: Mutex<u64>,
    /// `Prove` calls waiting on it; the last one to go away cancels a job
    /// that `Prove` created (its client is gone, nobody will read the proof).
    pub prove_waiters: AtomicUsize,
    pub made_by_prove: bool,
    /// CancelProof came; checked again once the job is handed to the engine.
    pub cancel_requested: std::sync::atomic::AtomicBool,
    done: watch::Sender<Option<Arc<Outcome>>>,
}

impl JobEntry {
    pub fn new(
        id: String,
        digest: [u8; 32],
        job: FilJob,
        priority: u8,
        made_by_prove: bool,
        input_bytes: u64,
    ) -> Arc<Self> {
        Arc::new(Self {
            id,
            digest,
            input_bytes,
            kind: job.kind,
            sector_size: job.sector_size,
            priority,
            partitions: job.partitions(),
            params: job.params.clone(),
            submitted: Instant::now(),
            submitted_at: SystemTime::now(),
            phase: Mutex::new(Phase::Pending(Box::new(job))),
            srs_wait_from: Mutex::new(None),
            bytes: Mutex::new(0),
            prove_waiters: AtomicUsize::new(0),
            made_by_prove,
            cancel_requested: Default::default(),
            done: watch::channel(None).0,
        })
    }

    pub fn outcome(&self) -> Option<Arc<Outcome>> {
        self.done.borrow().clone()
    }

    pub fn is_pending(&self) -> bool {
        matches!(*self.phase.lock().unwrap(), Phase::Pending(_))
    }

    pub fn is_running(&self) -> bool {
        matches!(
            *self.phase.lock().unwrap(),
            Phase::Running(_) | Phase::Starting
        )
    }

    /// Ends the job unless it already ended; true if this call ended it.
    pub fn finish(&self, outcome: Outcome) -> bool {
        let outcome = Arc::new(outcome);
        {
            let mut phase = self.phase.lock().unwrap();
            if matches!(*phase, Phase::Finished(_)) {
                return false;
            }
            *phase = Phase::Finished(outcome.clone());
        }
        self.done.send_replace(Some(outcome));
        true
    }

    /// Waits for the outcome, at most `timeout` (None: as long as it takes).
    pub async fn wait(&self, timeout: Option<Duration>) -> Option<Arc<Outcome>> {
        let mut rx = self.done.subscribe();
        let wait = rx.wait_for(Option::is_some);
        let got = match timeout {
            Some(t) => tokio::time::timeout(t, wait).await.ok()?,
            None => wait.await,
        };
        got.ok().and_then(|o| o.clone())
    }

    /// Failed or cancelled: the same request again proves afresh.
    pub fn may_retry(&self) -> bool {
        self.outcome()
            .is_some_and(|o| o.ending != Ending::Completed)
    }

    pub fn ended(&self, ending: Ending, error: String) -> Outcome {
        Outcome {
            ending,
            proof: vec![],
            error,
            timings: Timings {
                total: self.submitted.elapsed(),
                ..Default::default()
            },
        }
    }
}

/// Every job by id: those not finished, and the last `keep` finished ones
/// (for AwaitProof after the fact and idempotent resubmission).
pub struct JobTable {
    jobs: Mutex<HashMap<String, Arc<JobEntry>>>,
    finished: Mutex<VecDeque<String>>,
    keep: usize,
    next: AtomicUsize,
    /// Random per process, so automatic ids never repeat across restarts.
    boot: u32,
}

impl JobTable {
    pub fn new(keep: usize) -> Self {
        Self {
            jobs: Mutex::default(),
            finished: Mutex::default(),
            keep: keep.max(1),
            next: AtomicUsize::new(1),
            boot: rand::random(),
        }
    }

    /// An id for a request that brought none: `<kind>-auto-<boot>-<n>`,
    /// unique across restarts (`<boot>` is drawn at start).
    pub fn fresh_id(&self, kind: ProofKind) -> String {
        format!(
            "{kind}-auto-{:08x}-{}",
            self.boot,
            self.next.fetch_add(1, Ordering::Relaxed)
        )
    }

    pub fn get(&self, id: &str) -> Option<Arc<JobEntry>> {
        self.jobs.lock().unwrap().get(id).cloned()
    }

    /// The job id a request gets: its request id, unless a job of other
    /// inputs already holds it; then the request id with a digest prefix.
    fn id_for(
        jobs: &HashMap<String, Arc<JobEntry>>,
        request_id: &str,
        digest: &[u8; 32],
    ) -> String {
        match jobs.get(request_id) {
            Some(old) if old.digest != *digest => {
                let prefix: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
                format!("{request_id}@{prefix}")
            }
            _ => request_id.to_string(),
        }
    }

    /// The job this request id and digest already made, unless it failed or
    /// was cancelled (then the request proves afresh).
    pub fn existing(&self, request_id: &str, digest: &[u8; 32]) -> Option<Arc<JobEntry>> {
        let jobs = self.jobs.lock().unwrap();
        let old = jobs.get(&Self::id_for(&jobs, request_id, digest))?;
        (old.digest == *digest && !old.may_retry()).then(|| old.clone())
    }

    /// The job for `request_id` and `digest`: the existing one (see
    /// [`JobTable::existing`]), else a new one `make` builds with its id
    /// (true: it is new and must be queued).
    pub fn insert_or_existing(
        &self,
        request_id: &str,
        digest: &[u8; 32],
        make: impl FnOnce(String) -> Arc<JobEntry>,
    ) -> (Arc<JobEntry>, bool) {
        let mut jobs = self.jobs.lock().unwrap();
        let id = Self::id_for(&jobs, request_id, digest);
        if let Some(old) = jobs.get(&id)
            && old.digest == *digest
            && !old.may_retry()
        {
            return (old.clone(), false);
        }
        let entry = make(id.clone());
        jobs.insert(id, entry.clone());
        (entry, true)
    }

    /// Records that `id` finished; forgets the oldest finished jobs past `keep`.
    pub fn retire(&self, id: &str) {
        let mut finished = self.finished.lock().unwrap();
        finished.push_back(id.to_string());
        while finished.len() > self.keep {
            let old = finished.pop_front().expect("non-empty");
            let mut jobs = self.jobs.lock().unwrap();
            if jobs.get(&old).is_some_and(|j| j.outcome().is_some()) {
                jobs.remove(&old);
            }
        }
    }

    /// Every job known, newest first.
    pub fn all(&self) -> Vec<Arc<JobEntry>> {
        let mut v: Vec<_> = self.jobs.lock().unwrap().values().cloned().collect();
        v.sort_by_key(|j| std::cmp::Reverse(j.submitted));
        v
    }
}
