//! Pre-compiled constraints give exactly what full synthesis gives: A, B, C
//! evaluations, the assignment and the densities, bit for bit, for chain,
//! sha256 and a circuit of the embedding example's kind; from a fresh
//! recording, from memory and from the file on disk. A changed circuit is
//! detected and falls back to full synthesis.

mod common;

use common::pce::{matches_full_synthesis, synthesize};

use std::sync::Arc;

use bellperson::groth16::generate_random_parameters;
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::{Bls12, Scalar};
use cuzk::stages::circuit::Native;
use cuzk::stages::pce::PceCache;
use cuzk::stages::{ProvableCircuit, Srs, Workload};
use ff::Field;

fn workload_circuits(w: Workload, log: u32, n: u64, seed: u64) -> Vec<Box<dyn ProvableCircuit>> {
    (0..n)
        .map(|p| Box::new(w.instance(log, seed + p).circuit) as Box<dyn ProvableCircuit>)
        .collect()
}

/// The same circuits with their native witness (what `cuzk bench` and
/// `cuzk prove` submit): witness-only synthesis without the gadgets.
fn native_circuits(w: Workload, log: u32, n: u64, seed: u64) -> Vec<Box<dyn ProvableCircuit>> {
    (0..n)
        .map(|p| Box::new(Native(w.instance(log, seed + p).circuit)) as Box<dyn ProvableCircuit>)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pce_equals_full_synthesis_for_chain_and_sha256() {
    let dir = tempfile::tempdir().unwrap();
    let chain = common::srs(Workload::Chain, 10);
    matches_full_synthesis(&chain, dir.path(), || {
        workload_circuits(Workload::Chain, 10, 3, 7)
    })
    .await;
    let log = common::sha256_log_size();
    let sha = common::srs(Workload::Sha256, log);
    matches_full_synthesis(&sha, dir.path(), || {
        workload_circuits(Workload::Sha256, log, 2, 9)
    })
    .await;
    // sha256's native witness, against the gadgets' full synthesis.
    let native_dir = tempfile::tempdir().unwrap();
    matches_full_synthesis(&sha, native_dir.path(), || {
        native_circuits(Workload::Sha256, log, 2, 9)
    })
    .await;
}

/// The embedding example's circuit: x^(2^rounds) = y with y public; with
/// `duplicate`, one constraint is enforced twice (a changed circuit that
/// still fits the same SRS), with `bias` one step adds it (same structure,
/// different coefficients).
#[derive(Clone)]
struct Squaring {
    rounds: usize,
    x: Option<Scalar>,
    duplicate: bool,
    bias: u64,
}

impl Circuit<Scalar> for Squaring {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut value = self.x;
        let mut var = cs.alloc(|| "x", || value.ok_or(SynthesisError::AssignmentMissing))?;
        for i in 0..self.rounds {
            let bias = if i == 3 {
                Scalar::from(self.bias)
            } else {
                Scalar::ZERO
            };
            let next_value = value.map(|v| v.square() + bias);
            let next = if i + 1 == self.rounds {
                cs.alloc_input(
                    || "y",
                    || next_value.ok_or(SynthesisError::AssignmentMissing),
                )?
            } else {
                cs.alloc(
                    || "square",
                    || next_value.ok_or(SynthesisError::AssignmentMissing),
                )?
            };
            let times = if self.duplicate && i == 5 { 2 } else { 1 };
            for _ in 0..times {
                cs.enforce(
                    || "v*v = next - bias",
                    |lc| lc + var,
                    |lc| lc + var,
                    |lc| lc + next - (bias, CS::one()),
                );
            }
            (var, value) = (next, next_value);
        }
        Ok(())
    }
}

fn squaring(x: u64, duplicate: bool, bias: u64) -> Box<dyn ProvableCircuit> {
    Box::new(Squaring {
        rounds: 100,
        x: Some(Scalar::from(x)),
        duplicate,
        bias,
    })
}

