//! A PoRep partition's witness in parallel parts: filecoin-proofs'
//! `StackedCircuit::synthesize` and its per-challenge `Proof::synthesize`,
//! followed operation for operation, with each challenge cut into parts
//! that depend only on values computed before them.
//!
//! A 32 GiB partition has 18 challenges; as whole parts they keep 16 cores
//! busy for two rounds, the second on two cores. Most of a challenge is its
//! eleven labels (SHA-256 over 37 parents each), which need only the parent
//! columns, so a challenge becomes `layers + 3` parts: the data leaf and its
//! comm_d path; the parent columns, their hashes and paths, and the
//! challenge; one part per label; and the encoding and the column of labels.
//! Parts run on the synthesis pool in any order and land in circuit order
//! (`cuzk_stages::pce::WitnessCs::windows`), so the assignment is the one
//! sequential synthesis makes, variable for variable, and is checked against
//! the recording like any other.
//!
//! The hashing (labels, tree D's path, column hashes, the paths in trees C
//! and R) is computed natively by default (`porep_native`,
//! `poseidon_native`); the gadgets' route stays to compare against.
//!
//! Witness-only synthesis never evaluates a linear combination, so parts may
//! share the values allocated in other parts (the prelude's numbers, the
//! parent columns, the labels) whatever system allocated them.

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use bellperson::gadgets::boolean::Boolean;
use bellperson::gadgets::num::AllocatedNum;
use bellperson::gadgets::uint32::UInt32;
use bellperson::{ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;
use cuzk_stages::pce::{PartSize, Parts, WitnessCs, synthesize_parts};
use cuzk_stages::setup::MatrixCs;
use filecoin_hashers::{HashFunction, Hasher, POSEIDON_CONSTANTS_2, POSEIDON_CONSTANTS_11};
use rayon::prelude::*;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use storage_proofs_core::gadgets::por::PoRCircuit;
use storage_proofs_core::gadgets::uint64::UInt64;
use storage_proofs_core::gadgets::variables::Root;
use storage_proofs_core::gadgets::{constraint, encode::encode};
use storage_proofs_core::merkle::{
    BinaryMerkleTree, DiskStore, MerkleProof, MerkleProofTrait, MerkleTreeTrait, MerkleTreeWrapper,
};
use storage_proofs_core::util::reverse_bit_numbering;
use storage_proofs_porep::stacked::{
    self, Column, ColumnProof, Proof as VanillaProof, create_label_circuit,
};

use crate::porep_native::{PathOptions, TreeHash};

type G = filecoin_proofs::DefaultPieceHasher;

/// A vanilla Merkle proof in a tree of type `T`.
type TreeProof<T> = MerkleProof<
    <T as MerkleTreeTrait>::Hasher,
    <T as MerkleTreeTrait>::Arity,
    <T as MerkleTreeTrait>::SubTreeArity,
    <T as MerkleTreeTrait>::TopTreeArity,
>;

/// A parent column: its rows and the path of its hash in tree C.
struct Opening {
    rows: Vec<Fr>,
    path: PathOptions,
}

/// One challenge's private inputs, as filecoin-proofs' circuit proof holds them.
struct Challenge<Tree: MerkleTreeTrait> {
    data_leaf: Fr,
    node: u64,
    comm_d_path: PathOptions,
    comm_r_last_path: PathOptions,
    comm_c_path: PathOptions,
    drg: Vec<Opening>,
    exp: Vec<Opening>,
    /// The tree type the paths belong to.
    tree: std::marker::PhantomData<fn() -> Tree>,
}

/// A vanilla column proof's fields (private in storage-proofs-porep; read
/// back through its serde form, which names them).
#[derive(Deserialize)]
#[serde(bound(deserialize = "P: DeserializeOwned"))]
struct ColumnFields<P: MerkleProofTrait> {
    column: Column<P::Hasher>,
    inclusion_proof: P,
}

fn fields_of<P>(c: &ColumnProof<P>) -> Result<ColumnFields<P>, SynthesisError>
where
    P: MerkleProofTrait + serde::Serialize + DeserializeOwned,
{
    let bytes = bincode::serialize(c).map_err(io_error)?;
    bincode::deserialize(&bytes).map_err(io_error)
}

fn io_error(e: impl std::fmt::Display) -> SynthesisError {
    SynthesisError::IoError(std::io::Error::other(format!(
        "reading a PoRep column proof: {e}"
    )))
}

impl<Tree: 'static + MerkleTreeTrait> Challenge<Tree> {
    /// What `StackedCircuit`'s `Proof::from(vanilla)` takes from a vanilla proof.
    fn of(p: &VanillaProof<Tree, G>) -> Result<Self, SynthesisError> {
        let opening = |c: &ColumnProof<TreeProof<Tree>>| -> Result<Opening, SynthesisError> {
            let f = fields_of(c)?;
            Ok(Opening {
                rows: f
                    .column
                    .rows()
                    .iter()
                    .map(|&r| r.into())
                    .collect::<Vec<Fr>>(),
                path: f.inclusion_proof.as_options(),
            })
        };
        let columns = &p.replica_column_proofs;
        Ok(Self {
            data_leaf: p.comm_d_proofs.leaf().into(),
            // The challenged node is the leaf tree D's path opens.
            node: p.comm_d_proofs.path_index() as u64,
            comm_d_path: p.comm_d_proofs.as_options(),
            comm_r_last_path: p.comm_r_last_proof.as_options(),
            comm_c_path: fields_of(&columns.c_x)?.inclusion_proof.as_options(),
            drg: columns
                .drg_parents
                .iter()
                .map(opening)
                .collect::<Result<_, _>>()?,
            exp: columns
                .exp_parents
                .iter()
                .map(opening)
                .collect::<Result<_, _>>()?,
            tree: std::marker::PhantomData,
        })
    }
}

