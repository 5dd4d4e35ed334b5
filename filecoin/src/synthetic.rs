//! A PoRep C1 output for a sector that was never sealed, at any size.
//!
//! A C2 proof opens only the challenged nodes of a sector: per challenge,
//! its data leaf in tree D, its column and the columns of its 14 parents in
//! tree C, and its replica leaf in tree R. So a sector can be made from just
//! those: all-zero data (a committed-capacity sector, whose tree D is the
//! empty one), parents' labels chosen (a deterministic function of the
//! node), the challenged labels computed from them layer by layer as SDR
//! does, and trees C and R sparse (every other leaf zero, so an untouched
//! subtree has a known root). Filecoin's circuit checks exactly these
//! openings, so a proof of this sector verifies with `verify_seal`; the
//! sector's own vanilla verifier is run on it before it is written.
//!
//! Only interactive PoRep (V1_1) can be made this way: the synthetic and
//! non-interactive kinds derive their challenges from comm_r, which the
//! opened nodes determine. docs/plans/synthetic-sector.md has the reasoning.

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use filecoin_hashers::poseidon::{PoseidonDomain, PoseidonHasher};
use filecoin_hashers::sha256::{Sha256Domain, Sha256Hasher};
use filecoin_hashers::{HashFunction, Hasher};
use filecoin_proofs::with_shape;
use filecoin_proofs_api::RegisteredSealProof;
use filecoin_proofs_api::seal::{SealCommitPhase1Output, VanillaSealProof};
use merkletree::hash::Algorithm;
use sha2::{Digest, Sha256};
use storage_proofs_core::drgraph::Graph;
use storage_proofs_core::merkle::{MerkleProof, MerkleTreeTrait, base_path_length};
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_porep::stacked::{
    self, ColumnProof, EncodingProof, LabelingProof, ReplicaColumnProof, StackedDrg, Tau,
    generate_replica_id,
};
use typenum::{U2, Unsigned};

use crate::FilError;
use crate::ids::{self, prover_id};

/// What a synthetic sector is made from; the same inputs make the same sector.
#[derive(Clone, Copy, Debug)]
pub struct SectorSpec {
    pub sector_size: u64,
    pub miner: u64,
    pub sector: u64,
    pub ticket: [u8; 32],
    /// Challenge randomness (field-safe: the top two bits of byte 31 clear).
    pub seed: [u8; 32],
}

/// A synthetic sector's C1 output and what making it took.
pub struct Synthetic {
    pub c1: SealCommitPhase1Output,
    /// Distinct challenged nodes, and parents' columns made up for them.
    pub challenged: usize,
    pub parent_columns: usize,
}

/// The C1 output of a never-sealed sector of `spec.sector_size`, checked
/// with the vanilla verifier.
pub fn porep_c1(spec: &SectorSpec) -> Result<Synthetic, FilError> {
    let rp = ids::seal_proof_for(spec.sector_size)?;
    with_shape!(spec.sector_size, build, rp, spec)
}

/// A Merkle path: per level, the siblings in order and the node's place.
type Path<D> = Vec<(Vec<D>, usize)>;

/// A tree with only some leaves set (the others zero): the set nodes of
/// every level, the empty subtrees' roots, and each level's arity.
struct Sparse<H: Hasher> {
    arity: Vec<usize>,
    levels: Vec<HashMap<u64, H::Domain>>,
    empty: Vec<H::Domain>,
}

fn hash_node<H: Hasher>(children: &[H::Domain]) -> H::Domain {
    H::Function::default().multi_node(children, 0)
}

