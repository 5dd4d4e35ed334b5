//! MSMs on the GPU with the points resident on the device and the scalars
//! already there (as the engine runs them): cuzk's fixed-base MSM over
//! precomputed tables (`cuzk_gpu::fixed`) against sppark's `msm_t`, side by
//! side, each result checked against the other.
//!
//! `cargo bench -p cuzk-gpu --bench msm`. CUZK_MSM_G1 and CUZK_MSM_G2 list
//! the sizes as powers of two (default 20,22,24,26 and 20,22);
//! CUZK_MSM_TABLE_GIB caps the table of each size (default: what fits);
//! CUZK_MSM_WINDOW forces the window (with as many copies as windows);
//! CUZK_MSM_COPIES caps the copies. Ours is timed with runs stored into
//! buckets zeroed per chunk (the default) and added in place (the tuning's
//! `runs_added`, the earlier way) and with level 0 in affine pairs
//! (`pairs`, runs stored), interleaved; the speedup is the default's.
//! CUZK_MSM_WAYS picks which of those others run (a comma list of their
//! names; empty: none), and CUZK_MSM_BLOCKS adds level 0 in blocks of each
//! size listed (64, 128, 256), and CUZK_MSM_AHEADS level 0 prefetching
//! points each distance listed ahead, everywhere. The addition forms other than
//! the default's (`looped add`, `fused add` or `inlined add`, the tuning's
//! `add`) run everywhere too, unless CUZK_MSM_WAYS leaves them out.
//! CUZK_MSM_POREP_G1 and CUZK_MSM_POREP_G2 list sizes for one query of a PoRep partition with
//! PoRep's bit-heavy scalars, as the engine runs it (lists, ones, tail)
//! against one dense `msm_t` (default: none); the tail also on our own
//! Pippenger (the fixed-base MSM without precomputed copies, window
//! CUZK_MSM_TAIL_WINDOW, default from its size), which spreads a full
//! bucket over threads where `msm_t` gives each bucket one thread.
//! CUZK_MSM_POREP_REPEAT makes that share of the tail's scalars one value
//! (a witness that repeats values: a synthetic sector's default subtree
//! hashes), so the tail's buckets are skewed. CUZK_MSM_PLAIN_G1 and
//! CUZK_MSM_PLAIN_G2 list sizes for dense MSMs on our Pippenger over the
//! points as they are (no copies; windows CUZK_MSM_PLAIN_WINDOWS), runs
//! stored and level 0 in affine pairs (and with CUZK_MSM_PLAIN_ADDED=1 runs
//! added in place), against `msm_t` (default: none).

use std::time::Instant;

