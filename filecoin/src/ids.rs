//! Identities as hosts send them: sector sizes, prover ids from miner ids,
//! and registered-proof numbers (curio's, which are Lotus's `abi` values).

use filecoin_proofs_api::{RegisteredPoStProof, RegisteredSealProof, RegisteredUpdateProof};

use crate::FilError;

/// Sector sizes by name, for the CLI (`2KiB`, `8MiB`, `512MiB`, `32GiB`, `64GiB`,
/// and the test sizes filecoin-proofs knows: `4KiB`, `16KiB`, `32KiB`).
pub const SECTOR_SIZES: [(&str, u64); 8] = [
    ("2KiB", 2 << 10),
    ("4KiB", 4 << 10),
    ("16KiB", 16 << 10),
    ("32KiB", 32 << 10),
    ("8MiB", 8 << 20),
    ("512MiB", 512 << 20),
    ("32GiB", 32 << 30),
    ("64GiB", 64 << 30),
];

/// A sector size from its name or its byte count.
pub fn sector_size(s: &str) -> Result<u64, FilError> {
    let known = || {
        SECTOR_SIZES
            .iter()
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(", ")
    };
    SECTOR_SIZES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(s))
        .map(|(_, b)| *b)
        .or_else(|| {
            s.parse()
                .ok()
                .filter(|b| SECTOR_SIZES.iter().any(|(_, x)| x == b))
        })
        .ok_or_else(|| {
            FilError::malformed("sector size", format!("`{s}` is not one of {}", known()))
        })
}

/// The name of a sector size (`2KiB`), or its byte count.
pub fn sector_size_name(bytes: u64) -> String {
    SECTOR_SIZES
        .iter()
        .find(|(_, b)| *b == bytes)
        .map_or_else(|| bytes.to_string(), |(n, _)| n.to_string())
}

/// The prover id of a miner: its actor id as an LEB128 varint, left-aligned
/// in 32 zero bytes (the payload of its ID address, as filecoin-ffi makes it).
pub fn prover_id(miner: u64) -> [u8; 32] {
    let mut out = [0u8; 32];
    let (mut v, mut i) = (miner, 0);
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out[i] = byte;
            return out;
        }
        out[i] = byte | 0x80;
        i += 1;
    }
}

/// A seal proof from Lotus's `abi.RegisteredSealProof` number.
pub fn seal_proof(n: u64) -> Result<RegisteredSealProof, FilError> {
    use RegisteredSealProof::*;
    const ALL: [RegisteredSealProof; 20] = [
        StackedDrg2KiBV1,
        StackedDrg8MiBV1,
        StackedDrg512MiBV1,
        StackedDrg32GiBV1,
        StackedDrg64GiBV1,
        StackedDrg2KiBV1_1,
        StackedDrg8MiBV1_1,
        StackedDrg512MiBV1_1,
        StackedDrg32GiBV1_1,
        StackedDrg64GiBV1_1,
        StackedDrg2KiBV1_1_Feat_SyntheticPoRep,
        StackedDrg8MiBV1_1_Feat_SyntheticPoRep,
        StackedDrg512MiBV1_1_Feat_SyntheticPoRep,
        StackedDrg32GiBV1_1_Feat_SyntheticPoRep,
        StackedDrg64GiBV1_1_Feat_SyntheticPoRep,
        StackedDrg2KiBV1_2_Feat_NonInteractivePoRep,
        StackedDrg8MiBV1_2_Feat_NonInteractivePoRep,
        StackedDrg512MiBV1_2_Feat_NonInteractivePoRep,
        StackedDrg32GiBV1_2_Feat_NonInteractivePoRep,
        StackedDrg64GiBV1_2_Feat_NonInteractivePoRep,
    ];
    ALL.get(n as usize).copied().ok_or_else(|| {
        FilError::malformed(
            "registered_proof",
            format!("{n} is not a registered seal proof (0-19)"),
        )
    })
}

/// A PoSt proof from Lotus's `abi.RegisteredPoStProof` number: 0-4 Winning,
/// 5-9 Window V1, 10-14 Window V1_1 (filecoin-proofs' V1_2, the grinding fix).
pub fn post_proof(n: u64) -> Result<RegisteredPoStProof, FilError> {
    use RegisteredPoStProof::*;
    const ALL: [RegisteredPoStProof; 15] = [
        StackedDrgWinning2KiBV1,
        StackedDrgWinning8MiBV1,
        StackedDrgWinning512MiBV1,
        StackedDrgWinning32GiBV1,
        StackedDrgWinning64GiBV1,
        StackedDrgWindow2KiBV1,
        StackedDrgWindow8MiBV1,
        StackedDrgWindow512MiBV1,
        StackedDrgWindow32GiBV1,
        StackedDrgWindow64GiBV1,
        StackedDrgWindow2KiBV1_2,
        StackedDrgWindow8MiBV1_2,
        StackedDrgWindow512MiBV1_2,
        StackedDrgWindow32GiBV1_2,
        StackedDrgWindow64GiBV1_2,
    ];
    ALL.get(n as usize).copied().ok_or_else(|| {
        FilError::malformed(
            "registered_proof",
            format!("{n} is not a registered PoSt proof (0-14)"),
        )
    })
}

