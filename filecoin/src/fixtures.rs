//! Fixtures from a freshly sealed sector: `cuzk fil gen` seals random
//! sectors with filecoin-proofs (add_piece, PC1, PC2, C1) and writes every
//! input a host would send: the C1 output and curio's wrapper, WindowPoSt
//! vanilla proofs of two sectors and WinningPoSt's of one, with their
//! randomness, SnapDeals partition proofs of an updated sector, and a
//! metadata file (miner, sectors, tickets, seeds, commitments). None of this
//! needs Groth16 parameters.

use std::fs::{File, OpenOptions};
use std::io::{Seek, Write};
use std::path::{Path, PathBuf};

use filecoin_proofs_api::seal::{
    seal_commit_phase1, seal_pre_commit_phase1, seal_pre_commit_phase2,
};
use filecoin_proofs_api::{
    PieceInfo, PrivateReplicaInfo, RegisteredPoStProof, SectorId, UnpaddedBytesAmount, post, update,
};
use rand::RngCore;
use serde::{Deserialize, Serialize};

use crate::FilError;
use crate::ids::{self, prover_id, to_hex};
use crate::porep::C1;

/// What `cuzk fil gen` wrote, as `meta.json` (`synthetic.json` for a
/// synthetic sector, which has no SnapDeals inputs).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Meta {
    pub sector_size: u64,
    pub miner: u64,
    pub porep: PorepMeta,
    pub window: PostMeta,
    pub winning: PostMeta,
    #[serde(default)]
    pub snap: Option<SnapMeta>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PorepMeta {
    pub sector: u64,
    /// Lotus's registered seal proof number.
    pub registered_proof: u64,
    /// The C1 output (filecoin-ffi's JSON) and curio's wrapper of it.
    pub c1: String,
    pub wrapper: String,
    pub ticket: String,
    pub seed: String,
    pub comm_r: String,
    pub comm_d: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PostMeta {
    /// Lotus's registered PoSt proof number.
    pub registered_proof: u64,
    pub randomness: String,
    pub partition: u32,
    pub sectors: Vec<u64>,
    /// bincode FallbackPoStSectorProof files, one per sector.
    pub vanilla: Vec<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SnapMeta {
    /// Lotus's registered update proof number.
    pub registered_proof: u64,
    pub sector: u64,
    pub comm_r_old: String,
    pub comm_r_new: String,
    pub comm_d_new: String,
    /// bincode partition proof files, in partition order.
    pub vanilla: Vec<String>,
}

impl Meta {
    /// Reads `meta.json` from a fixtures directory, or a synthetic
    /// sector's `synthetic.json`.
    pub fn read(dir: &Path) -> Result<Self, FilError> {
        let mut path = dir.join("meta.json");
        if !path.exists() && dir.join("synthetic.json").exists() {
            path = dir.join("synthetic.json");
        }
        let text = std::fs::read_to_string(&path)
            .map_err(|e| FilError::malformed(path.display().to_string(), e))?;
        serde_json::from_str(&text).map_err(|e| FilError::malformed(path.display().to_string(), e))
    }
}

pub(crate) fn io(what: &str) -> impl Fn(std::io::Error) -> FilError + '_ {
    move |e| FilError::Other(anyhow::anyhow!("{what}: {e}"))
}

/// A sealed sector on disk.
struct Sealed {
    id: u64,
    sealed: PathBuf,
    cache: PathBuf,
    comm_r: [u8; 32],
    comm_d: [u8; 32],
    ticket: [u8; 32],
    pieces: Vec<PieceInfo>,
    pre_commit: filecoin_proofs_api::seal::SealPreCommitPhase2Output,
}

/// A random piece of `size` written (padded) to `staged`: its info.
pub(crate) fn stage_random_piece(
    size: UnpaddedBytesAmount,
    staged: &Path,
) -> Result<PieceInfo, FilError> {
    let mut data = vec![0u8; u64::from(size) as usize];
    rand::rngs::OsRng.fill_bytes(&mut data);
    let info = filecoin_proofs::generate_piece_commitment(&data[..], size)?;
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(staged)
        .map_err(io("creating the staged sector"))?;
    filecoin_proofs::add_piece(&data[..], &mut file, size, &[])?;
    file.rewind().map_err(io("rewinding the staged sector"))?;
    Ok(info)
}

/// A random full-sector piece, staged: its file and info.
fn piece(
    rp: filecoin_proofs_api::RegisteredSealProof,
    dir: &Path,
    name: &str,
) -> Result<(PathBuf, PieceInfo), FilError> {
    let staged = dir.join(name);
    let info = stage_random_piece(UnpaddedBytesAmount::from(rp.sector_size()), &staged)?;
    Ok((staged, info))
}

fn seal(
    rp: filecoin_proofs_api::RegisteredSealProof,
    dir: &Path,
    id: u64,
    miner: u64,
) -> Result<Sealed, FilError> {
    let sector_dir = dir.join(format!("sector-{id}"));
    let cache = sector_dir.join("cache");
    std::fs::create_dir_all(&cache).map_err(io("creating the sector cache"))?;
    let (staged, info) = piece(rp, &sector_dir, "staged")?;
    let sealed = sector_dir.join("sealed");
    File::create(&sealed).map_err(io("creating the sealed file"))?;
    let mut ticket = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut ticket);
    let pieces = vec![info];
    let p1 = seal_pre_commit_phase1(
        rp,
        &cache,
        &staged,
        &sealed,
        prover_id(miner),
        SectorId::from(id),
        ticket,
        &pieces,
    )?;
    let p2 = seal_pre_commit_phase2(p1, &cache, &sealed)?;
    Ok(Sealed {
        id,
        sealed,
        cache,
        comm_r: p2.comm_r,
        comm_d: p2.comm_d,
        ticket,
        pieces,
        pre_commit: p2,
    })
}

