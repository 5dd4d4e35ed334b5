//! Full proofs from the GPU backend, under every interlock variant, verified
//! with bellperson's verifier. Skips, saying why, without a usable GPU.

mod common;

use cuzk::bench::{BenchSpec, job_for};
use cuzk::config::{Backend, ByteSize, Config};
use cuzk::stages::Workload;
use cuzk::stages::partition::PartitionLayout;
use cuzk::{Engine, ProveError};

fn gpu_config(variant: &str) -> Option<Config> {
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

/// One chain job of `partitions` partitions of 2^`log_size`.
fn chain_job(
    srs: &std::sync::Arc<cuzk::stages::Srs>,
    log_size: u32,
    partitions: u64,
    seed: u64,
) -> cuzk::Job {
    let spec = BenchSpec {
        workload: Workload::Chain,
        log_size,
        partitions,
        proofs: 1,
        in_flight: 1,
        seed,
    };
    job_for(srs, &spec, 0).0
}

/// Proves jobs in flight and checks every device-role node ran on the GPU
/// and every other node on the CPU.
async fn prove(engine: &Engine, workload: Workload, log_size: u32, partitions: u64, jobs: usize) {
    let graph = engine.graph().clone();
    // Under synth_witness, every partition not synthesized in full (the one
    // that records) has its a, b and c evaluated on the device.
    let witness = graph.nodes.iter().any(|n| n.stage == "synth_witness");
    let (mut recorded, mut on_device) = (0, 0);
    for out in common::prove_in_flight(engine, workload, log_size, partitions, jobs).await {
        for p in &out.partitions {
            for t in &p.timings {
                recorded += usize::from(t.note("pce") == Some("recorded"));
                on_device += usize::from(t.note("abc") == Some("device"));
                let node = graph.node_named(&t.node).unwrap();
                if node.role.on_device() {
                    assert_eq!(t.note("backend"), Some("gpu"), "{}: {t:?}", graph.name);
                } else if t.note("backend").is_some() {
                    assert_eq!(t.note("backend"), Some("cpu"), "{}: {t:?}", graph.name);
                }
            }
        }
    }
    let partitions = partitions as usize * jobs;
    let expected = if witness { partitions - recorded } else { 0 };
    assert_eq!(
        on_device, expected,
        "{}: a, b, c evaluated on the device",
        graph.name
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpu_proofs_verify_under_every_variant() {
    for variant in cuzk::pipelines::builtin_names() {
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
    let Some(mut config) = gpu_config("single_lock_cpu_b2") else {
        return;
    };
    config.gpu.srs_resident = false;
    let engine = Engine::from_config(config).unwrap();
    let srs = common::srs(Workload::Chain, 12);
    let out = engine.submit(chain_job(&srs, 12, 3, 4)).await.unwrap();
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
    let Some(mut config) = gpu_config("serial") else {
        return;
    };
    config.gpu.vram_budget = ByteSize::mib(1);
    let engine = Engine::from_config(config.clone()).unwrap();
    let srs = common::srs(Workload::Chain, 14);
    let err = engine.submit(chain_job(&srs, 14, 2, 8)).await.unwrap_err();
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

/// A device budget that holds the resident SRS and one partition's buffers
/// but not two, with two device leases (as a 32 GiB PoRep on an 80 GB card):
/// the second partition waits for the first's buffers instead of failing,
/// and every proof verifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_waits_for_the_device_memory_partitions_in_flight_hold() {
    let Some(mut config) = gpu_config("pce_gpu") else {
        return;
    };
    let (log_size, partitions) = (14, 4);
    let srs = common::srs(Workload::Chain, log_size);
    let buffers = cuzk::stages::gpu::partition_device_bytes(&srs.shape(), false);
    let matrices = 64 << 20;
    config.gpu.msm_tables = false;
    let budget = cuzk::stages::gpu::srs_device_bytes(&srs) + buffers * 3 / 2 + matrices;
    config.gpu.vram_budget = ByteSize(budget as u64);
    let engine = Engine::from_config(config).unwrap();
    for seed in 0..2 {
        let out = engine
            .submit(chain_job(&srs, log_size, partitions, seed))
            .await
            .unwrap();
        out.verify(&srs).unwrap();
    }
    no_partition_failed(&engine);
    engine.shutdown().await;
}

/// No device was quarantined and no partition failed or moved: waiting for
/// memory, or giving tables up for it, is not a fault.
fn no_partition_failed(engine: &Engine) {
    let status = engine.status();
    assert!(
        status.quarantined_devices.is_empty(),
        "waiting is not a fault"
    );
    let retried: u64 = status.nodes.iter().map(|n| n.retried + n.failed).sum();
    assert_eq!(
        retried, 0,
        "no partition failed or moved: {:?}",
        status.nodes
    );
}

/// MSM tables are a cache: where they hold the memory a partition's buffers
/// and the pre-compiled matrices need (a daemon whose WinningPoSt SRS took
/// the room a 32 GiB PoRep's matrices need), the device gives them up, and
/// a, b and c are still evaluated on the device, never on the host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn msm_tables_give_way_to_partition_buffers_and_matrices() {
    let Some(mut config) = gpu_config("pce_gpu") else {
        return;
    };
    let (log_size, partitions) = (14, 4);
    let srs = common::srs(Workload::Chain, log_size);
    let buffers = cuzk::stages::gpu::partition_device_bytes(&srs.shape(), false);
    let lengths = srs.query_lens();
    // Every copy of every query's table, and a MiB beside it: nothing else
    // fits until the tables go.
    let tables = cuzk::stages::gpu::planned_bytes(
        lengths,
        &cuzk::stages::gpu::plan_tables(lengths, usize::MAX),
    );
    let matrices = 64 << 20;
    assert!(
        tables > buffers + matrices,
        "the tables ({tables} bytes) hold the room of a partition's buffers ({buffers}) and the matrices"
    );
    config.gpu.msm_tables = true;
    config.gpu.msm_table_budget = ByteSize(tables as u64);
    config.gpu.partition_buffers = cuzk::config::PartitionBuffers::Full;
    let srs_bytes = cuzk::stages::gpu::srs_device_bytes(&srs);
    config.gpu.vram_budget = ByteSize((srs_bytes + tables + (1 << 20)) as u64);
    let engine = Engine::from_config(config).unwrap();
    let mut sources = Vec::new();
    for seed in 0..2 {
        let out = engine
            .submit(chain_job(&srs, log_size, partitions, seed))
            .await
            .unwrap();
        out.verify(&srs).unwrap();
        let notes = out.partitions.iter().flat_map(|p| &p.timings);
        sources.extend(notes.filter_map(|t| t.note("abc_source").map(str::to_string)));
    }
    assert_eq!(sources.len(), 2 * partitions as usize, "{sources:?}");
    assert!(
        sources.iter().all(|s| s != "host") && sources.iter().any(|s| s == "device"),
        "a, b and c from the matrices on the device: {sources:?}"
    );
    no_partition_failed(&engine);
    engine.shutdown().await;
}

/// Proves two sha256 jobs of three partitions under `config` (every proof
/// verified) and checks each partition was staged once, noting `srs` and
/// `buffers`, holding its buffers (`compact` or full) and `chunks` bytes.
async fn prove_staged(config: Config, srs_note: &str, buffers: &str, compact: bool, chunks: usize) {
    let variant = config.pipeline.variant.clone();
    let engine = Engine::from_config(config).unwrap();
    let log = common::sha256_log_size();
    let out = common::prove_in_flight(&engine, Workload::Sha256, log, 3, 2).await;
    let srs = common::srs(Workload::Sha256, log);
    // The partition's buffers and the chunks: nothing for a streamed SRS.
    let held = cuzk::stages::gpu::partition_device_bytes(&srs.shape(), compact) + chunks;
    let mut staged = 0;
    for t in out
        .iter()
        .flat_map(|j| &j.partitions)
        .flat_map(|p| &p.timings)
    {
        if let Some(bytes) = t.note("device_bytes") {
            assert_eq!(t.note("srs"), Some(srs_note), "{variant}: {t:?}");
            assert_eq!(t.note("buffers"), Some(buffers), "{variant}: {t:?}");
            assert_eq!(bytes.parse::<usize>().unwrap(), held, "{variant}: {t:?}");
            staged += 1;
        }
    }
    assert_eq!(staged, 6, "{variant}: every partition staged once");
    engine.idle().await;
    assert_eq!(engine.arena_stats().in_use, 0);
    engine.shutdown().await;
}

/// An SRS left in host memory streams through chunk buffers far smaller
/// than any query (64 KiB: about 680 G1 points, 340 in G2), so every MSM
/// kind crosses chunk edges: dense parts, gathered tails and ones, from
/// lists packed on the host (single_lock) and on the device (pce_gpu), on
/// sha256's bit-heavy witness. Every proof verifies, and a partition holds
/// its buffers and the two chunks, no device memory for the SRS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn msms_stream_srs_points_through_small_chunks_and_proofs_verify() {
    for variant in ["single_lock", "pce_gpu"] {
        let Some(mut config) = gpu_config(variant) else {
            return;
        };
        config.gpu.srs_resident = false;
        config.gpu.stream_chunk = ByteSize(64 << 10);
        prove_staged(config, "streamed", "full", false, 2 * (64 << 10)).await;
    }
}

/// Compact partition buffers (two domain-sized buffers that a, b and c
/// pass through, the assignment after them), as a card smaller than a
/// partition's full buffers gets: proofs verify under single_lock (lists
/// from the host), pce_gpu (lists and a, b, c left to the device stage,
/// evaluated on the host) and two_lock (staging and compute apart), and
/// with the SRS streamed through small chunks too, as on a 16 GB card.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_partition_buffers_prove_under_every_kind_of_staging() {
    for (variant, streamed) in [
        ("single_lock", false),
        ("pce_gpu", false),
        ("two_lock", false),
        ("pce_gpu", true),
    ] {
        let Some(mut config) = gpu_config(variant) else {
            return;
        };
        config.gpu.partition_buffers = cuzk::config::PartitionBuffers::Compact;
        let (srs, chunks) = match streamed {
            true => {
                config.gpu.srs_resident = false;
                config.gpu.stream_chunk = ByteSize(64 << 10);
                ("streamed", 2 * (64 << 10))
            }
            false => ("resident", 0),
        };
        prove_staged(config, srs, "compact", true, chunks).await;
    }
}

/// pce_gpu with the matrices kept off the device (`gpu.pce_matrices`, as
/// when they do not fit): partitions synthesized witness-only (no room for
/// a, b and c in their arenas) have them evaluated on the host by the device
/// stage, and every proof verifies. The recording is made by at most one
/// partition, in full, or read from beside the parameters where an earlier
/// engine left it (then no partition synthesizes in full).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pce_gpu_without_matrices_on_the_device_evaluates_abc_on_the_host() {
    let Some(mut config) = gpu_config("pce_gpu") else {
        return;
    };
    config.gpu.pce_matrices = false;
    let engine = Engine::from_config(config).unwrap();
    let log_size = common::sha256_log_size();
    let out = common::prove_in_flight(&engine, Workload::Sha256, log_size, 3, 2).await;
    let shape = common::srs(Workload::Sha256, log_size).shape();
    let (full, witness_only) = (
        PartitionLayout::new(shape).bytes,
        PartitionLayout::witness_only(shape).bytes,
    );
    assert!(witness_only < full);
    let note = |p: &cuzk::PartitionProof, stage: &str, key: &str| {
        p.timings
            .iter()
            .filter(|t| stage.is_empty() || &*t.node == stage)
            .find_map(|t| t.note(key).map(str::to_string))
    };
    let (mut deferred, mut whole) = (0, 0);
    for p in out.iter().flat_map(|j| &j.partitions) {
        let arena: usize = note(p, "synth", "arena_bytes").unwrap().parse().unwrap();
        let abc = note(p, "", "abc_source");
        if note(p, "synth", "abc").as_deref() == Some("device") {
            deferred += 1;
            assert_eq!(arena, witness_only, "a, b, c left out of the arena");
            assert_eq!(abc.as_deref(), Some("host"), "no matrices on the device");
        } else {
            whole += 1;
            assert_eq!(arena, full, "synthesized in full");
            assert_eq!(abc.as_deref(), Some("synthesis"));
        }
    }
    assert!(whole <= 1, "{whole} partitions synthesized in full");
    assert!(
        deferred >= 5,
        "{deferred} of 6 partitions left a, b, c to the device stage"
    );
    engine.idle().await;
    assert_eq!(engine.arena_stats().in_use, 0);
}

