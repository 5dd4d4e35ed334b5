//! A SnapDeals partition's witness: `EmptySectorUpdateCircuit::synthesize`
//! (storage-proofs-update) followed operation for operation, with its
//! per-challenge work in parallel parts and its Merkle paths hashed natively.
//!
//! The circuit is a prefix (the public inputs, phi, the commitment checks,
//! the apex tree, the challenges' bits), then one run per challenge that
//! needs only values the prefix made: the challenge's high bits, rho, the
//! new label, its paths in the old and new tree R (Poseidon) and in tree D
//! up to the apex leaf (SHA-256). The prefix runs as the circuit does (its
//! gadgets are storage-proofs-update's private ones, so they are mirrored
//! here, constraint for constraint); each challenge is a part
//! (`cuzk_stages::pce::synthesize_parts`), so the assignment is the one
//! sequential synthesis makes and is held to the recording like any other.
//! Full synthesis and the recording run the circuit itself.

use bellperson::gadgets::boolean::{AllocatedBit, Boolean, field_into_allocated_bits_le};
use bellperson::gadgets::multipack::pack_bits;
use bellperson::gadgets::num::AllocatedNum;
use bellperson::{ConstraintSystem, LinearCombination, SynthesisError};
use blstrs::Scalar as Fr;
use ff::{Field, PrimeField, PrimeFieldBits};
use filecoin_hashers::{HashFunction, Hasher};
use neptune::circuit::poseidon_hash;
use rayon::prelude::*;
use storage_proofs_core::gadgets::constraint;
use storage_proofs_core::gadgets::insertion::{insert, select};
use storage_proofs_core::gadgets::por::por_no_challenge_input;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_update::circuit::ChallengeProof;
use storage_proofs_update::constants::{
    POSEIDON_CONSTANTS_GEN_RANDOMNESS, TreeD, TreeDHasher, TreeRHasher, hs,
};
use storage_proofs_update::{EmptySectorUpdateCircuit, PublicParams};

use cuzk_stages::pce::{Parts, WitnessCs, synthesize_parts};

use crate::porep_native::TreeHash;
use crate::porep_witness::Route;

