//! The engine's CPU backend against `bellperson::groth16::create_random_proof_batch`
//! on the same `chain` job and the same parameter file, side by side.
//!
//! Each side runs in its own child process (this binary, re-executed), so each
//! side's peak RSS is its own; sides alternate over repetitions so machine
//! noise hits both alike. Prints medians, the time ratio and the memory ratio.
//!
//! `cargo bench --bench cpu_vs_bellperson`; sizes from the environment:
//! CUZK_BENCH_LOG_SIZE (16), CUZK_BENCH_PARTITIONS (4), CUZK_BENCH_REPS (3),
//! CUZK_BENCH_WORKLOAD (chain), CUZK_BENCH_PARAMS (a parameter file to use).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use bellperson::groth16::{Parameters, create_random_proof_batch, verify_proof};
use blstrs::Bls12;
use cuzk::config::{Backend, Config};
use cuzk::stages::{Srs, Workload};
use cuzk::{Engine, Job};

mod common;

use common::{SIDE_ENV, interleave, median};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Setup {
    workload: Workload,
    log_size: u32,
    partitions: u64,
    params: PathBuf,
}

fn setup() -> Setup {
    let log_size = env_or("CUZK_BENCH_LOG_SIZE", 16) as u32;
    let partitions = env_or("CUZK_BENCH_PARTITIONS", 4);
    let workload =
        Workload::parse(&std::env::var("CUZK_BENCH_WORKLOAD").unwrap_or_else(|_| "chain".into()))
            .expect("CUZK_BENCH_WORKLOAD is chain or sha256");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("params");
    let params = std::env::var_os("CUZK_BENCH_PARAMS")
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.join(cuzk::params::file_name(workload, log_size)));
    Setup {
        workload,
        log_size,
        partitions,
        params,
    }
}

/// One measured run of one side, in a child process.
fn child(side: &str, s: &Setup) {
    let instances: Vec<_> = (0..s.partitions)
        .map(|p| s.workload.instance(s.log_size, 42 + p))
        .collect();
    let inputs: Vec<_> = instances.iter().map(|i| i.public_inputs.clone()).collect();
    let (seconds, proofs) = match side {
        "bellperson" => {
            let file = std::fs::File::open(&s.params).unwrap();
            let params = Parameters::<Bls12>::read(std::io::BufReader::new(file), false).unwrap();
            let circuits: Vec<_> = instances.into_iter().map(|i| i.circuit).collect();
            let started = Instant::now();
            let proofs =
                create_random_proof_batch(circuits, &params, &mut rand::rngs::OsRng).unwrap();
            (started.elapsed().as_secs_f64(), proofs)
        }
        "cuzk" => {
            let srs = Arc::new(Srs::read(&s.params, false).unwrap());
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            let _guard = rt.enter();
            let mut config = Config::default();
            config.gpu.backend = Backend::Cpu;
            let engine = Engine::from_config(config).unwrap();
            let job = instances
                .into_iter()
                .fold(Job::new(srs), |job, i| job.partition(i.circuit));
            let started = Instant::now();
            let out = rt.block_on(engine.submit(job)).unwrap();
            let seconds = started.elapsed().as_secs_f64();
            (
                seconds,
                out.partitions.into_iter().map(|p| p.proof).collect(),
            )
        }
        other => panic!("unknown side {other}"),
    };
    // Verify outside the timed region, with bellperson's verifier.
    let srs = Srs::read(&s.params, false).unwrap();
    for (proof, inputs) in proofs.iter().zip(&inputs) {
        assert!(
            verify_proof(&srs.pvk, proof, inputs).unwrap(),
            "{side}: a proof does not verify"
        );
    }
    let peak = cuzk::report::peak_rss_bytes().unwrap_or(0);
    println!("RESULT {side} {seconds} {peak}");
}

fn ensure_params(path: &Path, workload: Workload, log_size: u32) {
    if !path.is_file() {
        eprintln!("generating parameters {} (first run)", path.display());
        cuzk::params::generate(
            workload,
            log_size,
            path,
            cuzk::stages::setup::Device::auto(),
        )
        .unwrap();
    }
}

fn main() {
    let s = setup();
    if let Ok(side) = std::env::var(SIDE_ENV) {
        child(&side, &s);
        return;
    }
    // `cargo bench` passes --bench; `cargo test --benches` runs us too: keep that quick.
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return;
    }
    ensure_params(&s.params, s.workload, s.log_size);
    let reps = env_or("CUZK_BENCH_REPS", 3) as usize;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "{} 2^{} x {} partitions, parameters {}, {cores} cores, {reps} interleaved repetitions",
        s.workload.name(),
        s.log_size,
        s.partitions,
        s.params.display()
    );
    let sides = ["bellperson".to_string(), "cuzk".to_string()];
    let (mut times, peaks) = interleave(&sides, reps, cuzk::report::mib);
    let [b, c] = [median(&mut times[0]), median(&mut times[1])];
    println!("{:<12} {:>10} {:>14}", "side", "median s", "peak RSS");
    println!(
        "{:<12} {:>10.3} {:>14}",
        "bellperson",
        b,
        cuzk::report::mib(peaks[0])
    );
    println!(
        "{:<12} {:>10.3} {:>14}",
        "cuzk (cpu)",
        c,
        cuzk::report::mib(peaks[1])
    );
    println!(
        "ratio cuzk/bellperson: time {:.3} (goal <= 0.80), peak RSS {:.3} (goal <= 1.20)",
        c / b,
        peaks[1] as f64 / peaks[0] as f64
    );
}
