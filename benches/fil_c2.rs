//! PoRep C2 side by side on one C1 output: the engine against filecoin-proofs'
//! own `seal_commit_phase2` (bellperson on the CPU), each in a fresh child
//! process (this binary, re-executed) so each side's peak RSS is its own,
//! sides alternating over repetitions. Each side runs from the C1 output to
//! proof bytes, loading its parameters included; every proof is checked
//! with Filecoin's `verify_seal` outside the timed region.
//!
//! `cargo bench --bench fil_c2`. Environment: CUZK_FIL_PARAMS (the parameter
//! cache, default ~/.cache/cuzk/fil-2k, generated if empty), CUZK_FIL_FIXTURES
//! (a `cuzk fil gen` directory, else sealed afresh), CUZK_BENCH_SECTOR_SIZE
//! (2KiB), CUZK_BENCH_REPS (3), CUZK_BENCH_SIDES (seal_commit_phase2,cuzk-cpu;
//! add cuzk-gpu on a GPU machine); the engine's config from CUZK_* variables.

use std::path::PathBuf;
use std::time::Instant;

use cuzk::config::Backend;
use cuzk::filecoin::fixtures::Meta;
use cuzk::filecoin::ids::{self, prover_id};
use cuzk::filecoin::{ProofKind, params, porep};
use filecoin_proofs_api::SectorId;

mod common;

use common::{SIDE_ENV, interleave, median};

fn cache() -> PathBuf {
    std::env::var_os("CUZK_FIL_PARAMS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/cuzk/fil-2k")
        })
}

fn fixtures() -> PathBuf {
    std::env::var_os("CUZK_FIL_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fil-c2-fixtures"))
}

/// One measured run of one side.
fn child(side: &str) {
    params::use_cache(Some(&cache())).unwrap();
    let dir = fixtures();
    let meta = Meta::read(&dir).unwrap();
    let c1_bytes = std::fs::read(dir.join(&meta.porep.c1)).unwrap();
    let started = Instant::now();
    let bytes = match side {
        "seal_commit_phase2" => {
            let c1: filecoin_proofs_api::seal::SealCommitPhase1Output =
                serde_json::from_slice(&c1_bytes).unwrap();
            filecoin_proofs_api::seal::seal_commit_phase2(
                c1,
                prover_id(meta.miner),
                SectorId::from(meta.porep.sector),
            )
            .unwrap()
            .proof
        }
        "cuzk-cpu" | "cuzk-gpu" => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            let _guard = rt.enter();
            // Defaults, then CUZK_* variables (CUZK_PIPELINE__VARIANT=...).
            let mut config = cuzk::config::load(None).unwrap().config;
            config.gpu.backend = if side == "cuzk-gpu" {
                Backend::Gpu
            } else {
                Backend::Cpu
            };
            let engine = cuzk::Engine::from_config(config).unwrap();
            let c1 = porep::C1::parse(&c1_bytes).unwrap();
            let job = porep::job(&c1, meta.miner, Some(meta.porep.sector), None).unwrap();
            let srs = cuzk::srs_cache::SrsCache::new();
            rt.block_on(cuzk::fil::prove(&engine, &srs, job))
                .unwrap()
                .bytes
        }
        other => panic!("unknown side {other}"),
    };
    let seconds = started.elapsed().as_secs_f64();
    let ok = filecoin_proofs_api::seal::verify_seal(
        ids::seal_proof(meta.porep.registered_proof).unwrap(),
        ids::bytes32(
            "comm_r",
            &ids::from_hex("comm_r", &meta.porep.comm_r).unwrap(),
        )
        .unwrap(),
        ids::bytes32(
            "comm_d",
            &ids::from_hex("comm_d", &meta.porep.comm_d).unwrap(),
        )
        .unwrap(),
        prover_id(meta.miner),
        SectorId::from(meta.porep.sector),
        ids::bytes32(
            "ticket",
            &ids::from_hex("ticket", &meta.porep.ticket).unwrap(),
        )
        .unwrap(),
        ids::bytes32("seed", &ids::from_hex("seed", &meta.porep.seed).unwrap()).unwrap(),
        &bytes,
    )
    .unwrap();
    assert!(ok, "{side}: verify_seal rejects the proof");
    let peak = cuzk::report::peak_rss_bytes().unwrap_or(0);
    println!("RESULT {side} {seconds} {peak}");
}

fn main() {
    if let Ok(side) = std::env::var(SIDE_ENV) {
        child(&side);
        return;
    }
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return;
    }
    let size = ids::sector_size(
        &std::env::var("CUZK_BENCH_SECTOR_SIZE").unwrap_or_else(|_| "2KiB".into()),
    )
    .unwrap();
    params::use_cache(Some(&cache())).unwrap();
    for g in params::generate(
        &[ProofKind::Porep],
        size,
        cuzk::stages::setup::Device::auto(),
    )
    .unwrap()
    {
        if let Some(t) = g.took {
            println!("generated PoRep parameters in {:.0} s", t.as_secs_f64());
        }
    }
    let dir = fixtures();
    if Meta::read(&dir).map_or(true, |m| m.sector_size != size) {
        let t = Instant::now();
        cuzk::filecoin::fixtures::generate(size, 1000, &dir, false).unwrap();
        println!("sealed fixtures in {:.1} s", t.elapsed().as_secs_f64());
    }
    let reps: usize = std::env::var("CUZK_BENCH_REPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let sides: Vec<String> = std::env::var("CUZK_BENCH_SIDES")
        .unwrap_or_else(|_| "seal_commit_phase2,cuzk-cpu".into())
        .split(',')
        .map(str::to_string)
        .collect();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "PoRep C2, {} sector, one C1 output ({}), {cores} cores, {reps} interleaved repetitions",
        ids::sector_size_name(size),
        dir.display()
    );
    let (mut times, peaks) = interleave(&sides, reps, cuzk::report::mib);
    let medians: Vec<f64> = times.iter_mut().map(|v| median(v)).collect();
    println!(
        "{:<20} {:>10} {:>14} {:>8} {:>8}",
        "side", "median s", "peak RSS", "time×", "RSS×"
    );
    for (i, side) in sides.iter().enumerate() {
        println!(
            "{side:<20} {:>10.3} {:>14} {:>8.3} {:>8.3}",
            medians[i],
            cuzk::report::mib(peaks[i]),
            medians[i] / medians[0],
            peaks[i] as f64 / peaks[0].max(1) as f64
        );
    }
    println!(
        "(ratios against {}; every proof accepted by verify_seal)",
        sides[0]
    );
}
