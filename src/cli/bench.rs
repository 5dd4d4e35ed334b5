//! `cuzk bench`: `-c` proofs with `-j` in flight; s/proof, latency
//! percentiles, mean time per stage, peak RSS.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use cuzk::Engine;
use cuzk::bench::{BenchSpec, run as run_bench};
use cuzk::config::Loaded;
use cuzk::stages::Workload;
use indicatif::{ProgressBar, ProgressStyle};

/// The workload options `bench` and `compare` share.
#[derive(clap::Args, Clone)]
pub struct WorkloadArgs {
    /// chain or sha256.
    #[arg(long, default_value = "chain")]
    pub workload: String,
    /// log2 of the constraint count (domain size) of each partition.
    #[arg(long, default_value_t = 14)]
    pub log_size: u32,
    /// Partitions per proof.
    #[arg(long, default_value_t = 4)]
    pub partitions: u64,
    /// Proofs in total.
    #[arg(short = 'c', long = "proofs", default_value_t = 4)]
    pub proofs: usize,
    /// Proofs in flight at once.
    #[arg(short = 'j', long = "in-flight", default_value_t = 2)]
    pub in_flight: usize,
    /// Seed the witnesses are drawn from.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// A parameter file to use instead of the cache.
    #[arg(long)]
    pub params: Option<PathBuf>,
}

impl WorkloadArgs {
    pub fn spec(&self) -> anyhow::Result<BenchSpec> {
        let workload = Workload::parse(&self.workload)?;
        workload.check_log_size(self.log_size)?;
        anyhow::ensure!(self.partitions >= 1, "--partitions must be at least 1");
        anyhow::ensure!(self.proofs >= 1, "-c must be at least 1");
        anyhow::ensure!(self.in_flight >= 1, "-j must be at least 1");
        Ok(BenchSpec {
            workload,
            log_size: self.log_size,
            partitions: self.partitions,
            proofs: self.proofs,
            in_flight: self.in_flight,
            seed: self.seed,
        })
    }
}

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub run: WorkloadArgs,
    /// Also write the report as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Write TIMELINE events to this file.
    #[arg(long)]
    pub timeline: Option<PathBuf>,
    /// Write a waterfall chart of the run: OUT.svg, OUT.html, and its summary.
    #[arg(long)]
    pub waterfall: Option<PathBuf>,
}

pub fn run(loaded: Loaded, args: Args) -> anyhow::Result<ExitCode> {
    // A waterfall needs a timeline: record one to a temporary file if none was asked for.
    let scratch = tempfile::tempdir()?;
    let timeline = match (&args.timeline, &args.waterfall) {
        (Some(t), _) => Some(t.clone()),
        (None, Some(_)) => Some(scratch.path().join("timeline.log")),
        (None, None) => None,
    };
    let session = super::Session::start(&loaded.config, timeline.as_deref())?;
    let rt = &session.rt;
    let spec = args.run.spec()?;
    let (srs, params_note) = super::prove::load_params(
        &loaded,
        spec.workload,
        spec.log_size,
        args.run.params.as_ref(),
    )?;
    let _guard = rt.enter();
    let engine = Engine::with_options(
        loaded.config.clone(),
        session.engine_options(&loaded.config),
    )
    .context("starting the engine")?;
    if !args.quiet {
        eprintln!("parameters: {params_note}");
    }
    let bar = if args.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(spec.proofs as u64)
    };
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} proofs, {per_sec}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    let mut report = rt.block_on(run_bench(&engine, srs, &spec, |done| {
        bar.set_position(done as u64)
    }))?;
    bar.finish_and_clear();
    rt.block_on(engine.shutdown());
    drop(engine);
    if let Some(path) = &timeline {
        let text = std::fs::read_to_string(path)?;
        report.gpu_utilisation = cuzk::waterfall::from_log(&text, 0.0)
            .summary
            .gpu
            .map(|g| g.utilisation);
    }
    print!("{}", report.render());
    if let (Some(out), Some(log)) = (&args.waterfall, &timeline) {
        println!("waterfall:");
        super::waterfall::render(log, out, 0.0, None)?;
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(if report.verified == report.proofs {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
