//! WindowPoSt (one partition per request, as curio sends them) and
//! WinningPoSt, from bincode `FallbackPoStSectorProof`s: one
//! `FallbackPoStCircuit` per partition, checked with Filecoin's
//! `verify_window_post` / `verify_winning_post`.

use std::collections::BTreeMap;

use blstrs::Scalar as Fr;
use filecoin_hashers::Hasher;
use filecoin_proofs::{
    FallbackPoStSectorProof, PoStConfig, partition_vanilla_proofs, single_partition_vanilla_proofs,
    with_shape,
};
use filecoin_proofs_api::{PublicReplicaInfo, RegisteredPoStProof, SectorId};
use storage_proofs_core::api_version::ApiVersion;
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_post::fallback::{
    self, FallbackPoSt, FallbackPoStCircuit, FallbackPoStCompound, PublicSector,
};

use crate::ids::{bytes32, prover_id};
use crate::post_witness::PostPartition;
use crate::{FilError, FilJob, ProofKind, params};

/// A PoSt request as hosts send it.
#[derive(Clone, Debug)]
pub struct PostRequest {
    pub registered_proof: RegisteredPoStProof,
    pub miner: u64,
    pub randomness: [u8; 32],
    /// bincode `FallbackPoStSectorProof` per sector (this partition's, for Window).
    pub vanilla_proofs: Vec<Vec<u8>>,
    /// The Window partition these sectors are.
    pub partition: usize,
}

type Compound<T> = FallbackPoStCompound<T>;

fn setup<Tree: 'static + MerkleTreeTrait>(
    vanilla_params: fallback::SetupParams,
    partitions: Option<usize>,
    priority: bool,
) -> anyhow::Result<compound_proof::PublicParams<'static, FallbackPoSt<'static, Tree>>> {
    let sp = compound_proof::SetupParams {
        vanilla_params,
        partitions,
        priority,
    };
    <Compound<Tree> as CompoundProof<FallbackPoSt<'_, Tree>, FallbackPoStCircuit<Tree>>>::setup(&sp)
}

/// Checks the number of vanilla proofs before anything is decoded: at least
/// one, and no more than `most` (a Window partition's sector count).
fn count(req: &PostRequest, most: usize) -> Result<(), FilError> {
    match req.vanilla_proofs.len() {
        0 => Err(FilError::malformed(
            "vanilla_proofs",
            "is empty: a PoSt needs one vanilla proof per sector",
        )),
        n if n > most => Err(FilError::malformed(
            "vanilla_proofs",
            format!("has {n} sectors; one Window partition holds at most {most}"),
        )),
        _ => Ok(()),
    }
}

fn decode<Tree: MerkleTreeTrait>(
    req: &PostRequest,
) -> Result<Vec<FallbackPoStSectorProof<Tree>>, FilError> {
    count(req, usize::MAX)?;
    req.vanilla_proofs
        .iter()
        .enumerate()
        .map(|(i, b)| {
            crate::bincode_exact(b).map_err(|e| {
                FilError::malformed(
                    format!("vanilla_proofs[{i}]"),
                    format!("is not a bincode FallbackPoStSectorProof: {e}"),
                )
            })
        })
        .collect()
}

/// The WindowPoSt job of one partition.
pub fn window_job(req: &PostRequest) -> Result<FilJob, FilError> {
    let rp = req.registered_proof;
    if rp.typ() != filecoin_proofs_api::PoStType::Window {
        return Err(FilError::Mismatch(format!(
            "registered_proof: {rp:?} is not a Window PoSt"
        )));
    }
    let cfg = rp.as_v1_config();
    if cfg.api_version != ApiVersion::V1_2_0 {
        return Err(FilError::Unsupported {
            kind: format!("{rp:?}"),
            why: "per-partition proving needs Window PoSt V1_1 (registered proofs 10-14), whose challenges do not depend on the other partitions".into(),
        });
    }
    with_shape!(u64::from(cfg.sector_size), window_for, req, cfg)
}

