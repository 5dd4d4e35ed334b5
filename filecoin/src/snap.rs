//! SnapDeals (empty sector update): from bincode partition proofs and the
//! three commitments to one `EmptySectorUpdateCircuit` per partition,
//! checked with Filecoin's `verify_empty_sector_update_proof`.

use blstrs::Scalar as Fr;
use filecoin_proofs::{
    DefaultPieceDomain, PartitionProof, PoRepConfig, SectorUpdateConfig, with_shape,
};
use filecoin_proofs_api::RegisteredUpdateProof;
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_update::constants::TreeRHasher;
use storage_proofs_update::{
    EmptySectorUpdate, EmptySectorUpdateCircuit, EmptySectorUpdateCompound,
};

use crate::{FilError, FilJob, ProofKind, params};

/// A SnapDeals request as hosts send it.
#[derive(Clone, Debug)]
pub struct SnapRequest {
    pub registered_proof: RegisteredUpdateProof,
    /// bincode `PartitionProof` per partition, in partition order.
    pub partition_proofs: Vec<Vec<u8>>,
    pub comm_r_old: [u8; 32],
    pub comm_r_new: [u8; 32],
    pub comm_d_new: [u8; 32],
}

/// One SnapDeals partition: what filecoin-proofs builds its circuit from
/// (the circuit type itself is not `Clone`; this is, so pre-compiled
/// synthesis can fall back).
struct Partition<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> {
    pub_in: storage_proofs_update::PublicInputs,
    proof: PartitionProof<Tree>,
    pp: storage_proofs_update::PublicParams,
    k: usize,
}

impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> Clone for Partition<Tree> {
    fn clone(&self) -> Self {
        Self {
            pub_in: self.pub_in.clone(),
            proof: self.proof.clone(),
            pp: self.pp.clone(),
            k: self.k,
        }
    }
}

impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> Partition<Tree> {
    fn build(&self) -> anyhow::Result<EmptySectorUpdateCircuit<Tree>> {
        <EmptySectorUpdateCompound<Tree> as CompoundProof<
            EmptySectorUpdate<Tree>,
            EmptySectorUpdateCircuit<Tree>,
        >>::circuit(&self.pub_in, (), &self.proof, &self.pp, Some(self.k))
    }
}

impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> Partition<Tree> {
    /// [`Self::build`] as synthesis reports its errors.
    fn circuit(&self) -> Result<EmptySectorUpdateCircuit<Tree>, bellperson::SynthesisError> {
        self.build().map_err(|e| {
            bellperson::SynthesisError::IoError(std::io::Error::other(format!(
                "building the partition circuit: {e:#}"
            )))
        })
    }
}

impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> bellperson::Circuit<Fr>
    for Partition<Tree>
{
    fn synthesize<CS: bellperson::ConstraintSystem<Fr>>(
        self,
        cs: &mut CS,
    ) -> Result<(), bellperson::SynthesisError> {
        self.circuit()?.synthesize(cs)
    }
}

/// A SnapDeals partition as the engine proves it: the circuit itself for
/// full synthesis and the recording; for the witness alone, its challenges
/// in parallel and its Merkle paths hashed natively (`snap_witness`).
struct SnapPartition<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(Partition<Tree>);

impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> SnapPartition<Tree> {
    fn witness(
        self,
        cs: &mut cuzk_stages::pce::WitnessCs<'_>,
        route: crate::porep_witness::Route,
    ) -> Result<(), bellperson::SynthesisError> {
        crate::snap_witness::witness(self.0.circuit()?, cs, route)
    }
}

impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> cuzk_stages::ProvableCircuit
    for SnapPartition<Tree>
{
    fn synthesize_into(
        self: Box<Self>,
        cs: &mut cuzk_stages::cs::ArenaCs<'_>,
    ) -> Result<(), bellperson::SynthesisError> {
        bellperson::Circuit::synthesize(self.0, cs)
    }

    fn synthesize_witness(
        self: Box<Self>,
        cs: &mut cuzk_stages::pce::WitnessCs<'_>,
    ) -> Result<(), bellperson::SynthesisError> {
        self.witness(cs, crate::porep_witness::Route::Native)
    }

    fn synthesize_witness_gadgets(
        self: Box<Self>,
        cs: &mut cuzk_stages::pce::WitnessCs<'_>,
    ) -> Option<Result<(), bellperson::SynthesisError>> {
        Some(self.witness(cs, crate::porep_witness::Route::Gadgets))
    }

    fn synthesize_recording(
        self: Box<Self>,
        cs: &mut cuzk_stages::pce::RecordingCs<'_>,
    ) -> Result<(), bellperson::SynthesisError> {
        bellperson::Circuit::synthesize(self.0, cs)
    }

    fn duplicate(&self) -> Option<Box<dyn cuzk_stages::ProvableCircuit>> {
        Some(Box::new(Self(self.0.clone())))
    }

    fn shape(self: Box<Self>) -> Result<cuzk_stages::CircuitShape, bellperson::SynthesisError> {
        cuzk_stages::shape_of(self.0)
    }

    fn aux_name(
        self: Box<Self>,
        index: usize,
    ) -> Option<Result<Option<String>, bellperson::SynthesisError>> {
        Some(cuzk_stages::pce::aux_name(self.0, index))
    }
}

