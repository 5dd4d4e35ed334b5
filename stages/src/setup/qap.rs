//! The circuit's QAP evaluated at τ: the Lagrange basis of the domain at τ,
//! and each variable's A(τ), B(τ), C(τ) as a transposed sparse product.

use blstrs::Scalar;
use ff::{BatchInvert, Field, PrimeField};
use rayon::prelude::*;

use super::SetupError;
use crate::pce::matrix::{Csr, MINUS_ONE, NEG_POW, PLUS_ONE, POW, TABLE, powers_of_two};

/// Field elements per parallel task.
const CHUNK: usize = 1 << 14;

/// The evaluation domain: the smallest power of two holding every row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Domain {
    pub size: usize,
    /// A primitive `size`-th root of unity (bellperson's choice of it).
    pub omega: Scalar,
}

impl Domain {
    /// The domain of a circuit with `rows` constraints.
    pub fn for_rows(rows: usize) -> Result<Self, SetupError> {
        let mut exp = 0u32;
        while (1usize << exp) < rows {
            exp += 1;
            if exp >= Scalar::S {
                return Err(SetupError::DomainTooLarge { rows });
            }
        }
        let mut omega = Scalar::ROOT_OF_UNITY;
        for _ in exp..Scalar::S {
            omega = omega.square();
        }
        Ok(Self {
            size: 1 << exp,
            omega,
        })
    }

    /// Z(τ) = τ^size − 1, the polynomial vanishing on the domain.
    pub fn vanishing_at(&self, tau: &Scalar) -> Scalar {
        tau.pow_vartime([self.size as u64]) - Scalar::ONE
    }

    /// L_i(τ) = Z(τ)·ω^i / (size·(τ − ω^i)) for every i: the inverse FFT of
    /// τ's powers, in closed form.
    pub fn lagrange_at(&self, tau: &Scalar) -> Result<Vec<Scalar>, SetupError> {
        let z = self.vanishing_at(tau);
        if bool::from(z.is_zero()) {
            return Err(SetupError::TauInDomain);
        }
        let size_inv = Scalar::from(self.size as u64)
            .invert()
            .expect("the domain size is below the modulus");
        let factor = z * size_inv;
        let mut out = vec![Scalar::ZERO; self.size];
        out.par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(task, out)| {
                let mut w = self.omega.pow_vartime([(task * CHUNK) as u64]);
                let mut roots = Vec::with_capacity(out.len());
                for o in out.iter_mut() {
                    roots.push(w);
                    *o = *tau - w;
                    w *= self.omega;
                }
                out.iter_mut().batch_invert();
                for (o, w) in out.iter_mut().zip(roots) {
                    *o *= factor * w;
                }
            });
        Ok(out)
    }

    /// τ^i·Z(τ)·δ⁻¹ for i below size − 1: the scalars of the H query.
    pub fn h_scalars(&self, tau: &Scalar, delta_inv: &Scalar) -> Vec<Scalar> {
        let coeff = self.vanishing_at(tau) * delta_inv;
        let mut out = vec![Scalar::ZERO; self.size - 1];
        out.par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(task, out)| {
                let mut p = tau.pow_vartime([(task * CHUNK) as u64]) * coeff;
                for o in out {
                    *o = p;
                    p *= tau;
                }
            });
        out
    }
}

/// The value of a recorded coefficient code.
fn coefficient(code: u32, table: &[Scalar]) -> Scalar {
    match code {
        PLUS_ONE => Scalar::ONE,
        MINUS_ONE => -Scalar::ONE,
        c if c > NEG_POW && c < TABLE => -powers_of_two()[(c - NEG_POW) as usize],
        c if c < TABLE => powers_of_two()[(c - POW) as usize],
        c => table[(c - TABLE) as usize],
    }
}

