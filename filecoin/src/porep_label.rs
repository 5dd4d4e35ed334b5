//! A PoRep label's witness computed natively: what storage-proofs'
//! `create_label_circuit` allocates for witness-only synthesis, variable
//! for variable, without running bellperson's SHA-256 gadget.
//!
//! A label is SHA-256 over the replica id, the layer and node, and 37
//! parent labels: 20 compressions, nine tenths of a PoRep circuit. The
//! parents' bit decompositions stay with the gadgets (they come before the
//! hash and are a small share); the hash is `cuzk_workloads`' native mirror
//! of the gadget, reporting the same allocations and constraints in the
//! same order, so counts and fingerprint match the recording, and a·b = c
//! is checked on every row as for any witness.
//!
//! Witness-only systems only: the constraints reported here carry no
//! linear combinations.

use bellperson::gadgets::boolean::Boolean;
use bellperson::gadgets::num::AllocatedNum;
use bellperson::gadgets::uint32::UInt32;
use bellperson::{ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;
use cuzk_stages::workloads::WitnessSink;
use cuzk_stages::workloads::sha256_witness::{Bit, sha256};
use ff::PrimeField;
use storage_proofs_core::gadgets::uint64::UInt64;

/// Reports a native computation's allocations and constraints to a
/// witness-only constraint system.
struct Sink<'a, CS>(&'a mut CS);

impl<CS: ConstraintSystem<Fr>> WitnessSink for Sink<'_, CS> {
    #[inline]
    fn aux(&mut self, value: Fr) -> Result<(), SynthesisError> {
        self.0.alloc(|| "", || Ok(value)).map(drop)
    }
    #[inline]
    fn input(&mut self, value: Fr) -> Result<(), SynthesisError> {
        self.0.alloc_input(|| "", || Ok(value)).map(drop)
    }
    #[inline]
    fn constraint(&mut self) {
        self.0.enforce(|| "", |lc| lc, |lc| lc, |lc| lc);
    }
}

/// A gadget `Boolean` as the native hash takes it; a variable without a
/// value is a missing assignment.
fn bit(b: &Boolean) -> Result<Bit, SynthesisError> {
    let value = |v: Option<bool>| v.ok_or(SynthesisError::AssignmentMissing);
    Ok(match b {
        Boolean::Constant(c) => Bit::Const(*c),
        Boolean::Is(v) => Bit::Is(value(v.get_value())?),
        Boolean::Not(v) => Bit::Not(value(v.get_value())?),
    })
}

/// `create_label_circuit(cs, replica_id, parents, layer_index, node)` for a
/// witness-only `cs`: the same preimage (replica id padded to 32 bytes, the
/// layer and node, each parent padded to 32 bytes), the hash natively, then
/// the digest's first 254 bits (little-endian within each byte) packed
/// into the label, one variable and its packing constraint.
pub(crate) fn label<CS: ConstraintSystem<Fr>>(
    mut cs: CS,
    replica_id: &[Boolean],
    parents: &[Vec<Boolean>],
    layer_index: u32,
    node: &UInt64,
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    let mut preimage = Vec::with_capacity((2 + parents.len()) * 256);
    let pad = |p: &mut Vec<Bit>, to: usize| {
        while !p.len().is_multiple_of(to) {
            p.push(Bit::Const(false));
        }
    };
    for b in replica_id {
        preimage.push(bit(b)?);
    }
    pad(&mut preimage, 256);
    for b in UInt32::constant(layer_index)
        .into_bits_be()
        .iter()
        .chain(&node.to_bits_be())
    {
        preimage.push(bit(b)?);
    }
    pad(&mut preimage, 512);
    for parent in parents {
        for b in parent {
            preimage.push(bit(b)?);
        }
        pad(&mut preimage, 256);
    }
    let digest = sha256(&mut Sink(&mut cs), &preimage)?;
    let label = label_of(digest);
    let num = AllocatedNum::alloc(cs.namespace(|| "result_num"), || Ok(label))?;
    cs.enforce(|| "packing constraint", |lc| lc, |lc| lc, |lc| lc);
    Ok(num)
}

/// The label a digest packs into: its bytes as a little-endian integer,
/// cut to the field's 254-bit capacity (what `reverse_bit_numbering` then
/// `pack_bits` take).
fn label_of(mut digest: [u8; 32]) -> Fr {
    digest[31] &= 0x3f;
    Fr::from_repr_vartime(digest).expect("254 bits are below the modulus")
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellperson::gadgets::boolean::AllocatedBit;
    use cuzk_stages::pce::WitnessPart;
    use rand::{Rng, SeedableRng};
    use storage_proofs_porep::stacked::create_label_circuit;

    /// Random allocated bits (as a label's inputs come: variables).
    fn bits<CS: ConstraintSystem<Fr>>(cs: &mut CS, rng: &mut impl Rng, n: usize) -> Vec<Boolean> {
        (0..n)
            .map(|_| {
                Boolean::Is(AllocatedBit::alloc(&mut *cs, Some(rng.r#gen())).expect("allocates"))
            })
            .collect()
    }

    /// The native label writes what the gadget writes, value for value,
    /// with the same sequence of allocations and constraints.
    #[test]
    fn native_label_equals_the_gadget() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for layer in [1u32, 2, 11] {
            let inputs = |cs: &mut WitnessPart, rng: &mut rand::rngs::StdRng| {
                let replica = bits(cs, rng, 255);
                let node = UInt64::alloc(&mut *cs, Some(rng.r#gen())).expect("allocates");
                let parents: Vec<Vec<Boolean>> = (0..37)
                    .map(|_| {
                        let mut p = bits(cs, rng, 255);
                        p.push(Boolean::constant(false));
                        p
                    })
                    .collect();
                (replica, node, parents)
            };
            let seed: u64 = rng.r#gen();
            let (mut native, mut gadget) = (WitnessPart::default(), WitnessPart::default());
            let mut r = rand::rngs::StdRng::seed_from_u64(seed);
            let (replica, node, parents) = inputs(&mut native, &mut r);
            let n = label(&mut native, &replica, &parents, layer, &node).expect("native");
            let mut r = rand::rngs::StdRng::seed_from_u64(seed);
            let (replica, node, parents) = inputs(&mut gadget, &mut r);
            let g = create_label_circuit(
                &mut gadget,
                &replica,
                parents,
                UInt32::constant(layer),
                node,
            )
            .expect("gadget");
            assert_eq!(n.get_value(), g.get_value(), "layer {layer}: the label");
            let (a, b) = (native.aux(), gadget.aux());
            assert_eq!(a.len(), b.len(), "layer {layer}: aux count");
            if let Some(i) = (0..a.len()).find(|&i| a[i] != b[i]) {
                panic!("layer {layer}: aux {i} differs");
            }
            // Counts and the fingerprint of the operations too.
            assert!(
                native == gadget,
                "layer {layer}: the sequence of operations"
            );
        }
    }
}
