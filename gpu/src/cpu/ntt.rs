//! Number-theoretic transforms over the BLS12-381 scalar field on the CPU,
//! and the H-polynomial pipeline of the Groth16 prover built from them.
//!
//! Forward transforms run decimation-in-time (bit-reversed in, natural out)
//! and inverse ones decimation-in-frequency (natural in, bit-reversed out), so
//! the H pipeline never permutes a, b or c; only H itself is put back in
//! natural order at the end. Stages that fit in cache run block by block.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use blstrs::Scalar;
use ff::{Field, PrimeField};
use rayon::prelude::*;

/// Butterflies whose span fits this many elements run block-wise, in cache.
const BLOCK: usize = 1 << 12;
/// Work per rayon task in a global stage.
const GRAIN: usize = 1 << 12;

/// Precomputed constants of one evaluation domain of size 2^log_n.
pub struct Domain {
    pub log_n: u32,
    pub n: usize,
    twiddles: Vec<Scalar>,
    inv_twiddles: Vec<Scalar>,
    n_inv: Scalar,
    /// 1 / Z(g) where Z(x) = x^n - 1 is constant on the coset g·<ω>.
    z_inv_on_coset: Scalar,
    coset_in: CosetTable,
    coset_out: CosetTable,
}

/// `g^rev(p) · scale` for bit-reversed position p, factored into two small
/// tables (low and high bits of p) so it costs O(sqrt n) memory.
struct CosetTable {
    low_bits: u32,
    low: Vec<Scalar>,
    high: Vec<Scalar>,
}

fn bitrev(x: usize, bits: u32) -> usize {
    if bits == 0 {
        0
    } else {
        x.reverse_bits() >> (usize::BITS - bits)
    }
}

fn powers(base: Scalar, n: usize) -> Vec<Scalar> {
    let mut out = Vec::with_capacity(n);
    let mut acc = Scalar::ONE;
    for _ in 0..n {
        out.push(acc);
        acc *= base;
    }
    out
}

impl CosetTable {
    fn new(g: Scalar, scale: Scalar, log_n: u32) -> Self {
        let low_bits = log_n / 2;
        let high_bits = log_n - low_bits;
        // Position p = high·2^low_bits + low reverses to
        // rev(low)·2^high_bits + rev(high).
        let g_shifted = g.pow_vartime([1u64 << high_bits]);
        let low = (0..1usize << low_bits)
            .map(|l| g_shifted.pow_vartime([bitrev(l, low_bits) as u64]))
            .collect();
        let high = (0..1usize << high_bits)
            .map(|h| g.pow_vartime([bitrev(h, high_bits) as u64]) * scale)
            .collect();
        Self {
            low_bits,
            low,
            high,
        }
    }

    fn apply(&self, a: &mut [Scalar]) {
        a.par_chunks_mut(1 << self.low_bits)
            .zip(self.high.par_iter())
            .for_each(|(chunk, hi)| {
                for (x, lo) in chunk.iter_mut().zip(&self.low) {
                    *x *= *hi * lo;
                }
            });
    }
}

impl Domain {
    /// Builds the constants for a domain of 2^log_n points.
    pub fn new(log_n: u32) -> Self {
        assert!(
            log_n <= Scalar::S,
            "domain 2^{log_n} exceeds the field's 2-adicity"
        );
        let n = 1usize << log_n;
        let omega = (log_n..Scalar::S).fold(Scalar::ROOT_OF_UNITY, |w, _| w.square());
        let omega_inv = omega.invert().expect("roots of unity are invertible");
        let n_inv = Scalar::from(n as u64).invert().expect("n is invertible");
        let g = Scalar::MULTIPLICATIVE_GENERATOR;
        let g_inv = g.invert().expect("the generator is invertible");
        let z = g.pow_vartime([n as u64]) - Scalar::ONE;
        Self {
            log_n,
            n,
            twiddles: powers(omega, n / 2),
            inv_twiddles: powers(omega_inv, n / 2),
            n_inv,
            z_inv_on_coset: z.invert().expect("g is not an n-th root of unity"),
            coset_in: CosetTable::new(g, n_inv, log_n),
            coset_out: CosetTable::new(g_inv, n_inv, log_n),
        }
    }