use blstrs::{G1Projective, G2Projective, Scalar};
use cuzk_gpu::cuda::{self, DeviceBuffer, Stream};
use cuzk_gpu::fixed::{self, FixedCurve, FixedTerms, MsmTable};
use cuzk_gpu::ops::{self, G1, G2};
use ff::Field;
use group::{Curve, Group};
use rand::SeedableRng;
use rayon::prelude::*;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn sizes(var: &str, default: &str) -> Vec<u32> {
    std::env::var(var)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

/// `n` points cheaply: walks from random starts (one per chunk), normalised per chunk.
fn points<P>(n: usize) -> Vec<P::AffineRepr>
where
    P: Group + Curve + Send,
    P::AffineRepr: Default + Clone + Send,
{
    (0..n.div_ceil(1 << 16))
        .into_par_iter()
        .flat_map_iter(|c| {
            let mut r = rand::rngs::StdRng::seed_from_u64(c as u64);
            let step = P::random(&mut r);
            let mut acc = P::random(&mut r);
            let proj: Vec<P> = (0..(1usize << 16).min(n - c * (1 << 16)))
                .map(|_| {
                    acc += step;
                    acc
                })
                .collect();
            let mut out = vec![P::AffineRepr::default(); proj.len()];
            P::batch_normalize(&proj, &mut out);
            out
        })
        .collect()
}

fn scalars(n: usize) -> Vec<[u64; 4]> {
    (0..n)
        .into_par_iter()
        .map_init(
            || rand::rngs::StdRng::seed_from_u64(rand::random()),
            // SAFETY: Scalar is four Montgomery limbs.
            |r, _| unsafe { std::mem::transmute::<Scalar, [u64; 4]>(Scalar::random(r)) },
        )
        .collect()
}

fn time<R>(reps: usize, f: impl Fn() -> R) -> f64 {
    median(
        (0..reps)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect(),
    )
}

/// The tunings timed beside the default (named): `also` (those of
/// `CUZK_MSM_WAYS`, a comma list, when set), level 0 in each block size
/// of `CUZK_MSM_BLOCKS` and prefetching points each distance of
/// `CUZK_MSM_AHEADS` ahead (comma lists, default none).
fn ways(also: &[(&'static str, fixed::MsmTuning)]) -> Vec<(String, fixed::MsmTuning)> {
    let default = fixed::tuning();
    let picked = std::env::var("CUZK_MSM_WAYS").ok();
    let mut ways = vec![("ours".to_string(), default)];
    for &(what, tuning) in also {
        if picked
            .as_deref()
            .is_none_or(|p| p.split(',').any(|w| w.trim() == what))
        {
            ways.push((what.to_string(), tuning));
        }
    }
    // The other addition forms, everywhere (CUZK_MSM_WAYS can drop them).
    for other in default.add.others() {
        let name = format!("{other:?} add").to_lowercase();
        if picked
            .as_deref()
            .is_none_or(|p| p.split(',').any(|w| w.trim() == name))
        {
            ways.push((
                name,
                fixed::MsmTuning {
                    add: other,
                    ..default
                },
            ));
        }
    }
    for block in sizes("CUZK_MSM_BLOCKS", "") {
        ways.push((
            format!("blocks of {block}"),
            fixed::MsmTuning { block, ..default },
        ));
    }
    for ahead in sizes("CUZK_MSM_AHEADS", "") {
        ways.push((
            format!("prefetch {ahead} ahead"),
            fixed::MsmTuning { ahead, ..default },
        ));
    }
    ways
}

/// Our dense MSM of the first `n` points and Montgomery scalars over `table`.
fn ours_dense<C: FixedCurve>(
    stream: &Stream,
    points: &DeviceBuffer,
    table: &MsmTable,
    scalars: &DeviceBuffer,
    n: usize,
    tuning: fixed::MsmTuning,
) -> C::Projective {
    let dense = FixedTerms::Dense {
        base_offset: 0,
        scalar_offset: 0,
    };
    let mont = ops::ScalarForm::Montgomery;
    fixed::msm_fixed_tuned::<C>(stream, points, table, dense, scalars, n, mont, 0, tuning).unwrap()
}

/// One group at each size: table built, both MSMs timed, results compared.
fn group<C, P>(name: &str, stream: &Stream, logs: &[u32])
where
    C: FixedCurve<Projective = P>,
    P: Group + Curve + Send + PartialEq + std::fmt::Debug,
    P::AffineRepr: Default + Clone + Send + Copy,
{
    let Some(&max) = logs.iter().max() else {
        return;
    };
    let started = Instant::now();
    let (pts, sc) = (points::<P>(1 << max), scalars(1 << max));
    let d_points = DeviceBuffer::upload(stream, &pts).unwrap();
    let d_scalars = DeviceBuffer::upload(stream, &sc).unwrap();
    stream.sync().unwrap();
    drop(pts);
    println!(
        "{name}: 2^{max} points and scalars made and uploaded in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let cap = std::env::var("CUZK_MSM_TABLE_GIB")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .map(|g| (g * (1u64 << 30) as f64) as usize);
    for &lg in logs {
        let n = 1usize << lg;
        let (free, _) = cuda::mem_info(stream.device()).unwrap();
        // Leave room for either MSM's scratch.
        let budget = cap.unwrap_or(free.saturating_sub(16 << 30));
        let forced = std::env::var("CUZK_MSM_WINDOW")
            .ok()
            .and_then(|w| w.parse().ok());
        let max_copies = std::env::var("CUZK_MSM_COPIES")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(u32::MAX);
        let planned = match forced {
            Some(w) => Some((w, fixed::windows(w))),
            None => fixed::plan(n, C::POINT_BYTES, budget),
        }
        .map(|(w, c)| (w, c.min(max_copies)));
        let Some((window, copies)) = planned else {
            println!("{name} 2^{lg}: no table fits {budget} bytes");
            continue;
        };
        let t = Instant::now();
        let table = MsmTable::build::<C>(stream, &d_points, n, window, copies).unwrap();
        let built = t.elapsed().as_secs_f64();
        let ours_with = |tuning: fixed::MsmTuning| {
            ours_dense::<C>(stream, &d_points, &table, &d_scalars, n, tuning)
        };
        let default = fixed::tuning();
        let ways = ways(&[
            (
                "runs added",
                fixed::MsmTuning {
                    runs_added: true,
                    ..default
                },
            ),
            (
                "pairs",
                fixed::MsmTuning {
                    pairs: true,
                    ..default
                },
            ),
        ]);
        let sppark = || {
            ops::msm::<C>(
                stream,
                &d_points,
                0,
                C::POINT_BYTES,
                &d_scalars,
                0,
                n,
                ops::ScalarForm::Montgomery,
            )
            .unwrap()
        };
        let expect = sppark();
        for (what, tuning) in &ways {
            assert_eq!(
                ours_with(*tuning),
                expect,
                "{name} 2^{lg}: {what} agrees with sppark"
            );
        }
        let reps = if lg >= 26 { 3 } else { 7 };
        let (mut times, mut s) = (vec![Vec::new(); ways.len()], Vec::new());
        for _ in 0..reps {
            for (t, (_, tuning)) in times.iter_mut().zip(&ways) {
                t.push(time(1, || ours_with(*tuning)));
            }
            s.push(time(1, sppark));
        }
        let ms: Vec<f64> = times.into_iter().map(median).collect();
        let s = median(s);
        let others: Vec<String> = ways[1..]
            .iter()
            .zip(&ms[1..])
            .map(|((what, _), t)| format!("{what} {t:.2} ms ({:.2}x msm_t)", s / t))
            .collect();
        println!(
            "{name} 2^{lg}: cuzk fixed-base {:8.2} ms   sppark msm_t {s:8.2} ms   speedup {:.2}x   \
             ({}; window {window}, {copies} copies, table {:.2} GiB built in {built:.2} s)",
            ms[0],
            s / ms[0],
            others.join("; "),
            table.bytes() as f64 / (1u64 << 30) as f64,
        );
    }
}

/// Dense MSMs on our Pippenger over the points as they are (no precomputed
/// copies), at each window of CUZK_MSM_PLAIN_WINDOWS, against sppark's
/// `msm_t`, interleaved, every result compared: runs stored into buckets
/// zeroed per chunk in chunks of whole windows (the default), level 0 in
/// affine pairs, and chunks of terms over every window (the earlier way,
/// each later chunk's buckets merged); with CUZK_MSM_PLAIN_ADDED=1 also runs
/// added in place (the earlier way, 2.8-3.4x slower at window 20).
fn plain<C, P>(name: &str, stream: &Stream, lg: u32)
where
    C: FixedCurve<Projective = P>,
    P: Group + Curve + Send + PartialEq + std::fmt::Debug,
    P::AffineRepr: Default + Clone + Send + Copy,
{
    let n = 1usize << lg;
    let started = Instant::now();
    let (pts, sc) = (points::<P>(n), scalars(n));
    let d_points = DeviceBuffer::upload(stream, &pts).unwrap();
    let d_scalars = DeviceBuffer::upload(stream, &sc).unwrap();
    stream.sync().unwrap();
    drop((pts, sc));
    println!(
        "{name} dense 2^{lg}: points and scalars made and uploaded in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let mont = ops::ScalarForm::Montgomery;
    let sppark = || ops::msm::<C>(stream, &d_points, 0, C::POINT_BYTES, &d_scalars, 0, n, mont);
    let expect = sppark().unwrap();
    let reps = if lg >= 26 { 3 } else { 5 };
    let t_sppark = time(reps, || sppark().unwrap());
    let default = fixed::tuning();
    let mut also = vec![
        (
            "pairs",
            fixed::MsmTuning {
                pairs: true,
                ..default
            },
        ),
        (
            "chunks of terms",
            fixed::MsmTuning {
                chunk_terms: true,
                ..default
            },
        ),
    ];
    if std::env::var("CUZK_MSM_PLAIN_ADDED").as_deref() == Ok("1") {
        let added = fixed::MsmTuning {
            runs_added: true,
            ..default
        };
        also.push(("runs added", added));
    }
    let ways = ways(&also);
    for window in sizes("CUZK_MSM_PLAIN_WINDOWS", "14,16,18,20") {
        let table = MsmTable::plain(n, window);
        let ours = |tuning| ours_dense::<C>(stream, &d_points, &table, &d_scalars, n, tuning);
        for (what, tuning) in &ways {
            assert_eq!(
                ours(*tuning),
                expect,
                "{name} 2^{lg} window {window}: ours ({what}) agrees with sppark"
            );
        }
        let mut times = vec![Vec::new(); ways.len()];
        for _ in 0..reps {
            for (t, (_, tuning)) in times.iter_mut().zip(&ways) {
                t.push(time(1, || ours(*tuning)));
            }
        }
        let ms: Vec<f64> = times.into_iter().map(median).collect();
        let each: Vec<String> = ways
            .iter()
            .zip(&ms)
            .map(|((what, _), t)| {
                format!(
                    "{what} {t:8.2} ms ({:.2}x msm_t, {:.2}x ours)",
                    t_sppark / t,
                    ms[0] / t
                )
            })
            .collect();
        println!(
            "{name} dense 2^{lg} window {window}: {}   sppark msm_t {t_sppark:8.2} ms",
            each.join("   "),
        );
    }
}

/// PoRep's bit-heavy scalars (the shares `cuzk fil synth` counts for L at
/// 32 GiB's trees and layers: 51.6% zero, 47.8% one, 0.6% other), canonical;
/// `repeat` of the others one value.
fn porep_scalars(n: usize, repeat: f64) -> Vec<[u64; 4]> {
    let repeated: [u64; 4] = Scalar::random(&mut rand::rngs::StdRng::seed_from_u64(7)).to_repr_le();
    (0..n)
        .into_par_iter()
        .map_init(
            || rand::rngs::StdRng::seed_from_u64(rand::random()),
            |r, _| {
                let u: f64 = rand::Rng::r#gen(r);
                if u < 0.516 {
                    [0; 4]
                } else if u < 0.994 {
                    [1, 0, 0, 0]
                } else if u < 0.994 + 0.006 * repeat {
                    repeated
                } else {
                    let s: [u64; 4] = Scalar::random(&mut *r).to_repr_le();
                    s
                }
            },
        )
        .collect()
}

trait ReprLe {
    fn to_repr_le(&self) -> [u64; 4];
}

impl ReprLe for Scalar {
    fn to_repr_le(&self) -> [u64; 4] {
        let b = ff::PrimeField::to_repr(self);
        std::array::from_fn(|i| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap()))
    }
}

/// One query of a PoRep partition as the engine runs it, at 2^lg terms with
/// PoRep's scalars: prep's lists on the device, the ones by batch addition,
/// the significant tail by sppark's `msm_t` over gathered terms; against
/// one dense `msm_t` over the same scalars. Results compared.
fn porep<C, P>(name: &str, stream: &Stream, lg: u32)
where
    C: FixedCurve<Projective = P>,
    P: Group + Curve + Send + PartialEq + std::fmt::Debug,
    P::AffineRepr: Default + Clone + Send + Copy,
{
    let n = 1usize << lg;
    let started = Instant::now();
    let repeat: f64 = std::env::var("CUZK_MSM_POREP_REPEAT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    let (pts, sc) = (points::<P>(n), porep_scalars(n, repeat));
    let d_points = DeviceBuffer::upload(stream, &pts).unwrap();
    let d_scalars = DeviceBuffer::upload(stream, &sc).unwrap();
    drop(pts);
    let list = || DeviceBuffer::alloc(stream.device(), n * 4).unwrap();
    let (ones, sig_base, sig_scalar) = (list(), list(), list());
    let scratch = DeviceBuffer::alloc(stream.device(), ops::prep_scratch_bytes(n)).unwrap();
    stream.sync().unwrap();
    println!(
        "{name} PoRep 2^{lg}: points and scalars made and uploaded in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let lists = ops::QueryLists {
        ones: &ones,
        sig_base: &sig_base,
        sig_scalar: &sig_scalar,
    };
    let prep = || {
        ops::prep_query(
            stream,
            &d_scalars,
            0,
            n,
            ops::Select::None,
            ops::Select::All,
            &lists,
            Some(&scratch),
        )
        .unwrap()
    };
    let counts = prep();
    let canonical = ops::ScalarForm::Canonical;
    let sum = || ops::sum::<C>(stream, &d_points, &ones, counts.ones).unwrap();
    let tail = || {
        ops::msm_gathered::<C>(
            stream,
            &d_points,
            &sig_base,
            &d_scalars,
            &sig_scalar,
            counts.significant,
            canonical,
        )
        .unwrap()
    };
    let dense = || {
        ops::msm::<C>(
            stream,
            &d_points,
            0,
            C::POINT_BYTES,
            &d_scalars,
            0,
            n,
            canonical,
        )
        .unwrap()
    };
    assert_eq!(
        sum() + tail(),
        dense(),
        "{name} PoRep 2^{lg}: ones and tail agree with the dense MSM"
    );
    let reps = 3;
    let (tp, to, tt, td) = (
        time(reps, prep),
        time(reps, sum),
        time(reps, tail),
        time(reps, dense),
    );
    println!(
        "{name} PoRep 2^{lg} ({} ones, {} other, {:.0}% of them one value): prep {tp:.2} ms + ones {to:.2} ms \
         + tail {tt:.2} ms = {:.2} ms   sppark msm_t over all {td:.2} ms   speedup {:.2}x",
        counts.ones,
        counts.significant,
        100.0 * repeat,
        tp + to + tt,
        td / (tp + to + tt),
    );
    // The ones' sum in each block size against sppark's batch addition (0),
    // and in blocks of 64 with the looped and the fused addition,
    // interleaved, every result compared.
    use ops::AddForm::{Fused, Inlined as Inl, Looped};
    let ways = [
        (0u32, Inl),
        (64, Inl),
        (128, Inl),
        (256, Inl),
        (64, Looped),
        (64, Fused),
    ];
    let in_blocks = |(block, add)| {
        let shape = ops::SumShape { block, add };
        ops::sum_in_blocks::<C>(stream, &d_points, &ones, 0..counts.ones, shape).unwrap()
    };
    let ones_sum = sum();
    for &w in &ways {
        assert_eq!(
            in_blocks(w),
            ones_sum,
            "{name} PoRep 2^{lg}: ones in blocks of {} ({:?})",
            w.0,
            w.1
        );
    }
    let mut times = vec![Vec::new(); ways.len()];
    for _ in 0..5 {
        for (t, &w) in times.iter_mut().zip(&ways) {
            t.push(time(1, || in_blocks(w)));
        }
    }
    let ms: Vec<f64> = times.into_iter().map(median).collect();
    println!(
        "{name} PoRep 2^{lg} ones ({} of them): sppark batch addition {:.2} ms   ours in blocks of 64 {:.2} ms ({:.2}x)   128 {:.2} ms   256 {:.2} ms   64 looped {:.2} ms   64 fused {:.2} ms",
        counts.ones,
        ms[0],
        ms[1],
        ms[0] / ms[1],
        ms[2],
        ms[3],
        ms[4],
        ms[5],
    );
    // The tail on our Pippenger: the fixed-base MSM over a table of no
    // precomputed copies (nothing beyond the points), its windows in groups.
    let sig = counts.significant.max(2);
    let lg_sig = usize::BITS - (sig - 1).leading_zeros();
    let window = std::env::var("CUZK_MSM_TAIL_WINDOW")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(lg_sig.saturating_sub(4).clamp(8, 18));
    let plain = MsmTable::build::<C>(stream, &d_points, n, window, 1).unwrap();
    let gathered = || FixedTerms::Gathered {
        base_idx: &sig_base,
        scalar_idx: &sig_scalar,
    };
    let ours = || {
        fixed::msm_fixed::<C>(
            stream,
            &d_points,
            &plain,
            gathered(),
            &d_scalars,
            counts.significant,
            canonical,
        )
        .unwrap()
    };
    assert_eq!(
        ours(),
        tail(),
        "{name} PoRep 2^{lg}: our tail agrees with msm_t's"
    );
    let (t_ours, t_sppark) = (time(reps, ours), time(reps, tail));
    println!(
        "{name} PoRep 2^{lg} tail of {} terms: ours (window {window}, no copies) {t_ours:.2} ms   \
         sppark msm_t {t_sppark:.2} ms   speedup {:.2}x",
        counts.significant,
        t_sppark / t_ours,
    );
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
    let stream = Stream::new(device).unwrap();
    group::<G1, G1Projective>("G1", &stream, &sizes("CUZK_MSM_G1", "20,22,24,26"));
    group::<G2, G2Projective>("G2", &stream, &sizes("CUZK_MSM_G2", "20,22"));
    for lg in sizes("CUZK_MSM_PLAIN_G1", "") {
        plain::<G1, G1Projective>("G1", &stream, lg);
    }
    for lg in sizes("CUZK_MSM_PLAIN_G2", "") {
        plain::<G2, G2Projective>("G2", &stream, lg);
    }
    for lg in sizes("CUZK_MSM_POREP_G1", "") {
        porep::<G1, G1Projective>("G1", &stream, lg);
    }
    for lg in sizes("CUZK_MSM_POREP_G2", "") {
        porep::<G2, G2Projective>("G2", &stream, lg);
    }
}