/// The witness of `circuit`, its paths by `route`.
pub(crate) fn witness<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    circuit: EmptySectorUpdateCircuit<Tree>,
    cs: &mut WitnessCs<'_>,
    route: Route,
) -> Result<(), SynthesisError> {
    let EmptySectorUpdateCircuit {
        pub_params: pp,
        pub_inputs,
        priv_inputs,
    } = circuit;
    let proofs = &priv_inputs.challenge_proofs;
    let shape_error = || SynthesisError::Unsatisfiable;
    let first = proofs.first().ok_or_else(shape_error)?;
    if proofs.len() != pp.challenge_count
        || priv_inputs.apex_leafs.len() != pp.apex_leaf_count
        || first.path_d_new.len() != pp.challenge_bit_len
    {
        return Err(shape_error());
    }
    let hs = hs(pp.sector_nodes);
    let partition_path = &first.path_d_new[pp.challenge_bit_len - pp.partition_bit_len..];
    // Every challenge of the partition ends in the same partition path.
    if proofs.iter().any(|p| {
        p.path_d_new
            .get(pp.challenge_bit_len - pp.partition_bit_len..)
            != Some(partition_path)
    }) {
        return Err(shape_error());
    }
    let alloc = |cs: &mut WitnessCs<'_>, name: &str, v: Option<Fr>| {
        AllocatedNum::alloc(cs.namespace(|| name.to_string()), || {
            v.ok_or(SynthesisError::AssignmentMissing)
        })
    };

    // The public inputs: k and h_select packed, then the commitments.
    let k_and_h_select = alloc(cs, "k_and_h_select", pub_inputs.k_and_h_select)?;
    k_and_h_select.inputize(cs.namespace(|| "k_and_h_select (public input)"))?;
    let bit_len = pp.partition_bit_len + hs.len();
    let bits = allocated_bits(cs, &k_and_h_select, bit_len)?;
    let (partition_bits, h_select_bits) = bits.split_at(pp.partition_bit_len);
    let partition = pack_bits(
        cs.namespace(|| "pack partition bits"),
        &partition_bits
            .iter()
            .cloned()
            .map(Boolean::from)
            .collect::<Vec<_>>(),
    )?;
    let comm_r_old = alloc(cs, "comm_r_old", pub_inputs.comm_r_old)?;
    comm_r_old.inputize(cs.namespace(|| "comm_r_old_input"))?;
    let comm_d_new = alloc(cs, "comm_d_new", pub_inputs.comm_d_new)?;
    comm_d_new.inputize(cs.namespace(|| "comm_d_new_input"))?;
    let comm_r_new = alloc(cs, "comm_r_new", pub_inputs.comm_r_new)?;
    comm_r_new.inputize(cs.namespace(|| "comm_r_new_input"))?;
    let phi = poseidon_hash(
        cs.namespace(|| "phi"),
        vec![comm_d_new.clone(), comm_r_old.clone()],
        &*POSEIDON_CONSTANTS_GEN_RANDOMNESS,
    )?;

    // The private inputs outside the challenges' proofs.
    let comm_c = alloc(cs, "comm_c", priv_inputs.comm_c)?;
    let root_r_old = alloc(cs, "root_r_old", priv_inputs.root_r_old)?;
    let root_r_new = alloc(cs, "root_r_new", priv_inputs.root_r_new)?;
    let apex_leafs = priv_inputs
        .apex_leafs
        .iter()
        .map(|leaf| alloc(cs, "apex_leaf", *leaf))
        .collect::<Result<Vec<_>, _>>()?;
    let partition_path = partition_path
        .iter()
        .map(|siblings| Ok(vec![alloc(cs, "partition_path_sibling", siblings[0])?]))
        .collect::<Result<Vec<_>, SynthesisError>>()?;

    // comm_r = H(comm_c, root_r), old and new.
    for (name, root, comm_r) in [
        ("comm_r_old_calc", &root_r_old, &comm_r_old),
        ("comm_r_new_calc", &root_r_new, &comm_r_new),
    ] {
        let calc =
            <TreeRHasher as Hasher>::Function::hash2_circuit(cs.namespace(|| name), &comm_c, root)?;
        constraint::equal(cs, || "comm_r == H(comm_c, root_r)", &calc, comm_r);
    }
    apex_por(
        cs,
        apex_leafs.clone(),
        partition_bits.to_vec(),
        partition_path,
        comm_d_new,
    )?;
    let generated = challenge_bits(
        cs,
        &comm_r_new,
        &partition,
        pp.challenge_count,
        pp.challenge_bit_len - pp.partition_bit_len,
    )?;

    let shared = Shared {
        pp: &pp,
        hs: &hs,
        h_select_bits,
        partition_bits,
        phi,
        root_r_old,
        root_r_new,
        apex_leafs,
        generated,
        proofs: proofs.as_slice(),
        route,
    };
    let items: Vec<usize> = (0..proofs.len()).collect();
    synthesize_parts(cs, &shared, &items, None).map(drop)
}

/// What every challenge's part reads: the prefix's allocations (their
/// values), the challenges' generated bits and proofs.
struct Shared<'a, Tree: MerkleTreeTrait<Hasher = TreeRHasher>> {
    pp: &'a PublicParams,
    hs: &'a [usize],
    h_select_bits: &'a [AllocatedBit],
    partition_bits: &'a [AllocatedBit],
    phi: AllocatedNum<Fr>,
    root_r_old: AllocatedNum<Fr>,
    root_r_new: AllocatedNum<Fr>,
    apex_leafs: Vec<AllocatedNum<Fr>>,
    /// Per challenge, its bits without the partition's.
    generated: Vec<Vec<AllocatedBit>>,
    proofs: &'a [ChallengeProof<Tree>],
    route: Route,
}

impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> Parts for Shared<'_, Tree> {
    type Item = usize;
    fn per_item(&self) -> usize {
        1
    }
    fn run<P: ConstraintSystem<Fr> + Send>(
        &self,
        challenges: &[usize],
        parts: &mut [P],
    ) -> Result<(), SynthesisError> {
        parts
            .par_iter_mut()
            .zip(challenges)
            .try_for_each(|(cs, &c)| self.challenge(cs, c))
    }
}

impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> Shared<'_, Tree> {
    /// Challenge `c`'s run of the circuit's loop.
    fn challenge<CS: ConstraintSystem<Fr>>(
        &self,
        cs: &mut CS,
        c: usize,
    ) -> Result<(), SynthesisError> {
        let pp = self.pp;
        let proof = &self.proofs[c];
        let c_bits: Vec<AllocatedBit> = self.generated[c]
            .iter()
            .chain(self.partition_bits)
            .cloned()
            .collect();
        let c_high = high_bits(cs, &c_bits, self.h_select_bits, self.hs)?;
        let rho = poseidon_hash(
            cs.namespace(|| "rho"),
            vec![self.phi.clone(), c_high],
            &*POSEIDON_CONSTANTS_GEN_RANDOMNESS,
        )?;
        let alloc = |cs: &mut CS, v: Option<Fr>| {
            AllocatedNum::alloc(cs.namespace(|| "value"), || {
                v.ok_or(SynthesisError::AssignmentMissing)
            })
        };
        let leaf_r_old = alloc(cs, proof.leaf_r_old)?;
        let leaf_d_new = alloc(cs, proof.leaf_d_new)?;
        let leaf_r_new = label_r_new(cs, &leaf_r_old, &leaf_d_new, &rho)?;
        if leaf_r_new.get_value().is_some() && leaf_r_new.get_value() != proof.leaf_r_new {
            return Err(SynthesisError::Unsatisfiable);
        }
        let siblings = |cs: &mut CS, path: &[Vec<Option<Fr>>]| {
            path.iter()
                .map(|row| row.iter().map(|s| alloc(cs, *s)).collect())
                .collect::<Result<Vec<Vec<_>>, _>>()
        };
        for (path, leaf, root) in [
            (&proof.path_r_old, leaf_r_old, &self.root_r_old),
            (&proof.path_r_new, leaf_r_new, &self.root_r_new),
        ] {
            let path = siblings(cs, path)?;
            match self.route {
                Route::Native => por(cs, &c_bits, leaf, path, root, TreeHash::Poseidon)?,
                Route::Gadgets => por_no_challenge_input::<Tree, _>(
                    cs.namespace(|| "por tree_r"),
                    c_bits.clone(),
                    leaf,
                    path,
                    root.clone(),
                )?,
            }
        }
        let to_apex = pp.challenge_bit_len - pp.partition_bit_len - pp.apex_leaf_bit_len;
        let apex_leaf_bits: Vec<Boolean> = c_bits[to_apex..to_apex + pp.apex_leaf_bit_len]
            .iter()
            .cloned()
            .map(Boolean::from)
            .collect();
        let apex_leaf = select(
            cs.namespace(|| "select_apex_leaf"),
            &self.apex_leafs,
            &apex_leaf_bits,
        )?;
        let path = proof.path_d_new[..to_apex]
            .iter()
            .map(|row| Ok(vec![alloc(cs, row[0])?]))
            .collect::<Result<Vec<_>, SynthesisError>>()?;
        let bits = &c_bits[..to_apex];
        match self.route {
            Route::Native => por(cs, bits, leaf_d_new, path, &apex_leaf, TreeHash::Sha256),
            Route::Gadgets => por_no_challenge_input::<TreeD, _>(
                cs.namespace(|| "por to_apex_leaf"),
                bits.to_vec(),
                leaf_d_new,
                path,
                apex_leaf,
            ),
        }
    }
}

