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
//! recording like any other. Full synthesis and the recording run the
//! circuit as it is.

use bellperson::gadgets::num::AllocatedNum;
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;
use cuzk_stages::circuit::ProvableCircuit;
use cuzk_stages::cs::ArenaCs;
use cuzk_stages::pce::{Parts, RecordingCs, WitnessCs, synthesize_parts};
use filecoin_hashers::{HashFunction, Hasher};
use rayon::prelude::*;
use storage_proofs_core::gadgets::constraint;
use storage_proofs_core::gadgets::por::PoRCircuit;
use storage_proofs_core::gadgets::variables::Root;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_post::fallback::{FallbackPoStCircuit, Sector};

/// A PoSt partition: filecoin-proofs' circuit, its witness in parts.
pub struct PostPartition<Tree: MerkleTreeTrait>(pub FallbackPoStCircuit<Tree>);

impl<Tree: 'static + MerkleTreeTrait> Clone for PostPartition<Tree> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
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

/// One sector into its parts: the commitments, then the leaves in parallel.
fn sector<Tree: 'static + MerkleTreeTrait, P: ConstraintSystem<Fr> + Send>(
    s: &Sector<Tree>,
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
        .zip(s.leafs.par_iter().zip(&s.paths))
        .try_for_each(|(cs, (leaf, path))| {
            PoRCircuit::<Tree>::synthesize(
                cs.namespace(|| "challenge_inclusion"),
                Root::Val(*leaf),
                path.clone(),
                Root::from_allocated::<P>(comm_r_last.clone()),
                true,
            )
        })
}

/// Every sector into its parts (`per` each, in order).
struct SectorParts<Tree> {
    per: usize,
    tree: std::marker::PhantomData<fn() -> Tree>,
}

impl<Tree: 'static + MerkleTreeTrait> Parts for SectorParts<Tree> {
    type Item = Sector<Tree>;
    fn per_item(&self) -> usize {
        self.per
    }
    fn run<P: ConstraintSystem<Fr> + Send>(
        &self,
        sectors: &[Sector<Tree>],
        parts: &mut [P],
    ) -> Result<(), SynthesisError> {
        parts
            .par_chunks_mut(self.per.max(1))
            .zip(sectors)
            .try_for_each(|(parts, s)| sector(s, parts))
    }
}

impl<Tree: 'static + MerkleTreeTrait> ProvableCircuit for PostPartition<Tree> {
    fn synthesize_into(self: Box<Self>, cs: &mut ArenaCs<'_>) -> Result<(), SynthesisError> {
        self.0.synthesize(cs)
    }

    fn synthesize_witness(self: Box<Self>, cs: &mut WitnessCs<'_>) -> Result<(), SynthesisError> {
        let sectors = &self.0.sectors;
        let leaves = sectors.first().map_or(0, |s| s.leafs.len());
        // Every sector must make the same parts; the circuit makes them so.
        if sectors.iter().any(|s| s.leafs.len() != leaves) {
            return Err(SynthesisError::Unsatisfiable);
        }
        let parts = SectorParts::<Tree> {
            per: 1 + leaves,
            tree: std::marker::PhantomData,
        };
        synthesize_parts(cs, &parts, sectors, None).map(drop)
    }

    fn synthesize_recording(
        self: Box<Self>,
        cs: &mut RecordingCs<'_>,
    ) -> Result<(), SynthesisError> {
        self.0.synthesize(cs)
    }

    fn duplicate(&self) -> Option<Box<dyn ProvableCircuit>> {
        Some(Box::new(self.clone()))
    }

    fn shape(self: Box<Self>) -> Result<cuzk_stages::CircuitShape, SynthesisError> {
        cuzk_stages::shape_of(self.0)
    }
}
