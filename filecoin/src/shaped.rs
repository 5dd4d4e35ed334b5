//! PoRep partitions of a production shape at a test sector size, for
//! measuring synthesis without production parameters.
//!
//! A 32 GiB partition (11 layers, 18 challenges, 130 M constraints) cannot
//! be had without a 32 GiB sector. A 16 KiB sector has 32 GiB's tree shape
//! (8-8-0); with its layer count raised to 11 (filecoin-proofs' `LAYERS` is a
//! runtime map) and the challenge proofs of several C1 runs of one sealed
//! sector gathered into one partition, its circuit is a real, satisfiable
//! PoRep partition with 32 GiB's layers and challenges per partition; only
//! its Merkle paths are shorter.
//!
//! This changes `LAYERS` for the sector size for the rest of the process:
//! for measurement tools, never in a process that proves real sectors.

use std::fs::File;
use std::path::Path;

use filecoin_proofs::{
    MerkleTreeTrait, PoRepConfig, SealCommitPhase1Output, UnpaddedBytesAmount, seal_commit_phase1,
    seal_pre_commit_phase1, seal_pre_commit_phase2, with_shape,
};
use filecoin_proofs_api::{ApiVersion, SectorId};
use rand::RngCore;
use storage_proofs_porep::stacked::{self, Tau};

use crate::FilError;
use crate::fixtures::io;
use crate::ids::prover_id;
use crate::porep_circuit::PorepPartition;

/// One shaped partition and what it is.
pub struct Shaped {
    pub circuit: Box<dyn cuzk_stages::ProvableCircuit>,
    pub sector_size: u64,
    pub layers: usize,
    pub challenges: usize,
}

fn build<Tree: 'static + MerkleTreeTrait>(
    sector_size: u64,
    layers: usize,
    challenges: usize,
    work: &Path,
) -> Result<Shaped, FilError> {
    filecoin_proofs::constants::LAYERS
        .write()
        .expect("LAYERS is not poisoned")
        .insert(sector_size, layers);
    let cfg = PoRepConfig::new_groth16(sector_size, [7; 32], ApiVersion::V1_1_0);
    let (cache, staged, sealed) = (work.join("cache"), work.join("staged"), work.join("sealed"));
    std::fs::create_dir_all(&cache).map_err(io("creating the sector cache"))?;
    let size = UnpaddedBytesAmount::from(cfg.padded_bytes_amount());
    let piece = crate::fixtures::stage_random_piece(size, &staged)?;
    File::create(&sealed).map_err(io("creating the sealed file"))?;
    let (miner, sector) = (1000, SectorId::from(1));
    let mut ticket = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut ticket);
    let pieces = [piece];
    let p1 = seal_pre_commit_phase1::<_, _, _, Tree>(
        &cfg,
        &cache,
        &staged,
        &sealed,
        prover_id(miner),
        sector,
        ticket,
        &pieces,
    )?;
    let p2 = seal_pre_commit_phase2(&cfg, p1, &cache, &sealed)?;
    // Challenge proofs of partition 0 from C1 runs with different seeds,
    // until there are enough.
    let mut first: Option<SealCommitPhase1Output<Tree>> = None;
    let mut proofs = vec![];
    while proofs.len() < challenges {
        let mut seed = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut seed);
        seed[31] &= 0x3f;
        let c1 = seal_commit_phase1::<_, Tree>(
            &cfg,
            &cache,
            &sealed,
            prover_id(miner),
            sector,
            ticket,
            seed,
            p2.clone(),
            &pieces,
        )?;
        proofs.extend(c1.vanilla_proofs[0].iter().cloned());
        first.get_or_insert(c1);
    }
    proofs.truncate(challenges);
    let c1 = first.expect("at least one C1 run");
    let pub_in = stacked::PublicInputs {
        replica_id: c1.replica_id,
        tau: Some(Tau {
            comm_d: filecoin_hashers::Domain::try_from_bytes(&c1.comm_d)?,
            comm_r: filecoin_hashers::Domain::try_from_bytes(&c1.comm_r)?,
        }),
        k: None,
        seed: Some(c1.seed),
    };
    let params = filecoin_proofs::parameters::public_params::<Tree>(&cfg)?;
    let partition = PorepPartition::new(pub_in.into(), params.into(), proofs, 0);
    partition
        .circuit()
        .map_err(|e| FilError::Other(anyhow::anyhow!("the shaped partition: {e}")))?;
    Ok(Shaped {
        circuit: Box::new(partition),
        sector_size,
        layers,
        challenges,
    })
}

/// Seals a random sector of `sector_size` with `layers` layers in `work` and
/// returns a partition circuit with `challenges` challenges.
pub fn porep_partition(
    sector_size: u64,
    layers: usize,
    challenges: usize,
    work: &Path,
) -> Result<Shaped, FilError> {
    if !(1..=64).contains(&challenges) || !(1..=16).contains(&layers) {
        return Err(FilError::malformed(
            "the shape",
            "layers must be 1-16 and challenges 1-64",
        ));
    }
    crate::ids::sector_size(&sector_size.to_string())?;
    with_shape!(sector_size, build, sector_size, layers, challenges, work)
}
