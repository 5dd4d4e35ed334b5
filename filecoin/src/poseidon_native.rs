//! neptune's Poseidon circuit (`neptune::circuit::poseidon_hash`, the one
//! Filecoin's trees and column hashes use) computed natively for
//! witness-only synthesis: the same allocations and constraints in the
//! same order, values by field arithmetic, no linear combination built.
//!
//! The circuit keeps each state element either allocated or as a linear
//! combination of allocated ones (neptune's `Elt`); only S-boxes allocate
//! (an element not yet allocated is allocated first, with its constraint;
//! then l², l⁴ and l⁵, one constraint each), while the round keys and the
//! MDS products (dense, and sparse in the partial rounds) only move
//! values. The first round adds its keys before the S-box and computes the
//! domain tag's S-box as a constant; the result is element 1, allocated.

use bellperson::gadgets::num::AllocatedNum;
use bellperson::{ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;
use cuzk_stages::workloads::WitnessSink;
use ff::Field;
use filecoin_hashers::{
    POSEIDON_CONSTANTS_2, POSEIDON_CONSTANTS_4, POSEIDON_CONSTANTS_8, POSEIDON_CONSTANTS_11,
};
use neptune::Arity;
use neptune::poseidon::PoseidonConstants;

use crate::porep_native::Sink;

/// A state element: its value, and whether the circuit has it allocated.
#[derive(Clone, Copy)]
struct Elt {
    value: Fr,
    allocated: bool,
}

/// neptune's `PoseidonCircuit`, values only, reporting to `sink`.
struct Permutation<'c, 's, S, A: Arity<Fr>> {
    sink: &'s mut S,
    c: &'c PoseidonConstants<Fr, A>,
    state: Vec<Elt>,
    offset: usize,
    round: usize,
}

impl<S: WitnessSink, A: Arity<Fr>> Permutation<'_, '_, S, A> {
    /// A variable and its constraint.
    fn alloc(&mut self, value: Fr) -> Result<Fr, SynthesisError> {
        self.sink.aux(value)?;
        self.sink.constraint();
        Ok(value)
    }

    /// `Elt::ensure_allocated(enforce = true)`.
    fn allocated(&mut self, e: Elt) -> Result<Fr, SynthesisError> {
        if e.allocated {
            Ok(e.value)
        } else {
            self.alloc(e.value)
        }
    }

    /// `quintic_s_box`: l⁵ (+ the key after), allocated.
    fn s_box(&mut self, e: Elt, post: Option<Fr>) -> Result<Elt, SynthesisError> {
        let l = self.allocated(e)?;
        let l2 = self.alloc(l.square())?;
        let l4 = self.alloc(l2.square())?;
        let l5 = self.alloc(l4 * l + post.unwrap_or(Fr::ZERO))?;
        Ok(Elt {
            value: l5,
            allocated: true,
        })
    }

    /// `quintic_s_box_pre_add`: (l + pre)⁵ + post, allocated.
    fn s_box_pre_add(&mut self, e: Elt, pre: Fr, post: Fr) -> Result<Elt, SynthesisError> {
        let l = self.allocated(e)?;
        let l2 = self.alloc((l + pre).square())?;
        let l4 = self.alloc(l2.square())?;
        let l5 = self.alloc(l4 * (l + pre) + post)?;
        Ok(Elt {
            value: l5,
            allocated: true,
        })
    }

    fn keys(&mut self, n: usize) -> Vec<Fr> {
        let k = self.c.compressed_round_constants[self.offset..self.offset + n].to_vec();
        self.offset += n;
        k
    }

    fn full_round(&mut self, first: bool, last: bool) -> Result<(), SynthesisError> {
        let width = self.state.len();
        let pre = if first { self.keys(width) } else { Vec::new() };
        let post = if first || !last {
            self.keys(width)
        } else {
            Vec::new()
        };
        for i in 0..width {
            let e = self.state[i];
            self.state[i] = if first && i == 0 {
                // The domain tag's S-box is a constant.
                let l = e.value + pre[0];
                Elt {
                    value: l.square().square() * l + post[0],
                    allocated: false,
                }
            } else if first {
                self.s_box_pre_add(e, pre[i], post[i])?
            } else {
                self.s_box(e, post.get(i).copied())?
            };
        }
        self.mds();
        Ok(())
    }

    fn partial_round(&mut self) -> Result<(), SynthesisError> {
        let key = self.keys(1)[0];
        self.state[0] = self.s_box(self.state[0], Some(key))?;
        self.mds();
        Ok(())
    }

    /// `product_mds`: the dense matrix before the partial rounds, the
    /// sparse ones during them, M otherwise. Results are never allocated.
    fn mds(&mut self) {
        let c = self.c;
        let sparse_offset = c.half_full_rounds - 1;
        let width = self.state.len();
        let dense = |state: &[Elt], m: &Vec<Vec<Fr>>| -> Vec<Elt> {
            (0..width)
                .map(|j| Elt {
                    value: (0..width).map(|i| state[i].value * m[i][j]).sum(),
                    allocated: false,
                })
                .collect()
        };
        self.state = if self.round == sparse_offset {
            dense(&self.state, &c.pre_sparse_matrix)
        } else if self.round > sparse_offset && self.round < c.half_full_rounds + c.partial_rounds {
            let m = &c.sparse_matrixes[self.round - sparse_offset - 1];
            let first = self.state[0].value;
            let mut out = Vec::with_capacity(width);
            out.push(Elt {
                value: self
                    .state
                    .iter()
                    .zip(&m.w_hat)
                    .map(|(e, w)| e.value * w)
                    .sum(),
                allocated: false,
            });
            for j in 1..width {
                out.push(Elt {
                    value: self.state[j].value + first * m.v_rest[j - 1],
                    allocated: false,
                });
            }
            out
        } else {
            dense(&self.state, &c.mds_matrices.m)
        };
        self.round += 1;
    }

    /// `PoseidonCircuit::hash` up to its result (element 1, not yet allocated).
    fn run(mut self) -> Result<Fr, SynthesisError> {
        let half = self.c.full_rounds / 2;
        self.full_round(true, false)?;
        for _ in 1..half {
            self.full_round(false, false)?;
        }
        for _ in 0..self.c.partial_rounds {
            self.partial_round()?;
        }
        for _ in 0..half - 1 {
            self.full_round(false, false)?;
        }
        self.full_round(false, true)?;
        Ok(self.state[1].value)
    }
}

fn permute<S: WitnessSink, A: Arity<Fr>>(
    sink: &mut S,
    c: &PoseidonConstants<Fr, A>,
    preimage: &[Fr],
) -> Result<Fr, SynthesisError> {
    let mut state = Vec::with_capacity(preimage.len() + 1);
    state.push(Elt {
        value: c.domain_tag,
        allocated: false,
    });
    state.extend(preimage.iter().map(|&value| Elt {
        value,
        allocated: true,
    }));
    Permutation {
        sink,
        c,
        state,
        offset: 0,
        round: 0,
    }
    .run()
}

/// `poseidon_hash(cs, preimage, constants)` for a witness-only `cs`, with
/// Filecoin's constants for the preimage's length (2, 4, 8 or 11: its tree
/// arities and PoRep's column of eleven labels): the permutation natively,
/// then the result allocated with its constraint.
pub(crate) fn poseidon<CS: ConstraintSystem<Fr>>(
    mut cs: CS,
    preimage: &[AllocatedNum<Fr>],
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    let values = preimage
        .iter()
        .map(|n| n.get_value().ok_or(SynthesisError::AssignmentMissing))
        .collect::<Result<Vec<_>, _>>()?;
    let mut sink = Sink(&mut cs);
    let out = match values.len() {
        2 => permute(&mut sink, &POSEIDON_CONSTANTS_2, &values),
        4 => permute(&mut sink, &POSEIDON_CONSTANTS_4, &values),
        8 => permute(&mut sink, &POSEIDON_CONSTANTS_8, &values),
        11 => permute(&mut sink, &POSEIDON_CONSTANTS_11, &values),
        n => Err(SynthesisError::IoError(std::io::Error::other(format!(
            "a Poseidon preimage of {n} elements (Filecoin hashes 2, 4, 8 or 11)"
        )))),
    }?;
    let num = AllocatedNum::alloc(cs.namespace(|| "hash result"), || Ok(out))?;
    cs.enforce(|| "hash result", |lc| lc, |lc| lc, |lc| lc);
    Ok(num)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuzk_stages::pce::WitnessPart;
    use rand::SeedableRng;

    /// Every arity Filecoin uses: the native permutation writes what
    /// neptune's circuit writes, value for value, in the same sequence of
    /// operations, and its result is neptune's.
    #[test]
    fn native_poseidon_equals_neptunes_circuit() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        for arity in [2usize, 4, 8, 11] {
            let values: Vec<Fr> = (0..arity).map(|_| Fr::random(&mut rng)).collect();
            let nums = |cs: &mut WitnessPart| -> Vec<AllocatedNum<Fr>> {
                values
                    .iter()
                    .map(|&v| AllocatedNum::alloc(&mut *cs, || Ok(v)).expect("allocates"))
                    .collect()
            };
            let (mut native, mut gadget) = (WitnessPart::default(), WitnessPart::default());
            let pre = nums(&mut native);
            let n = poseidon(&mut native, &pre).expect("native");
            let pre = nums(&mut gadget);
            use neptune::circuit::poseidon_hash;
            let g = match arity {
                2 => poseidon_hash(&mut gadget, pre, &*POSEIDON_CONSTANTS_2),
                4 => poseidon_hash(&mut gadget, pre, &*POSEIDON_CONSTANTS_4),
                8 => poseidon_hash(&mut gadget, pre, &*POSEIDON_CONSTANTS_8),
                _ => poseidon_hash(&mut gadget, pre, &*POSEIDON_CONSTANTS_11),
            }
            .expect("gadget");
            assert_eq!(n.get_value(), g.get_value(), "arity {arity}: the hash");
            crate::porep_native::assert_same_witness(&native, &gadget, &format!("arity {arity}"));
        }
    }
}