/// The prelude's values every challenge uses.
struct Shared {
    replica_id_bits: Vec<Boolean>,
    comm_d: AllocatedNum<Fr>,
    comm_c: AllocatedNum<Fr>,
    comm_r_last: AllocatedNum<Fr>,
}

fn alloc<CS: ConstraintSystem<Fr>>(
    cs: CS,
    v: Option<Fr>,
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    AllocatedNum::alloc(cs, || v.ok_or(SynthesisError::AssignmentMissing))
}

/// `StackedCircuit::synthesize` up to its first challenge.
fn prelude<Tree: MerkleTreeTrait, CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    pub_in: &stacked::PublicInputs<<Tree::Hasher as Hasher>::Domain, <G as Hasher>::Domain>,
    first: &VanillaProof<Tree, G>,
) -> Result<Shared, SynthesisError> {
    let tau = pub_in.tau.as_ref();
    let replica_id = alloc(
        cs.namespace(|| "replica_id"),
        Some(pub_in.replica_id.into()),
    )?;
    replica_id.inputize(cs.namespace(|| "replica_id_input"))?;
    let replica_id_bits =
        reverse_bit_numbering(replica_id.to_bits_le(cs.namespace(|| "replica_id_bits"))?);
    let comm_d = alloc(cs.namespace(|| "comm_d"), tau.map(|t| t.comm_d.into()))?;
    comm_d.inputize(cs.namespace(|| "comm_d_input"))?;
    let comm_r = alloc(cs.namespace(|| "comm_r"), tau.map(|t| t.comm_r.into()))?;
    comm_r.inputize(cs.namespace(|| "comm_r_input"))?;
    let comm_r_last = alloc(
        cs.namespace(|| "comm_r_last"),
        Some(first.comm_r_last().into()),
    )?;
    let comm_c = alloc(cs.namespace(|| "comm_c"), Some(first.comm_c().into()))?;
    let hash = <Tree::Hasher as Hasher>::Function::hash2_circuit(
        cs.namespace(|| "H_comm_c_comm_r_last"),
        &comm_c,
        &comm_r_last,
    )?;
    constraint::equal(cs, || "comm_r = H(comm_c || comm_r_last)", &comm_r, &hash);
    Ok(Shared {
        replica_id_bits,
        comm_d,
        comm_c,
        comm_r_last,
    })
}

/// The inclusion of `leaf` under `root` along `path`, as filecoin-proofs enforces it.
pub(crate) fn inclusion<T: MerkleTreeTrait, CS: ConstraintSystem<Fr>>(
    cs: CS,
    path: &PathOptions,
    root: &AllocatedNum<Fr>,
    leaf: &AllocatedNum<Fr>,
) -> Result<(), SynthesisError>
where
    T::Hasher: 'static,
{
    type Wrapper<T> = MerkleTreeWrapper<
        <T as MerkleTreeTrait>::Hasher,
        DiskStore<<<T as MerkleTreeTrait>::Hasher as Hasher>::Domain>,
        <T as MerkleTreeTrait>::Arity,
        <T as MerkleTreeTrait>::SubTreeArity,
        <T as MerkleTreeTrait>::TopTreeArity,
    >;
    PoRCircuit::<Wrapper<T>>::synthesize(
        cs,
        Root::from_allocated::<CS>(leaf.clone()),
        path.clone().into(),
        Root::from_allocated::<CS>(root.clone()),
        true,
    )
}