fn window_for<Tree: 'static + MerkleTreeTrait>(
    req: &PostRequest,
    cfg: PoStConfig,
) -> Result<FilJob, FilError> {
    // Parameters, then the count, before anything is decoded or set up: a
    // request must not cost its claimed sector size's structures first.
    let params = params::require(ProofKind::WindowPost, u64::from(cfg.sector_size))?;
    count(req, cfg.sector_count)?;
    let vanilla = decode::<Tree>(req)?;
    let (prover, randomness, pid) = identities::<Tree>(req)?;
    let pp = setup::<Tree>(
        filecoin_proofs::parameters::window_post_setup_params(&cfg),
        None,
        cfg.priority,
    )?;
    let pub_in = fallback::PublicInputs {
        randomness,
        prover_id: pid,
        sectors: vanilla
            .iter()
            .map(|v| PublicSector {
                id: v.sector_id,
                comm_r: v.comm_r,
            })
            .collect(),
        k: Some(req.partition),
    };
    let partition = single_partition_vanilla_proofs(&cfg, &pp.vanilla_params, &pub_in, &vanilla)
        .map_err(|e| {
            FilError::malformed(
                format!("the vanilla proofs of partition {}", req.partition),
                format!("do not verify: {e:#}"),
            )
        })?;
    let circuit = <Compound<Tree> as CompoundProof<
        FallbackPoSt<'_, Tree>,
        FallbackPoStCircuit<Tree>,
    >>::circuit(
        &pub_in,
        Default::default(),
        &partition,
        &pp.vanilla_params,
        Some(0),
    )?;
    let inputs = <Compound<Tree> as CompoundProof<
        FallbackPoSt<'_, Tree>,
        FallbackPoStCircuit<Tree>,
    >>::generate_public_inputs(&pub_in, &pp.vanilla_params, Some(0))?;
    let rp = req.registered_proof;
    let replicas = replicas(rp, &vanilla);
    let randomness_bytes = req.randomness;
    let verifier = Box::new(move |bytes: &[u8]| {
        filecoin_proofs_api::post::verify_window_post(
            &randomness_bytes,
            &[(rp, bytes)],
            &replicas,
            prover,
        )
    });
    let size = u64::from(cfg.sector_size);
    Ok(FilJob::new(
        ProofKind::WindowPost,
        size,
        params,
        format!("wdpost-{}-{}", req.miner, req.partition),
        vec![(Box::new(PostPartition::new(circuit, &partition)), inputs)],
        verifier,
    ))
}

/// The WinningPoSt job.
pub fn winning_job(req: &PostRequest) -> Result<FilJob, FilError> {
    let rp = req.registered_proof;
    if rp.typ() != filecoin_proofs_api::PoStType::Winning {
        return Err(FilError::Mismatch(format!(
            "registered_proof: {rp:?} is not a Winning PoSt"
        )));
    }
    let cfg = rp.as_v1_config();
    with_shape!(u64::from(cfg.sector_size), winning_for, req, cfg)
}

