//! Throughput benchmarks: `c` proofs of a workload with at most `j` in
//! flight (the seeds' c/j), reported as seconds per proof, latency
//! percentiles and mean time per stage.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;

use crate::engine::{Engine, Job, JobProofs, ProveError};
use crate::report::{StageSummary, peak_rss_bytes, summarise};
use cuzk_stages::{Srs, Workload};

/// What to run.
#[derive(Clone, Debug)]
pub struct BenchSpec {
    pub workload: Workload,
    pub log_size: u32,
    /// Partitions per proof.
    pub partitions: u64,
    /// Proofs in total (`-c`).
    pub proofs: usize,
    /// Proofs in flight at once (`-j`).
    pub in_flight: usize,
    /// Witnesses are drawn from this seed.
    pub seed: u64,
}

/// What a run measured. Serialised as the `--json` output.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BenchReport {
    pub variant: String,
    pub backend: String,
    pub workload: String,
    pub log_size: u32,
    pub partitions: u64,
    pub proofs: usize,
    pub in_flight: usize,
    /// From the first submission to the last completion.
    pub wall_s: f64,
    /// wall_s / proofs: the throughput figure.
    pub s_per_proof: f64,
    pub latency_p50_s: f64,
    pub latency_p95_s: f64,
    pub latency_max_s: f64,
    pub stages: Vec<StageSummary>,
    pub peak_rss_bytes: u64,
    /// Proofs (jobs) whose every partition verified with bellperson's verifier.
    pub verified: usize,
    /// GPU busy time over wall time, from the run's timeline when one was recorded.
    #[serde(default)]
    pub gpu_utilisation: Option<f64>,
}

/// The job of proof number `index`: partitions with their own witnesses.
pub fn job_for(srs: &Arc<Srs>, spec: &BenchSpec, index: usize) -> (Job, Vec<Vec<blstrs::Scalar>>) {
    let mut job = Job::new(srs.clone()).label(spec.workload.name());
    let mut inputs = vec![];
    for p in 0..spec.partitions {
        let seed = spec
            .seed
            .wrapping_mul(1_000_003)
            .wrapping_add(index as u64 * 1_000 + p);
        let instance = spec.workload.instance(spec.log_size, seed);
        inputs.push(instance.public_inputs);
        job = job.partition(instance.circuit);
    }
    (job, inputs)
}

/// Nearest-rank percentile of sorted values.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// A proof's latency, result and the public inputs it should have.
type Finished = (
    Duration,
    Result<JobProofs, ProveError>,
    Vec<Vec<blstrs::Scalar>>,
);

/// Runs the benchmark on `engine`; `on_done` is called after each proof.
pub async fn run(
    engine: &Engine,
    srs: Arc<Srs>,
    spec: &BenchSpec,
    on_done: impl Fn(usize),
) -> anyhow::Result<BenchReport> {
    anyhow::ensure!(spec.proofs >= 1, "-c (proofs) must be at least 1");
    anyhow::ensure!(
        spec.in_flight >= 1,
        "-j (proofs in flight) must be at least 1"
    );
    let started = Instant::now();
    let mut running: JoinSet<Finished> = JoinSet::new();
    let mut next = 0;
    let mut latencies = vec![];
    let mut timings = vec![];
    let mut verified = 0;
    let mut first_error = None;
    let mut done = 0;
    while done < spec.proofs {
        while next < spec.proofs && running.len() < spec.in_flight {
            let (job, inputs) = job_for(&srs, spec, next);
            let handle = engine.submit(job);
            let submitted = Instant::now();
            running.spawn(async move {
                let out = handle.await;
                (submitted.elapsed(), out, inputs)
            });
            next += 1;
        }
        let (latency, out, inputs) = running.join_next().await.expect("jobs are running")?;
        done += 1;
        on_done(done);
        match out {
            Ok(proofs) => {
                latencies.push(latency.as_secs_f64());
                let srs = srs.clone();
                let ok = tokio::task::spawn_blocking(move || {
                    let ok = proofs.verify(&srs).is_ok()
                        && proofs
                            .partitions
                            .iter()
                            .zip(&inputs)
                            .all(|(p, i)| &p.public_inputs == i);
                    (ok, proofs)
                })
                .await?;
                verified += ok.0 as usize;
                timings.extend(ok.1.partitions.into_iter().map(|p| p.timings));
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    let wall = started.elapsed().as_secs_f64();
    if let Some(e) = first_error {
        anyhow::bail!("a proof failed: {e}");
    }
    latencies.sort_by(|a, b| a.partial_cmp(b).expect("finite"));
    Ok(BenchReport {
        variant: engine.graph().name.clone(),
        backend: engine.backend().name().into(),
        workload: spec.workload.name().into(),
        log_size: spec.log_size,
        partitions: spec.partitions,
        proofs: spec.proofs,
        in_flight: spec.in_flight,
        wall_s: wall,
        s_per_proof: wall / spec.proofs as f64,
        latency_p50_s: percentile(&latencies, 50.0),
        latency_p95_s: percentile(&latencies, 95.0),
        latency_max_s: latencies.last().copied().unwrap_or(0.0),
        stages: summarise(timings.iter().map(Vec::as_slice)),
        peak_rss_bytes: peak_rss_bytes().unwrap_or(0),
        verified,
        gpu_utilisation: None,
    })
}

impl BenchReport {
    /// The human-readable report `cuzk bench` prints.
    pub fn render(&self) -> String {
        let mut out = format!(
            "{} at 2^{} x {} partitions, c={} j={}, variant {}, backend {}\n",
            self.workload,
            self.log_size,
            self.partitions,
            self.proofs,
            self.in_flight,
            self.variant,
            self.backend
        );
        out.push_str(&format!(
            "throughput: {:.3} s/proof ({} proofs in {:.3} s)\n",
            self.s_per_proof, self.proofs, self.wall_s
        ));
        out.push_str(&format!(
            "latency:    p50 {:.3} s, p95 {:.3} s, max {:.3} s\n",
            self.latency_p50_s, self.latency_p95_s, self.latency_max_s
        ));
        if let Some(u) = self.gpu_utilisation {
            out.push_str(&format!(
                "GPU util:   {:.1}% (device work / wall, from the timeline)\n",
                u * 100.0
            ));
        }
        out.push_str(&format!(
            "peak RSS:   {}\n",
            crate::report::mib(self.peak_rss_bytes)
        ));
        out.push_str(&format!(
            "verified:   {}/{} proofs with bellperson::groth16::verify_proof\n",
            self.verified, self.proofs
        ));
        out.push_str("mean time per partition and stage:\n");
        out.push_str(&crate::report::stage_table(&self.stages));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 10.0);
        assert_eq!(percentile(&v, 95.0), 19.0);
        assert_eq!(percentile(&v, 100.0), 20.0);
        assert_eq!(percentile(&[3.0], 95.0), 3.0);
    }
}
