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
    /// Proofs proved and verified first, not counted: the SRS resident, MSM
    /// tables built and recordings made, as in a daemon that has been up a while.
    #[arg(long, default_value_t = 0)]
    pub warmup: usize,
    /// A parameter file to use instead of the cache.
    #[arg(long)]
    pub params: Option<PathBuf>,
    /// Prove a Filecoin PoRep C2 from this C1 output (JSON or curio's
    /// wrapper) instead of a built-in workload, every proof checked by
    /// Filecoin's `verify_seal`.
    #[arg(long, conflicts_with = "fixtures")]
    pub c1: Option<PathBuf>,
    /// With --c1: the miner (and sector, unless the wrapper has it).
    #[arg(long)]
    pub miner: Option<u64>,
    #[arg(long)]
    pub sector: Option<u64>,
    /// Prove a Filecoin input from a fixtures directory (`cuzk fil gen`) of
    /// kind --fil-kind (porep, window-post, winning-post, snap).
    #[arg(long)]
    pub fixtures: Option<PathBuf>,
    #[arg(long, default_value = "porep")]
    pub fil_kind: String,
}

impl WorkloadArgs {
    /// Whether the benchmark proves a Filecoin input.
    pub fn is_filecoin(&self) -> bool {
        self.c1.is_some() || self.fixtures.is_some()
    }

    /// The arguments that choose the input, for a child `cuzk bench`.
    pub fn input_args(&self) -> Vec<String> {
        let mut a = vec![];
        let mut push = |k: &str, v: String| {
            a.push(k.to_string());
            a.push(v);
        };
        if let Some(c1) = &self.c1 {
            push("--c1", c1.display().to_string());
        }
        if let Some(m) = self.miner {
            push("--miner", m.to_string());
        }
        if let Some(s) = self.sector {
            push("--sector", s.to_string());
        }
        if let Some(f) = &self.fixtures {
            push("--fixtures", f.display().to_string());
            push("--fil-kind", self.fil_kind.clone());
        }
        if !self.is_filecoin() {
            push("--workload", self.workload.clone());
            push("--log-size", self.log_size.to_string());
            push("--partitions", self.partitions.to_string());
            push("--seed", self.seed.to_string());
            if let Some(p) = &self.params {
                push("--params", p.display().to_string());
            }
        }
        a
    }

    /// The Filecoin proof source these arguments name.
    pub fn fil_source(&self, loaded: &Loaded) -> anyhow::Result<cuzk::bench::FilSource> {
        super::fil::use_cache(loaded, None)?;
        let make: Box<
            dyn Fn() -> Result<cuzk::filecoin::FilJob, cuzk::filecoin::FilError> + Send + Sync,
        > = match (&self.c1, &self.fixtures) {
            (Some(path), _) => {
                let c1 = cuzk::filecoin::porep::C1::parse(
                    &std::fs::read(path).with_context(|| format!("reading {}", path.display()))?,
                )?;
                let miner = self.miner.context("--c1 needs --miner")?;
                let sector = self.sector;
                Box::new(move || cuzk::filecoin::porep::job(&c1, miner, sector, None))
            }
            (None, Some(dir)) => super::fil::fixture_jobs(dir, &self.fil_kind)?,
            (None, None) => unreachable!("checked by is_filecoin"),
        };
        let job = make()?;
        let srs = std::sync::Arc::new(cuzk::srs_cache::SrsCache::new());
        let shape = srs.get(&job.params)?.srs.shape();
        Ok(cuzk::bench::FilSource {
            name: format!(
                "fil-{}-{}",
                job.kind,
                cuzk::filecoin::ids::sector_size_name(job.sector_size)
            ),
            log_size: shape.log_domain,
            partitions: job.partitions() as u64,
            make,
            srs,
        })
    }

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
    /// Drive a running daemon here (HOST:PORT, https://HOST:PORT or
    /// unix:///path) instead of an
    /// engine of our own: -j clients each calling Prove until -c proofs are
    /// done, with --fixtures and --fil-kind choosing the request.
    #[arg(long)]
    pub addr: Option<String>,
    /// The daemon's bearer token.
    #[arg(long, env = "CUZK_DAEMON__TOKEN")]
    pub token: Option<String>,
    #[command(flatten)]
    pub tls: super::tls_args::TlsArgs,
}

