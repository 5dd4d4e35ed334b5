//! GPU operations against the CPU references: NTTs bit for bit, MSMs equal
//! to blst's multi-exponentiation. Skips, saying why, without a usable GPU.

use blstrs::{G1Affine, G1Projective, G2Projective, Scalar};
use cuzk_gpu::cpu::msm::{self as cpu, Terms, g1_raw, g2_raw};
use cuzk_gpu::cpu::ntt::Domain;
use cuzk_gpu::cuda::{DeviceBuffer, Stream};
use cuzk_gpu::fixed::{self, FixedCurve, MsmTable};
use cuzk_gpu::ops::ScalarForm::{Canonical, Montgomery};
use cuzk_gpu::ops::{self, AddForm, G1, G2};
use ff::{Field, PrimeField};
use group::{Curve, Group};
use rand::{Rng, SeedableRng};
use rayon::prelude::*;

fn device() -> Option<i32> {
    match cuzk_gpu::device::usable_device() {
        Ok(d) => Some(d.ordinal as i32),
        Err(why) => {
            eprintln!("skipping GPU test: {why}");
            None
        }
    }
}

fn rng(seed: u64) -> rand::rngs::StdRng {
    rand::rngs::StdRng::seed_from_u64(seed)
}

fn limbs(s: &[Scalar]) -> Vec<[u64; 4]> {
    // SAFETY: Scalar is four Montgomery limbs.
    s.iter()
        .map(|x| unsafe { std::mem::transmute::<Scalar, [u64; 4]>(*x) })
        .collect()
}

fn scalars(limbs: &[[u64; 4]]) -> Vec<Scalar> {
    // SAFETY: as above.
    limbs
        .iter()
        .map(|l| unsafe { std::mem::transmute::<[u64; 4], Scalar>(*l) })
        .collect()
}

fn random_scalars(n: usize, seed: u64) -> Vec<Scalar> {
    let mut r = rng(seed);
    (0..n).map(|_| Scalar::random(&mut r)).collect()
}

/// Points cheaply: walks with 64 random steps, then one batch normalisation.
fn points<P: Group + Curve>(n: usize, seed: u64) -> Vec<P::AffineRepr>
where
    P::AffineRepr: Default + Clone,
{
    let mut r = rng(seed);
    let steps: Vec<P> = (0..64).map(|_| P::random(&mut r)).collect();
    let mut acc = P::random(&mut r);
    let proj: Vec<P> = (0..n)
        .map(|_| {
            acc += steps[r.gen_range(0..64)];
            acc
        })
        .collect();
    let mut out = vec![P::AffineRepr::default(); n];
    P::batch_normalize(&proj, &mut out);
    out
}

fn gpu_ntt(stream: &Stream, x: &[Scalar], lg: u32, inverse: bool, coset: bool) -> Vec<Scalar> {
    let buf = DeviceBuffer::upload(stream, &limbs(x)).unwrap();
    ops::ntt(stream, &buf, lg, inverse, coset).unwrap();
    let mut out = vec![[0u64; 4]; x.len()];
    buf.download(stream, &mut out).unwrap();
    scalars(&out)
}

fn cpu_ntt(x: &[Scalar], lg: u32, inverse: bool, coset: bool) -> Vec<Scalar> {
    let d = Domain::new(lg);
    let g = Scalar::MULTIPLICATIVE_GENERATOR;
    let mut y = x.to_vec();
    if inverse {
        d.intt(&mut y);
        if coset {
            let g_inv = g.invert().unwrap();
            let mut p = Scalar::ONE;
            y.iter_mut().for_each(|v| {
                *v *= p;
                p *= g_inv;
            });
        }
    } else {
        if coset {
            let mut p = Scalar::ONE;
            y.iter_mut().for_each(|v| {
                *v *= p;
                p *= g;
            });
        }
        d.ntt(&mut y);
    }
    y
}

