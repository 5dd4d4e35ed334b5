//! PoRep's SHA-256 work computed natively for witness-only synthesis: what
//! storage-proofs' `create_label_circuit` and tree D's `PoRCircuit`
//! allocate, variable for variable, without running bellperson's SHA-256
//! gadget.
//!
//! A label is SHA-256 over the replica id, the layer and node, and 37
//! parent labels: 20 compressions, and a challenge's eleven labels are
//! most of a PoRep circuit; tree D's path (30 levels at 32 GiB, two
//! compressions each) is most of the rest. Bit decompositions, index bits,
//! insertions and packings stay with the gadgets (small shares); each hash
//! is `cuzk_workloads`' native mirror of the gadget, reporting the same
//! allocations and constraints in the same order, so counts and
//! fingerprint match the recording, and a·b = c is checked on every row as
//! for any witness.
//!
//! Witness-only systems only: the constraints reported here carry no
//! linear combinations.

use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::multipack;
use bellperson::gadgets::num::AllocatedNum;
use bellperson::gadgets::uint32::UInt32;
use bellperson::{ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;
use cuzk_stages::workloads::WitnessSink;
use cuzk_stages::workloads::sha256_witness::{Bit, sha256};
use ff::PrimeField;
use storage_proofs_core::gadgets::constraint;
use storage_proofs_core::gadgets::insertion::insert;
use storage_proofs_core::gadgets::uint64::UInt64;

/// A Merkle path as `MerkleProofTrait::as_options` gives it: per level,
/// the siblings and the index among them.
pub(crate) type PathOptions = Vec<(Vec<Option<Fr>>, Option<usize>)>;

/// Reports a native computation's allocations and constraints to a
/// witness-only constraint system.
pub(crate) struct Sink<'a, CS>(pub(crate) &'a mut CS);

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
fn bit_of(b: &Boolean) -> Result<Bit, SynthesisError> {
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
    cs: CS,
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
        preimage.push(bit_of(b)?);
    }
    pad(&mut preimage, 256);
    for b in UInt32::constant(layer_index)
        .into_bits_be()
        .iter()
        .chain(&node.to_bits_be())
    {
        preimage.push(bit_of(b)?);
    }
    pad(&mut preimage, 512);
    for parent in parents {
        for b in parent {
            preimage.push(bit_of(b)?);
        }
        pad(&mut preimage, 256);
    }
    hash_to_num(cs, &preimage)
}

/// SHA-256 of `preimage` natively, then the gadgets' packing of the digest
/// into a number: its first 254 bits, little-endian within each byte (one
/// variable and its packing constraint).
fn hash_to_num<CS: ConstraintSystem<Fr>>(
    mut cs: CS,
    preimage: &[Bit],
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    let mut digest = sha256(&mut Sink(&mut cs), preimage)?;
    digest[31] &= 0x3f;
    let value = Fr::from_repr_vartime(digest).expect("254 bits are below the modulus");
    let num = AllocatedNum::alloc(cs.namespace(|| "pack"), || Ok(value))?;
    cs.enforce(|| "packing constraint", |lc| lc, |lc| lc, |lc| lc);
    Ok(num)
}

/// How a tree's nodes are hashed: tree D's SHA-256, or the Poseidon of
/// trees C and R (and of PoSt's tree R).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TreeHash {
    Sha256,
    Poseidon,
}

