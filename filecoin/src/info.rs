//! Circuit counts per proof kind at a sector size, from the circuits
//! themselves (their blank circuits synthesized into a counting system): no
//! parameters needed. Also the SRS each kind needs.

use filecoin_proofs::{DefaultPieceHasher, PoRepConfig, with_shape};
use filecoin_proofs_api::ApiVersion;
use rayon::prelude::*;
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_porep::stacked::{StackedCircuit, StackedCompound, StackedDrg};
use storage_proofs_update::constants::TreeRHasher;
use storage_proofs_update::{
    EmptySectorUpdate, EmptySectorUpdateCircuit, EmptySectorUpdateCompound,
};

use cuzk_stages::{CircuitShape, shape_of};

use crate::ids::{self, sector_size_name};
use crate::{FilError, ProofKind};

/// One kind's circuit at one sector size.
#[derive(Clone, Debug, serde::Serialize)]
pub struct KindInfo {
    pub kind: ProofKind,
    pub sector_size: u64,
    /// Partitions of one proof (WindowPoSt: per partition of sectors).
    pub partitions: usize,
    pub shape: CircuitShape,
}

impl KindInfo {
    /// Public inputs without the constant one.
    pub fn public_inputs(&self) -> usize {
        self.shape.inputs - 1
    }

    /// Bytes of the parameter file (bellperson's format, uncompressed points).
    pub fn srs_bytes(&self) -> u64 {
        let s = &self.shape.srs;
        let g1 = (s.domain - 1 + s.aux + s.a_len + s.b_len + s.inputs) as u64;
        g1 * 96 + (s.b_len as u64 + 3) * 192 + 3 * 96 + 5 * 4
    }
}

fn porep<Tree: 'static + MerkleTreeTrait>(size: u64) -> anyhow::Result<(usize, CircuitShape)> {
    let cfg = PoRepConfig::new_groth16(size, [0; 32], ApiVersion::V1_1_0);
    let pp = filecoin_proofs::parameters::public_params::<Tree>(&cfg)?;
    let blank = <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<
        StackedDrg<'_, Tree, DefaultPieceHasher>,
        StackedCircuit<Tree, DefaultPieceHasher>,
    >>::blank_circuit(&pp);
    Ok((usize::from(cfg.partitions), shape_of(blank)?))
}

fn post<Tree: 'static + MerkleTreeTrait>(
    cfg: filecoin_proofs::PoStConfig,
) -> anyhow::Result<(usize, CircuitShape)> {
    let (blank, _) = crate::params::blank_post::<Tree>(&cfg)?;
    Ok((1, shape_of(blank)?))
}

fn snap<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    size: u64,
) -> anyhow::Result<(usize, CircuitShape)> {
    let pp = storage_proofs_update::PublicParams::from_sector_size(size);
    let blank = <EmptySectorUpdateCompound<Tree> as CompoundProof<
        EmptySectorUpdate<Tree>,
        EmptySectorUpdateCircuit<Tree>,
    >>::blank_circuit(&pp);
    let partitions = storage_proofs_update::constants::partition_count(pp.sector_nodes);
    Ok((partitions, shape_of(blank)?))
}

/// One kind's counts at `sector_size`.
pub fn kind(kind: ProofKind, sector_size: u64) -> Result<KindInfo, FilError> {
    let (partitions, shape) = match kind {
        ProofKind::Porep => with_shape!(sector_size, porep, sector_size)?,
        ProofKind::WindowPost => with_shape!(
            sector_size,
            post,
            ids::window_proof_for(sector_size)?.as_v1_config()
        )?,
        ProofKind::WinningPost => with_shape!(
            sector_size,
            post,
            ids::winning_proof_for(sector_size)?.as_v1_config()
        )?,
        ProofKind::Snap => with_shape!(sector_size, snap, sector_size)?,
    };
    Ok(KindInfo {
        kind,
        sector_size,
        partitions,
        shape,
    })
}

/// Every kind at `sector_size` (counted in parallel).
pub fn all(sector_size: u64) -> Result<Vec<KindInfo>, FilError> {
    ids::sector_size(&sector_size.to_string())?;
    ProofKind::ALL
        .par_iter()
        .map(|&k| kind(k, sector_size))
        .collect()
}

/// The table `cuzk fil info` prints.
pub fn render(infos: &[KindInfo]) -> String {
    let mut out = format!(
        "{:<14} {:>14} {:>14} {:>11} {:>10} {:>12}\n",
        "proof", "constraints", "public inputs", "partitions", "domain", "SRS"
    );
    for i in infos {
        out.push_str(&format!(
            "{:<14} {:>14} {:>14} {:>11} {:>10} {:>12}\n",
            i.kind.as_str(),
            thousands(i.shape.constraints as u64),
            i.public_inputs(),
            i.partitions,
            format!("2^{}", i.shape.srs.log_domain),
            bytes(i.srs_bytes())
        ));
    }
    if let Some(i) = infos.first() {
        out.push_str(&format!(
            "(sector size {}; counted from the circuits, per partition)\n",
            sector_size_name(i.sector_size)
        ));
    }
    out
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn bytes(b: u64) -> String {
    const GIB: f64 = (1u64 << 30) as f64;
    const MIB: f64 = (1u64 << 20) as f64;
    if b as f64 >= GIB {
        format!("{:.1} GiB", b as f64 / GIB)
    } else {
        format!("{:.1} MiB", b as f64 / MIB)
    }
}
