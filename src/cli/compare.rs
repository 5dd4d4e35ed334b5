//! `cuzk compare`: the same workload under several configs, interleaved over
//! repetitions so machine noise hits all alike; the relative performance
//! table (the seeds' "relative performance of all phases").
//!
//! Each run is a `cuzk bench` child process, so every config starts from a
//! clean process and its peak RSS is its own.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::Context;
use cuzk::bench::BenchReport;
use serde::Serialize;

use super::bench::WorkloadArgs;

#[derive(clap::Args)]
pub struct Args {
    /// Configuration files or graph declaration files to compare; the first
    /// is the baseline. A declaration runs under `--config` (or the defaults)
    /// with `pipeline.graph` set to it.
    #[arg(required = true)]
    pub configs: Vec<PathBuf>,
    #[command(flatten)]
    pub run: WorkloadArgs,
    /// Repetitions of every config.
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// Also write the table as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Also write the table as Markdown here.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
}

/// One config's results over all repetitions.
#[derive(Serialize)]
pub struct Row {
    pub name: String,
    pub config: PathBuf,
    pub variant: String,
    pub backend: String,
    /// Median over repetitions.
    pub s_per_proof: f64,
    /// s_per_proof over the first row's.
    pub ratio: f64,
    pub s_per_proof_min: f64,
    pub s_per_proof_max: f64,
    /// (max - min) / median, in percent.
    pub spread_pct: f64,
    pub latency_p50_s: f64,
    pub latency_p95_s: f64,
    pub peak_rss_bytes: u64,
    pub verified: usize,
    pub proofs: usize,
    pub runs: Vec<BenchReport>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).expect("finite"));
    v[v.len() / 2]
}

/// What one compared file is.
#[derive(Clone, Debug)]
pub enum Entry {
    /// A configuration file.
    Config(PathBuf),
    /// A graph declaration, run under the base config.
    Graph {
        graph: PathBuf,
        base: Option<PathBuf>,
    },
}

impl Entry {
    fn read(path: &Path, base: Option<&Path>) -> anyhow::Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Ok(if cuzk::pipelines::is_declaration(&text) {
            Entry::Graph {
                graph: path.into(),
                base: base.map(Path::to_path_buf),
            }
        } else {
            Entry::Config(path.into())
        })
    }

    fn path(&self) -> &Path {
        match self {
            Entry::Config(p) | Entry::Graph { graph: p, .. } => p,
        }
    }

    /// The effective config: the file's, or the base's with the graph set.
    fn load(&self) -> anyhow::Result<cuzk::config::Config> {
        let context = || format!("loading {}", self.path().display());
        Ok(match self {
            Entry::Config(p) => cuzk::config::load(Some(p)).with_context(context)?.config,
            Entry::Graph { graph, base } => {
                let mut c = cuzk::config::load(base.as_deref())
                    .with_context(context)?
                    .config;
                c.pipeline.graph = Some(graph.clone());
                c
            }
        })
    }

    fn apply(&self, cmd: &mut Command) {
        match self {
            Entry::Config(p) => {
                cmd.arg("--config").arg(p);
            }
            Entry::Graph { graph, base } => {
                if let Some(b) = base {
                    cmd.arg("--config").arg(b);
                }
                cmd.env("CUZK_PIPELINE__GRAPH", graph);
            }
        }
    }
}

fn bench_once(entry: &Entry, args: &WorkloadArgs, out: &Path) -> anyhow::Result<BenchReport> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    entry.apply(&mut cmd);
    cmd.arg("bench").arg("--quiet").arg("--json").arg(out);
    cmd.args(args.input_args()).args([
        "-c",
        &args.proofs.to_string(),
        "-j",
        &args.in_flight.to_string(),
        "--warmup",
        &args.warmup.to_string(),
    ]);
    let output = cmd.output().context("running cuzk bench")?;
    anyhow::ensure!(
        output.status.success(),
        "cuzk bench with {} failed:\n{}{}",
        entry.path().display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let text = std::fs::read_to_string(out)?;
    Ok(serde_json::from_str(&text)?)
}

/// Row names: the variant, or the file name where two configs share a variant.
fn names(configs: &[PathBuf], variants: &[String]) -> Vec<String> {
    configs
        .iter()
        .zip(variants)
        .map(|(path, v)| {
            if variants.iter().filter(|o| *o == v).count() > 1 {
                path.file_stem().map_or_else(
                    || path.display().to_string(),
                    |s| s.to_string_lossy().into(),
                )
            } else {
                v.clone()
            }
        })
        .collect()
}

