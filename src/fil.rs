//! Filecoin proofs through the engine: a [`FilJob`]'s partitions are proven
//! by the configured graph and leave only as Filecoin's proof bytes that
//! Filecoin's own verifier accepted.

use std::sync::Arc;
use std::time::Duration;

pub use cuzk_filecoin::{FilError, FilJob, ProofKind};

use crate::engine::{Engine, Job, ProveError};
use crate::srs_cache::SrsCache;

/// A finished Filecoin proof.
#[derive(Debug)]
pub struct FilProof {
    pub kind: ProofKind,
    /// Filecoin's bytes: 192 per partition, in partition order.
    pub bytes: Vec<u8>,
    /// Per-partition timings from the engine.
    pub partitions: Vec<crate::PartitionProof>,
    pub srs_load: Duration,
    pub elapsed: Duration,
}

/// Why a Filecoin proof was not made.
#[derive(Debug, thiserror::Error)]
pub enum FilProveError {
    #[error(transparent)]
    Input(#[from] FilError),
    #[error("{0}")]
    Engine(#[from] ProveError),
    #[error("loading the parameters: {0:#}")]
    Srs(anyhow::Error),
    /// Filecoin's verifier panicked: the proof is not handed out.
    #[error("checking the proof with Filecoin's verifier: {0}")]
    VerifierPanicked(String),
}

/// Submits a Filecoin job and returns what the engine job will resolve to.
pub fn submit(
    engine: &Engine,
    srs: &SrsCache,
    job: FilJob,
    priority: u8,
) -> Result<Submitted, FilProveError> {
    let loaded = srs.get(&job.params).map_err(FilProveError::Srs)?;
    submit_loaded(engine, loaded, job, priority)
}

/// Submits a Filecoin job with its parameters already loaded (refused if
/// its partitions do not fit an arena).
pub fn submit_loaded(
    engine: &Engine,
    loaded: crate::srs_cache::Loaded,
    mut job: FilJob,
    priority: u8,
) -> Result<Submitted, FilProveError> {
    let mut parts = Job::new(loaded.srs.clone())
        .label(job.label.clone())
        .priority(priority);
    for c in std::mem::take(&mut job.circuits) {
        parts = parts.boxed_partition(c);
    }
    Ok(Submitted {
        handle: engine.try_submit(parts)?,
        job,
        srs: loaded.srs,
        srs_load: loaded.load_time,
    })
}

/// A submitted Filecoin job.
pub struct Submitted {
    pub handle: crate::ProofHandle,
    job: FilJob,
    srs: Arc<cuzk_stages::Srs>,
    pub srs_load: Duration,
}

impl Submitted {
    /// Waits for the partitions and checks them with Filecoin's verifier.
    pub async fn finish(self) -> Result<FilProof, FilProveError> {
        let out = self.handle.await?;
        let proofs: Vec<_> = out.partitions.iter().map(|p| p.proof.clone()).collect();
        let inputs: Vec<_> = out
            .partitions
            .iter()
            .map(|p| p.public_inputs.clone())
            .collect();
        let (job, srs) = (self.job, self.srs);
        let kind = job.kind;
        // Filecoin's verifier takes from milliseconds to seconds: off the
        // async workers, and a panic in it fails this job only.
        let bytes = tokio::task::spawn_blocking(move || job.finish(&proofs, &inputs, &srs.pvk))
            .await
            .map_err(|e| match e.try_into_panic() {
                Ok(panic) => {
                    FilProveError::VerifierPanicked(cuzk_engine::pool::panic_message(&*panic))
                }
                Err(e) => FilProveError::VerifierPanicked(e.to_string()),
            })??;
        Ok(FilProof {
            kind,
            bytes,
            partitions: out.partitions,
            srs_load: self.srs_load,
            elapsed: out.elapsed,
        })
    }
}

/// Proves a Filecoin job with `engine`.
pub async fn prove(
    engine: &Engine,
    srs: &SrsCache,
    job: FilJob,
) -> Result<FilProof, FilProveError> {
    submit(engine, srs, job, 0)?.finish().await
}