/// `out[j] = Σ_r M[r][j]·basis[r]` for every column `j` below `cols`: the
/// matrix's columns as polynomials, evaluated where `basis` was. Terms are
/// gathered by column first (a counting sort), so the sums run in
/// parallel without sharing an accumulator.
pub fn evaluate_columns(
    m: Csr<'_>,
    table: &[Scalar],
    basis: &[Scalar],
    cols: usize,
) -> Vec<Scalar> {
    assert!(basis.len() >= m.rows(), "a basis value per row");
    let mut start = vec![0u32; cols + 1];
    for &c in m.cols {
        start[c as usize + 1] += 1;
    }
    for j in 0..cols {
        start[j + 1] += start[j];
    }
    let mut next = start.clone();
    let mut by_column = vec![(0u32, 0u32); m.nnz()];
    for r in 0..m.rows() {
        for t in m.row_ptr[r] as usize..m.row_ptr[r + 1] as usize {
            let c = m.cols[t] as usize;
            by_column[next[c] as usize] = (r as u32, m.codes.get(t));
            next[c] += 1;
        }
    }
    drop(next);
    let mut out = vec![Scalar::ZERO; cols];
    out.par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(task, out)| {
            for (k, o) in out.iter_mut().enumerate() {
                let j = task * CHUNK + k;
                let terms = &by_column[start[j] as usize..start[j + 1] as usize];
                let mut acc = Scalar::ZERO;
                for &(r, code) in terms {
                    let l = basis[r as usize];
                    match code {
                        PLUS_ONE => acc += l,
                        MINUS_ONE => acc -= l,
                        code => acc += l * coefficient(code, table),
                    }
                }
                *o = acc;
            }
        });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// L_i(τ) from the definition: Π_{k≠i} (τ − ω^k)/(ω^i − ω^k).
    fn lagrange_by_definition(d: &Domain, tau: &Scalar, i: usize) -> Scalar {
        let root = |k: usize| d.omega.pow_vartime([k as u64]);
        let (mut num, mut den) = (Scalar::ONE, Scalar::ONE);
        for k in (0..d.size).filter(|&k| k != i) {
            num *= *tau - root(k);
            den *= root(i) - root(k);
        }
        num * den.invert().unwrap()
    }

    #[test]
    fn the_closed_form_basis_is_the_lagrange_basis() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let tau = Scalar::random(&mut rng);
        let d = Domain::for_rows(13).unwrap();
        assert_eq!(d.size, 16);
        assert_eq!(d.omega.pow_vartime([16]), Scalar::ONE);
        assert_ne!(d.omega.pow_vartime([8]), Scalar::ONE);
        let basis = d.lagrange_at(&tau).unwrap();
        for (i, l) in basis.iter().enumerate() {
            assert_eq!(*l, lagrange_by_definition(&d, &tau, i), "L_{i}");
        }
        // Σ L_i(τ)·x_i interpolates: for x_i = ω^i (the polynomial X), τ.
        let x: Scalar = (0..16)
            .map(|i| basis[i] * d.omega.pow_vartime([i as u64]))
            .sum();
        assert_eq!(x, tau);
    }

    #[test]
    fn a_root_of_unity_for_tau_is_refused() {
        let d = Domain::for_rows(8).unwrap();
        assert!(matches!(
            d.lagrange_at(&d.omega),
            Err(SetupError::TauInDomain)
        ));
    }

    #[test]
    fn every_coefficient_code_decodes_to_its_value() {
        let table = [Scalar::from(12345u64)];
        assert_eq!(coefficient(PLUS_ONE, &table), Scalar::ONE);
        assert_eq!(coefficient(MINUS_ONE, &table), -Scalar::ONE);
        assert_eq!(coefficient(POW + 3, &table), Scalar::from(8u64));
        assert_eq!(
            coefficient(POW + 255, &table),
            Scalar::from(2u64).pow_vartime([255])
        );
        assert_eq!(coefficient(NEG_POW + 1, &table), -Scalar::from(2u64));
        assert_eq!(
            coefficient(NEG_POW + 255, &table),
            -Scalar::from(2u64).pow_vartime([255])
        );
        assert_eq!(coefficient(TABLE, &table), table[0]);
    }
}
