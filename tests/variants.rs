//! Every interlock variant proves chain and sha256 jobs of several
//! partitions with several jobs in flight, and every proof verifies.

mod common;

use cuzk::Engine;
use cuzk::bench::{BenchSpec, job_for};
use cuzk::stages::Workload;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_variant_proves_chain_and_sha256_with_jobs_in_flight() {
    for variant in cuzk::pipelines::builtin_names() {
        let engine = Engine::from_config(common::config(variant)).unwrap();
        assert_eq!(engine.graph().name, variant);
        common::prove_in_flight(&engine, Workload::Chain, 10, 3, 3).await;
        common::prove_in_flight(&engine, Workload::Sha256, common::sha256_log_size(), 2, 2).await;
        engine.idle().await;
        assert_eq!(engine.arena_stats().in_use, 0, "{variant}");
        engine.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn variants_run_on_several_logical_devices() {
    for variant in ["single_lock", "two_lock"] {
        let mut config = common::config(variant);
        config.gpu.logical_devices = 2;
        let engine = Engine::from_config(config).unwrap();
        let srs = common::srs(Workload::Chain, 10);
        let spec = BenchSpec {
            workload: Workload::Chain,
            log_size: 10,
            partitions: 6,
            proofs: 1,
            in_flight: 1,
            seed: 5,
        };
        let out = engine.submit(job_for(&srs, &spec, 0).0).await.unwrap();
        out.verify(&srs).unwrap();
        let gpu_node = if variant == "two_lock" {
            "gpu_compute"
        } else {
            "gpu_ntt_msm"
        };
        for p in &out.partitions {
            let t = p.timings.iter().find(|t| &*t.node == gpu_node).unwrap();
            assert!(t.device.is_some_and(|d| d < 2));
        }
    }
}
