//! TIMELINE events of real jobs: matched START/END pairs for every stage and
//! partition, ordered offsets, and the details the waterfall needs.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use cuzk::bench::{BenchSpec, job_for};
use cuzk::runtime::TimelineWriter;
use cuzk::stages::Workload;
use cuzk::waterfall::parse::parse;
use cuzk::{Engine, EngineOptions};

async fn record(variant: &str, partitions: u64, jobs: usize) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("timeline.log");
    let writer = Arc::new(TimelineWriter::file(&path).unwrap());
    let options = EngineOptions {
        observers: vec![writer.clone()],
        ..Default::default()
    };
    let engine = Engine::with_options(common::config(variant), options).unwrap();
    let srs = common::srs(Workload::Chain, 10);
    let spec = BenchSpec {
        workload: Workload::Chain,
        log_size: 10,
        partitions,
        proofs: jobs,
        in_flight: jobs,
        seed: 3,
    };
    let handles: Vec<_> = (0..jobs)
        .map(|i| engine.submit(job_for(&srs, &spec, i).0))
        .collect();
    for h in handles {
        h.await.unwrap().verify(&srs).unwrap();
    }
    engine.shutdown().await;
    drop(engine);
    drop(writer);
    std::fs::read_to_string(&path).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_stage_of_every_partition_has_a_matched_start_and_end() {
    let text = record("single_lock", 4, 2).await;
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines.iter().all(|l| l.starts_with("TIMELINE,")),
        "only TIMELINE lines"
    );
    let records = parse(&text);
    // Offsets are written in order (no stage here times device work itself).
    let offsets: Vec<f64> = lines
        .iter()
        .map(|l| l.split(',').nth(1).unwrap().parse().unwrap())
        .collect();
    assert!(
        offsets.windows(2).all(|w| w[0] <= w[1]),
        "offsets are ordered"
    );

    let mut open: HashMap<(String, String, String), f64> = HashMap::new();
    let mut pairs: HashMap<String, usize> = HashMap::new();
    for r in &records {
        let p = r.partition().unwrap_or("-").to_string();
        if r.event == "JOB_END" || r.event == "PARTITION_END" {
            continue; // endpoints, not stage pairs
        }
        if let Some(base) = r.event.strip_suffix("_START") {
            assert!(
                open.insert((base.into(), r.job.clone(), p), r.t_ms)
                    .is_none(),
                "{r:?} opened twice"
            );
        } else if let Some(base) = r.event.strip_suffix("_END") {
            let start = open
                .remove(&(base.into(), r.job.clone(), p))
                .unwrap_or_else(|| panic!("{r:?} has no start"));
            assert!(start <= r.t_ms);
            *pairs.entry(base.to_string()).or_default() += 1;
        }
    }
    assert!(open.is_empty(), "unmatched starts: {open:?}");
    for stage in ["SYNTH", "PREP", "GPU", "B_G2", "ASSEMBLE"] {
        assert_eq!(pairs.get(stage), Some(&8), "{stage}: 2 jobs x 4 partitions");
    }
    assert_eq!(pairs.get("JOB"), None);
    let count = |e: &str| records.iter().filter(|r| r.event == e).count();
    assert_eq!(
        (
            count("JOB_SUBMIT"),
            count("JOB_END"),
            count("PARTITION_END")
        ),
        (2, 2, 8)
    );
    assert_eq!((count("GPU_QUEUE"), count("GPU_PICKUP")), (8, 8));
    for r in records.iter().filter(|r| r.event == "GPU_END") {
        assert_eq!(r.get("backend"), Some("cpu"));
        assert_eq!(r.get("role"), Some("device"), "roles are in every detail");
        assert_eq!(r.device(), Some("0"));
        assert!(
            r.worker().is_some() && r.get("duration_ms").is_some(),
            "{r:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_waits_are_recorded_where_workers_contend() {
    let text = record("single_lock", 6, 2).await;
    let records = parse(&text);
    let starts = records
        .iter()
        .filter(|r| r.event == "LOCK_WAIT_START")
        .count();
    let ends: Vec<_> = records
        .iter()
        .filter(|r| r.event == "LOCK_WAIT_END")
        .collect();
    assert_eq!(starts, ends.len());
    assert!(
        starts > 0,
        "two GPU workers on one lock wait for each other"
    );
    assert!(
        ends.iter()
            .all(|r| r.get("lock") == Some("gpu_lock") && r.get("waited_ms").is_some())
    );
}
