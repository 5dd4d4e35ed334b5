//! Spans reach a real OTLP/gRPC receiver (fake-opentelemetry-collector runs
//! one in-process) as job -> partition -> stage, with their attributes.
//! Its own test binary: it installs the global tracing subscriber.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use cuzk::runtime::SpanObserver;
use cuzk::stages::Workload;
use cuzk::{Engine, EngineOptions, Job};
use fake_opentelemetry_collector::{ExportedSpan, FakeCollectorServer};

/// An attribute's value; the collector stores them as debug strings of OTLP
/// `AnyValue`s, like `Some(AnyValue { value: Some(IntValue(2)) })`.
fn attr(span: &ExportedSpan, key: &str) -> Option<String> {
    let raw = span.attributes.get(key)?;
    let inner = raw.rsplit_once("Value(").map_or(raw.as_str(), |(_, v)| v);
    Some(
        inner
            .trim_end_matches(')')
            .trim_end_matches(" }")
            .trim_end_matches(')')
            .trim_matches('"')
            .to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_arrive_with_parent_links_and_attributes() {
    let mut collector = FakeCollectorServer::start().await.unwrap();
    let mut config = common::config("single_lock");
    config.tracing.otlp = true;
    config.tracing.endpoint = collector.endpoint();
    config.tracing.service_name = "cuzk-test".into();
    let telemetry = cuzk::telemetry::init(&config).unwrap();
    let options = EngineOptions {
        observers: vec![Arc::new(SpanObserver::new())],
        ..Default::default()
    };
    let engine = Engine::with_options(config, options).unwrap();
    let srs = common::srs(Workload::Chain, 10);
    let job = (0..2).fold(Job::new(srs.clone()).label("chain"), |job, p| {
        job.partition(Workload::Chain.instance(10, 40 + p).circuit)
    });
    engine.submit(job).await.unwrap().verify(&srs).unwrap();
    engine.shutdown().await;
    drop(engine);
    tokio::task::spawn_blocking(move || telemetry.shutdown())
        .await
        .unwrap();

    let spans = collector.exported_spans(13, Duration::from_secs(20)).await;
    let by_name = |n: &str| {
        spans
            .iter()
            .filter(|s| s.name == n)
            .collect::<Vec<&ExportedSpan>>()
    };
    let jobs = by_name("job chain");
    assert_eq!(
        jobs.len(),
        1,
        "names: {:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    let job = jobs[0];
    assert_eq!(job.parent_span_id, "", "the job is a root span");
    assert_eq!(attr(job, "partitions").as_deref(), Some("2"));
    let partitions = by_name("partition");
    assert_eq!(partitions.len(), 2);
    let mut partition_ids = HashMap::new();
    for p in &partitions {
        assert_eq!(p.parent_span_id, job.span_id, "partition under job");
        assert_eq!(p.trace_id, job.trace_id);
        partition_ids.insert(p.span_id.clone(), attr(p, "partition").unwrap());
    }
    for stage in ["synth", "prep_msm", "gpu_ntt_msm", "b_g2_msm", "assemble"] {
        let runs = by_name(stage);
        assert_eq!(runs.len(), 2, "{stage}: one span per partition");
        for s in runs {
            let partition = &partition_ids[&s.parent_span_id];
            assert_eq!(
                &attr(s, "partition").unwrap(),
                partition,
                "stage under its partition"
            );
            assert_eq!(attr(s, "stage").unwrap(), stage);
            assert_eq!(attr(s, "job"), attr(job, "job"));
            assert!(s.attributes.contains_key("worker"));
            assert!(s.start_time_unix_nano <= s.end_time_unix_nano);
        }
    }
    let gpu = &by_name("gpu_ntt_msm")[0];
    assert_eq!(attr(gpu, "backend").unwrap(), "cpu");
    assert!(attr(gpu, "points").unwrap().parse::<usize>().unwrap() > 0);
    assert_eq!(attr(gpu, "device").unwrap(), "0");
    assert_eq!(attr(by_name("synth")[0], "constraints").unwrap(), "1024");
    // Only the engine's spans: nothing from the exporter's own stack.
    assert!(
        spans.iter().all(|s| [
            "job chain",
            "partition",
            "synth",
            "prep_msm",
            "gpu_ntt_msm",
            "b_g2_msm",
            "assemble"
        ]
        .contains(&s.name.as_str())
            || s.name.starts_with("wait ")),
        "{:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
}