/// A Merkle inclusion by `route`: natively, or through `PoRCircuit`.
fn tree_inclusion<T: MerkleTreeTrait, CS: ConstraintSystem<Fr>>(
    cs: CS,
    path: &PathOptions,
    root: &AllocatedNum<Fr>,
    leaf: &AllocatedNum<Fr>,
    route: Route,
    hash: TreeHash,
) -> Result<(), SynthesisError>
where
    T::Hasher: 'static,
{
    match route {
        Route::Native => crate::porep_native::inclusion(cs, path, root, leaf, hash),
        Route::Gadgets => inclusion::<T, _>(cs, path, root, leaf),
    }
}

/// The column hash (Poseidon over the column's rows).
fn column_hash<CS: ConstraintSystem<Fr>>(
    cs: CS,
    rows: &[AllocatedNum<Fr>],
    route: Route,
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    use neptune::circuit::poseidon_hash;
    if route == Route::Native && matches!(rows.len(), 2 | 11) {
        return crate::poseidon_native::poseidon(cs, rows);
    }
    match rows.len() {
        2 => poseidon_hash(cs, rows.to_vec(), &*POSEIDON_CONSTANTS_2),
        11 => poseidon_hash(cs, rows.to_vec(), &*POSEIDON_CONSTANTS_11),
        n => Err(SynthesisError::IoError(std::io::Error::other(format!(
            "a PoRep column of {n} layers (filecoin-proofs hashes 2 or 11)"
        )))),
    }
}

/// A column's hash and its inclusion in tree C (parent columns, and the
/// challenged node's column of labels).
fn column_in_tree_c<Tree: MerkleTreeTrait, CS: ConstraintSystem<Fr>>(
    mut cs: CS,
    rows: &[AllocatedNum<Fr>],
    path: &PathOptions,
    s: &Shared,
    route: Route,
) -> Result<(), SynthesisError>
where
    Tree::Hasher: 'static,
{
    let hash = column_hash(cs.namespace(|| "column_hash"), rows, route)?;
    tree_inclusion::<Tree, _>(
        cs.namespace(|| "inclusion"),
        path,
        &s.comm_c,
        &hash,
        route,
        TreeHash::Poseidon,
    )
}

/// Part 1: the data leaf and its inclusion in tree D.
fn data_leaf<Tree: MerkleTreeTrait, CS: ConstraintSystem<Fr>>(
    mut cs: CS,
    c: &Challenge<Tree>,
    s: &Shared,
    route: Route,
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    let leaf = alloc(cs.namespace(|| "data_leaf"), Some(c.data_leaf))?;
    tree_inclusion::<BinaryMerkleTree<G>, _>(
        cs.namespace(|| "comm_d_inclusion"),
        &c.comm_d_path,
        &s.comm_d,
        &leaf,
        route,
        TreeHash::Sha256,
    )?;
    Ok(leaf)
}

/// The parent columns (drg, then expander) and the challenged node.
struct Parents {
    drg: Vec<Vec<AllocatedNum<Fr>>>,
    exp: Vec<Vec<AllocatedNum<Fr>>>,
    node: UInt64,
}

/// Part 2: each parent column allocated, hashed and its hash included in
/// tree C; then the challenged node, a public input.
fn parents<Tree: MerkleTreeTrait, CS: ConstraintSystem<Fr>>(
    mut cs: CS,
    c: &Challenge<Tree>,
    s: &Shared,
    route: Route,
) -> Result<Parents, SynthesisError>
where
    Tree::Hasher: 'static,
{
    let mut open = |o: &Opening| -> Result<Vec<AllocatedNum<Fr>>, SynthesisError> {
        let rows = o
            .rows
            .iter()
            .map(|&r| alloc(cs.namespace(|| "column_row"), Some(r)))
            .collect::<Result<Vec<_>, _>>()?;
        column_in_tree_c::<Tree, _>(cs.namespace(|| "column"), &rows, &o.path, s, route)?;
        Ok(rows)
    };
    let drg = c.drg.iter().map(&mut open).collect::<Result<Vec<_>, _>>()?;
    let exp = c.exp.iter().map(&mut open).collect::<Result<Vec<_>, _>>()?;
    let node = UInt64::alloc(cs.namespace(|| "challenge"), Some(c.node))?;
    node.pack_into_input(cs.namespace(|| "challenge input"))?;
    Ok(Parents { drg, exp, node })
}