#[test]
fn ntt_matches_the_cpu_bit_for_bit() {
    let Some(dev) = device() else { return };
    let stream = Stream::new(dev).unwrap();
    for lg in [1u32, 2, 5, 10, 13, 16, 20] {
        let x = random_scalars(1 << lg, lg as u64);
        for (inverse, coset) in [(false, false), (true, false), (false, true), (true, true)] {
            let gpu = gpu_ntt(&stream, &x, lg, inverse, coset);
            let cpu = cpu_ntt(&x, lg, inverse, coset);
            assert!(
                gpu == cpu,
                "NTT 2^{lg} inverse={inverse} coset={coset} differs"
            );
            assert_eq!(limbs(&gpu), limbs(&cpu), "bit for bit");
        }
    }
}

/// A 32 GiB PoRep partition's domain, 2^27 (4 GiB of scalars): the forward
/// NTT and the inverse coset NTT, bit for bit against the CPU's (rayon; ~10 s
/// each on 16 cores). The smaller sizes above cover the other directions.
#[test]
fn ntt_of_2_pow_27_matches_the_cpu_bit_for_bit() {
    let Some(dev) = device() else { return };
    let stream = Stream::new(dev).unwrap();
    let lg = 27u32;
    let x: Vec<Scalar> = (0..1u64 << (lg - 16))
        .into_par_iter()
        .flat_map_iter(|c| random_scalars(1 << 16, 27_000 + c))
        .collect();
    for (inverse, coset) in [(false, false), (true, true)] {
        let gpu = gpu_ntt(&stream, &x, lg, inverse, coset);
        let cpu = cpu_ntt(&x, lg, inverse, coset);
        let first = gpu.par_iter().zip(&cpu).position_first(|(g, c)| g != c);
        assert_eq!(
            first, None,
            "NTT 2^{lg} inverse={inverse} coset={coset}: first difference at this index"
        );
    }
}

/// A dense G1 MSM of 2^26 terms as the engine runs one without a table (our
/// Pippenger over the points as they are, the engine's window, several
/// chunks of whole windows or of scalars, runs stored and added, one by one
/// and in affine pairs), against blst on every core,
/// and sppark's `msm_t` too. A 32 GiB PoRep partition's H MSM is 2^27.
#[test]
fn dense_msm_of_2_pow_26_matches_blst() {
    let Some(dev) = device() else { return };
    let stream = Stream::new(dev).unwrap();
    let lg = 26u32;
    let n = 1usize << lg;
    let bases: Vec<G1Affine> = (0..1u64 << (lg - 16))
        .into_par_iter()
        .flat_map_iter(|c| points::<G1Projective>(1 << 16, 26_000 + c))
        .collect();
    let s: Vec<Scalar> = (0..1u64 << (lg - 16))
        .into_par_iter()
        .flat_map_iter(|c| random_scalars(1 << 16, 26_500 + c))
        .collect();
    let canonical: Vec<[u8; 32]> = s.par_iter().map(|x| x.to_bytes_le()).collect();
    let expect = cpu::msm::<cpu::G1>(Terms::Dense {
        bases: g1_raw(&bases),
        scalars: &canonical,
    });
    let d_bases = DeviceBuffer::upload(&stream, &bases).unwrap();
    let d_scalars = DeviceBuffer::upload(&stream, &limbs(&s)).unwrap();
    stream.sync().unwrap();
    let window = fixed::dense_window(n);
    let table = MsmTable::plain(n, window);
    let dense = fixed::FixedTerms::Dense {
        base_offset: 0,
        scalar_offset: 0,
    };
    // Runs stored in chunks of whole windows (the default), added in place,
    // level 0 in affine pairs, and chunks of terms (each later chunk's
    // buckets merged), level 0 in blocks of 64 (the default); and the
    // default in blocks of 128 (256 asked runs as 128); and in every
    // addition form.
    use AddForm::{Fused, Inlined as Inl, Looped};
    let ways = [
        (false, false, false, 64, Inl),
        (true, false, false, 64, Inl),
        (false, true, false, 64, Inl),
        (false, false, true, 64, Inl),
        (false, false, false, 128, Inl),
        (false, false, false, 256, Inl),
        (false, false, false, 64, Looped),
        (false, false, true, 128, Looped),
        (false, false, false, 64, Fused),
        (false, false, true, 256, Fused),
    ];
    // Each with level 0 prefetching points 0, 1, 8 or 10^6 entries ahead in
    // turn (the last beyond every segment).
    let aheads = [0, 1, 8, 1_000_000];
    for (i, (runs_added, pairs, chunk_terms, block, add)) in ways.into_iter().enumerate() {
        let ahead = aheads[i % aheads.len()];
        let tuning = fixed::MsmTuning {
            runs_added,
            pairs,
            chunk_terms,
            block,
            add,
            ahead,
            ..fixed::tuning()
        };
        let got = fixed::msm_fixed_tuned::<G1>(
            &stream, &d_bases, &table, dense, &d_scalars, n, Montgomery, 0, tuning,
        )
        .unwrap();
        assert_eq!(
            got, expect,
            "dense G1 2^{lg}, window {window}, runs added: {runs_added}, pairs: {pairs}, \
             chunks of terms: {chunk_terms}, level 0 in blocks of {block} ({add:?}, prefetching \
             {ahead} ahead), against blst"
        );
    }
    let sppark = ops::msm::<G1>(&stream, &d_bases, 0, 96, &d_scalars, 0, n, Montgomery).unwrap();
    assert_eq!(sppark, expect, "msm_t G1 2^{lg} against blst");
}

