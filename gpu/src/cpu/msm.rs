//! Multi-scalar multiplication on the CPU with blst's Pippenger tiles,
//! scheduled on the calling rayon pool.
//!
//! The work is cut into tiles (a range of points x a window of scalar bits);
//! each tile is one `blst_p*s_tile_pippenger` call, so every core works on a
//! full-size window and the pool that runs the stage also runs its MSM.
//! Bases and scalars may be gathered through index lists (prep_msm's packing)
//! without copying points: blst reads them through pointer arrays.

use blst::{blst_p1, blst_p1_affine, blst_p2, blst_p2_affine, limb_t};
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective};
use rayon::prelude::*;

/// Scalars are canonical little-endian 32-byte integers below the group order.
pub type ScalarBytes = [u8; 32];

const SCALAR_BITS: usize = 255;

/// The blst entry points for one curve group.
pub trait Curve: Sized + Send + Sync + 'static {
    type Affine: Send + Sync + 'static;
    type Raw: Copy + Default + Send + Sync + 'static;
    type Projective: Send;

    /// # Safety
    /// Pointer arrays as blst documents: `points`/`scalars` hold one pointer per
    /// entry, or a first pointer followed by null for a contiguous array.
    unsafe fn tile(
        ret: *mut Self::Raw,
        points: *const *const Self::Affine,
        npoints: usize,
        scalars: *const *const u8,
        scratch: *mut limb_t,
        bit0: usize,
        window: usize,
    );
    /// `point * scalar` for one term (blst's tiles need at least two points).
    fn mult_one(point: &Self::Affine, scalar: &ScalarBytes) -> Self::Raw;
    /// # Safety
    /// As for `tile`.
    unsafe fn add_affine_batch(
        ret: *mut Self::Raw,
        points: *const *const Self::Affine,
        npoints: usize,
    );
    fn add(a: &mut Self::Raw, b: &Self::Raw);
    fn double(a: &mut Self::Raw);
    /// Bytes of one bucket in blst's Pippenger.
    fn bucket_bytes() -> usize;
    fn into_projective(raw: Self::Raw) -> Self::Projective;
}

/// G1 over blstrs types.
pub struct G1;
/// G2 over blstrs types.
pub struct G2;

macro_rules! curve_impl {
    ($name:ident, $aff:ty, $raw:ty, $proj:ty, $tile:ident, $add:ident, $dadd:ident, $dbl:ident, $scratch:ident, $from_affine:ident, $mult:ident) => {
        impl Curve for $name {
            type Affine = $aff;
            type Raw = $raw;
            type Projective = $proj;

            unsafe fn tile(
                ret: *mut $raw,
                points: *const *const $aff,
                npoints: usize,
                scalars: *const *const u8,
                scratch: *mut limb_t,
                bit0: usize,
                window: usize,
            ) {
                unsafe {
                    blst::$tile(
                        ret,
                        points,
                        npoints,
                        scalars,
                        SCALAR_BITS,
                        scratch,
                        bit0,
                        window,
                    )
                }
            }

            fn mult_one(point: &$aff, scalar: &ScalarBytes) -> $raw {
                let mut p = <$raw>::default();
                let mut out = <$raw>::default();
                // SAFETY: valid point; the scalar is 32 bytes, 255 bits of which are read.
                unsafe {
                    blst::$from_affine(&mut p, point);
                    blst::$mult(&mut out, &p, scalar.as_ptr(), SCALAR_BITS);
                }
                out
            }

            unsafe fn add_affine_batch(ret: *mut $raw, points: *const *const $aff, npoints: usize) {
                unsafe { blst::$add(ret, points, npoints) }
            }

            fn add(a: &mut $raw, b: &$raw) {
                let lhs = *a;
                // SAFETY: valid points; blst handles equal inputs and infinity.
                unsafe { blst::$dadd(a, &lhs, b) }
            }

            fn double(a: &mut $raw) {
                let lhs = *a;
                // SAFETY: valid point.
                unsafe { blst::$dbl(a, &lhs) }
            }

            fn bucket_bytes() -> usize {
                // For zero points blst picks a 1-bit window: exactly one bucket.
                // SAFETY: a pure size computation.
                unsafe { blst::$scratch(0) }
            }

            fn into_projective(raw: $raw) -> $proj {
                // SAFETY: blstrs' projective types are repr(transparent) over blst's.
                unsafe { std::mem::transmute::<$raw, $proj>(raw) }
            }
        }
    };
}

