//! Arena regions hold scalars as raw `[u64; 4]` limbs; these views give them
//! their field type (Montgomery form) or their canonical byte form.

use blstrs::Scalar;
use rayon::prelude::*;

pub use cuzk_gpu::cpu::msm::ScalarBytes;

/// Raw storage of one scalar in an arena.
pub type Limbs = [u64; 4];

const _: () = assert!(std::mem::size_of::<Scalar>() == std::mem::size_of::<Limbs>());
const _: () = assert!(std::mem::align_of::<Scalar>() <= std::mem::align_of::<Limbs>());
const _: () = assert!(std::mem::size_of::<ScalarBytes>() == std::mem::size_of::<Limbs>());

/// Limbs as field elements.
pub fn as_scalars(limbs: &mut [Limbs]) -> &mut [Scalar] {
    // SAFETY: Scalar is repr(transparent) over blst_fr, a repr(C) [u64; 4];
    // every limb pattern below the modulus is a value and arenas only ever
    // hold values written through this view or zeroes.
    unsafe { std::slice::from_raw_parts_mut(limbs.as_mut_ptr().cast(), limbs.len()) }
}

/// Limbs as field elements, read-only.
pub fn as_scalars_ref(limbs: &[Limbs]) -> &[Scalar] {
    // SAFETY: as in `as_scalars`.
    unsafe { std::slice::from_raw_parts(limbs.as_ptr().cast(), limbs.len()) }
}

/// Field elements as their limbs (Montgomery form, fully reduced: equal
/// values have equal limbs, so comparing limbs compares values).
pub fn as_limbs(scalars: &[Scalar]) -> &[Limbs] {
    // SAFETY: as in `as_scalars`, the other way round.
    unsafe { std::slice::from_raw_parts(scalars.as_ptr().cast(), scalars.len()) }
}

/// Limbs already converted by [`to_canonical`], as little-endian bytes.
pub fn as_bytes(limbs: &[Limbs]) -> &[ScalarBytes] {
    // SAFETY: same size, weaker alignment, any bytes are valid.
    unsafe { std::slice::from_raw_parts(limbs.as_ptr().cast(), limbs.len()) }
}

/// Converts field elements (Montgomery form) to canonical little-endian bytes
/// in place, the form MSMs read.
pub fn to_canonical(limbs: &mut [Limbs]) {
    limbs.par_iter_mut().with_min_len(1 << 12).for_each(|l| {
        // SAFETY: as in `as_scalars`, for one element.
        let s: Scalar = unsafe { std::mem::transmute::<Limbs, Scalar>(*l) };
        // SAFETY: 32 bytes into 32 bytes.
        *l = unsafe { std::mem::transmute::<ScalarBytes, Limbs>(s.to_bytes_le()) };
    });
}