/// Random a and b over 2^lg, c = a·b, and the CPU's H (Montgomery limbs).
struct QuotientCase {
    a: Vec<Scalar>,
    b: Vec<Scalar>,
    c: Vec<Scalar>,
    h: Vec<[u64; 4]>,
    z_inv: [u64; 4],
}

impl QuotientCase {
    fn new(lg: u32, seed: u64) -> Self {
        let n = 1 << lg;
        let a = random_scalars(n, seed + lg as u64);
        let b = random_scalars(n, seed + 10 + lg as u64);
        let c: Vec<Scalar> = a.iter().zip(&b).map(|(a, b)| *a * b).collect();
        let d = Domain::get(lg);
        let (mut ca, mut cb, mut cc) = (a.clone(), b.clone(), c.clone());
        d.quotient(&mut ca, &mut cb, &mut cc);
        Self {
            h: limbs(&ca),
            z_inv: limbs(&[d.z_inv_on_coset()])[0],
            a,
            b,
            c,
        }
    }
}

#[test]
fn the_quotient_matches_the_cpu() {
    let Some(dev) = device() else { return };
    let stream = Stream::new(dev).unwrap();
    for lg in [4u32, 12, 18] {
        let q = QuotientCase::new(lg, 10);
        let bufs: Vec<DeviceBuffer> = [&q.a, &q.b, &q.c]
            .iter()
            .map(|v| DeviceBuffer::upload(&stream, &limbs(v)).unwrap())
            .collect();
        ops::quotient(&stream, &bufs[0], &bufs[1], &bufs[2], lg, &q.z_inv).unwrap();
        let mut h = vec![[0u64; 4]; 1 << lg];
        bufs[0].download(&stream, &mut h).unwrap();
        assert_eq!(h, q.h, "H at 2^{lg}");
    }
}