/// The low `bit_len` bits of `num`, allocated, and their packing enforced
/// (the circuit's split of `k_and_h_select`).
fn allocated_bits<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    num: &AllocatedNum<Fr>,
    bit_len: usize,
) -> Result<Vec<AllocatedBit>, SynthesisError> {
    let values: Vec<Option<bool>> = match num.get_value() {
        Some(v) => v.to_le_bits().into_iter().take(bit_len).map(Some).collect(),
        None => vec![None; bit_len],
    };
    let bits = values
        .into_iter()
        .map(|b| AllocatedBit::alloc(cs.namespace(|| "bit"), b))
        .collect::<Result<Vec<_>, _>>()?;
    enforce_packing(cs, &bits, num);
    Ok(bits)
}

/// `Σ 2^i · bits[i] = num`.
fn enforce_packing<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    bits: &[AllocatedBit],
    num: &AllocatedNum<Fr>,
) {
    let mut lc = LinearCombination::<Fr>::zero();
    let mut pow2 = Fr::ONE;
    for bit in bits {
        lc = lc + (pow2, bit.get_variable());
        pow2 = pow2.double();
    }
    cs.enforce(
        || "binary decomp",
        |_| lc,
        |lc| lc + CS::one(),
        |lc| lc + num.get_variable(),
    );
}

/// storage-proofs-update's `apex_por`: the apex tree over `apex_leafs`,
/// and its root's path (by the partition's bits) to comm_d.
fn apex_por<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    apex_leafs: Vec<AllocatedNum<Fr>>,
    partition_bits: Vec<AllocatedBit>,
    partition_path: Vec<Vec<AllocatedNum<Fr>>>,
    comm_d: AllocatedNum<Fr>,
) -> Result<(), SynthesisError> {
    let mut row = apex_leafs;
    while row.len() > 1 {
        row = row
            .chunks(2)
            .map(|pair| {
                <TreeDHasher as Hasher>::Function::hash2_circuit(
                    cs.namespace(|| "apex_tree generation hash"),
                    &pair[0],
                    &pair[1],
                )
            })
            .collect::<Result<_, _>>()?;
    }
    let apex_root = row.pop().ok_or(SynthesisError::Unsatisfiable)?;
    por_no_challenge_input::<TreeD, _>(
        cs.namespace(|| "partition-tree por"),
        partition_bits,
        apex_root,
        partition_path,
        comm_d,
    )
}

/// storage-proofs-update's `gen_challenge_bits`: per digest
/// H(comm_r_new, k · digests + j), its bits, cut into challenges.
fn challenge_bits<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    comm_r_new: &AllocatedNum<Fr>,
    partition: &AllocatedNum<Fr>,
    challenges: usize,
    bits_per_challenge: usize,
) -> Result<Vec<Vec<AllocatedBit>>, SynthesisError> {
    let per_digest = Fr::CAPACITY as usize / bits_per_challenge;
    let digests = challenges.div_ceil(per_digest) as u64;
    let mut generated = Vec::with_capacity(challenges);
    for j in 0..digests {
        let digest_index = AllocatedNum::alloc(cs.namespace(|| "digest_index"), || {
            let k = partition
                .get_value()
                .ok_or(SynthesisError::AssignmentMissing)?;
            Ok(k * Fr::from(digests) + Fr::from(j))
        })?;
        cs.enforce(
            || "digest_index",
            |lc| lc + (Fr::from(digests), partition.get_variable()) + (Fr::from(j), CS::one()),
            |lc| lc + CS::one(),
            |lc| lc + digest_index.get_variable(),
        );
        let digest = poseidon_hash(
            cs.namespace(|| "digest"),
            vec![comm_r_new.clone(), digest_index],
            &*POSEIDON_CONSTANTS_GEN_RANDOMNESS,
        )?;
        let bits =
            field_into_allocated_bits_le(cs.namespace(|| "digest bits"), digest.get_value())?;
        enforce_packing(cs, &bits, &digest);
        let take = if j == digests - 1 {
            challenges - generated.len()
        } else {
            per_digest
        };
        generated.extend(
            bits.chunks(bits_per_challenge)
                .take(take)
                .map(<[_]>::to_vec),
        );
    }
    Ok(generated)
}

