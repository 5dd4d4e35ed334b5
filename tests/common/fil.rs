//! Filecoin at 2 KiB for the tests: the parameter cache (generated once into
//! `CUZK_FIL_PARAMS`, default `~/.cache/cuzk/fil-2k`, and reused by later
//! runs) and one set of fixtures per test binary, sealed afresh.

use std::path::PathBuf;
use std::sync::OnceLock;

use cuzk::filecoin::fixtures::Meta;
use cuzk::filecoin::ids::{self, from_hex};
use cuzk::filecoin::{ProofKind, params};

pub const SIZE: u64 = 2048;

/// The parameter cache directory.
pub fn param_cache() -> PathBuf {
    std::env::var_os("CUZK_FIL_PARAMS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/cuzk/fil-2k")
        })
}

/// The parameters (generated if missing) and the fixtures.
pub fn fixtures() -> &'static (Meta, PathBuf) {
    static F: OnceLock<(Meta, PathBuf)> = OnceLock::new();
    F.get_or_init(|| {
        params::use_cache(Some(&param_cache())).unwrap();
        for g in
            params::generate(&ProofKind::ALL, SIZE, cuzk::stages::setup::Device::auto()).unwrap()
        {
            if let Some(t) = g.took {
                eprintln!(
                    "generated {} parameters in {:.0} s",
                    g.kind,
                    t.as_secs_f64()
                );
            }
        }
        let out = tempfile::tempdir().unwrap().keep();
        let meta = cuzk::filecoin::fixtures::generate(SIZE, 1000, &out, false).unwrap();
        (meta, out)
    })
}

/// A fixture file's bytes.
pub fn read(name: &str) -> Vec<u8> {
    std::fs::read(fixtures().1.join(name)).unwrap()
}

pub fn hex32(s: &str) -> [u8; 32] {
    ids::bytes32("test", &from_hex("test", s).unwrap()).unwrap()
}

/// The bytes with one bit of byte 100 flipped.
pub fn flipped(bytes: &[u8]) -> Vec<u8> {
    let mut b = bytes.to_vec();
    b[100] ^= 0x01;
    b
}

/// Filecoin's verdicts on proof bytes of each kind, for the fixtures.
pub mod verify {
    use std::collections::BTreeMap;

    use cuzk::filecoin::ids::{self, prover_id};
    use filecoin_proofs_api::{PublicReplicaInfo, SectorId};

    use super::{fixtures, hex32};

    pub fn porep(bytes: &[u8]) -> bool {
        let (meta, _) = fixtures();
        filecoin_proofs_api::seal::verify_seal(
            ids::seal_proof(meta.porep.registered_proof).unwrap(),
            hex32(&meta.porep.comm_r),
            hex32(&meta.porep.comm_d),
            prover_id(meta.miner),
            SectorId::from(meta.porep.sector),
            hex32(&meta.porep.ticket),
            hex32(&meta.porep.seed),
            bytes,
        )
        .unwrap_or(false)
    }

    /// WindowPoSt over both sectors (one partition's proof, merged as
    /// `merge_window_post_partition_proofs` does).
    pub fn window(bytes: &[u8]) -> bool {
        let (meta, _) = fixtures();
        let rp = ids::post_proof(meta.window.registered_proof).unwrap();
        let replicas: BTreeMap<SectorId, PublicReplicaInfo> =
            [(meta.porep.sector, &meta.porep.comm_r), {
                let snap = meta.snap.as_ref().unwrap();
                (snap.sector, &snap.comm_r_old)
            }]
            .iter()
            .map(|(s, c)| (SectorId::from(*s), PublicReplicaInfo::new(rp, hex32(c))))
            .collect();
        window_partition(
            rp,
            &hex32(&meta.window.randomness),
            &replicas,
            prover_id(meta.miner),
            bytes,
        )
    }

    /// `verify_window_post` on one partition's proof bytes, merged as
    /// `merge_window_post_partition_proofs` does.
    pub fn window_partition(
        rp: filecoin_proofs_api::RegisteredPoStProof,
        randomness: &[u8; 32],
        replicas: &BTreeMap<SectorId, PublicReplicaInfo>,
        prover: [u8; 32],
        bytes: &[u8],
    ) -> bool {
        let Ok(merged) = filecoin_proofs_api::post::merge_window_post_partition_proofs(
            rp,
            vec![filecoin_proofs_api::PartitionSnarkProof(bytes.to_vec())],
        ) else {
            return false;
        };
        filecoin_proofs_api::post::verify_window_post(
            randomness,
            &[(rp, &merged)],
            replicas,
            prover,
        )
        .unwrap_or(false)
    }

    pub fn winning(bytes: &[u8]) -> bool {
        let (meta, _) = fixtures();
        let rp = ids::post_proof(meta.winning.registered_proof).unwrap();
        let replicas: BTreeMap<SectorId, PublicReplicaInfo> = [(
            SectorId::from(meta.porep.sector),
            PublicReplicaInfo::new(rp, hex32(&meta.porep.comm_r)),
        )]
        .into();
        filecoin_proofs_api::post::verify_winning_post(
            &hex32(&meta.winning.randomness),
            bytes,
            &replicas,
            prover_id(meta.miner),
        )
        .unwrap_or(false)
    }

    pub fn snap(bytes: &[u8]) -> bool {
        let (meta, _) = fixtures();
        let snap = meta.snap.as_ref().unwrap();
        filecoin_proofs_api::update::verify_empty_sector_update_proof(
            ids::update_proof(snap.registered_proof).unwrap(),
            bytes,
            hex32(&snap.comm_r_old),
            hex32(&snap.comm_r_new),
            hex32(&snap.comm_d_new),
        )
        .unwrap_or(false)
    }
}

/// Proves `r` through a daemon with one Prove call: its answer.
pub async fn prove(
    c: &mut cuzk::daemon::client::Client,
    r: cuzk::daemon::proto::SubmitProofRequest,
) -> cuzk::daemon::proto::AwaitProofResponse {
    c.prove(cuzk::daemon::proto::ProveRequest { submit: Some(r) })
        .await
        .unwrap()
        .into_inner()
        .result
        .unwrap()
}