/// The quotient through two buffers (a, then b and c loaded into one
/// scratch buffer in turn) equals the CPU's, bit for bit.
#[test]
fn the_two_buffer_quotient_matches_the_cpu() {
    let Some(dev) = device() else { return };
    let stream = Stream::new(dev).unwrap();
    for lg in [4u32, 12, 18] {
        let n = 1 << lg;
        let QuotientCase {
            a,
            b,
            c,
            h: expect,
            z_inv,
        } = QuotientCase::new(lg, 30);
        let x = DeviceBuffer::upload(&stream, &limbs(&a)).unwrap();
        let scratch = DeviceBuffer::alloc(dev, n * 32).unwrap();
        let q = ops::TwoBufferQuotient {
            stream: &stream,
            a: &x,
            scratch: &scratch,
            lg,
        };
        q.a_to_coset().unwrap();
        scratch.copy_in(&stream, &limbs(&b)).unwrap();
        q.combine(ops::Combine::Mul, &z_inv).unwrap();
        // c replaces b once the stream is past b's use.
        stream.sync().unwrap();
        scratch.copy_in(&stream, &limbs(&c)).unwrap();
        q.combine(ops::Combine::SubScale, &z_inv).unwrap();
        q.finish().unwrap();
        let mut h = vec![[0u64; 4]; n];
        x.download(&stream, &mut h).unwrap();
        assert_eq!(h, expect, "H at 2^{lg}");
    }
}

fn check_g1(dev: i32, stream: &Stream, bases: &[G1Affine], s: &[Scalar], label: &str) {
    let n = s.len();
    let canonical: Vec<[u8; 32]> = s.iter().map(|x| x.to_bytes_le()).collect();
    let expect = cpu::msm::<cpu::G1>(Terms::Dense {
        bases: g1_raw(&bases[..n]),
        scalars: &canonical,
    });
    let d_points = DeviceBuffer::upload(stream, bases).unwrap();
    let d_mont = DeviceBuffer::upload(stream, &limbs(s)).unwrap();
    let d_canon = DeviceBuffer::upload(stream, &canonical).unwrap();
    stream.sync().unwrap();
    let got = ops::msm::<G1>(stream, &d_points, 0, 96, &d_mont, 0, n, Montgomery).unwrap();
    assert_eq!(got, expect, "G1 dense Montgomery {label} n={n}");
    let got = ops::msm::<G1>(stream, &d_points, 0, 96, &d_canon, 0, n, Canonical).unwrap();
    assert_eq!(got, expect, "G1 dense canonical {label} n={n}");
    // Gathered: every third term, reversed; and the sum of those bases.
    let idx: Vec<u32> = (0..n as u32).rev().step_by(3).collect();
    let d_idx = DeviceBuffer::upload(stream, &idx).unwrap();
    stream.sync().unwrap();
    let expect_g = cpu::msm::<cpu::G1>(Terms::Gathered {
        bases: g1_raw(bases),
        base_idx: &idx,
        scalars: &canonical,
        scalar_idx: &idx,
    });
    let got = ops::msm_gathered::<G1>(
        stream,
        &d_points,
        &d_idx,
        &d_canon,
        &d_idx,
        idx.len(),
        Canonical,
    )
    .unwrap();
    assert_eq!(got, expect_g, "G1 gathered {label} n={n}");
    let expect_sum = cpu::sum_gathered::<cpu::G1>(g1_raw(bases), &idx);
    let got = ops::sum::<G1>(stream, &d_points, &d_idx, idx.len()).unwrap();
    assert_eq!(got, expect_sum, "G1 batch addition {label} n={n}");
    // Every block size in every addition form, and sppark's batch addition (0).
    for add in AddForm::ALL {
        for block in [0, 64, 128, 256] {
            let shape = ops::SumShape { block, add };
            let got =
                ops::sum_in_blocks::<G1>(stream, &d_points, &d_idx, 0..idx.len(), shape).unwrap();
            assert_eq!(
                got, expect_sum,
                "G1 batch addition {label} n={n} in blocks of {block} ({add:?})"
            );
        }
    }
    let _ = dev;
}

#[test]
fn g1_msms_match_blst() {
    let Some(dev) = device() else { return };
    let stream = Stream::new(dev).unwrap();
    let bases = points::<G1Projective>(1 << 20, 1);
    for n in [1usize, 2, 3, 31, 100, 1000, 4097, 65_539, 1 << 20] {
        check_g1(dev, &stream, &bases, &random_scalars(n, n as u64), "random");
    }
    for n in [1usize, 7, 5000] {
        check_g1(dev, &stream, &bases, &vec![Scalar::ZERO; n], "all zero");
        check_g1(dev, &stream, &bases, &vec![Scalar::ONE; n], "all one");
        check_g1(dev, &stream, &bases, &vec![-Scalar::ONE; n], "all r-1");
    }
}

