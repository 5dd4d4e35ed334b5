//! `cuzk prove`: prove a built-in workload, verify every proof with
//! bellperson's verifier, and print per-stage times and the backend.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use cuzk::config::Loaded;
use cuzk::params::{self, Provenance};
use cuzk::stages::{Srs, Workload};
use cuzk::{Engine, Job};

#[derive(clap::Args)]
pub struct Args {
    /// chain or sha256.
    #[arg(long, default_value = "chain")]
    pub workload: String,
    /// log2 of the constraint count (domain size) of each partition.
    #[arg(long, default_value_t = 14)]
    pub log_size: u32,
    /// Partitions in the job (each with its own witness).
    #[arg(long, default_value_t = 4)]
    pub partitions: u64,
    /// A parameter file to use instead of the cache (`srs.cache_dir`).
    #[arg(long)]
    pub params: Option<PathBuf>,
    /// Seed the partitions' witnesses are drawn from.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write TIMELINE events to this file.
    #[arg(long)]
    pub timeline: Option<PathBuf>,
}

/// Loads `--params` or the cached parameters, generating them on first use.
pub fn load_params(
    loaded: &Loaded,
    workload: Workload,
    log_size: u32,
    explicit: Option<&PathBuf>,
) -> anyhow::Result<(Arc<Srs>, String)> {
    match explicit {
        Some(path) => {
            let srs = Srs::read(path, false)?;
            Ok((Arc::new(srs), format!("{}", path.display())))
        }
        None => {
            let (srs, path, provenance) =
                params::load_or_generate(&loaded.config.srs.cache_dir, workload, log_size)?;
            let how = match provenance {
                Provenance::Cached => "cached".to_string(),
                Provenance::Generated(t) => format!("generated in {:.1} s", t.as_secs_f64()),
            };
            Ok((srs, format!("{} ({how})", path.display())))
        }
    }
}

/// The partitions of one job of a workload.
pub fn workload_job(
    srs: &Arc<Srs>,
    workload: Workload,
    log_size: u32,
    partitions: u64,
    seed: u64,
) -> (Job, Vec<Vec<blstrs::Scalar>>) {
    let mut job = Job::new(srs.clone()).label(format!("{}-k{log_size}", workload.name()));
    let mut inputs = vec![];
    for p in 0..partitions {
        let instance = workload.instance(log_size, seed.wrapping_mul(1_000_003).wrapping_add(p));
        inputs.push(instance.public_inputs);
        job = job.native_partition(instance.circuit);
    }
    (job, inputs)
}

pub fn run(loaded: Loaded, args: Args) -> anyhow::Result<ExitCode> {
    let session = super::Session::start(&loaded.config, args.timeline.as_deref())?;
    let rt = &session.rt;
    let workload = Workload::parse(&args.workload)?;
    workload.check_log_size(args.log_size)?;
    anyhow::ensure!(args.partitions >= 1, "--partitions must be at least 1");
    let (srs, params_note) = load_params(&loaded, workload, args.log_size, args.params.as_ref())?;
    let _guard = rt.enter();
    let engine = Engine::with_options(
        loaded.config.clone(),
        session.engine_options(&loaded.config),
    )
    .context("starting the engine")?;
    println!(
        "cuzk prove: {} at 2^{} x {} partition(s) ({} each); variant {}; backend {} ({})",
        workload.name(),
        args.log_size,
        args.partitions,
        workload.describe(args.log_size),
        engine.graph().name,
        engine.backend().name(),
        engine.backend().reason
    );
    println!("parameters: {params_note}");
    let (job, expected) = workload_job(&srs, workload, args.log_size, args.partitions, args.seed);
    let out = rt.block_on(engine.try_submit(job)?)?;
    let wall = out.elapsed.as_secs_f64();
    println!(
        "proved {} partition(s) in {wall:.3} s ({:.3} s/partition)",
        out.partitions.len(),
        wall / out.partitions.len() as f64
    );
    print!(
        "{}",
        cuzk::report::stage_table(&cuzk::report::summarise(
            out.partitions.iter().map(|p| &p.timings[..])
        ))
    );
    let mut verified = 0;
    for (i, (p, want)) in out.partitions.iter().zip(&expected).enumerate() {
        let ok = p.public_inputs == *want
            && bellperson::groth16::verify_proof(&srs.pvk, &p.proof, want)?;
        if ok {
            verified += 1;
        } else {
            eprintln!("partition {i}: the proof does NOT verify");
        }
    }
    println!(
        "verified {verified}/{} proofs with bellperson::groth16::verify_proof",
        out.partitions.len()
    );
    if let Some(peak) = cuzk::report::peak_rss_bytes() {
        println!("peak RSS: {}", cuzk::report::mib(peak));
    }
    rt.block_on(engine.shutdown());
    Ok(if verified == out.partitions.len() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
