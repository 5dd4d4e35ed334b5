//! Real Groth16 proofs through the engine's CPU backend, each checked with
//! bellperson's verifier; bad input gives a clear error and the engine goes on.

mod common;

use std::sync::Arc;

use bellperson::groth16::verify_proof;
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use cuzk::stages::Workload;
use cuzk::stages::workloads::ChainCircuit;
use cuzk::{Engine, Job, ProveError};
use ff::Field;

fn workload_job(
    workload: Workload,
    log_size: u32,
    partitions: u64,
    seed: u64,
) -> (Job, Vec<Vec<Scalar>>) {
    let srs = common::srs(workload, log_size);
    let mut job = Job::new(srs).label(format!("{}-{seed}", workload.name()));
    let mut expected = vec![];
    for p in 0..partitions {
        let inst = workload.instance(log_size, seed * 1000 + p);
        expected.push(inst.public_inputs);
        job = job.partition(inst.circuit);
    }
    (job, expected)
}

async fn prove_and_verify(engine: &Engine, workload: Workload, log_size: u32, partitions: u64) {
    let srs = common::srs(workload, log_size);
    let (job, expected) = workload_job(workload, log_size, partitions, 1);
    let out = engine.submit(job).await.expect("the job proves");
    assert_eq!(out.partitions.len(), partitions as usize);
    for (p, want) in out.partitions.iter().zip(&expected) {
        assert_eq!(
            &p.public_inputs, want,
            "the circuit exposes the instance's public inputs"
        );
        assert!(
            verify_proof(&srs.pvk, &p.proof, want).unwrap(),
            "{} partition proof verifies",
            workload.name()
        );
        assert_eq!(p.to_bytes().len(), 192);
        let backend = p
            .timings
            .iter()
            .find(|t| &*t.node == "gpu_ntt_msm")
            .and_then(|t| t.note("backend"));
        assert_eq!(backend, Some("cpu"));
        // prep_msm sums each tail of at most HOST_TAIL_TERMS terms itself
        // (L, A, and B twice: G1 and G2), exactly those its plan notes.
        let prep = p.timings.iter().find(|t| &*t.node == "prep_msm").unwrap();
        let small = |q: &str| {
            let note = prep.note(q).unwrap();
            let count = |k: &str| -> usize {
                let at = note.find(k).unwrap() + k.len();
                note[at..]
                    .split([',', ';'])
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap()
            };
            usize::from(count("ones=") + count("sig=") <= cuzk::stages::prep::HOST_TAIL_TERMS)
        };
        let expected = small("l") + small("a") + 2 * small("b");
        assert_eq!(prep.note("host_tails"), Some(expected.to_string().as_str()));
        if workload == Workload::Chain {
            assert_eq!(expected, 4, "chain's tails are its few inputs");
        }
    }
    // Distinct witnesses and fresh randomness give distinct proofs.
    if partitions > 1 {
        assert_ne!(out.partitions[0].proof, out.partitions[1].proof);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chain_one_partition_verifies() {
    let engine = Engine::from_config(common::config("serial")).unwrap();
    prove_and_verify(&engine, Workload::Chain, 10, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chain_several_partitions_verify() {
    let engine = Engine::from_config(common::config("serial")).unwrap();
    prove_and_verify(&engine, Workload::Chain, 10, 4).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sha256_one_and_several_partitions_verify() {
    let engine = Engine::from_config(common::config("serial")).unwrap();
    let k = common::sha256_log_size();
    prove_and_verify(&engine, Workload::Sha256, k, 1).await;
    prove_and_verify(&engine, Workload::Sha256, k, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_public_input_is_a_clear_error_and_the_next_job_proves() {
    let engine = Engine::from_config(common::config("serial")).unwrap();
    let srs = common::srs(Workload::Chain, 10);
    let mut lying = ChainCircuit::new(10, Scalar::from(3u64));
    lying.output = Some(lying.output.unwrap() + Scalar::ONE);
    let job = Job::new(srs.clone())
        .partition(ChainCircuit::new(10, Scalar::from(2u64)))
        .partition(lying);
    let err = engine.submit(job).await.unwrap_err();
    match &err {
        ProveError::Partition {
            stage,
            partition,
            message,
            ..
        } => {
            assert_eq!((stage.as_str(), *partition), ("synth", 1));
            assert!(
                message.contains("constraint 1021 (`output`) is not satisfied"),
                "{message}"
            );
        }
        other => panic!("expected a partition error, got {other}"),
    }
    prove_and_verify(&engine, Workload::Chain, 10, 2).await;
    engine.idle().await;
    assert_eq!(
        engine.arena_stats().in_use,
        0,
        "the failed job's arenas came back"
    );
}

/// Claims y = x³ with a witness that is not.
#[derive(Clone)]
struct BadCube {
    x: Scalar,
    y: Scalar,
}

impl Circuit<Scalar> for BadCube {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let x = cs.alloc(|| "x", || Ok(self.x))?;
        let x2 = cs.alloc(|| "x2", || Ok(self.x.square()))?;
        let y = cs.alloc_input(|| "y", || Ok(self.y))?;
        cs.enforce(|| "square", |lc| lc + x, |lc| lc + x, |lc| lc + x2);
        cs.enforce(|| "cube", |lc| lc + x2, |lc| lc + x, |lc| lc + y);
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsatisfiable_witness_is_named_at_its_constraint() {
    let engine = Engine::from_config(common::config("serial")).unwrap();
    let params = {
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let blank = BadCube {
            x: Scalar::ONE,
            y: Scalar::ONE,
        };
        bellperson::groth16::generate_random_parameters::<blstrs::Bls12, _, _>(blank, &mut rng)
            .unwrap()
    };
    let srs = Arc::new(cuzk::stages::Srs::from_parameters(params));
    let good = BadCube {
        x: Scalar::from(3u64),
        y: Scalar::from(27u64),
    };
    let bad = BadCube {
        x: Scalar::from(3u64),
        y: Scalar::from(28u64),
    };
    let err = engine
        .submit(Job::new(srs.clone()).partition(bad))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains(
            "partition 0 failed in stage `synth`: constraint 1 (`cube`) is not satisfied"
        ),
        "{err}"
    );
    let out = engine
        .submit(Job::new(srs.clone()).partition(good))
        .await
        .unwrap();
    out.verify(&srs).unwrap();
    assert_eq!(out.partitions[0].public_inputs, [Scalar::from(27u64)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_size_srs_is_a_clear_error() {
    let engine = Engine::from_config(common::config("serial")).unwrap();
    let big = common::srs(Workload::Chain, 11);
    let err = engine
        .submit(Job::new(big).partition(ChainCircuit::new(10, Scalar::ONE)))
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("the circuit has 1022 auxiliary variables but the SRS expects 2046"),
        "{text}"
    );
    let small = common::srs(Workload::Chain, 10);
    let err = engine
        .submit(Job::new(small).partition(ChainCircuit::new(11, Scalar::ONE)))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("than the SRS allows"), "{err}");
    prove_and_verify(&engine, Workload::Chain, 10, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_job_releases_its_arenas_and_the_engine_goes_on() {
    let engine = Engine::from_config(common::config("serial")).unwrap();
    let (job, _) = workload_job(Workload::Chain, 12, 6, 9);
    let handle = engine.submit(job);
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    handle.cancel();
    assert!(matches!(handle.await, Err(ProveError::Cancelled)));
    engine.idle().await;
    let stats = engine.arena_stats();
    assert_eq!(stats.in_use, 0, "{stats:?}");
    assert!(stats.created <= stats.count);
    prove_and_verify(&engine, Workload::Chain, 10, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_verify_checks_before_returning() {
    let mut config = common::config("serial");
    config.engine.self_verify = true;
    let engine = Engine::from_config(config).unwrap();
    let (job, _) = workload_job(Workload::Chain, 10, 2, 5);
    let out = engine.submit(job).await.unwrap();
    let assemble = out.partitions[0].timings.last().unwrap();
    assert_eq!(assemble.note("verified"), Some("true"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_jobs_never_allocate_past_the_arena_pool() {
    let mut config = common::config("serial");
    config.arenas.count = 2;
    let engine = Engine::from_config(config).unwrap();
    let srs = common::srs(Workload::Chain, 10);
    let jobs: Vec<_> = (0..6)
        .map(|s| engine.submit(workload_job(Workload::Chain, 10, 3, 100 + s).0))
        .collect();
    for j in jobs {
        j.await.unwrap().verify(&srs).unwrap();
    }
    let stats = engine.arena_stats();
    assert_eq!(
        (stats.count, stats.created, stats.in_use),
        (2, 2, 0),
        "{stats:?}"
    );
}

#[test]
fn parameters_evicted_while_in_use_are_taken_back_not_read_twice() {
    use cuzk::srs_cache::SrsCache;
    let path = common::srs(Workload::Chain, 10)
        .path
        .clone()
        .expect("read from a file");
    let cache = SrsCache::new();
    let first = cache.get(&path).unwrap();
    let bytes = first.srs.memory_bytes();
    let evicted = cache.evict(&path).unwrap();
    assert!(Arc::ptr_eq(&evicted, &first.srs));
    drop(evicted);
    assert!(cache.entries().is_empty(), "no longer listed as loaded");
    assert_eq!(
        cache.resident_bytes(),
        bytes,
        "but counted while a job holds it"
    );
    let again = cache.get(&path).unwrap();
    assert!(
        Arc::ptr_eq(&again.srs, &first.srs) && again.load_time.is_zero(),
        "the copy in use is taken back, not read a second time"
    );
    drop((first, again));
    cache.evict(&path).unwrap();
    assert_eq!(cache.resident_bytes(), 0, "freed once nobody holds it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_too_large_for_an_arena_is_refused_at_submit_naming_the_sizes() {
    let mut config = common::config("serial");
    config.arenas.max_bytes = cuzk::config::ByteSize(64 << 10);
    let engine = Engine::from_config(config).unwrap();
    let (job, _) = workload_job(Workload::Chain, 10, 1, 2);
    let Err(err) = engine.try_submit(job) else {
        panic!("a 2^10 partition fits no 64 KiB arena, yet the job was taken");
    };
    let text = err.to_string();
    for want in [
        "domain 2^10",
        "arenas are limited to 0.1 MiB",
        "`arenas.max_bytes`",
    ] {
        assert!(text.contains(want), "`{want}` missing from: {text}");
    }
    // prove() refuses the same way, before any stage runs.
    let (job, _) = workload_job(Workload::Chain, 10, 1, 3);
    assert!(matches!(
        engine.prove(job).await,
        Err(ProveError::InvalidJob(_))
    ));
    assert_eq!(engine.arena_stats().created, 0, "no arena was made for it");

    // Derived (the default): the host's memory, so the same job proves.
    let engine = Engine::from_config(common::config("serial")).unwrap();
    assert!(engine.config().arenas.max_bytes.is_zero());
    prove_and_verify(&engine, Workload::Chain, 10, 1).await;
}
