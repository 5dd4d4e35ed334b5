//! Full proofs from the GPU backend, under every interlock variant, verified
//! with bellperson's verifier. Skips, saying why, without a usable GPU.

mod common;

use cuzk::bench::{BenchSpec, job_for};
use cuzk::config::{Backend, ByteSize, Config, Variant};
use cuzk::stages::Workload;
use cuzk::{Engine, ProveError};

fn gpu_config(variant: Variant) -> Option<Config> {
    if let Err(why) = cuzk_gpu::device::usable_device() {
        eprintln!("skipping GPU test: {why}");
        return None;
    }
    let mut c = common::config(variant);
    c.gpu.backend = Backend::Gpu;
    c.threads.groth16 = 0;
    c.threads.synthesis = 0;
    Some(c)
}

/// Proves jobs in flight and checks both device stages ran on the GPU.
async fn prove(engine: &Engine, workload: Workload, log_size: u32, partitions: u64, jobs: usize) {
    for out in common::prove_in_flight(engine, workload, log_size, partitions, jobs).await {
        for p in &out.partitions {
            let gpu = p
                .timings
                .iter()
                .find(|t| t.node.starts_with("gpu"))
                .unwrap();
            assert_eq!(gpu.note("backend"), Some("gpu"), "{gpu:?}");
            let b_g2 = p.timings.iter().find(|t| &*t.node == "b_g2_msm").unwrap();
            assert_eq!(b_g2.note("backend"), Some("gpu"));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpu_proofs_verify_under_every_variant() {
    for variant in Variant::ALL {
        let Some(config) = gpu_config(variant) else {
            return;
        };
        let engine = Engine::from_config(config).unwrap();
        assert_eq!(engine.backend().name(), "gpu");
        prove(&engine, Workload::Chain, 12, 4, 2).await;
        prove(&engine, Workload::Sha256, common::sha256_log_size(), 3, 2).await;
        engine.idle().await;
        assert_eq!(engine.arena_stats().in_use, 0);
        engine.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpu_proofs_verify_with_b_g2_on_the_cpu_and_the_srs_streamed() {
    let Some(mut config) = gpu_config(Variant::TwoLock) else {
        return;
    };
    config.gpu.b_g2_on_gpu = false;
    config.gpu.srs_resident = false;
    let engine = Engine::from_config(config).unwrap();
    let srs = common::srs(Workload::Chain, 12);
    let spec = BenchSpec {
        workload: Workload::Chain,
        log_size: 12,
        partitions: 3,
        proofs: 1,
        in_flight: 1,
        seed: 4,
    };
    let out = engine.submit(job_for(&srs, &spec, 0).0).await.unwrap();
    out.verify(&srs).unwrap();
    let b_g2 = out.partitions[0]
        .timings
        .iter()
        .find(|t| &*t.node == "b_g2_msm")
        .unwrap();
    assert_eq!(b_g2.note("backend"), Some("cpu"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_out_of_device_memory_is_a_clear_error_and_the_engine_goes_on() {
    let Some(mut config) = gpu_config(Variant::Serial) else {
        return;
    };
    config.gpu.vram_budget = ByteSize::mib(1);
    let engine = Engine::from_config(config.clone()).unwrap();
    let srs = common::srs(Workload::Chain, 14);
    let spec = BenchSpec {
        workload: Workload::Chain,
        log_size: 14,
        partitions: 2,
        proofs: 1,
        in_flight: 1,
        seed: 8,
    };
    let err = engine.submit(job_for(&srs, &spec, 0).0).await.unwrap_err();
    match &err {
        ProveError::Partition { stage, message, .. } => {
            assert_eq!(stage, "gpu_ntt_msm");
            assert!(message.contains("gpu.vram_budget"), "{message}");
        }
        other => panic!("{other}"),
    }
    engine.idle().await;
    assert_eq!(engine.arena_stats().in_use, 0);
    // Small partitions still fit: the engine keeps serving.
    prove(&engine, Workload::Chain, 4, 2, 1).await;
}
