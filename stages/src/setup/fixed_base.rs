//! Many multiples of one fixed point: `s·G` for millions of scalars `s`.
//!
//! A Groth16 setup multiplies its two generators by every evaluated
//! polynomial. With a table of `d·2^(w·k)·G` for every window `k` and signed
//! digit `d` in `1..=2^(w−1)`, one multiple costs `⌈256/w⌉` mixed additions
//! and no doublings (a double-and-add costs ~255 doublings plus the
//! additions). The window is chosen from the number of scalars so that
//! building the table never costs more than the lookups save.

use std::ops::Neg;

use blstrs::{G1Projective, G2Projective, Scalar};
use cuzk_gpu::fixed_base::{self as gpu, FixedBaseCurve};
use ff::PrimeField;
use group::prime::{PrimeCurve, PrimeCurveAffine};
use rayon::prelude::*;

/// Where the multiples are computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    Cpu,
    /// The CUDA device of this ordinal (the CPU if it fails, with a warning).
    Gpu(usize),
}

impl Device {
    /// The first GPU that runs this binary's kernels, else the CPU.
    pub fn auto() -> Self {
        match cuzk_gpu::device::usable_device() {
            Ok(d) => Self::Gpu(d.ordinal),
            Err(_) => Self::Cpu,
        }
    }

    /// `cpu`, `gpu` (the first usable GPU, or why there is none) or `auto`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "cpu" => Ok(Self::Cpu),
            "auto" => Ok(Self::auto()),
            "gpu" => cuzk_gpu::device::usable_device()
                .map(|d| Self::Gpu(d.ordinal))
                .map_err(|why| format!("--device gpu: {why}")),
            other => Err(format!("--device {other}: expected cpu, gpu or auto")),
        }
    }
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Cpu => write!(f, "the CPU"),
            Self::Gpu(d) => write!(f, "GPU {d}"),
        }
    }
}

/// A group the setup multiplies in: G1 or G2.
pub trait SetupCurve: PrimeCurve + Send + Sync
where
    Self::Affine: Send + Sync,
{
    /// The device's kernels for this group.
    type Gpu: FixedBaseCurve<Affine = Self::Affine>;
}

impl SetupCurve for G1Projective {
    type Gpu = gpu::G1;
}

impl SetupCurve for G2Projective {
    type Gpu = gpu::G2;
}

/// Scalars per parallel task: enough to amortise a batch normalisation's
/// one inversion, few enough to spread over the cores.
const CHUNK: usize = 1 << 12;

/// The widest window (a G2 table at 16 bits is 16 × 2^15 points, 96 MiB).
const MAX_WINDOW: u32 = 16;

/// A fixed point's table of signed-digit multiples.
pub struct FixedBase<G: PrimeCurve> {
    window: u32,
    windows: usize,
    /// `table[k·half + d − 1] = d·2^(w·k)·G`, `half = 2^(w−1)`.
    table: Vec<G::Affine>,
}

/// The window width that makes `n` multiples cheapest: lookups
/// (`windows × n` additions) plus the table (`windows × 2^(w−1)` additions).
pub fn window_for(n: usize) -> u32 {
    (2..=MAX_WINDOW)
        .min_by_key(|&w| windows(w) * (n + (1usize << (w - 1))))
        .expect("a window range")
}

/// Windows covering a 255-bit scalar and the final carry of its signed digits.
fn windows(w: u32) -> usize {
    256usize.div_ceil(w as usize)
}

impl<G> FixedBase<G>
where
    G: SetupCurve,
    G::Affine: Send + Sync,
{
    /// The table of `base` for `n` scalars to come.
    pub fn new(base: G, n: usize) -> Self {
        Self::with_window(base, window_for(n))
    }

    /// The table of `base` with a `window`-bit signed digit per lookup.
    pub fn with_window(base: G, window: u32) -> Self {
        assert!(
            (2..=MAX_WINDOW).contains(&window),
            "window {window} out of range"
        );
        let windows = windows(window);
        let half = 1usize << (window - 1);
        // The base of each window, 2^(w·k)·G, by doublings.
        let mut bases = Vec::with_capacity(windows);
        let mut b = base;
        for _ in 0..windows {
            bases.push(b);
            for _ in 0..window {
                b = b.double();
            }
        }
        let mut table = vec![G::Affine::identity(); windows * half];
        table
            .par_chunks_mut(half)
            .zip(bases.par_iter())
            .for_each(|(row, b)| {
                let mut multiples = Vec::with_capacity(half);
                let mut acc = *b;
                for _ in 0..half {
                    multiples.push(acc);
                    acc += b;
                }
                G::batch_normalize(&multiples, row);
            });
        Self {
            window,
            windows,
            table,
        }
    }

    /// The table: row k, entry d − 1 is `d·2^(window·k)·G`.
    pub fn table(&self) -> &[G::Affine] {
        &self.table
    }

    /// The window width in bits.
    pub fn window(&self) -> u32 {
        self.window
    }

    /// `s·G`, as a projective point.
    pub fn mul(&self, s: &Scalar) -> G {
        let half = 1usize << (self.window - 1);
        let mut acc = G::identity();
        for (k, d) in signed_digits(s, self.window, self.windows)
            .into_iter()
            .enumerate()
        {
            if d == 0 {
                continue;
            }
            let p = &self.table[k * half + d.unsigned_abs() as usize - 1];
            if d > 0 {
                acc += p;
            } else {
                acc += &p.neg();
            }
        }
        acc
    }

    /// `out[i] = scalars[i]·G` in affine form, on `device`.
    pub fn mul_many(&self, device: Device, scalars: &[Scalar], out: &mut [G::Affine]) {
        if let Device::Gpu(d) = device {
            match gpu::fixed_base_mul::<G::Gpu>(d as i32, &self.table, self.window, scalars, out) {
                Ok(()) => return,
                Err(e) => tracing::warn!(
                    device = d,
                    "fixed-base multiplication on the GPU failed ({e}); computing it on the CPU"
                ),
            }
        }
        self.mul_many_on_cpu(scalars, out);
    }

    /// `out[i] = scalars[i]·G` in affine form, on every core.
    pub fn mul_many_on_cpu(&self, scalars: &[Scalar], out: &mut [G::Affine]) {
        assert_eq!(scalars.len(), out.len(), "one output per scalar");
        out.par_chunks_mut(CHUNK)
            .zip(scalars.par_chunks(CHUNK))
            .for_each(|(out, scalars)| {
                let projective: Vec<G> = scalars.iter().map(|s| self.mul(s)).collect();
                G::batch_normalize(&projective, out);
            });
    }

    /// The multiples of the nonzero scalars only, in order (what Groth16's
    /// A and B queries keep: a zero scalar is the point at infinity there).
    pub fn mul_nonzero(&self, device: Device, scalars: &[Scalar]) -> Vec<G::Affine> {
        let kept: Vec<Scalar> = scalars
            .par_iter()
            .filter(|s| !bool::from(ff::Field::is_zero(*s)))
            .copied()
            .collect();
        let mut out = identities(kept.len());
        self.mul_many(device, &kept, &mut out);
        out
    }
}