impl<H: Hasher> Sparse<H> {
    fn build(leaves: BTreeMap<u64, H::Domain>, arity: Vec<usize>) -> Self {
        let mut empty = vec![H::Domain::default()];
        for &a in &arity {
            let below = *empty.last().expect("a level");
            empty.push(hash_node::<H>(&vec![below; a]));
        }
        let mut levels: Vec<HashMap<u64, H::Domain>> = vec![leaves.into_iter().collect()];
        for (h, &a) in arity.iter().enumerate() {
            let a = a as u64;
            let parents: BTreeSet<u64> = levels[h].keys().map(|i| i / a).collect();
            let next = parents
                .into_iter()
                .map(|p| {
                    let children: Vec<H::Domain> = (0..a)
                        .map(|c| *levels[h].get(&(p * a + c)).unwrap_or(&empty[h]))
                        .collect();
                    (p, hash_node::<H>(&children))
                })
                .collect();
            levels.push(next);
        }
        Self {
            arity,
            levels,
            empty,
        }
    }

    fn get(&self, level: usize, i: u64) -> H::Domain {
        *self.levels[level].get(&i).unwrap_or(&self.empty[level])
    }

    fn root(&self) -> H::Domain {
        self.get(self.arity.len(), 0)
    }

    /// Leaf `i` and its path: per level, the siblings in order and the
    /// node's place among them.
    fn path(&self, mut i: u64) -> (H::Domain, Path<H::Domain>) {
        let leaf = self.get(0, i);
        let mut path = Vec::with_capacity(self.arity.len());
        for (h, &a) in self.arity.iter().enumerate() {
            let (parent, at) = (i / a as u64, (i % a as u64) as usize);
            let siblings = (0..a)
                .filter(|&c| c != at)
                .map(|c| self.get(h, parent * a as u64 + c as u64))
                .collect();
            path.push((siblings, at));
            i = parent;
        }
        (leaf, path)
    }
}

/// Level arities of a sector's trees C and R (base, then sub and top).
fn tree_arities<Tree: MerkleTreeTrait>(nodes: usize) -> Vec<usize> {
    let (a, b, c) = (
        Tree::Arity::to_usize(),
        Tree::SubTreeArity::to_usize(),
        Tree::TopTreeArity::to_usize(),
    );
    let base = base_path_length::<Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity>(nodes);
    let mut arity = vec![a; base];
    arity.extend([b, c].into_iter().filter(|&x| x > 0));
    arity
}

/// SDR's label: SHA-256 of the replica id, layer and node, and the 37
/// parent labels, truncated into the field.
fn label(
    replica_id: &PoseidonDomain,
    layer: u32,
    node: u64,
    parents: &[PoseidonDomain],
) -> PoseidonDomain {
    let mut prefix = [0u8; 64];
    prefix[..32].copy_from_slice(replica_id.as_ref());
    prefix[32..36].copy_from_slice(&layer.to_be_bytes());
    prefix[36..44].copy_from_slice(&node.to_be_bytes());
    let mut h = Sha256::new();
    h.update(prefix);
    for p in parents {
        h.update(AsRef::<[u8]>::as_ref(p));
    }
    fr32::bytes_into_fr_repr_safe(h.finalize().as_ref()).into()
}

/// A made-up label for a node that is only ever a parent: fixed by the
/// replica, layer and node, so every opening of the node agrees.
fn made_up_label(replica_id: &PoseidonDomain, layer: u32, node: u32) -> PoseidonDomain {
    let mut h = Sha256::new();
    h.update(b"cuzk synthetic sector");
    h.update(AsRef::<[u8]>::as_ref(replica_id));
    h.update(layer.to_be_bytes());
    h.update(node.to_be_bytes());
    fr32::bytes_into_fr_repr_safe(h.finalize().as_ref()).into()
}

/// The 37 labels a node's label at `layer` (1-based) hashes: its DRG
/// parents at this layer and, above layer 1, its expander parents at the
/// layer below, repeated to 37 as SDR does.
fn parent_labels(
    columns: &HashMap<u32, Vec<PoseidonDomain>>,
    parents: &[u32; 14],
    layer: usize,
) -> Vec<PoseidonDomain> {
    let row = |node: u32, layer: usize| columns[&node][layer - 1];
    let mut distinct: Vec<PoseidonDomain> = parents[..6].iter().map(|&p| row(p, layer)).collect();
    if layer > 1 {
        distinct.extend(parents[6..].iter().map(|&p| row(p, layer - 1)));
    }
    distinct
        .iter()
        .cycle()
        .take(stacked::TOTAL_PARENTS)
        .copied()
        .collect()
}

