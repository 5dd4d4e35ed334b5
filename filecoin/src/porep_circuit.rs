//! One PoRep partition as the engine proves it: filecoin-proofs'
//! `StackedCircuit`, except that its witness (for pre-compiled constraints)
//! is computed challenge by challenge in parallel.
//!
//! A partition's circuit is a short prelude (the replica id, the
//! commitments) followed by one sub-circuit per challenge (18 for 32 GiB, each
//! 7 M constraints), independent of one another given the prelude. Its
//! witness is synthesized in parts, challenges and their labels in parallel
//! (see `porep_witness`); full synthesis and the recording run filecoin-proofs'
//! circuit as it is.

use std::sync::Arc;

use bellperson::{Circuit, SynthesisError};
use cuzk_stages::circuit::ProvableCircuit;
use cuzk_stages::cs::ArenaCs;
use cuzk_stages::pce::{RecordingCs, WitnessCs};
use cuzk_stages::setup::MatrixCs;

use crate::porep_witness::Route;
use filecoin_hashers::Hasher;
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::drgraph::Graph;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_porep::stacked::{
    self, Proof as VanillaProof, StackedCircuit, StackedCompound, StackedDrg,
};

type G = filecoin_proofs::DefaultPieceHasher;

/// A PoRep partition: what `StackedCompound::circuit` builds its circuit from.
pub struct PorepPartition<Tree: 'static + MerkleTreeTrait> {
    pub_in: Arc<stacked::PublicInputs<<Tree::Hasher as Hasher>::Domain, <G as Hasher>::Domain>>,
    params: Arc<stacked::PublicParams<Tree>>,
    proofs: Vec<VanillaProof<Tree, G>>,
    k: usize,
}

impl<Tree: 'static + MerkleTreeTrait> Clone for PorepPartition<Tree> {
    fn clone(&self) -> Self {
        Self {
            pub_in: self.pub_in.clone(),
            params: self.params.clone(),
            proofs: self.proofs.clone(),
            k: self.k,
        }
    }
}

impl<Tree: 'static + MerkleTreeTrait> PorepPartition<Tree> {
    pub fn new(
        pub_in: Arc<stacked::PublicInputs<<Tree::Hasher as Hasher>::Domain, <G as Hasher>::Domain>>,
        params: Arc<stacked::PublicParams<Tree>>,
        proofs: Vec<VanillaProof<Tree, G>>,
        k: usize,
    ) -> Self {
        Self {
            pub_in,
            params,
            proofs,
            k,
        }
    }

    /// The proof's public parameters.
    pub fn params(&self) -> &stacked::PublicParams<Tree> {
        &self.params
    }

    /// Challenges in this partition.
    pub fn challenges(&self) -> usize {
        self.proofs.len()
    }

    fn circuit_of(
        &self,
        proofs: &[VanillaProof<Tree, G>],
    ) -> Result<StackedCircuit<Tree, G>, SynthesisError> {
        <StackedCompound<Tree, G> as CompoundProof<
            StackedDrg<'_, Tree, G>,
            StackedCircuit<Tree, G>,
        >>::circuit(
            &self.pub_in,
            (),
            &proofs.to_vec(),
            &self.params,
            Some(self.k),
        )
        .map_err(|e| {
            SynthesisError::IoError(std::io::Error::other(format!(
                "building the PoRep circuit: {e:#}"
            )))
        })
    }

    /// The partition circuit's matrices, its challenges recorded in
    /// parallel: the setup's recording (the same matrices as the blank
    /// circuit's, which a test checks).
    pub fn record_in_parts(&self, cs: &mut MatrixCs) -> Result<(), SynthesisError> {
        crate::porep_witness::record_matrices(cs, &self.pub_in, &self.proofs)
    }

    /// The whole partition's circuit, as filecoin-proofs builds it.
    pub fn circuit(&self) -> Result<StackedCircuit<Tree, G>, SynthesisError> {
        self.circuit_of(&self.proofs)
    }
}

impl<Tree: 'static + MerkleTreeTrait> ProvableCircuit for PorepPartition<Tree> {
    fn synthesize_into(self: Box<Self>, cs: &mut ArenaCs<'_>) -> Result<(), SynthesisError> {
        self.circuit()?.synthesize(cs)
    }

    /// The labels natively (`porep_native`), the rest through the gadgets.
    fn synthesize_witness(self: Box<Self>, cs: &mut WitnessCs<'_>) -> Result<(), SynthesisError> {
        let nodes = self.params.graph.size();
        crate::porep_witness::witness(cs, &self.pub_in, nodes, &self.proofs, Route::Native)
    }

    fn synthesize_witness_gadgets(
        self: Box<Self>,
        cs: &mut WitnessCs<'_>,
    ) -> Option<Result<(), SynthesisError>> {
        let nodes = self.params.graph.size();
        Some(crate::porep_witness::witness(
            cs,
            &self.pub_in,
            nodes,
            &self.proofs,
            Route::Gadgets,
        ))
    }

    fn synthesize_recording(
        self: Box<Self>,
        cs: &mut RecordingCs<'_>,
    ) -> Result<(), SynthesisError> {
        self.circuit()?.synthesize(cs)
    }

    fn record_matrices(&self, cs: &mut MatrixCs) -> Option<Result<(), SynthesisError>> {
        Some(self.record_in_parts(cs))
    }

    fn duplicate(&self) -> Option<Box<dyn ProvableCircuit>> {
        Some(Box::new(self.clone()))
    }

    fn shape(self: Box<Self>) -> Result<cuzk_stages::CircuitShape, SynthesisError> {
        cuzk_stages::shape_of(self.circuit()?)
    }

    fn aux_name(self: Box<Self>, index: usize) -> Option<Result<Option<String>, SynthesisError>> {
        Some(
            self.circuit()
                .and_then(|c| cuzk_stages::pce::aux_name(c, index)),
        )
    }
}