curve_impl!(
    G1,
    blst_p1_affine,
    blst_p1,
    G1Projective,
    blst_p1s_tile_pippenger,
    blst_p1s_add,
    blst_p1_add_or_double,
    blst_p1_double,
    blst_p1s_mult_pippenger_scratch_sizeof,
    blst_p1_from_affine,
    blst_p1_mult
);
curve_impl!(
    G2,
    blst_p2_affine,
    blst_p2,
    G2Projective,
    blst_p2s_tile_pippenger,
    blst_p2s_add,
    blst_p2_add_or_double,
    blst_p2_double,
    blst_p2s_mult_pippenger_scratch_sizeof,
    blst_p2_from_affine,
    blst_p2_mult
);

/// Views blstrs affine points as blst's (both repr(transparent)).
pub fn g1_raw(points: &[G1Affine]) -> &[blst_p1_affine] {
    // SAFETY: G1Affine is repr(transparent) over blst_p1_affine.
    unsafe { std::slice::from_raw_parts(points.as_ptr().cast(), points.len()) }
}

/// Views blstrs affine points as blst's (both repr(transparent)).
pub fn g2_raw(points: &[G2Affine]) -> &[blst_p2_affine] {
    // SAFETY: G2Affine is repr(transparent) over blst_p2_affine.
    unsafe { std::slice::from_raw_parts(points.as_ptr().cast(), points.len()) }
}

/// Which points and scalars an MSM combines.
#[derive(Clone, Copy)]
pub enum Terms<'a, A> {
    /// `bases[i] * scalars[i]` for every i.
    Dense {
        bases: &'a [A],
        scalars: &'a [ScalarBytes],
    },
    /// `bases[base_idx[k]] * scalars[scalar_idx[k]]` for every k.
    Gathered {
        bases: &'a [A],
        base_idx: &'a [u32],
        scalars: &'a [ScalarBytes],
        scalar_idx: &'a [u32],
    },
}