/// How a partition's hashing (labels, tree D's path, column hashes, the
/// paths in trees C and R) is computed: natively (the default), or through
/// the gadgets (what the native route is held to).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    Native,
    Gadgets,
}

/// A label part: layer `layer`'s label from its parents' bits.
fn label<CS: ConstraintSystem<Fr>>(
    mut cs: CS,
    layer: usize,
    p: &Parents,
    s: &Shared,
    route: Route,
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    let mut parents = Vec::with_capacity(p.drg.len() + p.exp.len());
    let mut bits = |num: &AllocatedNum<Fr>| -> Result<(), SynthesisError> {
        let b = num.to_bits_le(cs.namespace(|| "parent_bits"))?;
        parents.push(reverse_bit_numbering(b));
        Ok(())
    };
    for col in &p.drg {
        bits(&col[layer - 1])?;
    }
    // Expander parents hold no value for the first layer.
    if layer > 1 {
        for col in &p.exp {
            bits(&col[layer - 2])?;
        }
    }
    // The 37 parents the labeling hash takes, as filecoin-proofs repeats them.
    let mut expanded = parents.clone();
    if layer > 1 {
        expanded.extend_from_slice(&parents);
        expanded.extend_from_slice(&parents[..9]);
    } else {
        for _ in 0..5 {
            expanded.extend_from_slice(&parents);
        }
        expanded.push(parents[0].clone());
    }
    match route {
        Route::Native => crate::porep_native::label(
            cs.namespace(|| "create_label"),
            &s.replica_id_bits,
            &expanded,
            layer as u32,
            &p.node,
        ),
        Route::Gadgets => create_label_circuit(
            cs.namespace(|| "create_label"),
            &s.replica_id_bits,
            expanded,
            UInt32::constant(layer as u32),
            p.node.clone(),
        ),
    }
}

/// The last part: the encoded node's inclusion in tree R, and the column of
/// labels' hash in tree C.
fn encoding<Tree: MerkleTreeTrait, CS: ConstraintSystem<Fr>>(
    mut cs: CS,
    c: &Challenge<Tree>,
    s: &Shared,
    leaf: &AllocatedNum<Fr>,
    labels: &[AllocatedNum<Fr>],
    route: Route,
) -> Result<(), SynthesisError>
where
    Tree::Hasher: 'static,
{
    let key = labels.last().ok_or(SynthesisError::Unsatisfiable)?;
    let encoded = encode(cs.namespace(|| "encode_node"), key, leaf)?;
    tree_inclusion::<Tree, _>(
        cs.namespace(|| "comm_r_last_data_inclusion"),
        &c.comm_r_last_path,
        &s.comm_r_last,
        &encoded,
        route,
        TreeHash::Poseidon,
    )?;
    column_in_tree_c::<Tree, _>(cs.namespace(|| "c_x"), labels, &c.comm_c_path, s, route)
}

/// Parts per challenge of `layers` layers.
fn parts_per_challenge(layers: usize) -> usize {
    layers + 3
}

/// One challenge into its parts: the data leaf beside everything else; the
/// labels in parallel once the parent columns are allocated; the encoding last.
fn challenge<Tree, P>(
    c: &Challenge<Tree>,
    s: &Shared,
    parts: &mut [P],
    route: Route,
) -> Result<(), SynthesisError>
where
    Tree: MerkleTreeTrait,
    Tree::Hasher: 'static,
    P: ConstraintSystem<Fr> + Send,
{
    let layers = c.drg.first().map_or(0, |o| o.rows.len());
    let [leaf_part, parents_part, rest @ ..] = parts else {
        return Err(SynthesisError::Unsatisfiable);
    };
    let (label_parts, last) = rest.split_at_mut(layers);
    let [last] = last else {
        return Err(SynthesisError::Unsatisfiable);
    };
    let (leaf, labels) = rayon::join(
        || data_leaf(&mut *leaf_part, c, s, route),
        || {
            let p = parents(&mut *parents_part, c, s, route)?;
            label_parts
                .par_iter_mut()
                .enumerate()
                .map(|(i, cs)| label(cs, i + 1, &p, s, route))
                .collect::<Result<Vec<_>, _>>()
        },
    );
    encoding(last, c, s, &leaf?, &labels?, route)
}