pub fn table(rows: &[Row]) -> String {
    let mut out = format!(
        "{:<16} {:<12} {:>9} {:>7} {:>22} {:>8} {:>8} {:>11} {:>9}\n",
        "config",
        "variant",
        "s/proof",
        "ratio",
        "min-max s/proof (±%)",
        "p50 s",
        "p95 s",
        "peak RSS",
        "verified"
    );
    for r in rows {
        out.push_str(&format!(
            "{:<16} {:<12} {:>9.3} {:>7.3} {:>22} {:>8.3} {:>8.3} {:>11} {:>9}\n",
            r.name,
            r.variant,
            r.s_per_proof,
            r.ratio,
            format!(
                "{:.3}-{:.3} (±{:.1}%)",
                r.s_per_proof_min,
                r.s_per_proof_max,
                r.spread_pct / 2.0
            ),
            r.latency_p50_s,
            r.latency_p95_s,
            cuzk::report::mib(r.peak_rss_bytes),
            format!("{}/{}", r.verified, r.proofs)
        ));
    }
    out
}

pub fn markdown(rows: &[Row], header: &str) -> String {
    let mut out = format!(
        "{header}\n\n| config | variant | s/proof | ratio | min–max s/proof | spread | p50 latency | p95 latency | peak RSS | verified |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {:.3} | {:.3} | {:.3}–{:.3} | ±{:.1}% | {:.3} s | {:.3} s | {} | {}/{} |\n",
            r.name,
            r.variant,
            r.s_per_proof,
            r.ratio,
            r.s_per_proof_min,
            r.s_per_proof_max,
            r.spread_pct / 2.0,
            r.latency_p50_s,
            r.latency_p95_s,
            cuzk::report::mib(r.peak_rss_bytes),
            r.verified,
            r.proofs
        ));
    }
    out
}

pub fn run(args: Args, base: Option<&Path>) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(args.reps >= 1, "--reps must be at least 1");
    let spec = args.run.spec()?;
    // Every entry must load and declare a valid graph before anything runs;
    // name the one that does not.
    let mut variants = vec![];
    let mut entries = vec![];
    for path in &args.configs {
        let entry = Entry::read(path, base)?;
        let config = entry.load()?;
        let graph =
            cuzk::pipelines::graph(&config).with_context(|| format!("in {}", path.display()))?;
        variants.push(graph.name);
        entries.push(entry);
    }
    // Generate shared parameters once, before the timed runs.
    let mut run_args = args.run.clone();
    if run_args.params.is_none() && !run_args.is_filecoin() {
        let config = entries[0].load()?;
        let (path, _) = cuzk::params::ensure(&config.srs.cache_dir, spec.workload, spec.log_size)?;
        run_args.params = Some(path);
    }
    let tmp = tempfile::tempdir()?;
    let mut runs: Vec<Vec<BenchReport>> = args.configs.iter().map(|_| vec![]).collect();
    for rep in 0..args.reps {
        for (i, (entry, config)) in entries.iter().zip(&args.configs).enumerate() {
            let out = tmp.path().join(format!("{rep}-{i}.json"));
            let report = bench_once(entry, &run_args, &out)?;
            eprintln!(
                "rep {}/{}: {:<28} {:.3} s/proof",
                rep + 1,
                args.reps,
                config.display(),
                report.s_per_proof
            );
            runs[i].push(report);
        }
    }
    let names = names(&args.configs, &variants);
    let mut rows: Vec<Row> = runs
        .into_iter()
        .zip(&args.configs)
        .zip(names)
        .map(|((runs, config), name)| {
            let s: Vec<f64> = runs.iter().map(|r| r.s_per_proof).collect();
            let med = median(s.clone());
            let (min, max) = s
                .iter()
                .fold((f64::MAX, 0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
            Row {
                name,
                config: config.clone(),
                variant: runs[0].variant.clone(),
                backend: runs[0].backend.clone(),
                s_per_proof: med,
                ratio: 1.0,
                s_per_proof_min: min,
                s_per_proof_max: max,
                spread_pct: 100.0 * (max - min) / med,
                latency_p50_s: median(runs.iter().map(|r| r.latency_p50_s).collect()),
                latency_p95_s: median(runs.iter().map(|r| r.latency_p95_s).collect()),
                peak_rss_bytes: runs.iter().map(|r| r.peak_rss_bytes).max().unwrap_or(0),
                verified: runs.iter().map(|r| r.verified).sum(),
                proofs: runs.iter().map(|r| r.proofs).sum(),
                runs,
            }
        })
        .collect();
    let base = rows[0].s_per_proof;
    for r in &mut rows {
        r.ratio = r.s_per_proof / base;
    }
    let header = format!(
        "{} at 2^{} x {} partitions, c={} j={}, {} repetitions, backend {}",
        rows[0].runs[0].workload,
        rows[0].runs[0].log_size,
        rows[0].runs[0].partitions,
        spec.proofs,
        spec.in_flight,
        args.reps,
        rows[0].backend
    );
    println!("{header}");
    print!("{}", table(&rows));
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&rows)?)?;
    }
    if let Some(path) = &args.markdown {
        std::fs::write(path, markdown(&rows, &header))?;
    }
    let all = rows.iter().all(|r| r.verified == r.proofs);
    Ok(if all {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