fn build<Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>>(
    rp: RegisteredSealProof,
    spec: &SectorSpec,
) -> Result<Synthetic, FilError> {
    let other = |e: anyhow::Error| FilError::Other(e);
    let cfg = rp.as_v1_config();
    let pp = filecoin_proofs::parameters::public_params::<Tree>(&cfg).map_err(other)?;
    let (nodes, layers) = (pp.graph.size(), pp.num_layers);
    let partitions = usize::from(cfg.partitions);

    // Tree D over all-zero data: every node is an empty subtree's root.
    let d =
        Sparse::<Sha256Hasher>::build(BTreeMap::new(), vec![2; nodes.trailing_zeros() as usize]);
    let comm_d = d.root();
    let replica_id: PoseidonDomain = generate_replica_id::<PoseidonHasher, _>(
        &prover_id(spec.miner),
        spec.sector,
        &spec.ticket,
        comm_d,
        &cfg.porep_id,
    );
    let inputs = stacked::PublicInputs::<PoseidonDomain, Sha256Domain> {
        replica_id,
        seed: Some(spec.seed),
        tau: None,
        k: None,
    };
    let challenges: Vec<Vec<usize>> = (0..partitions)
        .map(|k| inputs.challenges(&pp.challenges, nodes, Some(k)))
        .collect();
    let challenged: BTreeSet<usize> = challenges.iter().flatten().copied().collect();
    let parents_of = |x: usize| -> Result<[u32; 14], FilError> {
        let mut p = [0u32; 14];
        pp.graph.parents(x, &mut p).map_err(other)?;
        Ok(p)
    };
    let parents: HashMap<usize, [u32; 14]> = challenged
        .iter()
        .map(|&x| Ok((x, parents_of(x)?)))
        .collect::<Result<_, FilError>>()?;

    // Columns: made up for parents that are never challenged; computed for
    // challenged nodes, layer by layer and in node order, so a challenged
    // DRG parent (always a lower node) has its label at this layer and an
    // expander parent its label at the layer below.
    let mut columns: HashMap<u32, Vec<PoseidonDomain>> = HashMap::new();
    for p in parents.values().flatten() {
        if !challenged.contains(&(*p as usize)) {
            columns.entry(*p).or_insert_with(|| {
                (1..=layers as u32)
                    .map(|l| made_up_label(&replica_id, l, *p))
                    .collect()
            });
        }
    }
    let parent_columns = columns.len();
    for &x in &challenged {
        columns.insert(x as u32, vec![PoseidonDomain::default(); layers]);
    }
    for layer in 1..=layers {
        for &x in &challenged {
            let l = label(
                &replica_id,
                layer as u32,
                x as u64,
                &parent_labels(&columns, &parents[&x], layer),
            );
            columns.get_mut(&(x as u32)).expect("inserted above")[layer - 1] = l;
        }
    }

    // Trees C (column hashes) and R (last layer's label plus the zero data).
    let arity = tree_arities::<Tree>(nodes);
    let c_leaves = columns
        .iter()
        .map(|(&i, rows)| {
            let column = stacked::Column::<PoseidonHasher>::new(i, rows.clone()).map_err(other)?;
            Ok((u64::from(i), column.hash().into()))
        })
        .collect::<Result<BTreeMap<u64, PoseidonDomain>, FilError>>()?;
    let c = Sparse::<PoseidonHasher>::build(c_leaves, arity.clone());
    let r_leaves = challenged
        .iter()
        .map(|&x| (x as u64, columns[&(x as u32)][layers - 1]))
        .collect();
    let r = Sparse::<PoseidonHasher>::build(r_leaves, arity);
    let (comm_c, comm_r_last) = (c.root(), r.root());
    let comm_r = <PoseidonHasher as Hasher>::Function::hash2(&comm_c, &comm_r_last);

    type TreeProof<Tree> = MerkleProof<
        PoseidonHasher,
        <Tree as MerkleTreeTrait>::Arity,
        <Tree as MerkleTreeTrait>::SubTreeArity,
        <Tree as MerkleTreeTrait>::TopTreeArity,
    >;
    let opening = |t: &Sparse<PoseidonHasher>, i: u64| -> TreeProof<Tree> {
        let (leaf, path) = t.path(i);
        MerkleProof::from_parts(leaf, t.root(), path)
    };
    let column = |i: u32| -> Result<ColumnProof<TreeProof<Tree>>, FilError> {
        Ok(ColumnProof::new(
            i,
            columns[&i].clone(),
            opening(&c, u64::from(i)),
        ))
    };
    let mut proofs = Vec::with_capacity(partitions);
    for partition in &challenges {
        let mut these = Vec::with_capacity(partition.len());
        for &x in partition {
            let p = &parents[&x];
            let (leaf, path) = d.path(x as u64);
            these.push(stacked::Proof::<Tree, Sha256Hasher> {
                comm_d_proofs: MerkleProof::<Sha256Hasher, U2>::from_parts(leaf, comm_d, path),
                comm_r_last_proof: opening(&r, x as u64),
                replica_column_proofs: ReplicaColumnProof {
                    c_x: column(x as u32)?,
                    drg_parents: p[..6]
                        .iter()
                        .map(|&q| column(q))
                        .collect::<Result<_, _>>()?,
                    exp_parents: p[6..]
                        .iter()
                        .map(|&q| column(q))
                        .collect::<Result<_, _>>()?,
                },
                labeling_proofs: (1..=layers)
                    .map(|l| LabelingProof::new(l as u32, x as u64, parent_labels(&columns, p, l)))
                    .collect(),
                encoding_proof: EncodingProof::new(
                    layers as u32,
                    x as u64,
                    parent_labels(&columns, p, layers),
                ),
            });
        }
        proofs.push(these);
    }

    // The sector's own verifier, as C1 runs it, before anything is written.
    let public = stacked::PublicInputs::<PoseidonDomain, Sha256Domain> {
        tau: Some(Tau { comm_d, comm_r }),
        ..inputs
    };
    let valid = StackedDrg::<Tree, Sha256Hasher>::verify_all_partitions(&pp, &public, &proofs)
        .map_err(other)?;
    if !valid {
        return Err(FilError::Other(anyhow::anyhow!(
            "the synthetic sector failed Filecoin's vanilla verifier (a bug in cuzk's construction)"
        )));
    }
    let mut comm_d_bytes = [0u8; 32];
    comm_d_bytes.copy_from_slice(comm_d.as_ref());
    let mut comm_r_bytes = [0u8; 32];
    comm_r_bytes.copy_from_slice(comm_r.as_ref());
    let c1 = SealCommitPhase1Output {
        registered_proof: rp,
        vanilla_proofs: wrap::<Tree>(spec.sector_size, proofs)?,
        comm_r: comm_r_bytes,
        comm_d: comm_d_bytes,
        replica_id,
        seed: spec.seed,
        ticket: spec.ticket,
    };
    Ok(Synthetic {
        c1,
        challenged: challenged.len(),
        parent_columns,
    })
}