/// Every challenge into its parts (`parts_per_challenge` each, in order).
struct ChallengeParts<'s, Tree> {
    shared: &'s Shared,
    per: usize,
    route: Route,
    tree: std::marker::PhantomData<fn() -> Tree>,
}

impl<Tree> Parts for ChallengeParts<'_, Tree>
where
    Tree: MerkleTreeTrait,
    Tree::Hasher: 'static,
{
    type Item = Challenge<Tree>;
    fn per_item(&self) -> usize {
        self.per
    }
    fn run<P: ConstraintSystem<Fr> + Send>(
        &self,
        cs: &[Challenge<Tree>],
        parts: &mut [P],
    ) -> Result<(), SynthesisError> {
        parts
            .par_chunks_mut(self.per.max(1))
            .zip(cs)
            .try_for_each(|(parts, c)| challenge(c, self.shared, parts, self.route))
    }
}

/// A partition shape: tree type, nodes, layers.
type ShapeKey = (TypeId, usize, usize);

/// Part sizes learned per partition shape: the first challenge of the first
/// partition of a shape synthesizes into growable parts, everything else
/// straight into its windows of the arena.
fn known_sizes() -> &'static Mutex<HashMap<ShapeKey, Vec<PartSize>>> {
    static SIZES: OnceLock<Mutex<HashMap<ShapeKey, Vec<PartSize>>>> = OnceLock::new();
    SIZES.get_or_init(Default::default)
}

/// The prelude into `cs`, and the challenges (with their layers) whose
/// parts follow it.
#[allow(clippy::type_complexity)]
fn prelude_and_challenges<Tree: 'static + MerkleTreeTrait, CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    pub_in: &stacked::PublicInputs<<Tree::Hasher as Hasher>::Domain, <G as Hasher>::Domain>,
    proofs: &[VanillaProof<Tree, G>],
) -> Result<(Shared, Vec<Challenge<Tree>>, usize), SynthesisError> {
    let first = proofs.first().ok_or(SynthesisError::Unsatisfiable)?;
    let shared = prelude(cs, pub_in, first)?;
    let challenges = proofs
        .par_iter()
        .map(Challenge::of)
        .collect::<Result<Vec<_>, _>>()?;
    let layers = challenges[0].drg.first().map_or(0, |o| o.rows.len());
    Ok((shared, challenges, layers))
}

/// A partition's witness: the prelude here, the challenges' parts in
/// parallel, the hashing by `route`.
pub(crate) fn witness<Tree: 'static + MerkleTreeTrait>(
    cs: &mut WitnessCs<'_>,
    pub_in: &stacked::PublicInputs<<Tree::Hasher as Hasher>::Domain, <G as Hasher>::Domain>,
    nodes: usize,
    proofs: &[VanillaProof<Tree, G>],
    route: Route,
) -> Result<(), SynthesisError> {
    let (shared, challenges, layers) = prelude_and_challenges(&mut *cs, pub_in, proofs)?;
    let key = (TypeId::of::<Tree>(), nodes, layers);
    let known = known_sizes()
        .lock()
        .expect("not poisoned")
        .get(&key)
        .cloned();
    let learn = known.is_none();
    let parts = ChallengeParts::<Tree> {
        shared: &shared,
        per: parts_per_challenge(layers),
        route,
        tree: std::marker::PhantomData,
    };
    // The first challenge of a shape's first partition goes into growable
    // parts (its labels still in parallel) and teaches the sizes; every
    // other challenge goes straight into its windows.
    let one = synthesize_parts(cs, &parts, &challenges, known)?;
    if learn {
        known_sizes().lock().expect("not poisoned").insert(key, one);
    }
    Ok(())
}

/// A partition's constraint matrices: the prelude here, every challenge's
/// parts through the gadgets (the circuit's own constraints), recorded in
/// parallel and appended in the circuit's order.
pub(crate) fn record_matrices<Tree: 'static + MerkleTreeTrait>(
    cs: &mut MatrixCs,
    pub_in: &stacked::PublicInputs<<Tree::Hasher as Hasher>::Domain, <G as Hasher>::Domain>,
    proofs: &[VanillaProof<Tree, G>],
) -> Result<(), SynthesisError> {
    let (shared, challenges, layers) = prelude_and_challenges(&mut *cs, pub_in, proofs)?;
    let parts = ChallengeParts::<Tree> {
        shared: &shared,
        per: parts_per_challenge(layers),
        route: Route::Gadgets,
        tree: std::marker::PhantomData,
    };
    cs.record_parts(&parts, &challenges)
}