/// Field-safe randomness (the top two bits of the last byte cleared).
fn randomness() -> [u8; 32] {
    let mut r = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut r);
    r[31] &= 0x3f;
    r
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> Result<String, FilError> {
    let mut f = File::create(dir.join(name)).map_err(io("writing a fixture"))?;
    f.write_all(bytes).map_err(io("writing a fixture"))?;
    Ok(name.to_string())
}

fn post_vanilla(
    rp: RegisteredPoStProof,
    randomness: &[u8; 32],
    miner: u64,
    sectors: &[&Sealed],
    dir: &Path,
    prefix: &str,
) -> Result<Vec<String>, FilError> {
    let ids: Vec<SectorId> = sectors.iter().map(|s| SectorId::from(s.id)).collect();
    let challenges =
        post::generate_fallback_sector_challenges(rp, randomness, &ids, prover_id(miner))?;
    sectors
        .iter()
        .map(|s| {
            let replica = PrivateReplicaInfo::new(rp, s.comm_r, s.cache.clone(), s.sealed.clone());
            let id = SectorId::from(s.id);
            let proof = post::generate_single_vanilla_proof(rp, id, &replica, &challenges[&id])?;
            write(dir, &format!("{prefix}-{}.bin", s.id), &proof)
        })
        .collect()
}

