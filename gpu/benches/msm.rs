//! G1 MSM on the GPU: the engine's path (SRS points resident on the device,
//! scalars already there, as the H MSM reads them) beside sppark's
//! `mult_pippenger` called directly on host data (uploaded every call).
//!
//! `cargo bench -p cuzk-gpu --bench msm`; CUZK_MSM_LOG sets the size (24).

use std::time::Instant;

use blstrs::{G1Affine, G1Projective, Scalar};
use cuzk_gpu::cuda::{DeviceBuffer, Stream};
use cuzk_gpu::ops::{self, G1};
use ff::Field;
use group::{Curve, Group};
use rand::SeedableRng;
use rayon::prelude::*;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return;
    }
    let device = match cuzk_gpu::device::usable_device() {
        Ok(d) => d.ordinal as i32,
        Err(why) => {
            println!("skipping: {why}");
            return;
        }
    };
    let log: u32 = std::env::var("CUZK_MSM_LOG")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    let n = 1usize << log;
    let started = Instant::now();
    // Points: walks from random starts (one per chunk), normalised per chunk.
    let points: Vec<G1Affine> = (0..n.div_ceil(1 << 16))
        .into_par_iter()
        .flat_map_iter(|c| {
            let mut r = rand::rngs::StdRng::seed_from_u64(c as u64);
            let step = G1Projective::random(&mut r);
            let mut acc = G1Projective::random(&mut r);
            let proj: Vec<G1Projective> = (0..(1usize << 16).min(n - c * (1 << 16)))
                .map(|_| {
                    acc += step;
                    acc
                })
                .collect();
            let mut out = vec![G1Affine::default(); proj.len()];
            G1Projective::batch_normalize(&proj, &mut out);
            out
        })
        .collect();
    let scalars: Vec<[u64; 4]> = (0..n)
        .into_par_iter()
        .map_init(
            || rand::rngs::StdRng::seed_from_u64(rand::random()),
            // SAFETY: Scalar is four Montgomery limbs.
            |r, _| unsafe { std::mem::transmute::<Scalar, [u64; 4]>(Scalar::random(r)) },
        )
        .collect();
    println!(
        "G1 MSM of 2^{log} points (inputs made in {:.1} s)",
        started.elapsed().as_secs_f64()
    );

    let stream = Stream::new(device).unwrap();
    let t = Instant::now();
    let d_points = DeviceBuffer::upload(&stream, &points).unwrap();
    let d_scalars = DeviceBuffer::upload(&stream, &scalars).unwrap();
    stream.sync().unwrap();
    println!(
        "upload of points and scalars: {:.1} ms (once)",
        t.elapsed().as_secs_f64() * 1e3
    );

    let resident = || ops::msm::<G1>(&stream, &d_points, 0, 96, &d_scalars, 0, n, true).unwrap();
    let direct = || {
        let mut out = blst::blst_p1::default();
        // SAFETY: host slices of n points and scalars.
        unsafe {
            cuzk_kernels::cuzk_g1_sppark_mult_pippenger(
                device,
                points.as_ptr().cast(),
                scalars.as_ptr(),
                n,
                true,
                (&mut out as *mut blst::blst_p1).cast(),
            )
        }
        .unwrap();
        // SAFETY: blst_p1 and G1Projective share a layout.
        unsafe { std::mem::transmute::<blst::blst_p1, G1Projective>(out) }
    };
    let (a, b) = (resident(), direct());
    assert_eq!(a.to_affine(), b.to_affine(), "both MSMs agree");
    let time = |f: &dyn Fn() -> G1Projective, reps: usize| {
        median(
            (0..reps)
                .map(|_| {
                    let t = Instant::now();
                    f();
                    t.elapsed().as_secs_f64() * 1e3
                })
                .collect(),
        )
    };
    let (r, d) = (time(&resident, 7), time(&direct, 5));
    println!("{:<52} {:>10}", "variant", "median ms");
    println!(
        "{:<52} {:>10.1}",
        "cuzk msm (points resident, scalars on device)", r
    );
    println!(
        "{:<52} {:>10.1}",
        "sppark mult_pippenger (host points + scalars)", d
    );
    println!("ratio cuzk/sppark-direct: {:.3}", r / d);
}