/// Random parameters for the squaring circuit's shape.
fn squaring_srs() -> Arc<Srs> {
    let blank = Squaring {
        rounds: 100,
        x: None,
        duplicate: false,
        bias: 0,
    };
    let params = generate_random_parameters::<Bls12, _, _>(blank, &mut rand::rngs::OsRng).unwrap();
    Arc::new(Srs::from_parameters(params))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pce_equals_full_synthesis_for_the_example_circuit_and_a_changed_one_falls_back() {
    let srs = squaring_srs();
    let dir = tempfile::tempdir().unwrap();
    matches_full_synthesis(&srs, dir.path(), || {
        vec![squaring(3, false, 0), squaring(5, false, 0)]
    })
    .await;

    let cache = Arc::new(PceCache::new(Some(dir.path().into())));
    for changed in [
        squaring(3, true, 0),  // one more constraint: counts and fingerprint differ
        squaring(3, false, 9), // same structure, other coefficients: rows are not satisfied
    ] {
        let copy = changed.duplicate().unwrap();
        let classic = synthesize("synth", Arc::default(), &srs, vec![copy]).await;
        let got = synthesize("synth_pce", cache.clone(), &srs, vec![changed]).await;
        assert_eq!(
            got[0].1.as_deref(),
            Some("fallback"),
            "the change is detected"
        );
        assert!(got[0].0 == classic[0].0, "and full synthesis ran instead");
    }

    // On the GPU: the biased circuit's witness under the unbiased recording
    // breaks exactly the biased step's constraint (row 3), which the device
    // check names.
    let Some(device) = common::pce::gpu() else {
        return;
    };
    let recording = cache.get_or_record(&srs, || None).0.unwrap();
    let z = common::pce::assignment(&srs, squaring(3, false, 9)).await;
    let d = common::pce::on_device(device, &recording, &z, srs.shape().domain);
    assert_eq!(d.unsatisfied, Some(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_recording_is_refused_before_the_device_reads_it() {
    use cuzk::stages::pce::Recording;
    let dir = tempfile::tempdir().unwrap();
    let srs = common::srs(Workload::Chain, 10);
    let cache = Arc::new(PceCache::new(Some(dir.path().into())));
    synthesize(
        "synth_pce",
        cache.clone(),
        &srs,
        workload_circuits(Workload::Chain, 10, 1, 3),
    )
    .await;
    let path = cache.path_for(&srs).unwrap();
    let intact = Recording::open(&path)
        .unwrap()
        .expect("a recording on disk");
    assert_eq!(intact.validate(), Ok(()));
    // The body ends with C's coefficient codes: overwrite its last 256
    // bytes, as a corrupted copy would. The digest refuses the file (it is
    // recorded again)...
    use cuzk::stages::pce::store::{DIGEST_BYTES, digest};
    let mut bytes = std::fs::read(&path).unwrap();
    let body = bytes.len() - DIGEST_BYTES;
    bytes[body - 256..body].fill(0xff);
    let damaged = dir.path().join("damaged.pce");
    std::fs::write(&damaged, &bytes).unwrap();
    assert!(Recording::open(&damaged).unwrap().is_none());
    // ...and one whose digest was made over the damage (a recorder bug)
    // is still refused before the device reads it.
    let sum = digest(&bytes[..body]);
    bytes[body..].copy_from_slice(&sum);
    std::fs::write(&damaged, &bytes).unwrap();
    let err = Recording::open(&damaged)
        .unwrap()
        .unwrap()
        .validate()
        .unwrap_err();
    assert_eq!(err, "matrix C has a coefficient code beyond its table");
    // A file cut short is refused too, and the cache records the shape again
    // over a damaged file.
    std::fs::write(&damaged, &bytes[..bytes.len() / 2]).unwrap();
    assert!(Recording::open(&damaged).unwrap().is_none());
}

/// `circuits` through pce_gpu's synthesis (a, b and c left to the device)
/// with `cache`: each partition's arena and its `pce`, `abc` and
/// `arena_bytes` notes.
async fn synthesize_deferred(
    cache: &Arc<PceCache>,
    srs: &Arc<Srs>,
    circuits: Vec<Box<dyn ProvableCircuit>>,
) -> Vec<(common::pce::Captured, Vec<Option<String>>)> {
    let mut stages = cuzk::stages::cpu_stages(cache.clone());
    let deferred = cuzk::stages::synth_pce::SynthPce {
        cache: cache.clone(),
        defer_abc: true,
    };
    stages.register("synth_deferred", Arc::new(deferred));
    common::pce::synthesize_noted(
        "synth_deferred",
        "pce,abc,arena_bytes",
        stages,
        srs,
        circuits,
    )
    .await
}

/// A graph that leaves a, b and c to the device (pce_gpu's synth_witness)
/// gives partitions after the recording an arena without them: smaller by
/// three domains of scalars, holding the same assignment and densities as
/// full synthesis, from which the host fallback evaluates a, b, c equal to
/// full synthesis's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deferred_abc_leaves_them_out_of_the_arena() {
    let srs = common::srs(Workload::Chain, 10);
    let dir = tempfile::tempdir().unwrap();
    let circuits = || native_circuits(Workload::Chain, 10, 3, 21);
    let classic = synthesize("synth", Arc::default(), &srs, circuits()).await;
    let cache = Arc::new(PceCache::new(Some(dir.path().into())));
    let got = synthesize_deferred(&cache, &srs, circuits()).await;
    let bytes = |notes: &[Option<String>]| notes[2].as_deref().unwrap().parse::<usize>().unwrap();
    let shape = srs.shape();
    assert_eq!(got[0].1[0].as_deref(), Some("recorded"));
    assert_eq!(
        got[0].0.a.len(),
        shape.domain,
        "the recording partition holds a, b, c"
    );
    let recording = cache.get_or_record(&srs, || None).0.expect("recorded");
    for ((run, notes), (want, _)) in got.iter().zip(&classic).skip(1) {
        assert_eq!(notes[0].as_deref(), Some("memory"));
        assert_eq!(notes[1].as_deref(), Some("device"));
        assert!(run.a.is_empty() && run.b.is_empty() && run.c.is_empty());
        assert_eq!(bytes(&got[0].1) - bytes(notes), 3 * 32 * shape.domain);
        assert!(run.z == want.z && run.densities == want.densities);
        assert_eq!(run.public_inputs, want.public_inputs);
        let mut abc = [0; 3].map(|_| vec![[0u64; 4]; shape.domain]);
        let [a, b, c] = &mut abc;
        let out = [a.as_mut_slice(), b.as_mut_slice(), c.as_mut_slice()];
        cuzk::stages::gpu::evaluate_on_host(&recording, &run.z, false, out, shape.inputs).unwrap();
        assert!(abc == [want.a.clone(), want.b.clone(), want.c.clone()]);
    }
}

/// A circuit that records its matrices without values, as Filecoin's do
/// ([`ProvableCircuit::record_matrices`]): here in one part.
#[derive(Clone)]
struct InParts(Squaring);

impl ProvableCircuit for InParts {
    fn synthesize_into(
        self: Box<Self>,
        cs: &mut cuzk::stages::cs::ArenaCs<'_>,
    ) -> Result<(), SynthesisError> {
        self.0.synthesize(cs)
    }
    fn synthesize_witness(
        self: Box<Self>,
        cs: &mut cuzk::stages::pce::WitnessCs<'_>,
    ) -> Result<(), SynthesisError> {
        self.0.synthesize(cs)
    }
    fn synthesize_recording(
        self: Box<Self>,
        cs: &mut cuzk::stages::pce::RecordingCs<'_>,
    ) -> Result<(), SynthesisError> {
        self.0.synthesize(cs)
    }
    fn record_matrices(
        &self,
        cs: &mut cuzk::stages::setup::MatrixCs,
    ) -> Option<Result<(), SynthesisError>> {
        Some(self.0.clone().synthesize(cs))
    }
    fn duplicate(&self) -> Option<Box<dyn ProvableCircuit>> {
        Some(Box::new(self.clone()))
    }
    fn shape(self: Box<Self>) -> Result<cuzk::stages::CircuitShape, SynthesisError> {
        cuzk::stages::shape_of(self.0)
    }
}

/// Where the first partition records in parts (no arena needed) and a, b
/// and c are left to the device, it too gets the witness-only arena: a full
/// one would stay page-locked at its size (19 GiB rather than 7 at 32 GiB
/// PoRep) for the rest of the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recording_in_parts_leaves_the_first_partition_witness_only() {
    let srs = squaring_srs();
    let circuits = || -> Vec<Box<dyn ProvableCircuit>> {
        (3..6u64)
            .map(|x| {
                Box::new(InParts(Squaring {
                    rounds: 100,
                    x: Some(Scalar::from(x)),
                    duplicate: false,
                    bias: 0,
                })) as Box<dyn ProvableCircuit>
            })
            .collect()
    };
    let classic = synthesize("synth", Arc::default(), &srs, circuits()).await;
    let dir = tempfile::tempdir().unwrap();
    let cache = Arc::new(PceCache::new(Some(dir.path().into())));
    let got = synthesize_deferred(&cache, &srs, circuits()).await;
    let witness_only = cuzk::stages::partition::PartitionLayout::witness_only(srs.shape()).bytes;
    assert_eq!(got[0].1[0].as_deref(), Some("recorded"));
    for ((run, notes), (want, _)) in got.iter().zip(&classic) {
        assert_eq!(
            notes[1].as_deref(),
            Some("device"),
            "a, b, c left to the device"
        );
        assert_eq!(
            notes[2].as_deref(),
            Some(witness_only.to_string().as_str()),
            "arena bytes"
        );
        assert!(run.a.is_empty() && run.b.is_empty() && run.c.is_empty());
        assert!(run.z == want.z && run.densities == want.densities);
        assert_eq!(run.public_inputs, want.public_inputs);
    }
}