    /// The shared domain of 2^log_n points (built once, then cached).
    pub fn get(log_n: u32) -> Arc<Domain> {
        static CACHE: OnceLock<Mutex<HashMap<u32, Arc<Domain>>>> = OnceLock::new();
        let cache = CACHE.get_or_init(Default::default);
        if let Some(d) = cache.lock().unwrap().get(&log_n) {
            return d.clone();
        }
        let d = Arc::new(Domain::new(log_n));
        cache.lock().unwrap().entry(log_n).or_insert(d).clone()
    }

    /// 1 / Z(g), Z(x) = x^n − 1, on the coset g·<ω> with g = 7 (blstrs'
    /// multiplicative generator, and sppark's coset generator).
    pub fn z_inv_on_coset(&self) -> Scalar {
        self.z_inv_on_coset
    }

    /// Evaluations at ω^i of the polynomial with coefficients `a` (natural order).
    pub fn ntt(&self, a: &mut [Scalar]) {
        assert_eq!(a.len(), self.n);
        bitrev_permute(a);
        self.dit(a, &self.twiddles);
    }

    /// Coefficients of the polynomial with evaluations `a` at ω^i (natural order).
    pub fn intt(&self, a: &mut [Scalar]) {
        assert_eq!(a.len(), self.n);
        self.dif(a, &self.inv_twiddles);
        bitrev_permute(a);
        let n_inv = self.n_inv;
        a.par_iter_mut()
            .with_min_len(GRAIN)
            .for_each(|x| *x *= n_inv);
    }

    /// The Groth16 quotient: given evaluations of A, B, C over the domain,
    /// leaves in `a` the coefficients of H = (A·B − C) / Z, computed on the
    /// coset g·<ω> (where Z does not vanish). `b` and `c` are scratch.
    pub fn quotient(&self, a: &mut [Scalar], b: &mut [Scalar], c: &mut [Scalar]) {
        assert!(a.len() == self.n && b.len() == self.n && c.len() == self.n);
        let to_coset = |x: &mut [Scalar]| {
            self.dif(x, &self.inv_twiddles); // coefficients, bit-reversed
            self.coset_in.apply(x); // · g^k / n
            self.dit(x, &self.twiddles); // evaluations on the coset, natural
        };
        rayon::join(
            || to_coset(a),
            || rayon::join(|| to_coset(b), || to_coset(c)),
        );
        let z_inv = self.z_inv_on_coset;
        a.par_iter_mut()
            .zip(b.par_iter())
            .zip(c.par_iter())
            .with_min_len(GRAIN)
            .for_each(|((a, b), c)| *a = (*a * b - c) * z_inv);
        self.dif(a, &self.inv_twiddles);
        self.coset_out.apply(a); // · g^-k / n
        bitrev_permute(a);
    }

    /// Natural order in, bit-reversed out.
    fn dif(&self, a: &mut [Scalar], tw: &[Scalar]) {
        let n = self.n;
        let block = BLOCK.min(n);
        let mut half = n / 2;
        while half >= block {
            global_stage(a, half, tw, n / (2 * half), butterfly_dif);
            half /= 2;
        }
        a.par_chunks_mut(block).for_each(|blk| {
            let mut h = half;
            while h >= 1 {
                local_stage(blk, h, tw, n / (2 * h), butterfly_dif);
                h /= 2;
            }
        });
    }

    /// Bit-reversed order in, natural out.
    fn dit(&self, a: &mut [Scalar], tw: &[Scalar]) {
        let n = self.n;
        let block = BLOCK.min(n);
        a.par_chunks_mut(block).for_each(|blk| {
            let mut h = 1;
            while h < block {
                local_stage(blk, h, tw, n / (2 * h), butterfly_dit);
                h *= 2;
            }
        });
        let mut half = block;
        while half < n {
            global_stage(a, half, tw, n / (2 * half), butterfly_dit);
            half *= 2;
        }
    }
}

type Butterfly = fn(&mut Scalar, &mut Scalar, &Scalar);

fn butterfly_dif(u: &mut Scalar, v: &mut Scalar, w: &Scalar) {
    let t = *u - *v;
    *u += *v;
    *v = t * w;
}

fn butterfly_dit(u: &mut Scalar, v: &mut Scalar, w: &Scalar) {
    let t = *v * w;
    *v = *u - t;
    *u += t;
}

fn butterflies(
    lo: &mut [Scalar],
    hi: &mut [Scalar],
    j0: usize,
    tw: &[Scalar],
    stride: usize,
    f: Butterfly,
) {
    for (k, (u, v)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
        f(u, v, &tw[(j0 + k) * stride]);
    }
}