/// An update proof from Lotus's `abi.RegisteredUpdateProof` number (0-4).
pub fn update_proof(n: u64) -> Result<RegisteredUpdateProof, FilError> {
    use RegisteredUpdateProof::*;
    const ALL: [RegisteredUpdateProof; 5] = [
        StackedDrg2KiBV1,
        StackedDrg8MiBV1,
        StackedDrg512MiBV1,
        StackedDrg32GiBV1,
        StackedDrg64GiBV1,
    ];
    ALL.get(n as usize).copied().ok_or_else(|| {
        FilError::malformed(
            "registered_proof",
            format!("{n} is not a registered update proof (0-4)"),
        )
    })
}

/// The first of Lotus's registered proofs numbered `numbers` whose sector
/// size is `sector_size`.
fn proof_for<P: Copy>(
    numbers: std::ops::Range<u64>,
    of: fn(u64) -> Result<P, FilError>,
    size_of: fn(P) -> u64,
    sector_size: u64,
    what: &str,
) -> Result<P, FilError> {
    numbers
        .filter_map(|n| of(n).ok())
        .find(|&p| size_of(p) == sector_size)
        .ok_or_else(|| {
            FilError::malformed(
                "sector size",
                format!("no {what} for {}", sector_size_name(sector_size)),
            )
        })
}

/// The Window PoSt proof of a sector size (V1_2, the current one).
pub fn window_proof_for(sector_size: u64) -> Result<RegisteredPoStProof, FilError> {
    proof_for(
        10..15,
        post_proof,
        |p| u64::from(p.sector_size()),
        sector_size,
        "Window PoSt",
    )
}

/// The Winning PoSt proof of a sector size.
pub fn winning_proof_for(sector_size: u64) -> Result<RegisteredPoStProof, FilError> {
    proof_for(
        0..5,
        post_proof,
        |p| u64::from(p.sector_size()),
        sector_size,
        "Winning PoSt",
    )
}

/// The update proof of a sector size.
pub fn update_proof_for(sector_size: u64) -> Result<RegisteredUpdateProof, FilError> {
    proof_for(
        0..5,
        update_proof,
        |p| u64::from(p.sector_size()),
        sector_size,
        "SnapDeals update proof",
    )
}

/// The V1_1 seal proof of a sector size.
pub fn seal_proof_for(sector_size: u64) -> Result<RegisteredSealProof, FilError> {
    proof_for(
        5..10,
        seal_proof,
        |p| u64::from(p.sector_size()),
        sector_size,
        "seal proof",
    )
}

/// Lotus's number of a seal proof.
pub fn seal_proof_number(rp: RegisteredSealProof) -> u64 {
    (0..20)
        .find(|&n| seal_proof(n).ok() == Some(rp))
        .expect("every seal proof has a number")
}

/// Lotus's number of a PoSt proof.
pub fn post_proof_number(rp: RegisteredPoStProof) -> u64 {
    (0..15)
        .find(|&n| post_proof(n).ok() == Some(rp))
        .expect("every PoSt proof has a number")
}

/// Lotus's number of an update proof.
pub fn update_proof_number(rp: RegisteredUpdateProof) -> u64 {
    (0..5)
        .find(|&n| update_proof(n).ok() == Some(rp))
        .expect("every update proof has a number")
}

/// Lower-case hex of bytes.
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Bytes from hex (an optional `0x` prefix allowed).
pub fn from_hex(what: &str, s: &str) -> Result<Vec<u8>, FilError> {
    let s = s.trim().trim_start_matches("0x");
    if !s.len().is_multiple_of(2) {
        return Err(FilError::malformed(what, "has an odd number of hex digits"));
    }
    (0..s.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&s[i..i + 2], 16)
                .map_err(|_| FilError::malformed(what, format!("`{}` is not hex", &s[i..i + 2])))
        })
        .collect()
}

/// A 32-byte value (randomness, a commitment) from raw bytes.
pub fn bytes32(what: &str, bytes: &[u8]) -> Result<[u8; 32], FilError> {
    bytes
        .try_into()
        .map_err(|_| FilError::malformed(what, format!("is {} bytes; it must be 32", bytes.len())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prover_ids_are_leb128_of_the_actor_id() {
        assert_eq!(prover_id(1000)[..3], [0xe8, 0x07, 0x00]);
        assert_eq!(prover_id(0)[..2], [0, 0]);
        assert_eq!(prover_id(127)[..2], [127, 0]);
        assert_eq!(prover_id(128)[..3], [0x80, 0x01, 0]);
    }

    #[test]
    fn registered_proofs_map_as_lotus_numbers_them() {
        assert_eq!(
            post_proof(0).unwrap(),
            RegisteredPoStProof::StackedDrgWinning2KiBV1
        );
        assert_eq!(
            post_proof(10).unwrap(),
            RegisteredPoStProof::StackedDrgWindow2KiBV1_2
        );
        assert_eq!(
            seal_proof(5).unwrap(),
            RegisteredSealProof::StackedDrg2KiBV1_1
        );
        assert!(
            post_proof(15)
                .unwrap_err()
                .to_string()
                .contains("registered_proof")
        );
        assert_eq!(sector_size("2kib").unwrap(), 2048);
        assert!(sector_size("3KiB").is_err());
    }
}
