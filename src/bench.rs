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
    /// The process's peak through the warm-up proofs (loading parameters,
    /// recording the circuit), when `peak_rss_bytes` was started again after
    /// them and so covers only the measured proofs.
    #[serde(default)]
    pub warmup_peak_rss_bytes: Option<u64>,
    /// Proofs whose every partition verified with bellperson's verifier (for
    /// Filecoin inputs, that Filecoin's verifier accepted).
    pub verified: usize,
    /// GPU busy time over wall time, from the run's timeline when one was recorded.
    #[serde(default)]
    pub gpu_utilisation: Option<f64>,
    /// Proofs proved (and verified) before the measured ones, not counted.
    #[serde(default)]
    pub warmup: usize,
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
        job = job.native_partition(instance.circuit);
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

/// What one benchmark proof came to: its partitions' timings if it was
/// made and verified, else why not.
pub type Outcome = Result<Vec<Vec<cuzk_engine::StageTiming>>, String>;

/// A proof being made.
pub type Pending = std::pin::Pin<Box<dyn std::future::Future<Output = Outcome> + Send>>;

/// Where benchmark proofs come from: a built-in workload, or a Filecoin input.
pub trait ProofSource: Send + Sync {
    /// (workload name, log2 of the domain, partitions per proof), for the report.
    fn describe(&self) -> (String, u32, u64);
    /// Submits proof number `index`; the future verifies it when it is done.
    fn submit(&self, engine: &Engine, index: usize) -> anyhow::Result<Pending>;
}

/// Proofs of a built-in workload, checked with bellperson's verifier.
pub struct WorkloadSource {
    pub srs: Arc<Srs>,
    pub spec: BenchSpec,
}

impl ProofSource for WorkloadSource {
    fn describe(&self) -> (String, u32, u64) {
        (
            self.spec.workload.name().into(),
            self.spec.log_size,
            self.spec.partitions,
        )
    }

    fn submit(&self, engine: &Engine, index: usize) -> anyhow::Result<Pending> {
        let (job, inputs) = job_for(&self.srs, &self.spec, index);
        let handle = engine.try_submit(job)?;
        let srs = self.srs.clone();
        Ok(Box::pin(async move {
            let proofs: JobProofs = handle.await.map_err(|e: ProveError| e.to_string())?;
            tokio::task::spawn_blocking(move || {
                let ok = proofs.verify(&srs).is_ok()
                    && proofs
                        .partitions
                        .iter()
                        .zip(&inputs)
                        .all(|(p, i)| &p.public_inputs == i);
                if ok {
                    Ok(proofs.partitions.into_iter().map(|p| p.timings).collect())
                } else {
                    Err("a proof does not verify".to_string())
                }
            })
            .await
            .map_err(|e| e.to_string())?
        }))
    }
}

/// Proofs of one Filecoin input, proven again and again, each checked with
/// Filecoin's verifier.
pub struct FilSource {
    /// Makes the job (again) for every proof.
    pub make: Box<dyn Fn() -> Result<cuzk_filecoin::FilJob, cuzk_filecoin::FilError> + Send + Sync>,
    pub srs: Arc<crate::srs_cache::SrsCache>,
    pub name: String,
    pub log_size: u32,
    pub partitions: u64,
}

impl ProofSource for FilSource {
    fn describe(&self) -> (String, u32, u64) {
        (self.name.clone(), self.log_size, self.partitions)
    }

    fn submit(&self, engine: &Engine, _: usize) -> anyhow::Result<Pending> {
        let submitted = crate::fil::submit(engine, &self.srs, (self.make)()?, 0)?;
        Ok(Box::pin(async move {
            let proof = submitted.finish().await.map_err(|e| e.to_string())?;
            Ok(proof.partitions.into_iter().map(|p| p.timings).collect())
        }))
    }
}

/// Runs `proofs` proofs from `source` with at most `in_flight` at once on
/// `engine`; `on_done` is called after each proof with how many are done,
/// its latency in seconds and whether it verified.
pub async fn run(
    engine: &Engine,
    source: &dyn ProofSource,
    proofs: usize,
    in_flight: usize,
    on_done: impl Fn(usize, f64, bool),
) -> anyhow::Result<BenchReport> {
    anyhow::ensure!(proofs >= 1, "-c (proofs) must be at least 1");
    anyhow::ensure!(in_flight >= 1, "-j (proofs in flight) must be at least 1");
    let started = Instant::now();
    let mut running: JoinSet<(Duration, Outcome)> = JoinSet::new();
    let (mut next, mut done, mut verified) = (0, 0, 0);
    let mut latencies = vec![];
    let mut timings = vec![];
    let mut first_error = None;
    while done < proofs {
        while next < proofs && running.len() < in_flight {
            let pending = source.submit(engine, next)?;
            let submitted = Instant::now();
            running.spawn(async move {
                let out = pending.await;
                (submitted.elapsed(), out)
            });
            next += 1;
        }
        let (latency, out) = running.join_next().await.expect("jobs are running")?;
        done += 1;
        on_done(done, latency.as_secs_f64(), out.is_ok());
        match out {
            Ok(t) => {
                latencies.push(latency.as_secs_f64());
                verified += 1;
                timings.extend(t);
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
    let (workload, log_size, partitions) = source.describe();
    Ok(BenchReport {
        variant: engine.graph().name.clone(),
        backend: engine.backend().name().into(),
        workload,
        log_size,
        partitions,
        proofs,
        in_flight,
        wall_s: wall,
        s_per_proof: wall / proofs as f64,
        latency_p50_s: percentile(&latencies, 50.0),
        latency_p95_s: percentile(&latencies, 95.0),
        latency_max_s: latencies.last().copied().unwrap_or(0.0),
        stages: summarise(timings.iter().map(Vec::as_slice)),
        peak_rss_bytes: peak_rss_bytes().unwrap_or(0),
        warmup_peak_rss_bytes: None,
        verified,
        gpu_utilisation: None,
        warmup: 0,
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
            "throughput: {:.3} s/proof ({} proofs in {:.3} s{})\n",
            self.s_per_proof,
            self.proofs,
            self.wall_s,
            match self.warmup {
                0 => String::new(),
                n => format!(", after {n} warm-up proof{}", if n == 1 { "" } else { "s" }),
            }
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
        out.push_str(&match self.warmup_peak_rss_bytes {
            Some(warm) => format!(
                "peak RSS:   {} over the measured proofs, {} through the warm-up\n",
                crate::report::mib(self.peak_rss_bytes),
                crate::report::mib(warm)
            ),
            None => format!("peak RSS:   {}\n", crate::report::mib(self.peak_rss_bytes)),
        });
        out.push_str(&format!(
            "verified:   {}/{} proofs ({})\n",
            self.verified,
            self.proofs,
            if self.workload.starts_with("fil-") {
                "Filecoin's own verifier"
            } else {
                "bellperson::groth16::verify_proof"
            }
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
