//! A PoSt partition as the engine proves it: storage-proofs'
//! `FallbackPoStCircuit`, except that its witness (for pre-compiled
//! constraints) is computed in parallel parts.
//!
//! The circuit is one sub-circuit per sector (2,349 in a 32 GiB WindowPoSt
//! partition, one in a WinningPoSt), and a sector is its commitment check
//! (comm_r = H(comm_c, comm_r_last)) followed by one Merkle inclusion per
//! challenged leaf (10 per WindowPoSt sector, 66 in a WinningPoSt), each
//! needing only the sector's comm_r_last. So a sector becomes `1 + leaves`
//! parts: `Sector::synthesize` followed operation for operation, the
//! leaves in parallel once the commitments are allocated; parts land in
//! circuit order (`cuzk_stages::pce::synthesize_parts`), so the assignment
//! is the one sequential synthesis makes and is checked against the
//! recording like any other. Each leaf's path in tree R is hashed natively
//! (`poseidon_native`). Full synthesis runs the circuit as it is; the
//! matrices are recorded in the same parts, in parallel ([`record_sectors`]:
//! the parameters' setup records the blank circuit so, and the prover a
//! partition's first proof).

use bellperson::gadgets::num::AllocatedNum;
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;
use cuzk_stages::circuit::ProvableCircuit;
use cuzk_stages::cs::ArenaCs;
use cuzk_stages::pce::{Parts, RecordingCs, WitnessCs, synthesize_parts};
use cuzk_stages::setup::MatrixCs;
use filecoin_hashers::{HashFunction, Hasher};
use rayon::prelude::*;
use storage_proofs_core::gadgets::constraint;
use storage_proofs_core::gadgets::por::PoRCircuit;
use storage_proofs_core::gadgets::variables::Root;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_post::fallback::{FallbackPoStCircuit, Proof, Sector};

use crate::porep_native::{PathOptions, TreeHash};
use crate::porep_witness::Route;

/// A PoSt partition: filecoin-proofs' circuit, its witness in parts, the
/// Merkle paths hashed natively.
pub struct PostPartition<Tree: MerkleTreeTrait> {
    circuit: FallbackPoStCircuit<Tree>,
    /// Per sector, per challenged leaf: the path the circuit opens (the
    /// circuit keeps its paths private).
    paths: Vec<Vec<PathOptions>>,
}

impl<Tree: 'static + MerkleTreeTrait> Clone for PostPartition<Tree> {
    fn clone(&self) -> Self {
        Self {
            circuit: self.circuit.clone(),
            paths: self.paths.clone(),
        }
    }
}

impl<Tree: 'static + MerkleTreeTrait> PostPartition<Tree> {
    /// The circuit filecoin-proofs made from `vanilla` (sector `i` of one
    /// from proof `i` of the other).
    pub fn new(circuit: FallbackPoStCircuit<Tree>, vanilla: &Proof<Tree::Proof>) -> Self {
        let paths = vanilla.sectors.iter().map(|s| s.as_options()).collect();
        Self { circuit, paths }
    }
}

/// The sector's commitments as `Sector::synthesize` allocates and checks
/// them; returns comm_r_last, which every leaf's inclusion ends at.
fn commitments<Tree: 'static + MerkleTreeTrait, CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    s: &Sector<Tree>,
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    let alloc = |cs: &mut CS, name: &'static str, v: Option<Fr>| {
        AllocatedNum::alloc(cs.namespace(|| name), || {
            v.ok_or(SynthesisError::AssignmentMissing)
        })
    };
    let comm_r_last = alloc(cs, "comm_r_last", s.comm_r_last)?;
    let comm_c = alloc(cs, "comm_c", s.comm_c)?;
    let comm_r = alloc(cs, "comm_r", s.comm_r)?;
    comm_r.inputize(cs.namespace(|| "comm_r_input"))?;
    let hash = <Tree::Hasher as Hasher>::Function::hash2_circuit(
        cs.namespace(|| "H_comm_c_comm_r_last"),
        &comm_c,
        &comm_r_last,
    )?;
    constraint::equal(cs, || "comm_r", &comm_r, &hash);
    Ok(comm_r_last)
}

/// One sector into its parts: the commitments, then the leaves in
/// parallel, their paths natively where `paths` has them.
fn sector<Tree: 'static + MerkleTreeTrait, P: ConstraintSystem<Fr> + Send>(
    s: &Sector<Tree>,
    paths: Option<&[PathOptions]>,
    parts: &mut [P],
) -> Result<(), SynthesisError> {
    let [first, leaves @ ..] = parts else {
        return Err(SynthesisError::Unsatisfiable);
    };
    if leaves.len() != s.leafs.len() || s.leafs.len() != s.paths.len() {
        return Err(SynthesisError::Unsatisfiable);
    }
    let comm_r_last = commitments(first, s)?;
    leaves
        .par_iter_mut()
        .enumerate()
        .try_for_each(|(i, cs)| match paths {
            Some(paths) => {
                // `PoRCircuit::synthesize`: the leaf, then its path.
                let leaf = AllocatedNum::alloc(cs.namespace(|| "value"), || {
                    s.leafs[i].ok_or(SynthesisError::AssignmentMissing)
                })?;
                crate::porep_native::inclusion(
                    cs.namespace(|| "challenge_inclusion"),
                    &paths[i],
                    &comm_r_last,
                    &leaf,
                    TreeHash::Poseidon,
                )
            }
            None => PoRCircuit::<Tree>::synthesize(
                cs.namespace(|| "challenge_inclusion"),
                Root::Val(s.leafs[i]),
                s.paths[i].clone(),
                Root::from_allocated::<P>(comm_r_last.clone()),
                true,
            ),
        })
}