#[test]
fn g2_msms_match_blst() {
    let Some(dev) = device() else { return };
    let stream = Stream::new(dev).unwrap();
    let bases = points::<G2Projective>(1 << 16, 2);
    let d_points = DeviceBuffer::upload(&stream, &bases).unwrap();
    for n in [1usize, 2, 3, 100, 4097, 65_536] {
        for (label, s) in [
            ("random", random_scalars(n, 100 + n as u64)),
            ("all zero", vec![Scalar::ZERO; n]),
            ("all one", vec![Scalar::ONE; n]),
        ] {
            let canonical: Vec<[u8; 32]> = s.iter().map(|x| x.to_bytes_le()).collect();
            let expect = cpu::msm::<cpu::G2>(Terms::Dense {
                bases: g2_raw(&bases[..n]),
                scalars: &canonical,
            });
            let d_canon = DeviceBuffer::upload(&stream, &canonical).unwrap();
            stream.sync().unwrap();
            let got =
                ops::msm::<G2>(&stream, &d_points, 0, 192, &d_canon, 0, n, Canonical).unwrap();
            assert_eq!(got, expect, "G2 dense {label} n={n}");
            let idx: Vec<u32> = (0..n as u32).step_by(2).collect();
            let d_idx = DeviceBuffer::upload(&stream, &idx).unwrap();
            stream.sync().unwrap();
            let got = ops::msm_gathered::<G2>(
                &stream,
                &d_points,
                &d_idx,
                &d_canon,
                &d_idx,
                idx.len(),
                Canonical,
            )
            .unwrap();
            let expect = cpu::msm::<cpu::G2>(Terms::Gathered {
                bases: g2_raw(&bases),
                base_idx: &idx,
                scalars: &canonical,
                scalar_idx: &idx,
            });
            assert_eq!(got, expect, "G2 gathered {label} n={n}");
            let expect_sum = cpu::sum_gathered::<cpu::G2>(g2_raw(&bases), &idx);
            let got = ops::sum::<G2>(&stream, &d_points, &d_idx, idx.len()).unwrap();
            assert_eq!(got, expect_sum, "G2 batch addition n={n}");
            for add in AddForm::ALL {
                for block in [0, 64, 128, 256] {
                    let shape = ops::SumShape { block, add };
                    let got =
                        ops::sum_in_blocks::<G2>(&stream, &d_points, &d_idx, 0..idx.len(), shape)
                            .unwrap();
                    assert_eq!(
                        got, expect_sum,
                        "G2 batch addition n={n} in blocks of {block} ({add:?})"
                    );
                }
            }
        }
    }
}