/// `cuzk bench --addr`: load on a daemon.
fn run_daemon(addr: &str, args: &Args) -> anyhow::Result<ExitCode> {
    let dir = args
        .run
        .fixtures
        .clone()
        .context("--addr needs --fixtures DIR (and --fil-kind) to make the requests")?;
    let kind = cuzk::filecoin::ProofKind::parse(&args.run.fil_kind)?;
    let template = cuzk::daemon::client::request_from_fixtures(
        &dir,
        kind,
        "",
        cuzk::daemon::proto::Priority::Unspecified,
    )?;
    let tag = std::process::id();
    let maker = |phase: &'static str| {
        let template = template.clone();
        move |i: usize| {
            let mut r = template.clone();
            r.request_id = format!("bench-{tag}-{phase}{i}");
            r
        }
    };
    let tls = args.tls.client();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    if let w @ 1.. = args.run.warmup {
        let clients = args.run.in_flight.min(w);
        rt.block_on(cuzk::daemon::client::load(
            addr,
            args.token.as_deref(),
            tls.as_ref(),
            maker("warm-"),
            w,
            clients,
        ))
        .context("the warm-up proofs")?;
    }
    let make = maker("");
    let report = rt.block_on(cuzk::daemon::client::load(
        addr,
        args.token.as_deref(),
        tls.as_ref(),
        make,
        args.run.proofs,
        args.run.in_flight,
    ))?;
    print!("{}", report.render());
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(if report.failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

pub fn run(loaded: Loaded, args: Args) -> anyhow::Result<ExitCode> {
    if let Some(addr) = &args.addr {
        return run_daemon(addr, &args);
    }
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
    let (source, params_note): (Box<dyn cuzk::bench::ProofSource>, String) =
        if args.run.is_filecoin() {
            let s = args.run.fil_source(&loaded)?;
            let note = format!(
                "Filecoin's parameter cache {}",
                cuzk::filecoin::params::cache_dir().display()
            );
            (Box::new(s), note)
        } else {
            let (srs, note) = super::prove::load_params(
                &loaded,
                spec.workload,
                spec.log_size,
                args.run.params.as_ref(),
            )?;
            (
                Box::new(cuzk::bench::WorkloadSource {
                    srs,
                    spec: spec.clone(),
                }),
                note,
            )
        };
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
    // Without the bar (a log, a device run that may be cut short), a line
    // per proof as it lands.
    let progress = |what: &str, done: usize, of: usize, s: f64, ok: bool| {
        if args.quiet {
            let verdict = if ok { "verified" } else { "FAILED" };
            eprintln!("{what} {done}/{of}: {s:.2} s, {verdict}");
        }
    };
    let mut warmup_peak = None;
    if args.run.warmup > 0 {
        let w = args.run.warmup;
        let warm = rt
            .block_on(run_bench(
                &engine,
                source.as_ref(),
                w,
                spec.in_flight.min(w),
                |done, s, ok| progress("warm-up proof", done, w, s, ok),
            ))
            .context("the warm-up proofs")?;
        anyhow::ensure!(
            warm.verified == warm.proofs,
            "{} of {} warm-up proofs did not verify",
            warm.proofs - warm.verified,
            warm.proofs
        );
        // The first proof loads the parameters and records the circuit: its
        // peak is told apart from the steady state's.
        let peak = cuzk::report::peak_rss_bytes();
        if cuzk::report::reset_peak_rss() {
            warmup_peak = peak;
        }
    }
    let mut report = rt.block_on(run_bench(
        &engine,
        source.as_ref(),
        spec.proofs,
        spec.in_flight,
        |done, s, ok| {
            bar.set_position(done as u64);
            progress("proof", done, spec.proofs, s, ok);
        },
    ))?;
    bar.finish_and_clear();
    report.warmup = args.run.warmup;
    report.warmup_peak_rss_bytes = warmup_peak;
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