/// One stage over a block in cache, single-threaded.
fn local_stage(a: &mut [Scalar], half: usize, tw: &[Scalar], stride: usize, f: Butterfly) {
    for pair in a.chunks_mut(2 * half) {
        let (lo, hi) = pair.split_at_mut(half);
        butterflies(lo, hi, 0, tw, stride, f);
    }
}

/// One stage over the whole array, butterflies spread across the pool.
fn global_stage(a: &mut [Scalar], half: usize, tw: &[Scalar], stride: usize, f: Butterfly) {
    a.par_chunks_mut(2 * half).for_each(|pair| {
        let (lo, hi) = pair.split_at_mut(half);
        lo.par_chunks_mut(GRAIN)
            .zip(hi.par_chunks_mut(GRAIN))
            .enumerate()
            .for_each(|(i, (l, h))| butterflies(l, h, i * GRAIN, tw, stride, f));
    });
}

/// A raw pointer shared by tasks that touch disjoint elements.
#[derive(Clone, Copy)]
struct SharedPtr(*mut Scalar);
// SAFETY: used only where tasks access disjoint indices.
unsafe impl Send for SharedPtr {}
unsafe impl Sync for SharedPtr {}
impl SharedPtr {
    fn get(self) -> *mut Scalar {
        self.0
    }
}

/// Reorders `a` by bit-reversing indices (an involution: each pair swaps once).
pub fn bitrev_permute(a: &mut [Scalar]) {
    let n = a.len();
    assert!(n.is_power_of_two());
    let bits = n.trailing_zeros();
    let ptr = SharedPtr(a.as_mut_ptr());
    (0..n).into_par_iter().with_min_len(GRAIN).for_each(|i| {
        let j = bitrev(i, bits);
        if i < j {
            // SAFETY: i < j < n, and the pair (i, j) is visited only at i.
            unsafe { std::ptr::swap(ptr.get().add(i), ptr.get().add(j)) }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_core::SeedableRng;

    fn random(n: usize, seed: u64) -> Vec<Scalar> {
        let mut r = rand::rngs::StdRng::seed_from_u64(seed);
        (0..n).map(|_| Scalar::random(&mut r)).collect()
    }

    fn eval(coeffs: &[Scalar], x: Scalar) -> Scalar {
        coeffs.iter().rev().fold(Scalar::ZERO, |acc, c| acc * x + c)
    }

    #[test]
    fn ntt_matches_naive_evaluation() {
        for log_n in [0, 1, 2, 3, 5, 13] {
            let d = Domain::new(log_n);
            let coeffs = random(d.n, log_n as u64);
            let mut a = coeffs.clone();
            d.ntt(&mut a);
            let omega = (log_n..Scalar::S).fold(Scalar::ROOT_OF_UNITY, |w, _| w.square());
            for i in [0, d.n / 3, d.n - 1] {
                assert_eq!(
                    a[i],
                    eval(&coeffs, omega.pow_vartime([i as u64])),
                    "n=2^{log_n} i={i}"
                );
            }
            d.intt(&mut a);
            assert_eq!(a, coeffs, "intt inverts ntt at 2^{log_n}");
        }
    }

    #[test]
    fn quotient_satisfies_h_times_z_at_a_random_point() {
        for log_n in [1, 4, 13] {
            let d = Domain::new(log_n);
            // A satisfied system: C = A·B at every domain point, so Z divides A·B − C.
            let a_ev = random(d.n, 1);
            let b_ev = random(d.n, 2);
            let c_ev: Vec<Scalar> = a_ev.iter().zip(&b_ev).map(|(a, b)| *a * b).collect();
            let (mut a, mut b, mut c) = (a_ev.clone(), b_ev.clone(), c_ev.clone());
            d.quotient(&mut a, &mut b, &mut c);
            let h = a;
            let (mut ac, mut bc, mut cc) = (a_ev, b_ev, c_ev);
            d.intt(&mut ac);
            d.intt(&mut bc);
            d.intt(&mut cc);
            let x = Scalar::from(0xdead_beefu64);
            let z = x.pow_vartime([d.n as u64]) - Scalar::ONE;
            assert_eq!(
                eval(&h, x) * z,
                eval(&ac, x) * eval(&bc, x) - eval(&cc, x),
                "2^{log_n}"
            );
            assert_eq!(h[d.n - 1], Scalar::ZERO, "deg H <= n - 2");
        }
    }
}