/// The fixed-base MSM of `s` against blst over each table of `bases` (copy 0
/// on the device in `d_bases`): dense at offset 0 and 1 (Montgomery and
/// canonical scalars), gathered (every third term, reversed) and in chunks
/// of scalars, with runs stored and added.
#[allow(clippy::too_many_arguments)]
fn check_fixed<C, K>(
    stream: &Stream,
    bases: &[K::Affine],
    d_bases: &DeviceBuffer,
    tables: &[MsmTable],
    s: &[Scalar],
    label: &str,
) where
    C: FixedCurve,
    K: cpu::Curve<Projective = C::Projective>,
    C::Projective: PartialEq + std::fmt::Debug,
{
    let n = s.len();
    let canonical: Vec<[u8; 32]> = s.iter().map(|x| x.to_bytes_le()).collect();
    let d_mont = DeviceBuffer::upload(stream, &limbs(s)).unwrap();
    let d_canon = DeviceBuffer::upload(stream, &canonical).unwrap();
    let idx: Vec<u32> = (0..n as u32).rev().step_by(3).collect();
    let d_idx = DeviceBuffer::upload(stream, &idx).unwrap();
    stream.sync().unwrap();
    let off = usize::from(n < bases.len());
    let expect = cpu::msm::<K>(Terms::Dense {
        bases: &bases[off..off + n],
        scalars: &canonical,
    });
    let expect_g = cpu::msm::<K>(Terms::Gathered {
        bases,
        base_idx: &idx,
        scalars: &canonical,
        scalar_idx: &idx,
    });
    let dense = |scalar_offset| fixed::FixedTerms::Dense {
        base_offset: off,
        scalar_offset,
    };
    for (i, t) in tables.iter().enumerate() {
        let shape = format!(
            "{label} n={n}, window {} x {} copies",
            t.window(),
            t.copies()
        );
        let got =
            fixed::msm_fixed::<C>(stream, d_bases, t, dense(0), &d_mont, n, Montgomery).unwrap();
        assert_eq!(got, expect, "fixed dense Montgomery {shape}");
        let got =
            fixed::msm_fixed::<C>(stream, d_bases, t, dense(0), &d_canon, n, Canonical).unwrap();
        assert_eq!(got, expect, "fixed dense canonical {shape}");
        let gathered = fixed::FixedTerms::Gathered {
            base_idx: &d_idx,
            scalar_idx: &d_idx,
        };
        let got =
            fixed::msm_fixed::<C>(stream, d_bases, t, gathered, &d_canon, idx.len(), Canonical)
                .unwrap();
        assert_eq!(got, expect_g, "fixed gathered {shape}");
        // In chunks (at least four once n is large): of whole groups of
        // windows where one group's digits fit (the plain tables and few
        // copies), else of scalars, each later chunk's buckets stored apart
        // and joined to the total; or every run
        // added in place (the earlier way); the first table also in pairs,
        // with runs stored and added, and the plain ones (dense MSMs) in
        // pairs with runs stored.
        let per_chunk = (n * fixed::windows(t.window()) as usize / 4).max(1000);
        let ways = [(false, false), (true, false), (false, true), (true, true)];
        let take = match (i, t.copies()) {
            (0, _) => 4,
            (_, 1) => 3,
            _ => 2,
        };
        // And level 0 in blocks of 128 (every other way runs the default's
        // 64), whole; and in each other addition form, in chunks in blocks
        // of 64 and whole in blocks of 128.
        let default = fixed::tuning();
        let tunings = ways
            .into_iter()
            .take(take)
            .map(|(runs_added, pairs)| {
                let tuning = fixed::MsmTuning {
                    runs_added,
                    pairs,
                    ..default
                };
                (tuning, per_chunk)
            })
            .chain([(
                fixed::MsmTuning {
                    block: 128,
                    ..default
                },
                0,
            )])
            // And level 0 prefetching points 1 and 4 entries ahead, whole and
            // in chunks.
            .chain(
                [(1, 0), (4, per_chunk)]
                    .map(|(ahead, chunk)| (fixed::MsmTuning { ahead, ..default }, chunk)),
            )
            .chain(default.add.others().flat_map(|add| {
                [(64, per_chunk), (128, 0)].map(|(block, chunk)| {
                    let tuning = fixed::MsmTuning {
                        block,
                        add,
                        ..default
                    };
                    (tuning, chunk)
                })
            }));
        for (tuning, chunk) in tunings {
            let got = fixed::msm_fixed_tuned::<C>(
                stream,
                d_bases,
                t,
                dense(0),
                &d_canon,
                n,
                Canonical,
                chunk,
                tuning,
            )
            .unwrap();
            assert_eq!(
                got, expect,
                "fixed dense in chunks of {chunk} digits (0: whole) {shape}, runs added: {}, pairs: {}, \
                 level 0 in blocks of {} ({:?}, prefetching {} ahead)",
                tuning.runs_added, tuning.pairs, tuning.block, tuning.add, tuning.ahead
            );
        }
    }
}