/// storage-proofs-update's `get_challenge_high_bits`: the `h` high bits of
/// the challenge for the `h` that `h_select_bits` picks from `hs`.
fn high_bits<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    c_bits: &[AllocatedBit],
    h_select_bits: &[AllocatedBit],
    hs: &[usize],
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    if h_select_bits.len() != hs.len() {
        return Err(SynthesisError::Unsatisfiable);
    }
    let c_bits: Vec<Boolean> = c_bits.iter().cloned().map(Boolean::from).collect();
    let n = c_bits.len();
    let scaled = hs
        .iter()
        .zip(h_select_bits)
        .map(|(&h, select)| {
            let c_high = pack_bits(cs.namespace(|| "c_high"), &c_bits[n - h..])?;
            let scaled = AllocatedNum::alloc(cs.namespace(|| "c_high_or_zero"), || {
                match select
                    .get_value()
                    .ok_or(SynthesisError::AssignmentMissing)?
                {
                    true => c_high.get_value().ok_or(SynthesisError::AssignmentMissing),
                    false => Ok(Fr::ZERO),
                }
            })?;
            cs.enforce(
                || "c_high_or_zero",
                |lc| lc + c_high.get_variable(),
                |lc| lc + select.get_variable(),
                |lc| lc + scaled.get_variable(),
            );
            Ok(scaled)
        })
        .collect::<Result<Vec<_>, SynthesisError>>()?;
    let selected = AllocatedNum::alloc(cs.namespace(|| "c_high_selected"), || {
        scaled.iter().try_fold(Fr::ZERO, |sum, v| {
            Ok(sum + v.get_value().ok_or(SynthesisError::AssignmentMissing)?)
        })
    })?;
    cs.enforce(
        || "c_high_selected",
        |lc| scaled.iter().fold(lc, |lc, v| lc + v.get_variable()),
        |lc| lc + CS::one(),
        |lc| lc + selected.get_variable(),
    );
    Ok(selected)
}

/// storage-proofs-update's `label_r_new`: label_r_old + label_d_new · rho.
fn label_r_new<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    label_r_old: &AllocatedNum<Fr>,
    label_d_new: &AllocatedNum<Fr>,
    rho: &AllocatedNum<Fr>,
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    let product = label_d_new.mul(cs.namespace(|| "label_d_new * rho"), rho)?;
    let label = AllocatedNum::alloc(cs.namespace(|| "label_r_new"), || {
        let old = label_r_old
            .get_value()
            .ok_or(SynthesisError::AssignmentMissing)?;
        let product = product
            .get_value()
            .ok_or(SynthesisError::AssignmentMissing)?;
        Ok(old + product)
    })?;
    cs.enforce(
        || "label_r_new",
        |lc| lc + label_r_old.get_variable() + product.get_variable(),
        |lc| lc + CS::one(),
        |lc| lc + label.get_variable(),
    );
    Ok(label)
}

/// `por_no_challenge_input` with the hashes native: per level, the node
/// inserted among its siblings at the index the next bits give, hashed;
/// then the root checked. The levels' arities are the path's.
fn por<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    bits: &[AllocatedBit],
    leaf: AllocatedNum<Fr>,
    path: Vec<Vec<AllocatedNum<Fr>>>,
    root: &AllocatedNum<Fr>,
    hash: TreeHash,
) -> Result<(), SynthesisError> {
    let mut bits = bits.iter().cloned().map(Boolean::from);
    let mut cur = leaf;
    for siblings in &path {
        let arity = siblings.len() + 1;
        if !arity.is_power_of_two() {
            return Err(SynthesisError::Unsatisfiable);
        }
        let index: Vec<Boolean> = (0..arity.trailing_zeros())
            .map(|_| bits.next().ok_or(SynthesisError::Unsatisfiable))
            .collect::<Result<_, _>>()?;
        let children = insert(&mut cs.namespace(|| "insert"), &cur, &index, siblings)?;
        cur = crate::porep_native::hash_children(cs.namespace(|| "hash"), &children, hash)?;
    }
    if bits.next().is_some() {
        return Err(SynthesisError::Unsatisfiable);
    }
    constraint::equal(cs, || "root", &cur, root);
    Ok(())
}
