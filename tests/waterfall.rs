//! `cuzk waterfall`: figures checked against hand-computed values on small
//! synthetic logs (ours and the seeds' format), and the files it writes.

use std::process::Command;

use cuzk::waterfall::from_log;

/// Two partitions; GPU busy 100-300 and 400-600 ms; the log spans 0-700 ms.
const OURS: &str = "\
TIMELINE,0.000,JOB_SUBMIT,1,partitions=2,label=chain
TIMELINE,0.000,SYNTH_START,1,partition=0,worker=0,stage=synth
TIMELINE,0.000,SYNTH_START,1,partition=1,worker=1,stage=synth
TIMELINE,100.000,SYNTH_END,1,partition=0,worker=0,stage=synth,duration_ms=100
TIMELINE,100.000,GPU_QUEUE,1,partition=0,stage=gpu_ntt_msm
TIMELINE,100.000,GPU_PICKUP,1,partition=0,worker=0,device=0,stage=gpu_ntt_msm
TIMELINE,100.000,GPU_START,1,partition=0,worker=0,device=0,stage=gpu_ntt_msm
TIMELINE,300.000,GPU_END,1,partition=0,worker=0,device=0,stage=gpu_ntt_msm,backend=cpu
TIMELINE,350.000,SYNTH_END,1,partition=1,worker=1,stage=synth,duration_ms=350
TIMELINE,350.000,GPU_QUEUE,1,partition=1,stage=gpu_ntt_msm
TIMELINE,400.000,GPU_PICKUP,1,partition=1,worker=0,device=0,stage=gpu_ntt_msm
TIMELINE,400.000,GPU_START,1,partition=1,worker=0,device=0,stage=gpu_ntt_msm
TIMELINE,600.000,GPU_END,1,partition=1,worker=0,device=0,stage=gpu_ntt_msm,backend=cpu
TIMELINE,700.000,JOB_END,1,ok=true
";

#[test]
fn utilisation_and_gaps_match_hand_computed_values() {
    let w = from_log(OURS, 0.0);
    let s = &w.summary;
    assert_eq!(s.wall_ms, 700.0);
    let g = s.gpu.as_ref().unwrap();
    assert_eq!(g.busy_ms, 400.0);
    assert!((g.utilisation - 400.0 / 700.0).abs() < 1e-12);
    assert_eq!(g.window_ms, 500.0);
    assert!((g.window_utilisation - 0.8).abs() < 1e-12);
    assert_eq!(g.gaps.len(), 1);
    assert_eq!(
        (g.gaps[0].start_ms, g.gaps[0].end_ms, g.gaps[0].duration_ms),
        (300.0, 400.0, 100.0)
    );
    // Partition 1 sat in the GPU queue from 350 to 400: half the gap was not starvation.
    assert!((g.starved_share - 0.5).abs() < 1e-12, "{}", g.starved_share);
    assert_eq!(g.queue_wait_mean_ms, Some(25.0));
    let synth = s.stages.iter().find(|x| x.stage == "SYNTH").unwrap();
    assert_eq!(
        (synth.count, synth.workers, synth.p50_ms, synth.p95_ms),
        (2, 2, 100.0, 350.0)
    );
}

/// The seeds' daemon log: prefixed lines, string job ids, bare partition
/// numbers, no queue events. GPU busy 1000-4000, 4500-8000, 8000-11000 ms
/// (the last two touch); first event at 0, last at 12000.
const SEEDS: &str = "\
2025-06-01T10:00:00.000Z INFO cuzk_core::engine: TIMELINE,0,SYNTH_START,sector-a,0
2025-06-01T10:00:00.000Z INFO cuzk_core::engine: TIMELINE,0,SYNTH_START,sector-a,1
2025-06-01T10:00:01.000Z INFO cuzk_core::engine: TIMELINE,1000,SYNTH_END,sector-a,0
2025-06-01T10:00:01.000Z INFO cuzk_core::engine: TIMELINE,1000,GPU_START,sector-a,0
2025-06-01T10:00:02.000Z INFO cuzk_core::engine: TIMELINE,2000,SYNTH_END,sector-a,1
2025-06-01T10:00:04.000Z INFO cuzk_core::engine: TIMELINE,4000,GPU_END,sector-a,0
2025-06-01T10:00:04.500Z INFO cuzk_core::engine: TIMELINE,4500,GPU_START,sector-a,1
2025-06-01T10:00:05.000Z INFO cuzk_core::engine: TIMELINE,5000,SYNTH_START,sector-b,0
2025-06-01T10:00:07.000Z INFO cuzk_core::engine: TIMELINE,7000,SYNTH_END,sector-b,0
2025-06-01T10:00:08.000Z INFO cuzk_core::engine: TIMELINE,8000,GPU_END,sector-a,1
2025-06-01T10:00:08.000Z INFO cuzk_core::engine: TIMELINE,8000,GPU_START,sector-b,0
2025-06-01T10:00:11.000Z INFO cuzk_core::engine: TIMELINE,11000,GPU_END,sector-b,0
2025-06-01T10:00:12.000Z INFO cuzk_core::engine: TIMELINE,12000,SYNTH_START,sector-c,0
";

