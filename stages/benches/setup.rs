//! Parameter generation: ours against bellperson's `generate_parameters`,
//! from the same secrets, one after the other in one run (the outputs are
//! compared too).
//!
//! `cargo bench -p cuzk-stages --bench setup` (CUZK_SETUP_LOG=16 by default,
//! CUZK_SETUP_WORKLOAD=chain|sha256, CUZK_SETUP_DEVICE=auto|gpu|cpu,
//! CUZK_SETUP_BELLPERSON=0 to skip theirs)

use std::time::Instant;

use blstrs::Bls12;
use cuzk_stages::Workload;
use cuzk_stages::setup::{Device, Toxic, generate_timed};
use rand::SeedableRng;

mod common;

use common::env;

fn main() {
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return;
    }
    let workload = Workload::parse(&env("CUZK_SETUP_WORKLOAD", "chain".to_string())).unwrap();
    let log: u32 = env("CUZK_SETUP_LOG", 16);
    let theirs: bool = env("CUZK_SETUP_BELLPERSON", 1u8) == 1;
    let device = Device::parse(&env("CUZK_SETUP_DEVICE", "auto".to_string())).unwrap();
    let toxic = Toxic::random(&mut rand::rngs::StdRng::seed_from_u64(1));
    let what = format!(
        "{} 2^{log}, {} threads, multiples on {device}",
        workload.name(),
        rayon::current_num_threads()
    );

    let started = Instant::now();
    let (ours, t) = generate_timed(workload.blank(log), &toxic, device).unwrap();
    let ours_s = started.elapsed().as_secs_f64();
    println!(
        "setup {what}: cuzk {ours_s:.3} s (record {:.3}, evaluate {:.3}, G1 {:.3}, G2 {:.3}); {} H, {} L, {} A, {} B points",
        t.record.as_secs_f64(),
        t.evaluate.as_secs_f64(),
        t.g1.as_secs_f64(),
        t.g2.as_secs_f64(),
        ours.h.len(),
        ours.l.len(),
        ours.a.len(),
        ours.b_g1.len(),
    );
    if !theirs {
        return;
    }
    let started = Instant::now();
    let reference = bellperson::groth16::generate_parameters::<Bls12, _>(
        workload.blank(log),
        toxic.g1,
        toxic.g2,
        toxic.alpha,
        toxic.beta,
        toxic.gamma,
        toxic.delta,
        toxic.tau,
    )
    .unwrap();
    let theirs_s = started.elapsed().as_secs_f64();
    let equal = reference.vk == ours.vk
        && reference.h == ours.h
        && reference.l == ours.l
        && reference.a == ours.a
        && reference.b_g1 == ours.b_g1
        && reference.b_g2 == ours.b_g2;
    println!(
        "setup {what}: bellperson {theirs_s:.3} s; cuzk is {:.1}x faster; parameters equal: {equal}",
        theirs_s / ours_s
    );
    assert!(equal, "the two setups differ");
}