/// The API's enum of vanilla proofs for a sector size (its own constructor
/// is private).
fn wrap<Tree: 'static + MerkleTreeTrait>(
    sector_size: u64,
    proofs: Vec<Vec<stacked::Proof<Tree, Sha256Hasher>>>,
) -> Result<VanillaSealProof, FilError> {
    use filecoin_proofs::constants::*;
    let any: Box<dyn Any> = Box::new(proofs);
    let mismatch = || {
        FilError::Other(anyhow::anyhow!(
            "no vanilla proof type for {sector_size} bytes"
        ))
    };
    Ok(match sector_size {
        SECTOR_SIZE_2_KIB => {
            VanillaSealProof::StackedDrg2KiBV1(*any.downcast().map_err(|_| mismatch())?)
        }
        SECTOR_SIZE_8_MIB => {
            VanillaSealProof::StackedDrg8MiBV1(*any.downcast().map_err(|_| mismatch())?)
        }
        SECTOR_SIZE_512_MIB => {
            VanillaSealProof::StackedDrg512MiBV1(*any.downcast().map_err(|_| mismatch())?)
        }
        SECTOR_SIZE_32_GIB => {
            VanillaSealProof::StackedDrg32GiBV1(*any.downcast().map_err(|_| mismatch())?)
        }
        SECTOR_SIZE_64_GIB => {
            VanillaSealProof::StackedDrg64GiBV1(*any.downcast().map_err(|_| mismatch())?)
        }
        _ => return Err(mismatch()),
    })
}