/// Each partition's MSM plan, as noted ("l", "a", "b": dense or packed, and
/// the ones, significant and zero terms), with where it was made.
fn plans(out: &[cuzk::JobProofs]) -> (Vec<[String; 3]>, usize) {
    let (mut plans, mut on_device) = (vec![], 0);
    for job in out {
        for p in &job.partitions {
            let t = p
                .timings
                .iter()
                .find(|t| t.note("l").is_some())
                .expect("a stage noted the plan");
            on_device += usize::from(t.note("prep") == Some("device"));
            plans.push(["l", "a", "b"].map(|q| t.note(q).unwrap().to_string()));
        }
    }
    (plans, on_device)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prep_on_the_device_plans_what_prep_msm_plans_on_the_host() {
    // chain's aux terms are dense, sha256's packed (ones, zeros, significant).
    for (workload, log_size) in [
        (Workload::Chain, 12),
        (Workload::Sha256, common::sha256_log_size()),
    ] {
        let mut got = vec![];
        for variant in ["pce", "pce_gpu"] {
            let Some(config) = gpu_config(variant) else {
                return;
            };
            let engine = Engine::from_config(config).unwrap();
            let out = common::prove_in_flight(&engine, workload, log_size, 3, 2).await;
            got.push(plans(&out));
            engine.shutdown().await;
        }
        assert_eq!(got[0].1, 0, "pce prepares on the host");
        assert_eq!(
            got[1].1, 6,
            "pce_gpu prepares every partition on the device"
        );
        assert_eq!(got[0].0, got[1].0, "{workload:?}: the same plans");
    }
}

/// With tables beside the resident SRS, chain's H and dense L, A and B₁ MSMs
/// run on them (four per partition in gpu_ntt_msm) and its B₂ (one in
/// b_g2_msm); with `gpu.msm_tables` off none does. Proofs verify either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn msm_tables_serve_the_dense_msms_and_proofs_verify_without_them() {
    for tables in [true, false] {
        let Some(mut config) = gpu_config("serial") else {
            return;
        };
        config.gpu.msm_tables = tables;
        let engine = Engine::from_config(config).unwrap();
        let srs = common::srs(Workload::Chain, 12);
        let out = engine.submit(chain_job(&srs, 12, 3, 9)).await.unwrap();
        out.verify(&srs).unwrap();
        let on_tables = |node: &str| -> usize {
            out.partitions
                .iter()
                .map(|p| {
                    let t = p.timings.iter().find(|t| &*t.node == node).unwrap();
                    t.note("msm_tables").unwrap().parse::<usize>().unwrap()
                })
                .sum()
        };
        let expected = if tables { (4 * 3, 3) } else { (0, 0) };
        assert_eq!(
            (on_tables("gpu_ntt_msm"), on_tables("b_g2_msm")),
            expected,
            "MSMs on tables (msm_tables = {tables})"
        );
        engine.shutdown().await;
    }
}

/// pce_gpu's a, b and c, evaluated on the device from the recording, equal
/// the host's evaluation bit for bit: chain, and sha256 with the gadget's
/// witness and with its native one.
#[test]
fn abc_evaluated_on_the_device_equal_the_hosts_bit_for_bit() {
    use cuzk::stages::ProvableCircuit;
    use cuzk::stages::circuit::Native;
    if gpu_config("pce_gpu").is_none() {
        return;
    }
    let sha = common::sha256_log_size();
    for (name, workload, log_size, native) in [
        ("chain", Workload::Chain, 12, false),
        ("sha256", Workload::Sha256, sha, false),
        ("sha256 native", Workload::Sha256, sha, true),
    ] {
        let make = || -> Box<dyn ProvableCircuit> {
            let circuit = workload.instance(log_size, 7).circuit;
            if native {
                Box::new(Native(circuit))
            } else {
                Box::new(circuit)
            }
        };
        let report = cuzk::stages::measure::measure(make, 1, false).unwrap();
        let device = report
            .device
            .expect("a usable GPU measures the device's evaluation");
        assert!(
            device.equal_to_host,
            "{name}: a, b, c from the device differ from the host's"
        );
    }
}
