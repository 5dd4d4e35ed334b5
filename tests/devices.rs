//! One engine drives several devices: the CPU backend presented as 2 and 4
//! logical devices. Partitions of one job spread across devices; a device
//! that fails has its partitions retried on the others; timelines and
//! metrics name the device.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use cuzk::bench::{BenchSpec, job_for};
use cuzk::runtime::TimelineWriter;
use cuzk::stages::Workload;
use cuzk::waterfall::parse::parse;
use cuzk::{Engine, EngineOptions, ProveError};

fn spec(partitions: u64) -> BenchSpec {
    BenchSpec {
        workload: Workload::Chain,
        log_size: 10,
        partitions,
        proofs: 1,
        in_flight: 1,
        seed: 77,
    }
}

/// The devices the GPU node ran each partition on, in partition order.
fn devices_of(out: &cuzk::JobProofs, node: &str) -> Vec<usize> {
    out.partitions
        .iter()
        .map(|p| {
            p.timings
                .iter()
                .find(|t| &*t.node == node)
                .unwrap()
                .device
                .unwrap()
        })
        .collect()
}

/// The first node of the graph that does device work (found by role, whatever it is called).
fn device_node(engine: &Engine) -> String {
    let g = engine.graph();
    let chain = g.validate().unwrap();
    chain
        .order
        .iter()
        .map(|&i| &g.nodes[i])
        .find(|n| n.role == cuzk::runtime::Role::Device)
        .unwrap()
        .name
        .clone()
}

async fn engine(
    variant: &str,
    devices: usize,
    faulty: &[usize],
) -> (Engine, tempfile::TempDir, Arc<TimelineWriter>) {
    let mut config = common::config(variant);
    config.gpu.logical_devices = devices;
    let dir = tempfile::tempdir().unwrap();
    let timeline = Arc::new(TimelineWriter::file(&dir.path().join("t.log")).unwrap());
    let options = EngineOptions {
        observers: vec![timeline.clone()],
        inject_device_faults: faulty.to_vec(),
        ..Default::default()
    };
    (
        Engine::with_options(config, options).unwrap(),
        dir,
        timeline,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_of_one_job_spread_over_2_and_4_devices() {
    for (variant, devices) in [("single_lock", 2), ("two_lock", 4), ("serial", 4)] {
        let (engine, dir, _t) = engine(variant, devices, &[]).await;
        assert_eq!(engine.backend().devices, devices);
        let srs = common::srs(Workload::Chain, 10);
        let out = engine.submit(job_for(&srs, &spec(12), 0).0).await.unwrap();
        out.verify(&srs).unwrap();
        let node = &device_node(&engine);
        let used: BTreeSet<usize> = devices_of(&out, node).into_iter().collect();
        assert!(
            used.len() > 1,
            "{variant} on {devices} devices used {used:?}"
        );
        assert!(used.iter().all(|&d| d < devices));
        engine.shutdown().await;
        let log = std::fs::read_to_string(dir.path().join("t.log")).unwrap();
        let seen: BTreeSet<&str> = parse(&log)
            .iter()
            .filter(|r| r.event == "GPU_START")
            .filter_map(|r| r.device())
            .map(|d| if d == "0" { "0" } else { "other" })
            .collect();
        assert_eq!(
            seen.len(),
            2,
            "TIMELINE GPU events carry device= for several devices"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_device_has_its_partitions_retried_on_the_others() {
    for (variant, devices, faulty) in [
        ("single_lock", 2, vec![1]),
        ("two_lock", 4, vec![1, 3]),
        ("throttled", 4, vec![0]),
    ] {
        let (engine, dir, _t) = engine(variant, devices, &faulty).await;
        let srs = common::srs(Workload::Chain, 10);
        let out = engine.submit(job_for(&srs, &spec(10), 1).0).await.unwrap();
        out.verify(&srs).unwrap();
        let node = &device_node(&engine);
        assert!(
            devices_of(&out, node).iter().all(|d| !faulty.contains(d)),
            "{variant}: every partition finished on a healthy device"
        );
        engine.shutdown().await;
        let log = std::fs::read_to_string(dir.path().join("t.log")).unwrap();
        let faults: Vec<_> = parse(&log)
            .into_iter()
            .filter(|r| r.event == "DEVICE_FAULT")
            .collect();
        assert!(
            !faults.is_empty(),
            "{variant}: the faulty devices got work and failed it"
        );
        for f in &faults {
            let d: usize = f.device().unwrap().parse().unwrap();
            assert!(faulty.contains(&d), "only injected devices fault: {f:?}");
            assert!(f.get("error").unwrap().contains("injected fault"));
        }
        let retried: u64 = engine.status().nodes.iter().map(|n| n.retried).sum();
        assert_eq!(retried as usize, faults.len());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_every_device_fails_the_job_fails_clearly_and_the_engine_goes_on() {
    let (engine, _dir, _t) = engine("single_lock", 2, &[0, 1]).await;
    let srs = common::srs(Workload::Chain, 10);
    let err = engine
        .submit(job_for(&srs, &spec(3), 2).0)
        .await
        .unwrap_err();
    match err {
        ProveError::Partition { stage, message, .. } => {
            assert_eq!(stage, "gpu_ntt_msm");
            assert!(
                message.contains("device") && message.contains("injected fault"),
                "{message}"
            );
        }
        other => panic!("{other}"),
    }
    engine.idle().await;
    assert_eq!(engine.arena_stats().in_use, 0);
}

/// A device whose stages keep faulting is quarantined after three faults in
/// a row: the jobs after it never try it again (each partition no longer
/// pays a failed attempt before its retry), and the engine's status names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_that_keeps_faulting_is_quarantined_and_gets_no_more_work() {
    let (engine, dir, _t) = engine("single_lock", 2, &[1]).await;
    let srs = common::srs(Workload::Chain, 10);
    let faults = || {
        let log = std::fs::read_to_string(dir.path().join("t.log")).unwrap();
        parse(&log)
            .iter()
            .filter(|r| r.event == "DEVICE_FAULT")
            .count()
    };
    let out = engine.submit(job_for(&srs, &spec(10), 1).0).await.unwrap();
    out.verify(&srs).unwrap();
    let after_first = faults();
    assert!(after_first >= 3, "device 1 faulted {after_first} times");
    assert_eq!(engine.status().quarantined_devices, [1]);
    for seed in 2..4 {
        let out = engine
            .submit(job_for(&srs, &spec(10), seed).0)
            .await
            .unwrap();
        out.verify(&srs).unwrap();
        assert!(
            devices_of(&out, &device_node(&engine))
                .iter()
                .all(|&d| d == 0)
        );
    }
    assert_eq!(
        faults(),
        after_first,
        "the quarantined device got no partition"
    );
    engine.shutdown().await;
}