/// The SnapDeals job.
pub fn job(req: &SnapRequest) -> Result<FilJob, FilError> {
    let cfg = req.registered_proof.as_v1_config();
    with_shape!(u64::from(cfg.sector_size), job_for, req, cfg)
}

fn job_for<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    req: &SnapRequest,
    porep: PoRepConfig,
) -> Result<FilJob, FilError> {
    type Compound<T> = EmptySectorUpdateCompound<T>;
    let cfg = SectorUpdateConfig::from_porep_config(&porep);
    // Before anything is decoded: no parameters, no work.
    let params = params::require(ProofKind::Snap, u64::from(cfg.sector_size))?;
    let partitions = usize::from(cfg.update_partitions);
    if req.partition_proofs.len() != partitions {
        return Err(FilError::malformed(
            "vanilla_proofs",
            format!(
                "has {} partition proofs; {:?} has {partitions}",
                req.partition_proofs.len(),
                req.registered_proof
            ),
        ));
    }
    let vanilla: Vec<PartitionProof<Tree>> = req
        .partition_proofs
        .iter()
        .enumerate()
        .map(|(k, b)| {
            crate::bincode_exact(b).map_err(|e| {
                FilError::malformed(
                    format!("vanilla_proofs[{k}]"),
                    format!("is not a bincode partition proof: {e}"),
                )
            })
        })
        .collect::<Result<_, _>>()?;
    // Each commitment must be a field element (as_safe_commitment checks it):
    // a non-canonical one would make Filecoin's code panic later.
    let pub_in = storage_proofs_update::PublicInputs {
        k: partitions,
        comm_r_old: crate::safe_commitment(&req.comm_r_old, "comm_r_old")?,
        comm_d_new: crate::safe_commitment::<DefaultPieceDomain>(&req.comm_d_new, "comm_d_new")?,
        comm_r_new: crate::safe_commitment(&req.comm_r_new, "comm_r_new")?,
        h: cfg.h,
    };
    let sp = compound_proof::SetupParams {
        vanilla_params: storage_proofs_update::SetupParams {
            sector_bytes: u64::from(cfg.sector_size),
        },
        partitions: Some(partitions),
        priority: false,
    };
    let pp = <Compound<Tree> as CompoundProof<
        EmptySectorUpdate<Tree>,
        EmptySectorUpdateCircuit<Tree>,
    >>::setup(&sp)?;
    let mut parts: Vec<(Box<dyn cuzk_stages::ProvableCircuit>, Vec<Fr>)> = vec![];
    for (k, proof) in vanilla.iter().enumerate() {
        let circuit = Partition::<Tree> {
            pub_in: pub_in.clone(),
            proof: proof.clone(),
            pp: pp.vanilla_params.clone(),
            k,
        };
        // Built once here so a bad proof fails now, not in synthesis.
        circuit.build()?;
        let inputs = <Compound<Tree> as CompoundProof<
            EmptySectorUpdate<Tree>,
            EmptySectorUpdateCircuit<Tree>,
        >>::generate_public_inputs(&pub_in, &pp.vanilla_params, Some(k))?;
        parts.push((Box::new(SnapPartition(circuit)), inputs));
    }
    let (rp, old, new, d) = (
        req.registered_proof,
        req.comm_r_old,
        req.comm_r_new,
        req.comm_d_new,
    );
    let verifier = Box::new(move |bytes: &[u8]| {
        filecoin_proofs_api::update::verify_empty_sector_update_proof(rp, bytes, old, new, d)
    });
    let size = u64::from(cfg.sector_size);
    Ok(FilJob::new(
        ProofKind::Snap,
        size,
        params,
        "snap".into(),
        parts,
        verifier,
    ))
}