impl<A> Terms<'_, A> {
    pub fn len(&self) -> usize {
        match self {
            Terms::Dense { bases, scalars } => bases.len().min(scalars.len()),
            Terms::Gathered { base_idx, .. } => base_idx.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// blst's window choice for `n` points (bits of n, less a few).
fn window_bits(n: usize) -> usize {
    let bits = usize::BITS as usize - n.leading_zeros() as usize;
    match bits {
        b if b > 13 => b - 4,
        b if b > 5 => b - 3,
        _ => 2,
    }
}

/// Pointer arrays through which blst reads gathered terms.
struct Gather<A> {
    points: Vec<*const A>,
    scalars: Vec<*const u8>,
}

// SAFETY: the pointers refer to data borrowed for the whole MSM call, read only.
unsafe impl<A> Sync for Gather<A> {}

impl<A: Sync> Gather<A> {
    /// Pointer arrays starting at term `start`.
    fn from(&self, start: usize) -> (*const *const A, *const *const u8) {
        (
            self.points[start..].as_ptr(),
            self.scalars[start..].as_ptr(),
        )
    }

    fn new(terms: &Terms<'_, A>) -> Self {
        match *terms {
            Terms::Dense { .. } => Self {
                points: vec![],
                scalars: vec![],
            },
            Terms::Gathered {
                bases,
                base_idx,
                scalars,
                scalar_idx,
            } => Self {
                points: base_idx
                    .iter()
                    .map(|&i| &bases[i as usize] as *const A)
                    .collect(),
                scalars: scalar_idx
                    .iter()
                    .map(|&i| scalars[i as usize].as_ptr())
                    .collect(),
            },
        }
    }
}

/// `sum(bases * scalars)` over `terms`, using the current rayon pool.
pub fn msm<C: Curve>(terms: Terms<'_, C::Affine>) -> C::Projective {
    let n = terms.len();
    if n == 0 {
        return C::into_projective(C::Raw::default());
    }
    if n == 1 {
        let (point, scalar) = match terms {
            Terms::Dense { bases, scalars } => (&bases[0], &scalars[0]),
            Terms::Gathered {
                bases,
                base_idx,
                scalars,
                scalar_idx,
            } => (
                &bases[base_idx[0] as usize],
                &scalars[scalar_idx[0] as usize],
            ),
        };
        return C::into_projective(C::mult_one(point, scalar));
    }
    let window = window_bits(n);
    // Booth-encoded windows borrow from the window above, so the top row also
    // takes the final carry: one more row when the bits divide evenly.
    let rows = SCALAR_BITS / window + 1;
    // Enough columns that every thread has tiles, none under 512 points (and
    // so none under the two points a blst tile needs).
    let threads = rayon::current_num_threads();
    let columns = (2 * threads).div_ceil(rows).clamp(1, (n / 512).max(1));
    let column_start = |c: usize| c * n / columns;
    let gather = Gather::new(&terms);
    let bucket_words = (C::bucket_bytes() << (window - 1)).div_ceil(std::mem::size_of::<limb_t>());

    let tiles: Vec<C::Raw> = (0..rows * columns)
        .into_par_iter()
        .map_init(
            || vec![0 as limb_t; bucket_words],
            |scratch, t| {
                let (row, col) = (t / columns, t % columns);
                let start = column_start(col);
                let len = column_start(col + 1) - start;
                // A pointer followed by null tells blst the rest is contiguous.
                let dense: ([*const C::Affine; 2], [*const u8; 2]);
                let (p, s) = match &terms {
                    Terms::Dense { bases, scalars } => {
                        dense = (
                            [&bases[start] as *const _, std::ptr::null()],
                            [scalars[start].as_ptr(), std::ptr::null()],
                        );
                        (dense.0.as_ptr(), dense.1.as_ptr())
                    }
                    Terms::Gathered { .. } => gather.from(start),
                };
                let mut out = C::Raw::default();
                // SAFETY: `p`/`s` address `len` valid terms (a full pointer array or
                // a contiguous range); scratch holds 2^(window-1) buckets.
                unsafe {
                    C::tile(
                        &mut out,
                        p,
                        len,
                        s,
                        scratch.as_mut_ptr(),
                        row * window,
                        window,
                    )
                };
                out
            },
        )
        .collect();

    // Sum each row's columns, then Horner over rows from the top bits down.
    let mut acc = C::Raw::default();
    for row in (0..rows).rev() {
        for _ in 0..window {
            C::double(&mut acc);
        }
        for col in 0..columns {
            C::add(&mut acc, &tiles[row * columns + col]);
        }
    }
    C::into_projective(acc)
}

/// `sum(bases[idx])`: the terms whose scalar is one, by batched affine addition.
pub fn sum_gathered<C: Curve>(bases: &[C::Affine], idx: &[u32]) -> C::Projective {
    const CHUNK: usize = 1 << 14;
    let partial: Vec<C::Raw> = idx
        .par_chunks(CHUNK)
        .map(|chunk| {
            let ptrs: Vec<*const C::Affine> = chunk
                .iter()
                .map(|&i| &bases[i as usize] as *const _)
                .collect();
            let mut out = C::Raw::default();
            // SAFETY: one valid pointer per point.
            unsafe { C::add_affine_batch(&mut out, ptrs.as_ptr(), ptrs.len()) };
            out
        })
        .collect();
    let mut acc = C::Raw::default();
    for p in &partial {
        C::add(&mut acc, p);
    }
    C::into_projective(acc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use blstrs::Scalar;
    use ff::Field;
    use group::{Curve as _, Group};
    use rand_core::SeedableRng;

    fn rng() -> rand::rngs::StdRng {
        rand::rngs::StdRng::seed_from_u64(7)
    }

    fn points(n: usize) -> Vec<G1Affine> {
        let mut r = rng();
        let p: Vec<G1Projective> = (0..n).map(|_| G1Projective::random(&mut r)).collect();
        let mut out = vec![G1Affine::default(); n];
        G1Projective::batch_normalize(&p, &mut out);
        out
    }

    fn naive(bases: &[G1Affine], scalars: &[Scalar]) -> G1Projective {
        bases
            .iter()
            .zip(scalars)
            .map(|(b, s)| G1Projective::from(*b) * s)
            .sum()
    }

    #[test]
    fn dense_and_gathered_match_naive() {
        let mut r = rng();
        // Sizes cover every window width from 2 to 9 bits, including those
        // that divide 255 (3, 5) where the top window carries.
        for n in [1usize, 2, 3, 31, 50, 100, 200, 1000, 2000, 4097, 9000] {
            let bases = points(n);
            let scalars: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut r)).collect();
            let bytes: Vec<ScalarBytes> = scalars.iter().map(|s| s.to_bytes_le()).collect();
            let expect = naive(&bases, &scalars);
            let got = msm::<G1>(Terms::Dense {
                bases: g1_raw(&bases),
                scalars: &bytes,
            });
            assert_eq!(got, expect, "dense n={n}");

            // Every other term, reversed, through index lists.
            let idx: Vec<u32> = (0..n as u32).rev().step_by(2).collect();
            let sub_b: Vec<_> = idx.iter().map(|&i| bases[i as usize]).collect();
            let sub_s: Vec<_> = idx.iter().map(|&i| scalars[i as usize]).collect();
            let got = msm::<G1>(Terms::Gathered {
                bases: g1_raw(&bases),
                base_idx: &idx,
                scalars: &bytes,
                scalar_idx: &idx,
            });
            assert_eq!(got, naive(&sub_b, &sub_s), "gathered n={n}");
            assert_eq!(
                sum_gathered::<G1>(g1_raw(&bases), &idx),
                sub_b
                    .iter()
                    .map(|b| G1Projective::from(*b))
                    .sum::<G1Projective>()
            );
        }
    }

    #[test]
    fn edge_cases() {
        let bases = points(600);
        let zeros = vec![[0u8; 32]; 600];
        let got = msm::<G1>(Terms::Dense {
            bases: g1_raw(&bases),
            scalars: &zeros,
        });
        assert!(bool::from(got.is_identity()));
        let ones = vec![Scalar::ONE.to_bytes_le(); 600];
        let got = msm::<G1>(Terms::Dense {
            bases: g1_raw(&bases),
            scalars: &ones,
        });
        assert_eq!(
            got.to_affine(),
            bases
                .iter()
                .map(|b| G1Projective::from(*b))
                .sum::<G1Projective>()
                .to_affine()
        );
        let max = (-Scalar::ONE).to_bytes_le();
        let got = msm::<G1>(Terms::Dense {
            bases: g1_raw(&bases[..1]),
            scalars: &[max],
        });
        assert_eq!(got, -G1Projective::from(bases[0]));
        let empty = msm::<G1>(Terms::Dense {
            bases: g1_raw(&[]),
            scalars: &[],
        });
        assert!(bool::from(empty.is_identity()));
    }

    #[test]
    fn g2_matches_naive() {
        let mut r = rng();
        let n = 300;
        let p: Vec<G2Projective> = (0..n).map(|_| G2Projective::random(&mut r)).collect();
        let mut bases = vec![G2Affine::default(); n];
        G2Projective::batch_normalize(&p, &mut bases);
        let scalars: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut r)).collect();
        let bytes: Vec<ScalarBytes> = scalars.iter().map(|s| s.to_bytes_le()).collect();
        let expect: G2Projective = bases
            .iter()
            .zip(&scalars)
            .map(|(b, s)| G2Projective::from(*b) * s)
            .sum();
        assert_eq!(
            msm::<G2>(Terms::Dense {
                bases: g2_raw(&bases),
                scalars: &bytes
            }),
            expect
        );
    }
}
