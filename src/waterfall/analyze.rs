//! The numbers the seeds computed by hand from TIMELINE logs:
//!
//! - **GPU utilisation**: the union of the device work of every node whose
//!   declared role is `device` (its device spans where the stage reports
//!   them) over the wall time (first to last event of the log), and over the
//!   device's own window (its first start to its last end);
//! - **idle gaps**: the holes between merged device intervals, and how much
//!   of that idle time had no partition waiting for a device node (starvation);
//! - **per-stage p50/p95** and their **inflation**: p50 over the median
//!   duration of the stage's runs at the lowest load seen (load = stage runs
//!   in progress at a run's midpoint, itself included);
//! - a **bottleneck verdict** with the evidence behind it.

use serde::Serialize;

use cuzk_engine::vocab::{Role, event, suffix};

use super::model::{Bar, Timeline, merge};

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Gap {
    pub start_ms: f64,
    pub end_ms: f64,
    pub duration_ms: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GpuSummary {
    pub busy_ms: f64,
    /// busy / wall.
    pub utilisation: f64,
    /// From the first GPU start to the last GPU end.
    pub window_ms: f64,
    /// busy / window.
    pub window_utilisation: f64,
    pub gaps: Vec<Gap>,
    pub gap_total_ms: f64,
    pub largest_gap: Option<Gap>,
    /// Mean time partitions waited in the GPU node's queue.
    pub queue_wait_mean_ms: Option<f64>,
    /// Share of idle-gap time with no partition waiting in the GPU queue.
    pub starved_share: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StageStats {
    pub stage: String,
    /// The role its node declared, if the log says.
    pub role: Option<Role>,
    /// Device work (what GPU utilisation counts).
    pub device: bool,
    pub count: usize,
    /// Distinct workers seen running it.
    pub workers: usize,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    /// Median duration at the lowest load this stage ran at.
    pub baseline_ms: f64,
    /// p50 / baseline.
    pub inflation: f64,
    /// Share of its workers' time the stage was running, over the log's wall
    /// time (1.0 = every worker busy all the time: the stage is saturated).
    pub occupancy: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub wall_ms: f64,
    pub events: usize,
    pub jobs: usize,
    pub gpu: Option<GpuSummary>,
    pub stages: Vec<StageStats>,
    pub lock_wait_total_ms: f64,
    pub verdict: String,
    pub evidence: Vec<String>,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    crate::bench::percentile(sorted, p)
}

fn is_wait(kind: &str) -> bool {
    kind.ends_with(suffix::WAIT)
}

/// Stage runs in progress at `at`.
fn load_at(bars: &[&Bar], at: f64) -> usize {
    bars.iter().filter(|b| b.start <= at && at <= b.end).count()
}

fn stage_stats(t: &Timeline) -> Vec<StageStats> {
    let wall = (t.t1 - t.t0).max(1e-9);
    let runs: Vec<&Bar> = t.bars.iter().filter(|b| !is_wait(&b.kind)).collect();
    let mut kinds: Vec<&str> = vec![];
    for b in &runs {
        if !kinds.contains(&b.kind.as_str()) {
            kinds.push(&b.kind);
        }
    }
    kinds
        .into_iter()
        .map(|kind| {
            let mine: Vec<&&Bar> = runs.iter().filter(|b| b.kind == kind).collect();
            let mut d: Vec<f64> = mine.iter().map(|b| b.duration()).collect();
            d.sort_by(|a, b| a.partial_cmp(b).expect("finite"));
            let loads: Vec<usize> = mine
                .iter()
                .map(|b| load_at(&runs, (b.start + b.end) / 2.0))
                .collect();
            let lightest = loads.iter().copied().min().unwrap_or(0);
            let mut base: Vec<f64> = mine
                .iter()
                .zip(&loads)
                .filter(|(_, l)| **l == lightest)
                .map(|(b, _)| b.duration())
                .collect();
            base.sort_by(|a, b| a.partial_cmp(b).expect("finite"));
            let baseline = percentile(&base, 50.0);
            let p50 = percentile(&d, 50.0);
            let mut workers: Vec<_> = mine
                .iter()
                .map(|b| (b.device.clone(), b.worker.clone()))
                .collect();
            workers.sort();
            workers.dedup();
            StageStats {
                stage: kind.to_string(),
                role: mine[0].role,
                device: mine[0].is_device_work(),
                count: d.len(),
                workers: workers.len(),
                mean_ms: d.iter().sum::<f64>() / d.len().max(1) as f64,
                p50_ms: p50,
                p95_ms: percentile(&d, 95.0),
                baseline_ms: baseline,
                inflation: if baseline > 0.0 { p50 / baseline } else { 1.0 },
                occupancy: d.iter().sum::<f64>() / (workers.len().max(1) as f64 * wall),
            }
        })
        .collect()
}

fn gpu_summary(t: &Timeline, wall: f64, min_gap_ms: f64) -> Option<GpuSummary> {
    let busy = merge(
        t.bars
            .iter()
            .filter(|b| b.is_device_work())
            .map(|b| (b.start, b.end))
            .collect(),
    );
    let (first, last) = (busy.first()?.0, busy.last()?.1);
    let busy_ms: f64 = busy.iter().map(|(s, e)| e - s).sum();
    let gaps: Vec<Gap> = busy
        .windows(2)
        .map(|w| Gap {
            start_ms: w[0].1,
            end_ms: w[1].0,
            duration_ms: w[1].0 - w[0].1,
        })
        .filter(|g| g.duration_ms > 0.0 && g.duration_ms >= min_gap_ms)
        .collect();
    let gap_total_ms: f64 = gaps.iter().map(|g| g.duration_ms).sum();
    // Idle time with a partition waiting for the GPU is not starvation.
    let waiting = merge(
        t.queues
            .iter()
            .filter(|q| q.for_device())
            .map(|q| (q.start, q.end))
            .collect(),
    );
    let fed: f64 = gaps
        .iter()
        .map(|g| {
            waiting
                .iter()
                .map(|(s, e)| (e.min(g.end_ms) - s.max(g.start_ms)).max(0.0))
                .sum::<f64>()
        })
        .sum();
    let queue: Vec<f64> = t
        .queues
        .iter()
        .filter(|q| q.for_device())
        .map(|q| q.end - q.start)
        .collect();
    let window = last - first;
    Some(GpuSummary {
        busy_ms,
        utilisation: if wall > 0.0 { busy_ms / wall } else { 1.0 },
        window_ms: window,
        window_utilisation: if window > 0.0 { busy_ms / window } else { 1.0 },
        largest_gap: gaps
            .iter()
            .max_by(|a, b| a.duration_ms.partial_cmp(&b.duration_ms).expect("finite"))
            .cloned(),
        gap_total_ms,
        gaps,
        queue_wait_mean_ms: (!queue.is_empty())
            .then(|| queue.iter().sum::<f64>() / queue.len() as f64),
        starved_share: if gap_total_ms > 0.0 {
            1.0 - fed / gap_total_ms
        } else {
            0.0
        },
    })
}

/// Computes the summary; gaps shorter than `min_gap_ms` are not counted.
pub fn analyze(t: &Timeline, min_gap_ms: f64) -> Summary {
    let wall = t.t1 - t.t0;
    let stages = stage_stats(t);
    let gpu = gpu_summary(t, wall, min_gap_ms);
    let lock_wait_total_ms = t
        .bars
        .iter()
        .filter(|b| b.kind == event::LOCK_WAIT)
        .map(Bar::duration)
        .sum();
    let (verdict, evidence) = verdict(gpu.as_ref(), &stages, lock_wait_total_ms);
    Summary {
        wall_ms: wall,
        events: t.events,
        jobs: t.jobs.len(),
        gpu,
        stages,
        lock_wait_total_ms,
        verdict,
        evidence,
    }
}

const GPU_BOUND: f64 = 0.85;
const STARVED: f64 = 0.6;
const INFLATED: f64 = 1.3;
/// Inflation of stages this short is scheduling noise, not contention.
const SIGNIFICANT_MS: f64 = 5.0;
/// A stage whose workers are busy this share of the time is saturated.
const SATURATED: f64 = 0.8;

fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

fn verdict(
    gpu: Option<&GpuSummary>,
    stages: &[StageStats],
    lock_wait_ms: f64,
) -> (String, Vec<String>) {
    let Some(g) = gpu else {
        return (
            "no verdict".into(),
            vec![
                "the log has no device work (no node with role=device) to measure the GPU by"
                    .into(),
            ],
        );
    };
    // Device time per partition: every device stage's mean (GPU compute and B in G2).
    let device_ms: f64 = stages.iter().filter(|s| s.device).map(|s| s.mean_ms).sum();
    let on_device =
        |s: &StageStats| s.role.is_some_and(Role::on_device) || s.stage.starts_with("GPU");
    let inflated: Vec<&StageStats> = stages
        .iter()
        .filter(|s| {
            s.inflation >= INFLATED
                && s.p50_ms - s.baseline_ms >= SIGNIFICANT_MS
                && s.count >= 3
                && !s.stage.ends_with(suffix::HOST)
        })
        .collect();
    let inflation_note = || {
        inflated
            .iter()
            .map(|s| {
                format!(
                    "{} p50 {:.0} ms is {:.2}x its {:.0} ms at the lightest load",
                    s.stage, s.p50_ms, s.inflation, s.baseline_ms
                )
            })
            .collect::<Vec<_>>()
    };
    let mut evidence = vec![format!(
        "the GPU was busy {} of the time between its first and last work ({} of the whole log)",
        pct(g.window_utilisation),
        pct(g.utilisation)
    )];
    if g.window_utilisation >= GPU_BOUND {
        if let Some(q) = g.queue_wait_mean_ms {
            evidence.push(format!(
                "partitions waited {q:.0} ms on average in the GPU queue"
            ));
        }
        evidence.extend(inflation_note());
        let kind = if inflated.iter().any(|s| s.device) {
            "GPU-bound, with contention slowing the GPU stage"
        } else {
            "GPU-bound"
        };
        return (kind.into(), evidence);
    }
    evidence.push(format!(
        "{} idle gaps totalling {:.0} ms; in {} of that idle time no partition was waiting for the GPU",
        g.gaps.len(),
        g.gap_total_ms,
        pct(g.starved_share)
    ));
    // Upstream stages whose workers are nearly always busy hold the GPU back.
    let saturated: Vec<&StageStats> = stages
        .iter()
        .filter(|s| !on_device(s) && !s.stage.ends_with(suffix::HOST) && s.occupancy >= SATURATED)
        .collect();
    if g.starved_share >= STARVED {
        for s in &saturated {
            evidence.push(format!(
                "{}'s {} worker(s) were busy {} of the time: more workers would feed the GPU",
                s.stage,
                s.workers,
                pct(s.occupancy)
            ));
        }
        if !inflated.is_empty() {
            evidence.extend(inflation_note());
            return (
                "CPU/memory contention: stages slow down under load and starve the GPU".into(),
                evidence,
            );
        }
        // The upstream stage with the least capacity (workers per second of work).
        let slowest = stages
            .iter()
            .filter(|s| !on_device(s) && !s.stage.ends_with(suffix::WAIT))
            .min_by(|a, b| {
                let cap = |s: &StageStats| s.workers.max(1) as f64 / s.mean_ms.max(1e-9);
                cap(a).partial_cmp(&cap(b)).expect("finite")
            });
        if let Some(s) = slowest {
            evidence.push(format!(
                "{} takes {:.0} ms per partition on {} worker(s), against {:.0} ms on the GPU",
                s.stage, s.mean_ms, s.workers, device_ms
            ));
            let name = if s.role == Some(Role::Synth) || s.stage == "SYNTH" {
                "synthesis".to_string()
            } else {
                s.stage.to_lowercase()
            };
            return (format!("{name}-bound: the GPU waits for {name}"), evidence);
        }
        return ("upstream-bound: the GPU waits for work".into(), evidence);
    }
    evidence.push(format!("{lock_wait_ms:.0} ms were spent waiting for locks"));
    (
        "interlock-bound: the GPU idles while partitions wait in its queue".into(),
        evidence,
    )
}

impl Summary {
    /// The text summary `cuzk waterfall` prints.
    pub fn render(&self) -> String {
        let mut out = format!(
            "wall {:.3} s, {} events, {} jobs\n",
            self.wall_ms / 1e3,
            self.events,
            self.jobs
        );
        match &self.gpu {
            Some(g) => {
                out.push_str(&format!(
                    "GPU utilisation: {} of the wall time (busy {:.3} s of {:.3} s); {} of its window ({:.3} s)\n",
                    pct(g.utilisation),
                    g.busy_ms / 1e3,
                    self.wall_ms / 1e3,
                    pct(g.window_utilisation),
                    g.window_ms / 1e3
                ));
                out.push_str(&format!(
                    "idle gaps: {} totalling {:.3} s",
                    g.gaps.len(),
                    g.gap_total_ms / 1e3
                ));
                if let Some(l) = &g.largest_gap {
                    out.push_str(&format!(
                        ", largest {:.3} s at {:.3}-{:.3} s",
                        l.duration_ms / 1e3,
                        l.start_ms / 1e3,
                        l.end_ms / 1e3
                    ));
                }
                out.push_str(&format!(
                    "; {} of idle time starved (nothing queued)\n",
                    pct(g.starved_share)
                ));
            }
            None => out.push_str("GPU utilisation: no GPU events in this log\n"),
        }
        out.push_str(&format!(
            "{:<12} {:>6} {:>8} {:>10} {:>10} {:>12} {:>10} {:>10}\n",
            "stage", "runs", "workers", "p50 ms", "p95 ms", "light p50", "inflation", "occupancy"
        ));
        for s in &self.stages {
            out.push_str(&format!(
                "{:<12} {:>6} {:>8} {:>10.1} {:>10.1} {:>12.1} {:>9.2}x {:>10}\n",
                s.stage,
                s.count,
                s.workers,
                s.p50_ms,
                s.p95_ms,
                s.baseline_ms,
                s.inflation,
                pct(s.occupancy)
            ));
        }
        out.push_str(&format!("verdict: {}\n", self.verdict));
        for e in &self.evidence {
            out.push_str(&format!("  - {e}\n"));
        }
        out
    }
}
