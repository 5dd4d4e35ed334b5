//! Helpers shared by the integration tests: cached parameters and engines.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use cuzk::config::Config;
use cuzk::stages::{Srs, Workload};

/// Parameters shared by every test of this binary, generated once per size
/// into a directory under the target dir (so reruns reuse them).
pub fn srs(workload: Workload, log_size: u32) -> Arc<Srs> {
    type Cache = Mutex<HashMap<(Workload, u32), Arc<Srs>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut guard = cache.lock().unwrap();
    guard
        .entry((workload, log_size))
        .or_insert_with(|| {
            let (srs, _, _) =
                cuzk::params::load_or_generate(&param_dir(), workload, log_size).unwrap();
            srs
        })
        .clone()
}

pub fn param_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("params")
}

/// A small CPU configuration for tests.
pub fn config(variant: &str) -> Config {
    let mut c = Config::default();
    c.pipeline.variant = variant.into();
    c.gpu.backend = cuzk::config::Backend::Cpu;
    c.threads.synthesis = 2;
    c.threads.groth16 = 2;
    c.engine.self_verify = false;
    c
}

/// The smallest sha256 size (one compression).
pub fn sha256_log_size() -> u32 {
    Workload::Sha256.min_log_size()
}

/// Submits `jobs` jobs of a workload at once (all in flight), awaits them,
/// and checks every proof with bellperson's verifier and every partition's
/// public inputs; returns the proofs for further checks.
pub async fn prove_in_flight(
    engine: &cuzk::Engine,
    workload: Workload,
    log_size: u32,
    partitions: u64,
    jobs: usize,
) -> Vec<cuzk::JobProofs> {
    use cuzk::bench::{BenchSpec, job_for};
    let srs = srs(workload, log_size);
    let spec = BenchSpec {
        workload,
        log_size,
        partitions,
        proofs: jobs,
        in_flight: jobs,
        seed: 11,
    };
    let handles: Vec<_> = (0..jobs)
        .map(|i| {
            let (job, inputs) = job_for(&srs, &spec, i);
            (engine.submit(job), inputs)
        })
        .collect();
    let mut out = vec![];
    for (handle, inputs) in handles {
        let proofs = handle
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", engine.config().pipeline.variant));
        proofs.verify(&srs).unwrap();
        let got: Vec<_> = proofs
            .partitions
            .iter()
            .map(|p| p.public_inputs.clone())
            .collect();
        assert_eq!(got, inputs);
        out.push(proofs);
    }
    out
}
pub mod fil;
pub mod pce;