/// `n` points at infinity, written by every core: a 2^27-point query's
/// 13 GB are first touched in parallel, not page by page on one thread.
pub fn identities<A: PrimeCurveAffine + Send>(n: usize) -> Vec<A> {
    (0..n).into_par_iter().map(|_| A::identity()).collect()
}

/// The scalar's canonical integer in `count` signed `w`-bit digits, each in
/// `−2^(w−1) ..= 2^(w−1)`, least significant first.
fn signed_digits(s: &Scalar, w: u32, count: usize) -> Vec<i32> {
    let repr = s.to_repr();
    let bytes = repr.as_ref();
    let bit = |i: usize| -> u32 {
        if i >= 256 {
            0
        } else {
            u32::from(bytes[i / 8] >> (i % 8)) & 1
        }
    };
    let (radix, half) = (1i32 << w, 1i32 << (w - 1));
    let mut digits = Vec::with_capacity(count);
    let mut carry = 0i32;
    for k in 0..count {
        let mut v = carry;
        for j in 0..w as usize {
            v += (bit(k * w as usize + j) as i32) << j;
        }
        if v > half {
            digits.push(v - radix);
            carry = 1;
        } else {
            digits.push(v);
            carry = 0;
        }
    }
    debug_assert_eq!(carry, 0, "a 255-bit scalar fits its windows");
    digits
}

#[cfg(test)]
mod tests {
    use super::*;
    use blstrs::{G1Projective, G2Projective};
    use ff::Field;
    use group::{Curve, Group};
    use rand::SeedableRng;

    fn edge_scalars() -> Vec<Scalar> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut s = vec![
            Scalar::ZERO,
            Scalar::ONE,
            -Scalar::ONE,
            Scalar::from(2u64).pow_vartime([254]),
            Scalar::from(u64::MAX),
        ];
        s.extend((0..200).map(|_| Scalar::random(&mut rng)));
        s
    }

    #[test]
    fn multiples_equal_double_and_add_for_every_window() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let g1 = G1Projective::random(&mut rng);
        let scalars = edge_scalars();
        for w in [2, 3, 5, 8, 11, 13] {
            let table = FixedBase::with_window(g1, w);
            let mut out = vec![blstrs::G1Affine::identity(); scalars.len()];
            table.mul_many(Device::Cpu, &scalars, &mut out);
            for (s, p) in scalars.iter().zip(&out) {
                assert_eq!(*p, (g1 * s).to_affine(), "window {w}, scalar {s:?}");
            }
        }
        let g2 = G2Projective::random(&mut rng);
        let table = FixedBase::<G2Projective>::new(g2, scalars.len());
        for s in &scalars {
            assert_eq!(table.mul(s).to_affine(), (g2 * s).to_affine());
        }
    }

    #[test]
    fn zero_scalars_are_left_out_of_the_nonzero_multiples() {
        let g = G1Projective::generator();
        let table = FixedBase::new(g, 4);
        let out = table.mul_nonzero(
            Device::Cpu,
            &[Scalar::ZERO, Scalar::from(3u64), Scalar::ZERO],
        );
        assert_eq!(out, vec![(g * Scalar::from(3u64)).to_affine()]);
    }

    #[test]
    fn the_window_grows_with_the_number_of_scalars() {
        assert!(window_for(1) <= 4);
        assert!(window_for(1 << 20) >= 14);
        assert_eq!(window_for(usize::MAX / 1024), MAX_WINDOW);
    }
}