/// Every sector into its parts (`per` each, in order); items are sector
/// indices, with their paths for the native route.
struct SectorParts<'a, Tree: MerkleTreeTrait> {
    per: usize,
    sectors: &'a [Sector<Tree>],
    paths: Option<&'a [Vec<PathOptions>]>,
}

impl<Tree: 'static + MerkleTreeTrait> Parts for SectorParts<'_, Tree> {
    type Item = usize;
    fn per_item(&self) -> usize {
        self.per
    }
    fn run<P: ConstraintSystem<Fr> + Send>(
        &self,
        sectors: &[usize],
        parts: &mut [P],
    ) -> Result<(), SynthesisError> {
        parts
            .par_chunks_mut(self.per.max(1))
            .zip(sectors)
            .try_for_each(|(parts, &i)| {
                let paths = self.paths.map(|p| p[i].as_slice());
                sector(&self.sectors[i], paths, parts)
            })
    }
}

/// Leaves per sector, the same for every sector (the circuit makes them
/// so; parts need it).
fn leaves_per_sector<Tree: MerkleTreeTrait>(
    sectors: &[Sector<Tree>],
) -> Result<usize, SynthesisError> {
    let leaves = sectors.first().map_or(0, |s| s.leafs.len());
    match sectors.iter().all(|s| s.leafs.len() == leaves) {
        true => Ok(leaves),
        false => Err(SynthesisError::Unsatisfiable),
    }
}

/// A PoSt circuit's constraint matrices, its sectors' parts recorded in
/// parallel and appended in the circuit's order: the matrices sequential
/// synthesis records (values do not shape them, so the blank circuit
/// records so too; tests check both).
pub fn record_sectors<Tree: 'static + MerkleTreeTrait>(
    circuit: &FallbackPoStCircuit<Tree>,
    cs: &mut MatrixCs,
) -> Result<(), SynthesisError> {
    let sectors = &circuit.sectors;
    let parts = SectorParts {
        per: 1 + leaves_per_sector(sectors)?,
        sectors,
        paths: None,
    };
    let items: Vec<usize> = (0..sectors.len()).collect();
    cs.record_parts(&parts, &items)
}

impl<Tree: 'static + MerkleTreeTrait> PostPartition<Tree> {
    /// The witness in parts, the paths by `route`.
    fn witness(&self, cs: &mut WitnessCs<'_>, route: Route) -> Result<(), SynthesisError> {
        let sectors = &self.circuit.sectors;
        let leaves = leaves_per_sector(sectors)?;
        let native = route == Route::Native
            && self.paths.len() == sectors.len()
            && self.paths.iter().all(|p| p.len() == leaves);
        let parts = SectorParts {
            per: 1 + leaves,
            sectors,
            paths: native.then_some(self.paths.as_slice()),
        };
        let items: Vec<usize> = (0..sectors.len()).collect();
        synthesize_parts(cs, &parts, &items, None).map(drop)
    }
}

impl<Tree: 'static + MerkleTreeTrait> ProvableCircuit for PostPartition<Tree> {
    fn synthesize_into(self: Box<Self>, cs: &mut ArenaCs<'_>) -> Result<(), SynthesisError> {
        self.circuit.synthesize(cs)
    }

    fn synthesize_witness(self: Box<Self>, cs: &mut WitnessCs<'_>) -> Result<(), SynthesisError> {
        self.witness(cs, Route::Native)
    }

    fn synthesize_witness_gadgets(
        self: Box<Self>,
        cs: &mut WitnessCs<'_>,
    ) -> Option<Result<(), SynthesisError>> {
        Some(self.witness(cs, Route::Gadgets))
    }

    fn synthesize_recording(
        self: Box<Self>,
        cs: &mut RecordingCs<'_>,
    ) -> Result<(), SynthesisError> {
        self.circuit.synthesize(cs)
    }

    fn record_matrices(&self, cs: &mut MatrixCs) -> Option<Result<(), SynthesisError>> {
        Some(record_sectors(&self.circuit, cs))
    }

    fn duplicate(&self) -> Option<Box<dyn ProvableCircuit>> {
        Some(Box::new(self.clone()))
    }

    fn shape(self: Box<Self>) -> Result<cuzk_stages::CircuitShape, SynthesisError> {
        cuzk_stages::shape_of(self.circuit)
    }

    fn aux_name(self: Box<Self>, index: usize) -> Option<Result<Option<String>, SynthesisError>> {
        Some(cuzk_stages::pce::aux_name(self.circuit, index))
    }
}