/// A never-sealed sector's PoSt vanilla proof: what a host sends for it.
pub struct SyntheticPost {
    pub sector: u64,
    /// The sector's comm_r (what a verifier's replica info holds).
    pub comm_r: [u8; 32],
    /// bincode `FallbackPoStSectorProof`, as `generate_single_vanilla_proof` makes.
    pub vanilla: Vec<u8>,
}

/// PoSt vanilla proofs of never-sealed `sectors` of `miner` for `randomness`
/// (field-safe): each sector's tree R is all zeros (a committed-capacity
/// replica whose labels are zero, which no verifier can tell), its comm_c
/// made up per sector, and each challenged leaf opened along empty subtrees.
pub fn post_vanilla(
    rp: filecoin_proofs_api::RegisteredPoStProof,
    randomness: &[u8; 32],
    miner: u64,
    sectors: &[u64],
) -> Result<Vec<SyntheticPost>, FilError> {
    use filecoin_proofs_api::SectorId;
    let ids: Vec<SectorId> = sectors.iter().map(|&s| SectorId::from(s)).collect();
    let challenges = filecoin_proofs_api::post::generate_fallback_sector_challenges(
        rp,
        randomness,
        &ids,
        prover_id(miner),
    )?;
    let size = u64::from(rp.sector_size());
    sectors
        .iter()
        .map(|&sector| {
            let leaves = challenges.get(&SectorId::from(sector)).ok_or_else(|| {
                FilError::Other(anyhow::anyhow!(
                    "no challenges were derived for sector {sector}"
                ))
            })?;
            with_shape!(size, post_sector, size, miner, sector, leaves)
        })
        .collect()
}

fn post_sector<Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>>(
    size: u64,
    miner: u64,
    sector: u64,
    leaves: &[u64],
) -> Result<SyntheticPost, FilError> {
    let nodes = (size / 32) as usize;
    let r = Sparse::<PoseidonHasher>::build(BTreeMap::new(), tree_arities::<Tree>(nodes));
    let mut h = Sha256::new();
    h.update(b"cuzk synthetic comm_c");
    h.update(miner.to_le_bytes());
    h.update(sector.to_le_bytes());
    let comm_c: PoseidonDomain = fr32::bytes_into_fr_repr_safe(h.finalize().as_ref()).into();
    let comm_r_last = r.root();
    let comm_r = <PoseidonHasher as Hasher>::Function::hash2(&comm_c, &comm_r_last);
    let inclusion_proofs = leaves
        .iter()
        .map(|&i| {
            let (leaf, path) = r.path(i);
            MerkleProof::from_parts(leaf, comm_r_last, path)
        })
        .collect();
    let proof = filecoin_proofs::FallbackPoStSectorProof::<Tree> {
        sector_id: filecoin_proofs_api::SectorId::from(sector),
        comm_r,
        vanilla_proof: storage_proofs_post::fallback::Proof {
            sectors: vec![storage_proofs_post::fallback::SectorProof {
                inclusion_proofs,
                comm_c,
                comm_r_last,
            }],
        },
    };
    let mut comm_r_bytes = [0u8; 32];
    comm_r_bytes.copy_from_slice(comm_r.as_ref());
    Ok(SyntheticPost {
        sector,
        comm_r: comm_r_bytes,
        vanilla: bincode::serialize(&proof).map_err(|e| FilError::Other(e.into()))?,
    })
}