/// `PoRCircuit::<Tree>::synthesize(cs, leaf, path, root, true)` for a
/// witness-only `cs`, a tree of any arities (each level's is its siblings
/// plus one): per level the index bits, the siblings, their insertion (and
/// for SHA-256 the children's bits) through the gadgets, the hash
/// natively; then the index bits packed into public inputs and the root
/// enforced equal.
pub(crate) fn inclusion<CS: ConstraintSystem<Fr>>(
    mut cs: CS,
    path: &PathOptions,
    root: &AllocatedNum<Fr>,
    leaf: &AllocatedNum<Fr>,
    hash: TreeHash,
) -> Result<(), SynthesisError> {
    let mut cur = leaf.clone();
    let mut index_bits = Vec::with_capacity(path.len() * 3);
    for (level, (siblings, index)) in path.iter().enumerate() {
        let cs = &mut cs.namespace(|| format!("level {level}"));
        let arity = siblings.len() + 1;
        if !arity.is_power_of_two() {
            return Err(SynthesisError::Unsatisfiable);
        }
        let mut bits = Vec::with_capacity(arity.trailing_zeros() as usize);
        for b in 0..arity.trailing_zeros() {
            bits.push(Boolean::from(AllocatedBit::alloc(
                cs.namespace(|| "index bit"),
                index.map(|i| (i >> b) & 1 == 1),
            )?));
        }
        index_bits.extend_from_slice(&bits);
        let siblings = siblings
            .iter()
            .map(|h| {
                AllocatedNum::alloc(cs.namespace(|| "sibling"), || {
                    h.ok_or(SynthesisError::AssignmentMissing)
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let children = insert(cs, &cur, &bits, &siblings)?;
        cur = hash_children(cs.namespace(|| "hash"), &children, hash)?;
    }
    multipack::pack_into_inputs(cs.namespace(|| "path"), &index_bits)?;
    constraint::equal(&mut cs, || "root", &cur, root);
    Ok(())
}

/// A Merkle node from its children, natively: the tree's
/// `hash_multi_leaf_circuit`.
pub(crate) fn hash_children<CS: ConstraintSystem<Fr>>(
    cs: CS,
    children: &[AllocatedNum<Fr>],
    hash: TreeHash,
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    match hash {
        TreeHash::Sha256 => sha256_of_children(cs, children),
        TreeHash::Poseidon => crate::poseidon_native::poseidon(cs, children),
    }
}

/// `Sha256Function::hash_multi_leaf_circuit`: each child's bits, padded to
/// whole bytes and reversed within each byte, hashed natively.
fn sha256_of_children<CS: ConstraintSystem<Fr>>(
    mut cs: CS,
    children: &[AllocatedNum<Fr>],
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    let mut preimage = Vec::with_capacity(children.len() * 256);
    for child in children {
        let mut bits = child.to_bits_le(cs.namespace(|| "child bits"))?;
        while !bits.len().is_multiple_of(8) {
            bits.push(Boolean::Constant(false));
        }
        for byte in bits.chunks_exact(8) {
            for b in byte.iter().rev() {
                preimage.push(bit_of(b)?);
            }
        }
    }
    hash_to_num(cs, &preimage)
}

/// Asserts a native witness equals the gadgets': the aux values (naming
/// the first that differs), then inputs, counts and the sequence of
/// operations.
#[cfg(test)]
pub(crate) fn assert_same_witness(
    native: &cuzk_stages::pce::WitnessPart,
    gadget: &cuzk_stages::pce::WitnessPart,
    what: &str,
) {
    let (a, b) = (native.aux(), gadget.aux());
    assert_eq!(a.len(), b.len(), "{what}: aux count");
    if let Some(i) = (0..a.len()).find(|&i| a[i] != b[i]) {
        panic!("{what}: aux {i} differs");
    }
    assert!(
        native == gadget,
        "{what}: inputs or the sequence of operations"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellperson::gadgets::boolean::AllocatedBit;
    use cuzk_stages::pce::WitnessPart;
    use ff::Field;
    use rand::{Rng, SeedableRng};
    use storage_proofs_porep::stacked::create_label_circuit;

    /// A path natively against `PoRCircuit::<T>` over the same path: aux
    /// and inputs value for value, the same sequence of operations.
    fn compare<T: storage_proofs_core::merkle::MerkleTreeTrait>(
        name: &str,
        path: &PathOptions,
        hash: TreeHash,
        rng: &mut impl Rng,
    ) where
        T::Hasher: 'static,
    {
        let (leaf, root) = (Fr::random(&mut *rng), Fr::random(&mut *rng));
        let nums = |cs: &mut WitnessPart| {
            let leaf = AllocatedNum::alloc(&mut *cs, || Ok(leaf)).expect("allocates");
            let root = AllocatedNum::alloc(&mut *cs, || Ok(root)).expect("allocates");
            (leaf, root)
        };
        let (mut native, mut gadget) = (WitnessPart::default(), WitnessPart::default());
        let (l, r) = nums(&mut native);
        inclusion(&mut native, path, &r, &l, hash).expect("native");
        let (l, r) = nums(&mut gadget);
        crate::porep_witness::inclusion::<T, _>(&mut gadget, path, &r, &l).expect("gadget");
        assert_same_witness(&native, &gadget, name);
    }

    /// Random siblings and indices for levels of the given arities.
    fn path(arities: &[usize], rng: &mut impl Rng) -> PathOptions {
        arities
            .iter()
            .map(|&a| {
                let siblings = (1..a).map(|_| Some(Fr::random(&mut *rng))).collect();
                (siblings, Some(rng.gen_range(0..a)))
            })
            .collect()
    }

    /// Tree D's binary SHA-256 path (32 GiB's 30 levels and shorter) and
    /// Poseidon trees C and R of 2 KiB's 8-0-0 and 64 GiB's 8-8-2 shapes.
    #[test]
    fn native_inclusion_equals_por_circuit() {
        use filecoin_hashers::poseidon::PoseidonHasher;
        use storage_proofs_core::merkle::{BinaryMerkleTree, LCTree};
        use typenum::{U0, U2, U8};
        type G = filecoin_proofs::DefaultPieceHasher;
        let mut rng = rand::rngs::StdRng::seed_from_u64(9);
        for levels in [1usize, 6, 30] {
            let p = path(&vec![2; levels], &mut rng);
            compare::<BinaryMerkleTree<G>>(
                &format!("SHA-256, {levels} levels"),
                &p,
                TreeHash::Sha256,
                &mut rng,
            );
        }
        let p = path(&[8, 8], &mut rng);
        compare::<LCTree<PoseidonHasher, U8, U0, U0>>(
            "Poseidon 8-0-0",
            &p,
            TreeHash::Poseidon,
            &mut rng,
        );
        let mut arities = vec![8; 10];
        arities.extend([8, 2]);
        let p = path(&arities, &mut rng);
        compare::<LCTree<PoseidonHasher, U8, U8, U2>>(
            "Poseidon 8-8-2",
            &p,
            TreeHash::Poseidon,
            &mut rng,
        );
    }

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
            assert_same_witness(&native, &gadget, &format!("layer {layer}"));
        }
    }
}