#[test]
fn the_seeds_format_gives_the_hand_computed_figures() {
    let w = from_log(SEEDS, 0.0);
    let s = &w.summary;
    assert_eq!((s.events, s.jobs), (13, 3));
    assert_eq!(s.wall_ms, 12000.0);
    let g = s.gpu.as_ref().unwrap();
    assert_eq!(g.busy_ms, 9500.0);
    assert!((g.utilisation - 9500.0 / 12000.0).abs() < 1e-12);
    assert!((g.window_utilisation - 0.95).abs() < 1e-12);
    assert_eq!(g.gaps.len(), 1, "touching intervals merge: one 500 ms gap");
    assert_eq!(g.gap_total_ms, 500.0);
    assert_eq!(g.largest_gap.as_ref().unwrap().start_ms, 4000.0);
    assert_eq!(s.verdict, "GPU-bound");
    let gpu = s.stages.iter().find(|x| x.stage == "GPU").unwrap();
    assert_eq!((gpu.count, gpu.p50_ms, gpu.p95_ms), (3, 3000.0, 3500.0));
    // A minimum gap filters the 500 ms hole out.
    assert_eq!(from_log(SEEDS, 600.0).summary.gpu.unwrap().gaps.len(), 0);
}

#[test]
fn a_starved_gpu_is_called_synthesis_bound() {
    // One synth worker takes 400 ms per partition; the GPU needs 100 ms.
    let mut log = String::new();
    for p in 0..4 {
        let s = p as f64 * 400.0;
        log += &format!("TIMELINE,{s},SYNTH_START,1,partition={p},worker=0\n");
        log += &format!(
            "TIMELINE,{},SYNTH_END,1,partition={p},worker=0\n",
            s + 400.0
        );
        log += &format!("TIMELINE,{},GPU_QUEUE,1,partition={p}\n", s + 400.0);
        log += &format!(
            "TIMELINE,{},GPU_PICKUP,1,partition={p},worker=0,device=0\n",
            s + 400.0
        );
        log += &format!(
            "TIMELINE,{},GPU_START,1,partition={p},worker=0,device=0\n",
            s + 400.0
        );
        log += &format!(
            "TIMELINE,{},GPU_END,1,partition={p},worker=0,device=0\n",
            s + 500.0
        );
    }
    let s = from_log(&log, 0.0).summary;
    let g = s.gpu.as_ref().unwrap();
    assert!((g.window_utilisation - 400.0 / 1300.0).abs() < 1e-12);
    assert_eq!(g.gaps.len(), 3);
    assert_eq!(g.starved_share, 1.0);
    assert!(s.verdict.starts_with("synthesis-bound"), "{}", s.verdict);
    assert!(
        s.evidence
            .iter()
            .any(|e| e.contains("SYNTH takes 400 ms per partition")),
        "{:?}",
        s.evidence
    );
}

#[test]
fn the_cli_writes_svg_and_html_with_lanes_bars_and_a_legend() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.log");
    std::fs::write(&log, OURS).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args(["waterfall"])
        .arg(&log)
        .arg("-o")
        .arg(dir.path().join("chart.html"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("GPU utilisation: 57.1% of the wall time"),
        "{stdout}"
    );
    assert!(
        stdout.contains("idle gaps: 1 totalling 0.100 s"),
        "{stdout}"
    );
    let svg = std::fs::read_to_string(dir.path().join("chart.svg")).unwrap();
    for lane in [
        "SYNTH w0",
        "SYNTH w1",
        "GPU d0 w0",
        "GPU busy / idle",
        "jobs",
    ] {
        assert!(
            svg.contains(&format!(">{lane}</text>")),
            "lane {lane} is labelled"
        );
    }
    assert!(svg.contains(">legend</text>") && svg.contains(">GPU idle gap</text>"));
    assert_eq!(
        svg.matches("<title>GPU job 1 partition").count(),
        2,
        "one bar per partition-stage"
    );
    assert_eq!(svg.matches("<title>GPU idle 100.0 ms").count(), 1);
    let html = std::fs::read_to_string(dir.path().join("chart.html")).unwrap();
    assert!(
        html.starts_with("<!doctype html>") && html.contains("<svg") && html.contains("verdict:")
    );
    assert!(!html.contains("src=\"http"), "self-contained");
}

#[test]
fn a_log_without_events_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("empty.log");
    std::fs::write(&log, "nothing to see\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .arg("waterfall")
        .arg(&log)
        .args(["-o", "/tmp/never.html"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("has no TIMELINE lines"));
}

/// The same run from a graph that names its nodes otherwise: device time is
/// found by the declared role, not by the event prefix.
#[test]
fn device_time_is_found_by_role_not_by_name() {
    let renamed = OURS
        .replace("GPU_", "ACCEL_")
        .replace("stage=gpu_ntt_msm", "stage=accel,role=device")
        .replace("SYNTH_", "WITNESS_")
        .replace("stage=synth", "stage=witness,role=synth");
    let w = from_log(&renamed, 0.0);
    let ours = from_log(OURS, 0.0);
    let (g, o) = (
        w.summary.gpu.as_ref().unwrap(),
        ours.summary.gpu.as_ref().unwrap(),
    );
    assert_eq!(
        (g.busy_ms, g.window_ms, g.gaps.len()),
        (o.busy_ms, o.window_ms, o.gaps.len())
    );
    assert_eq!(
        g.starved_share, o.starved_share,
        "queues into device nodes count too"
    );
    let accel = w
        .summary
        .stages
        .iter()
        .find(|s| s.stage == "ACCEL")
        .unwrap();
    assert!(accel.device);
    let witness = w
        .summary
        .stages
        .iter()
        .find(|s| s.stage == "WITNESS")
        .unwrap();
    assert_eq!(witness.role, Some(cuzk_engine::vocab::Role::Synth));
    let svg = cuzk::waterfall::svg::render(&w.timeline, &w.summary, "renamed");
    assert!(
        svg.contains("ACCEL d0"),
        "the renamed device node keeps its device lane"
    );
}