/// What `cuzk fil gen --synthetic` wrote, as `synthetic.json`.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct SyntheticMeta {
    pub sector_size: u64,
    pub miner: u64,
    pub porep: crate::fixtures::PorepMeta,
    /// WinningPoSt of the PoRep's sector number and WindowPoSt of
    /// `window_sectors` sectors from it on (sectors of their own: their
    /// tree R is all zeros).
    pub winning: crate::fixtures::PostMeta,
    pub window: crate::fixtures::PostMeta,
    /// Distinct challenged nodes; parents' columns made up for them.
    pub challenged: usize,
    pub parent_columns: usize,
}

/// Makes the sector of `spec` and writes its C1 output (`c1.json`),
/// curio's wrapper of it (`c1-wrapper.json`), WinningPoSt and WindowPoSt
/// vanilla proofs (`winning-vanilla-N.bin`, `window-vanilla-N.bin`, for
/// `post_randomness`) and `synthetic.json` into `out`.
pub fn write(
    spec: &SectorSpec,
    window_sectors: u64,
    post_randomness: [u8; 32],
    out: &std::path::Path,
) -> Result<SyntheticMeta, FilError> {
    use crate::ids::to_hex;
    let s = porep_c1(spec)?;
    std::fs::create_dir_all(out).map_err(crate::fixtures::io("creating the output directory"))?;
    let put = |name: &str, bytes: &[u8]| {
        std::fs::write(out.join(name), bytes)
            .map_err(crate::fixtures::io("writing the synthetic sector"))
    };
    let json = |e: serde_json::Error| FilError::Other(e.into());
    put("c1.json", &serde_json::to_vec(&s.c1).map_err(json)?)?;
    put(
        "c1-wrapper.json",
        &crate::porep::C1::wrap(&s.c1, spec.sector),
    )?;
    let post = |rp: filecoin_proofs_api::RegisteredPoStProof, prefix: &str, sectors: Vec<u64>| {
        let proofs = post_vanilla(rp, &post_randomness, spec.miner, &sectors)?;
        let files = proofs
            .iter()
            .map(|p| {
                let name = format!("{prefix}-{}.bin", p.sector);
                put(&name, &p.vanilla).map(|()| name)
            })
            .collect::<Result<Vec<_>, FilError>>()?;
        Ok::<_, FilError>(crate::fixtures::PostMeta {
            registered_proof: ids::post_proof_number(rp),
            randomness: to_hex(&post_randomness),
            partition: 0,
            sectors,
            vanilla: files,
        })
    };
    let winning = post(
        ids::winning_proof_for(spec.sector_size)?,
        "winning-vanilla",
        vec![spec.sector],
    )?;
    let window = post(
        ids::window_proof_for(spec.sector_size)?,
        "window-vanilla",
        (spec.sector..spec.sector + window_sectors.max(1)).collect(),
    )?;
    let meta = SyntheticMeta {
        sector_size: spec.sector_size,
        miner: spec.miner,
        porep: crate::fixtures::PorepMeta {
            sector: spec.sector,
            registered_proof: ids::seal_proof_number(s.c1.registered_proof),
            c1: "c1.json".into(),
            wrapper: "c1-wrapper.json".into(),
            ticket: to_hex(&spec.ticket),
            seed: to_hex(&spec.seed),
            comm_r: to_hex(&s.c1.comm_r),
            comm_d: to_hex(&s.c1.comm_d),
        },
        winning,
        window,
        challenged: s.challenged,
        parent_columns: s.parent_columns,
    };
    put(
        "synthetic.json",
        &serde_json::to_vec_pretty(&meta).map_err(json)?,
    )?;
    Ok(meta)
}