/// Tables of full size, with fewer copies than windows (their groups joined
/// on the host), and with a narrow window; and plain ones (no copies: the
/// engine's Pippenger for gathered and dense MSMs without a table), as the
/// engine sizes them and narrow.
fn tables<C: FixedCurve>(stream: &Stream, d_bases: &DeviceBuffer, n: usize) -> Vec<MsmTable> {
    let (window, copies) = fixed::plan(n, C::POINT_BYTES, usize::MAX).unwrap();
    let built = [(window, copies), (window, 3), (9, 5)]
        .into_iter()
        .map(|(w, c)| MsmTable::build::<C>(stream, d_bases, n, w, c).unwrap());
    let plain = [fixed::plain_window(n), fixed::dense_window(n), 9].map(|w| MsmTable::plain(n, w));
    built.chain(plain).collect()
}

/// Scalars that repeat: every bucket of every window full of one value's
/// terms (msm_t gives such a bucket one thread), or a third of them so.
fn edge_scalars(n: usize) -> [(&'static str, Vec<Scalar>); 4] {
    let mut third = random_scalars(n, 5);
    let value = random_scalars(1, 6)[0];
    third.iter_mut().step_by(3).for_each(|s| *s = value);
    [
        ("all zero", vec![Scalar::ZERO; n]),
        ("all one", vec![Scalar::ONE; n]),
        ("all r-1", vec![-Scalar::ONE; n]),
        ("a third one value", third),
    ]
}

#[test]
fn fixed_base_g1_msms_match_blst() {
    let Some(dev) = device() else { return };
    let stream = Stream::new(dev).unwrap();
    let bases = points::<G1Projective>(1 << 20, 1);
    let d_bases = DeviceBuffer::upload(&stream, &bases).unwrap();
    let tabs = tables::<G1>(&stream, &d_bases, bases.len());
    let raw = g1_raw(&bases);
    for n in [1usize, 2, 3, 31, 100, 1000, 4097, 65_539, (1 << 20) - 1] {
        let s = random_scalars(n, 7 + n as u64);
        check_fixed::<G1, cpu::G1>(&stream, raw, &d_bases, &tabs, &s, "random");
    }
    for n in [1usize, 7, 5000] {
        for (label, s) in edge_scalars(n) {
            check_fixed::<G1, cpu::G1>(&stream, raw, &d_bases, &tabs, &s, label);
        }
    }
    // One point repeated: every bucket adds a point to itself (doubling) and
    // opposite digits cancel (infinity).
    let same = vec![bases[5]; 1 << 12];
    let d_same = DeviceBuffer::upload(&stream, &same).unwrap();
    let same_tabs = tables::<G1>(&stream, &d_same, same.len());
    for (label, s) in [
        ("random", random_scalars(same.len() - 1, 11)),
        ("all one", vec![Scalar::ONE; same.len() - 1]),
    ] {
        let label = format!("repeated point, {label}");
        check_fixed::<G1, cpu::G1>(&stream, g1_raw(&same), &d_same, &same_tabs, &s, &label);
    }
}

#[test]
fn fixed_base_g2_msms_match_blst() {
    let Some(dev) = device() else { return };
    let stream = Stream::new(dev).unwrap();
    let bases = points::<G2Projective>(1 << 16, 2);
    let d_bases = DeviceBuffer::upload(&stream, &bases).unwrap();
    let tabs = tables::<G2>(&stream, &d_bases, bases.len());
    let raw = g2_raw(&bases);
    for n in [1usize, 2, 3, 100, 4097, (1 << 16) - 1] {
        let s = random_scalars(n, 200 + n as u64);
        check_fixed::<G2, cpu::G2>(&stream, raw, &d_bases, &tabs, &s, "random");
    }
    for (label, s) in edge_scalars(3000) {
        check_fixed::<G2, cpu::G2>(&stream, raw, &d_bases, &tabs, &s, label);
    }
    let same = vec![bases[3]; 1 << 10];
    let d_same = DeviceBuffer::upload(&stream, &same).unwrap();
    let same_tabs = tables::<G2>(&stream, &d_same, same.len());
    let s = random_scalars(same.len() - 1, 13);
    check_fixed::<G2, cpu::G2>(
        &stream,
        g2_raw(&same),
        &d_same,
        &same_tabs,
        &s,
        "repeated point",
    );
}

/// 2^24 terms, as the benchmark's largest G1 size below 2^26: the default
/// table (window 22, 12 copies) against blst.
#[test]
fn fixed_base_g1_msm_of_2_pow_24_matches_blst() {
    let Some(dev) = device() else { return };
    let stream = Stream::new(dev).unwrap();
    let n = 1usize << 24;
    let bases: Vec<G1Affine> = (0..n >> 16)
        .into_par_iter()
        .flat_map_iter(|c| points::<G1Projective>(1 << 16, 1000 + c as u64))
        .collect();
    let s: Vec<Scalar> = (0..n >> 16)
        .into_par_iter()
        .flat_map_iter(|c| random_scalars(1 << 16, 5000 + c as u64))
        .collect();
    let d_bases = DeviceBuffer::upload(&stream, &bases).unwrap();
    let (window, copies) = fixed::plan(n, 96, usize::MAX).unwrap();
    let table = MsmTable::build::<G1>(&stream, &d_bases, n, window, copies).unwrap();
    let canonical: Vec<[u8; 32]> = s.par_iter().map(|x| x.to_bytes_le()).collect();
    let d_mont = DeviceBuffer::upload(&stream, &limbs(&s)).unwrap();
    stream.sync().unwrap();
    let expect = cpu::msm::<cpu::G1>(Terms::Dense {
        bases: g1_raw(&bases),
        scalars: &canonical,
    });
    let terms = fixed::FixedTerms::Dense {
        base_offset: 0,
        scalar_offset: 0,
    };
    let got =
        fixed::msm_fixed::<G1>(&stream, &d_bases, &table, terms, &d_mont, n, Montgomery).unwrap();
    assert_eq!(got, expect, "fixed-base G1 MSM of 2^24");
}

/// The cuts of an ascending index list at chunk starts, and indices made
/// relative to a chunk and back, against the host's `partition_point`.
#[test]
fn list_lower_bounds_and_shifts_match_the_host() {
    let Some(dev) = device() else { return };
    let stream = Stream::new(dev).unwrap();
    let mut r = rng(7);
    let mut list: Vec<u32> = (0..100_000u32).filter(|_| r.gen_bool(0.3)).collect();
    list.push(99_999);
    let d_list = DeviceBuffer::upload(&stream, &list).unwrap();
    // Starts at chunk edges, past the end, below the first, on and between entries.
    let values: Vec<u32> = (0..=100_001u32)
        .step_by(977)
        .chain([0, 99_999, 100_000, u32::MAX])
        .collect();
    let got = ops::lower_bounds(&stream, &d_list, list.len(), &values).unwrap();
    let expect: Vec<u64> = values
        .iter()
        .map(|&v| list.partition_point(|&x| x < v) as u64)
        .collect();
    assert_eq!(got, expect);
    // A sub-range shifted down by 5,000 and back.
    let terms = 1_000..20_000;
    ops::shift_indices(&stream, &d_list, terms.clone(), 5_000u32.wrapping_neg()).unwrap();
    let mut shifted = vec![0u32; list.len()];
    d_list.download(&stream, &mut shifted).unwrap();
    for (k, (&was, &now)) in list.iter().zip(&shifted).enumerate() {
        let expect = if terms.contains(&k) {
            was.wrapping_sub(5_000)
        } else {
            was
        };
        assert_eq!(now, expect, "entry {k}");
    }
    ops::shift_indices(&stream, &d_list, terms, 5_000).unwrap();
    d_list.download(&stream, &mut shifted).unwrap();
    assert_eq!(shifted, list);
}