/// Seals random sectors of `sector_size` for `miner` and writes every
/// input into `out`; `keep` keeps the sealed sectors beside them.
pub fn generate(sector_size: u64, miner: u64, out: &Path, keep: bool) -> Result<Meta, FilError> {
    let rp = ids::seal_proof_for(sector_size)?;
    std::fs::create_dir_all(out).map_err(io("creating the fixtures directory"))?;
    let work = out.join("sectors");
    let (s1, s2) = (seal(rp, &work, 1, miner)?, seal(rp, &work, 2, miner)?);

    // PoRep C1 of sector 1.
    let mut seed = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut seed);
    seed[31] &= 0x3f;
    let c1 = seal_commit_phase1(
        &s1.cache,
        &s1.sealed,
        prover_id(miner),
        SectorId::from(s1.id),
        s1.ticket,
        seed,
        s1.pre_commit.clone(),
        &s1.pieces,
    )?;
    let c1_name = write(
        out,
        "c1.json",
        &serde_json::to_vec(&c1).map_err(|e| FilError::Other(e.into()))?,
    )?;
    let wrapper_name = write(out, "c1-wrapper.json", &C1::wrap(&c1, s1.id))?;

    // WindowPoSt over both sectors (one partition at 2 KiB); WinningPoSt of sector 1.
    let window_rp = ids::window_proof_for(sector_size)?;
    let window_rand = randomness();
    let window = post_vanilla(
        window_rp,
        &window_rand,
        miner,
        &[&s1, &s2],
        out,
        "window-vanilla",
    )?;
    let winning_rp = ids::winning_proof_for(sector_size)?;
    let winning_rand = randomness();
    let winning = post_vanilla(
        winning_rp,
        &winning_rand,
        miner,
        &[&s1],
        out,
        "winning-vanilla",
    )?;

    // SnapDeals: sector 2 updated with new data.
    let rup = ids::update_proof_for(sector_size)?;
    let snap_dir = work.join("update-2");
    let new_cache = snap_dir.join("cache");
    std::fs::create_dir_all(&new_cache).map_err(io("creating the update cache"))?;
    let (new_staged, new_piece) = piece(rp, &snap_dir, "staged")?;
    let new_replica = snap_dir.join("sealed");
    File::create(&new_replica)
        .and_then(|f| f.set_len(std::fs::metadata(&s2.sealed)?.len()))
        .map_err(io("creating the new replica"))?;
    let encoded = update::empty_sector_update_encode_into(
        rup,
        &new_replica,
        &new_cache,
        &s2.sealed,
        &s2.cache,
        &new_staged,
        &[new_piece],
    )?;
    let partitions = update::generate_partition_proofs(
        rup,
        s2.comm_r,
        encoded.comm_r_new,
        encoded.comm_d_new,
        &s2.sealed,
        &s2.cache,
        &new_replica,
        &new_cache,
    )?;
    let snap = partitions
        .iter()
        .enumerate()
        .map(|(k, p)| write(out, &format!("snap-partition-{k}.bin"), &p.0))
        .collect::<Result<Vec<_>, _>>()?;

    let meta = Meta {
        sector_size,
        miner,
        porep: PorepMeta {
            sector: s1.id,
            registered_proof: ids::seal_proof_number(rp),
            c1: c1_name,
            wrapper: wrapper_name,
            ticket: to_hex(&s1.ticket),
            seed: to_hex(&seed),
            comm_r: to_hex(&s1.comm_r),
            comm_d: to_hex(&s1.comm_d),
        },
        window: PostMeta {
            registered_proof: ids::post_proof_number(window_rp),
            randomness: to_hex(&window_rand),
            partition: 0,
            sectors: vec![s1.id, s2.id],
            vanilla: window,
        },
        winning: PostMeta {
            registered_proof: ids::post_proof_number(winning_rp),
            randomness: to_hex(&winning_rand),
            partition: 0,
            sectors: vec![s1.id],
            vanilla: winning,
        },
        snap: Some(SnapMeta {
            registered_proof: ids::update_proof_number(rup),
            sector: s2.id,
            comm_r_old: to_hex(&s2.comm_r),
            comm_r_new: to_hex(&encoded.comm_r_new),
            comm_d_new: to_hex(&encoded.comm_d_new),
            vanilla: snap,
        }),
    };
    let _ = s2.comm_d;
    write(
        out,
        "meta.json",
        &serde_json::to_vec_pretty(&meta).map_err(|e| FilError::Other(e.into()))?,
    )?;
    if !keep {
        let _ = std::fs::remove_dir_all(&work);
    }
    Ok(meta)
}