#[cfg(test)]
mod tests {
    use super::*;
    use filecoin_hashers::Domain;
    use storage_proofs_core::merkle::MerkleProofTrait;

    fn spec(sector_size: u64) -> SectorSpec {
        SectorSpec {
            sector_size,
            miner: 1000,
            sector: 9,
            ticket: [3; 32],
            seed: [4; 32],
        }
    }

    #[test]
    fn comm_d_is_filecoins_for_a_sector_of_zeros() {
        let s = porep_c1(&spec(2048)).unwrap();
        let zeros =
            filecoin_proofs::compute_comm_d(filecoin_proofs::SectorSize(2048), &[]).unwrap();
        assert_eq!(s.c1.comm_d, zeros);
    }

    /// Made in seconds on two cores, checked by Filecoin's vanilla verifier
    /// inside `porep_c1`, with the 32 GiB trees' path lengths (a proof of it
    /// needs the 32 GiB parameters).
    #[test]
    fn a_32gib_sector_is_made_and_passes_the_vanilla_verifier() {
        let s = porep_c1(&spec(32 << 30)).unwrap();
        assert!(
            s.challenged > 170 && s.challenged <= 180,
            "{} challenged nodes",
            s.challenged
        );
        let vanilla: Vec<
            Vec<filecoin_proofs::VanillaSealProof<filecoin_proofs::SectorShape32GiB>>,
        > = s.c1.vanilla_proofs.clone().try_into().unwrap();
        assert_eq!(vanilla.len(), 10, "partitions");
        for p in &vanilla {
            assert_eq!(p.len(), 18, "challenges per partition");
            for c in p {
                assert_eq!(c.comm_d_proofs.path().len(), 30, "tree D: 2^30 leaves");
                assert_eq!(
                    c.comm_r_last_proof.path().len(),
                    10,
                    "tree R: 9 base levels, 1 sub"
                );
                assert_eq!(c.labeling_proofs.len(), 11, "layers");
            }
        }
    }

    #[test]
    fn a_changed_label_fails_the_vanilla_verifier() {
        // The construction's own check is not vacuous: a proof whose first
        // label is made from other parents is refused by Filecoin's verifier.
        let s = porep_c1(&spec(2048)).unwrap();
        let mut vanilla: Vec<
            Vec<filecoin_proofs::VanillaSealProof<filecoin_proofs::SectorShape2KiB>>,
        > = s.c1.vanilla_proofs.clone().try_into().unwrap();
        let cfg = s.c1.registered_proof.as_v1_config();
        let pp =
            filecoin_proofs::parameters::public_params::<filecoin_proofs::SectorShape2KiB>(&cfg)
                .unwrap();
        let proof = &mut vanilla[0][0];
        let x = proof.comm_d_proofs.path_index() as u64;
        proof.labeling_proofs[0] = LabelingProof::new(
            1,
            x,
            vec![PoseidonDomain::default(); stacked::TOTAL_PARENTS],
        );
        let public = stacked::PublicInputs::<PoseidonDomain, Sha256Domain> {
            replica_id: s.c1.replica_id,
            seed: Some(s.c1.seed),
            tau: Some(Tau {
                comm_d: Sha256Domain::try_from_bytes(&s.c1.comm_d).unwrap(),
                comm_r: PoseidonDomain::try_from_bytes(&s.c1.comm_r).unwrap(),
            }),
            k: None,
        };
        let ok =
            StackedDrg::<filecoin_proofs::SectorShape2KiB, Sha256Hasher>::verify_all_partitions(
                &pp, &public, &vanilla,
            )
            .unwrap_or(false);
        assert!(!ok, "an altered column passed");
    }
}
