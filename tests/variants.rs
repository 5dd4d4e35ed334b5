//! Every built-in graph declaration proves chain and sha256 jobs of several
//! partitions with several jobs in flight, and every proof verifies; so do
//! graphs declared in a file or inline in the config.

mod common;

use cuzk::Engine;
use cuzk::bench::{BenchSpec, job_for};
use cuzk::stages::Workload;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_builtin_graph_proves_chain_and_sha256_with_jobs_in_flight() {
    for variant in cuzk::pipelines::builtin_names() {
        let engine = Engine::from_config(common::config(variant)).unwrap();
        assert_eq!(engine.graph().name, variant);
        common::prove_in_flight(&engine, Workload::Chain, 10, 3, 3).await;
        common::prove_in_flight(&engine, Workload::Sha256, common::sha256_log_size(), 2, 2).await;
        engine.idle().await;
        assert_eq!(engine.arena_stats().in_use, 0, "{variant}");
        assert!(
            engine.status().leases.iter().all(|l| l.in_use == 0),
            "{variant}"
        );
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
        let graph = engine.graph();
        for p in &out.partitions {
            let devices: Vec<_> = p
                .timings
                .iter()
                .filter(|t| graph.node_named(&t.node).unwrap().role.on_device())
                .map(|t| t.device)
                .collect();
            assert!(devices.iter().all(|d| d.is_some_and(|d| d < 2)));
            assert!(
                devices.windows(2).all(|w| w[0] == w[1]),
                "a partition stays on one device through its device nodes: {devices:?}"
            );
        }
    }
}

/// A variant that exists only as a file: synthesis limited to one at a time
/// by a semaphore. It proves, from a file and declared inline in the config.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graph_declared_in_a_file_or_inline_proves() {
    let text = cuzk::pipelines::builtin("single_lock")
        .unwrap()
        .replace("name = \"single_lock\"", "name = \"one_synth\"")
        .replace(
            "[[resource]]\nname = \"gpu_lock\"",
            "[[resource]]\nname = \"synth_slots\"\nkind = \"semaphore\"\nsize = 1\n\n[[resource]]\nname = \"gpu_lock\"",
        )
        .replace(
            "pool = \"synth\"\ntakes = [\"arena\"]",
            "pool = \"synth\"\ntakes = [\"arena\"]\nholds = [\"synth_slots\"]",
        );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("one_synth.toml");
    std::fs::write(&path, &text).unwrap();
    let mut from_file = common::config("single_lock");
    from_file.pipeline.graph = Some(path);
    let mut inline = common::config("single_lock");
    inline.pipeline.declare = Some(toml::from_str(&text).unwrap());
    for config in [from_file, inline] {
        let engine = Engine::from_config(config).unwrap();
        assert_eq!(engine.graph().name, "one_synth");
        assert_eq!(
            engine.graph().node_named("synth").unwrap().holds,
            ["synth_slots"]
        );
        common::prove_in_flight(&engine, Workload::Chain, 10, 3, 2).await;
        engine.shutdown().await;
    }
}

/// The example config and every config in configs/ load and resolve a graph.
#[test]
fn the_shipped_configs_load() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("cuzk.example.toml")];
    for e in std::fs::read_dir(root.join("configs")).unwrap() {
        files.push(e.unwrap().path());
    }
    for f in files {
        let loaded =
            cuzk::config::load(Some(&f)).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let graph = cuzk::pipelines::graph(&loaded.config)
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        if let Some(stem) = f
            .file_stem()
            .filter(|_| f.parent().unwrap().ends_with("configs"))
        {
            assert_eq!(
                graph.name,
                stem.to_string_lossy(),
                "configs/ are named after their graph"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pce_gpu_on_the_cpu_backend_prepares_in_its_device_stage() {
    // pce_gpu declares no prep_msm node: its device stage (here the CPU)
    // makes each partition's MSM plan, exactly once.
    let engine = Engine::from_config(common::config("pce_gpu")).unwrap();
    assert!(engine.graph().node_named("prep_msm").is_none());
    let out =
        common::prove_in_flight(&engine, Workload::Sha256, common::sha256_log_size(), 3, 2).await;
    for p in out.iter().flat_map(|j| &j.partitions) {
        let planned: Vec<_> = p
            .timings
            .iter()
            .filter(|t| t.note("l").is_some())
            .map(|t| &*t.node)
            .collect();
        assert_eq!(planned, ["gpu_ntt_msm"]);
    }
    engine.shutdown().await;
}
