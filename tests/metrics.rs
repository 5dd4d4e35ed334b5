//! The Prometheus endpoint serves the engine's counters after a job.
//! Its own test binary: it installs the global metrics recorder.

mod common;

use std::time::Duration;

use cuzk::stages::Workload;
use cuzk::stages::workloads::ChainCircuit;
use cuzk::{Engine, Job};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn scrape(addr: std::net::SocketAddr) -> String {
    for _ in 0..100 {
        if let Ok(mut s) = tokio::net::TcpStream::connect(addr).await {
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                .await
                .unwrap();
            let mut body = String::new();
            s.read_to_string(&mut body).await.unwrap();
            return body;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the metrics endpoint never answered");
}

fn line<'a>(text: &'a str, name: &str, labels: &[&str]) -> Option<&'a str> {
    text.lines()
        .find(|l| l.starts_with(&format!("{name}{{")) && labels.iter().all(|x| l.contains(x)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_serves_counters_after_a_job() {
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    cuzk::metrics::serve(addr).unwrap();
    let engine = Engine::from_config(common::config("serial")).unwrap();
    let srs = common::srs(Workload::Chain, 10);
    let job = (0..3).fold(Job::new(srs.clone()).label("chain"), |job, p| {
        job.partition(Workload::Chain.instance(10, p).circuit)
    });
    engine.submit(job).await.unwrap().verify(&srs).unwrap();
    let mut bad = ChainCircuit::new(10, blstrs::Scalar::from(5u64));
    bad.output = Some(blstrs::Scalar::from(6u64));
    assert!(
        engine
            .submit(Job::new(srs).label("chain").partition(bad))
            .await
            .is_err()
    );
    engine.idle().await;
    tokio::time::sleep(Duration::from_millis(100)).await;

    let text = scrape(addr).await;
    let completed = line(
        &text,
        "cuzk_proofs_completed_total",
        &["workload=\"chain\"", "variant=\"serial\""],
    );
    assert!(completed.is_some_and(|l| l.ends_with(" 1")), "{text}");
    let failed = line(
        &text,
        "cuzk_proofs_failed_total",
        &["workload=\"chain\"", "variant=\"serial\""],
    );
    assert!(failed.is_some_and(|l| l.ends_with(" 1")), "{text}");
    for stage in ["synth", "prep_msm", "gpu_ntt_msm", "b_g2_msm", "assemble"] {
        assert!(
            line(
                &text,
                "cuzk_stage_duration_seconds_count",
                &[&format!("stage=\"{stage}\"")]
            )
            .is_some(),
            "{stage} histogram: {text}"
        );
    }
    assert!(
        line(&text, "cuzk_channel_depth", &["edge=\"into_gpu_ntt_msm\""]).is_some(),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.starts_with("cuzk_arenas_in_use 0")),
        "{text}"
    );
    assert!(
        line(
            &text,
            "cuzk_device_busy_microseconds_total",
            &["device=\"0\""]
        )
        .is_some(),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("cuzk_partitions_completed_total 3")),
        "{text}"
    );
}