fn winning_for<Tree: 'static + MerkleTreeTrait>(
    req: &PostRequest,
    cfg: PoStConfig,
) -> Result<FilJob, FilError> {
    let params = params::require(ProofKind::WinningPost, u64::from(cfg.sector_size))?;
    count(req, usize::MAX)?;
    if req.vanilla_proofs.len() != cfg.sector_count {
        return Err(FilError::malformed(
            "vanilla_proofs",
            format!(
                "has {} sectors; Winning PoSt proves exactly {}",
                req.vanilla_proofs.len(),
                cfg.sector_count
            ),
        ));
    }
    let vanilla = decode::<Tree>(req)?;
    let (prover, randomness, pid) = identities::<Tree>(req)?;
    let pp = setup::<Tree>(
        filecoin_proofs::parameters::winning_post_setup_params(&cfg)?,
        None,
        cfg.priority,
    )?;
    let sectors: Vec<_> = vanilla
        .iter()
        .map(|v| PublicSector {
            id: v.sector_id,
            comm_r: v.comm_r,
        })
        .collect();
    let prove_in = fallback::PublicInputs {
        randomness,
        prover_id: pid,
        sectors: sectors.clone(),
        k: None,
    };
    let parts = partition_vanilla_proofs(&cfg, &pp.vanilla_params, &prove_in, 1, &vanilla)
        .map_err(|e| {
            FilError::malformed(
                "the Winning PoSt vanilla proof",
                format!("does not verify: {e:#}"),
            )
        })?;
    // The verifier repeats the sector once per circuit slot.
    let verify_in = fallback::PublicInputs {
        sectors: sectors
            .iter()
            .cycle()
            .take(pp.vanilla_params.sector_count)
            .cloned()
            .collect(),
        ..prove_in
    };
    // Filecoin's own check above covers the first of the sector's
    // challenges only (one public sector against 66 slots); each slot is
    // checked here against its own challenge, so a vanilla proof made for
    // other randomness is refused now rather than failing after the GPU.
    let every_slot = fallback::PublicInputs {
        k: Some(0),
        ..verify_in.clone()
    };
    if !FallbackPoSt::<Tree>::verify(&pp.vanilla_params, &every_slot, &parts[0])? {
        return Err(FilError::malformed(
            "the Winning PoSt vanilla proof",
            "does not verify for this randomness, sector and commitment".to_string(),
        ));
    }
    let circuit = <Compound<Tree> as CompoundProof<
        FallbackPoSt<'_, Tree>,
        FallbackPoStCircuit<Tree>,
    >>::circuit(
        &prove_in,
        Default::default(),
        &parts[0],
        &pp.vanilla_params,
        Some(0),
    )?;
    let inputs = <Compound<Tree> as CompoundProof<
        FallbackPoSt<'_, Tree>,
        FallbackPoStCircuit<Tree>,
    >>::generate_public_inputs(&verify_in, &pp.vanilla_params, Some(0))?;
    let rp = req.registered_proof;
    let replicas = replicas(rp, &vanilla);
    let randomness_bytes = req.randomness;
    let verifier = Box::new(move |bytes: &[u8]| {
        filecoin_proofs_api::post::verify_winning_post(&randomness_bytes, bytes, &replicas, prover)
    });
    let size = u64::from(cfg.sector_size);
    Ok(FilJob::new(
        ProofKind::WinningPost,
        size,
        params,
        format!("winpost-{}", req.miner),
        vec![(Box::new(PostPartition::new(circuit, &parts[0])), inputs)],
        verifier,
    ))
}

type Domain<Tree> = <<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain;
/// The prover id, and the randomness and prover id as field elements.
type Identities<Tree> = ([u8; 32], Domain<Tree>, Domain<Tree>);

fn identities<Tree: MerkleTreeTrait>(req: &PostRequest) -> Result<Identities<Tree>, FilError> {
    let prover = prover_id(req.miner);
    Ok((
        prover,
        crate::safe_commitment(&req.randomness, "randomness")?,
        crate::safe_commitment(&prover, "prover_id")?,
    ))
}

/// The replicas Filecoin's PoSt verifiers check the proof against: each
/// proven sector and its comm_r.
fn replicas<Tree: MerkleTreeTrait>(
    rp: RegisteredPoStProof,
    vanilla: &[FallbackPoStSectorProof<Tree>],
) -> BTreeMap<SectorId, PublicReplicaInfo> {
    vanilla
        .iter()
        .map(|v| {
            let comm_r: Fr = v.comm_r.into();
            (
                v.sector_id,
                PublicReplicaInfo::new(rp, comm_r.to_bytes_le()),
            )
        })
        .collect()
}

/// Randomness as PoSt takes it: 32 bytes that are a valid field element.
pub fn randomness(bytes: &[u8]) -> Result<[u8; 32], FilError> {
    bytes32("randomness", bytes)
}
