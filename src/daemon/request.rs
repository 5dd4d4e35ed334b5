//! A `SubmitProofRequest` as curio sends it, turned into a Filecoin job;
//! every refusal names the field that is wrong.

use cuzk_filecoin::{FilError, FilJob, ProofKind, ids, porep, post, snap};
use sha2::{Digest, Sha256};

use super::proto::{Priority, ProofKind as WireKind, SubmitProofRequest};

/// A validated request.
pub struct Parsed {
    pub kind: ProofKind,
    /// The engine priority (curio's LOW 1 .. CRITICAL 4).
    pub priority: u8,
    pub job: FilJob,
}

/// The longest request id accepted (curio's longest, a WindowPoSt id with
/// its sector list, is well under it).
pub const MAX_REQUEST_ID: usize = 256;

/// A request id is logged, shown on the status page and kept as a key: at
/// most [`MAX_REQUEST_ID`] bytes of curio's alphabet (letters, digits,
/// `. _ : - [ ]` and space, as in `wdpost-1000-0-[b0 b1]`).
pub fn check_request_id(id: &str) -> Result<(), String> {
    if id.len() > MAX_REQUEST_ID {
        return Err(format!(
            "request_id: is {} bytes; at most {MAX_REQUEST_ID} are accepted",
            id.len()
        ));
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || "._:-[] ".contains(c);
    if let Some(c) = id.chars().find(|&c| !allowed(c)) {
        return Err(format!(
            "request_id: contains {c:?}; ids are letters, digits, `.`, `_`, `:`, `-`, `[`, `]` and spaces"
        ));
    }
    Ok(())
}

/// What a request asks for, as a SHA-256 over every field that changes the
/// proof (all but the id and the priority). A request id names a job only
/// together with this digest: the same id with other inputs is another job,
/// and never gets the first one's proof.
pub fn digest(req: &SubmitProofRequest) -> [u8; 32] {
    let mut h = Sha256::new();
    // Each field length-prefixed, so no two requests hash the same bytes.
    let mut field = |bytes: &[u8]| {
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    field(&req.proof_kind.to_le_bytes());
    field(&req.sector_size.to_le_bytes());
    field(&req.registered_proof.to_le_bytes());
    field(&req.miner_id.to_le_bytes());
    field(&req.sector_number.to_le_bytes());
    field(&req.partition_index.to_le_bytes());
    field(&req.randomness);
    field(&req.comm_r_old);
    field(&req.comm_r_new);
    field(&req.comm_d_new);
    field(&req.vanilla_proof);
    field(&(req.vanilla_proofs.len() as u64).to_le_bytes());
    for p in &req.vanilla_proofs {
        field(p);
    }
    h.finalize().into()
}

/// Our kind of a wire kind.
pub fn kind_of(kind: i32) -> Result<ProofKind, String> {
    match WireKind::try_from(kind) {
        Ok(WireKind::PorepSealCommit) => Ok(ProofKind::Porep),
        Ok(WireKind::SnapDealsUpdate) => Ok(ProofKind::Snap),
        Ok(WireKind::WindowPostPartition) => Ok(ProofKind::WindowPost),
        Ok(WireKind::WinningPost) => Ok(ProofKind::WinningPost),
        Ok(WireKind::Unspecified) => Err("proof_kind: is unspecified".into()),
        Err(_) => Err(format!("proof_kind: {kind} is not a proof kind (1-4)")),
    }
}

/// The wire kind of ours.
pub fn wire_kind(kind: ProofKind) -> WireKind {
    match kind {
        ProofKind::Porep => WireKind::PorepSealCommit,
        ProofKind::Snap => WireKind::SnapDealsUpdate,
        ProofKind::WindowPost => WireKind::WindowPostPartition,
        ProofKind::WinningPost => WireKind::WinningPost,
    }
}

/// The priority curio gives each kind when it sends none: WinningPoSt must
/// land within its epoch, WindowPoSt within its deadline, seals can wait.
pub fn default_priority(kind: ProofKind) -> Priority {
    match kind {
        ProofKind::Porep | ProofKind::Snap => Priority::Normal,
        ProofKind::WindowPost => Priority::High,
        ProofKind::WinningPost => Priority::Critical,
    }
}

fn priority(req: &SubmitProofRequest, kind: ProofKind) -> Result<u8, String> {
    let p = match Priority::try_from(req.priority) {
        Ok(Priority::Unspecified) => default_priority(kind),
        Ok(p) => p,
        Err(_) => {
            return Err(format!(
                "priority: {} is not a priority (0-4)",
                req.priority
            ));
        }
    };
    Ok(p as u8)
}

/// A 32-byte commitment, or the CID curio may send for one (its digest is
/// the last 32 bytes, after the multihash length byte 0x20).
fn commitment(field: &str, bytes: &[u8]) -> Result<[u8; 32], FilError> {
    match bytes.len() {
        32 => Ok(bytes.try_into().expect("32 bytes")),
        n if n > 34 && bytes[0] == 0x01 && bytes[n - 33] == 0x20 => {
            Ok(bytes[n - 32..].try_into().expect("32 bytes"))
        }
        0 => Err(FilError::malformed(field, "is empty")),
        n => Err(FilError::malformed(
            field,
            format!("is {n} bytes; it must be a 32-byte commitment or its CID"),
        )),
    }
}

fn vanilla(req: &SubmitProofRequest) -> Result<Vec<Vec<u8>>, FilError> {
    if req.vanilla_proofs.is_empty() {
        return Err(FilError::malformed(
            "vanilla_proofs",
            "is empty: PoSt sends one bincode vanilla proof per sector, SnapDeals one per partition",
        ));
    }
    if let Some(i) = req.vanilla_proofs.iter().position(Vec::is_empty) {
        return Err(FilError::malformed(
            format!("vanilla_proofs[{i}]"),
            "is empty",
        ));
    }
    Ok(req.vanilla_proofs.clone())
}

fn check_size(req: &SubmitProofRequest, job: &FilJob) -> Result<(), FilError> {
    if req.sector_size != 0 && req.sector_size != job.sector_size {
        return Err(FilError::Mismatch(format!(
            "sector_size: {} does not match the proof's {} sector",
            ids::sector_size_name(req.sector_size),
            ids::sector_size_name(job.sector_size)
        )));
    }
    Ok(())
}

fn post_request(req: &SubmitProofRequest, kind: &str) -> Result<post::PostRequest, FilError> {
    if !req.vanilla_proof.is_empty() {
        return Err(FilError::malformed(
            "vanilla_proof",
            format!(
                "is set, but {kind}'s vanilla proofs go in vanilla_proofs (is proof_kind right?)"
            ),
        ));
    }
    let vanilla_proofs = vanilla(req)?;
    Ok(post::PostRequest {
        registered_proof: ids::post_proof(req.registered_proof)?,
        miner: req.miner_id,
        randomness: ids::bytes32("randomness", &req.randomness)?,
        vanilla_proofs,
        partition: req.partition_index as usize,
    })
}

/// The Filecoin job a request asks for, or what is wrong with it.
pub fn parse(req: &SubmitProofRequest) -> Result<Parsed, FilError> {
    let kind = kind_of(req.proof_kind).map_err(|m| FilError::malformed("request", m))?;
    let priority = priority(req, kind).map_err(|m| FilError::malformed("request", m))?;
    // Filecoin's own code checks the vanilla proofs, and some of its checks
    // panic on crafted bytes (an inclusion path whose index is out of range
    // panics in storage-proofs' `InclusionPath::root`): that is the
    // request's fault, refused naming the field, not a crash.
    let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job_of(req, kind)));
    let job = built.unwrap_or_else(|panic| {
        let field = match kind {
            ProofKind::Porep => "vanilla_proof",
            _ => "vanilla_proofs",
        };
        Err(FilError::malformed(
            field,
            format!(
                "could not be checked: Filecoin's verifier {} on them",
                cuzk_engine::pool::panic_message(&*panic)
            ),
        ))
    })?;
    check_size(req, &job)?;
    Ok(Parsed {
        kind,
        priority,
        job,
    })
}

/// The job of a request of `kind`.
fn job_of(req: &SubmitProofRequest, kind: ProofKind) -> Result<FilJob, FilError> {
    Ok(match kind {
        ProofKind::Porep => {
            if req.vanilla_proof.is_empty() {
                return Err(FilError::malformed(
                    "vanilla_proof",
                    "is empty: PoRep sends the C1 output (curio's {\"SectorNum\",\"Phase1Out\",\"SectorSize\"} wrapper or the raw JSON)",
                ));
            }
            if !req.vanilla_proofs.is_empty() {
                return Err(FilError::malformed(
                    "vanilla_proofs",
                    "is set, but PoRep's C1 output goes in vanilla_proof (is proof_kind right?)",
                ));
            }
            let c1 = porep::C1::parse(&req.vanilla_proof)
                .map_err(|e| FilError::malformed("vanilla_proof", e))?;
            // 0, proto's default, means "as the C1 output says".
            let expect = match req.registered_proof {
                0 => None,
                n => Some(ids::seal_proof(n)?),
            };
            let sector =
                (req.sector_number != 0 || c1.sector.is_none()).then_some(req.sector_number);
            porep::job(&c1, req.miner_id, sector, expect)?
        }
        ProofKind::WindowPost => post::window_job(&post_request(req, "WindowPoSt")?)?,
        ProofKind::WinningPost => post::winning_job(&post_request(req, "WinningPoSt")?)?,
        ProofKind::Snap => snap::job(&snap::SnapRequest {
            registered_proof: ids::update_proof(req.registered_proof)?,
            partition_proofs: vanilla(req)?,
            comm_r_old: commitment("comm_r_old", &req.comm_r_old)?,
            comm_r_new: commitment("comm_r_new", &req.comm_r_new)?,
            comm_d_new: commitment("comm_d_new", &req.comm_d_new)?,
        })?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commitments_come_raw_or_as_cids() {
        let raw = [7u8; 32];
        assert_eq!(commitment("comm_r_old", &raw).unwrap(), raw);
        // bagboea4b5abc...: v1, fil-commitment-sealed, poseidon-bls12_381-a2-fc1, 32 bytes.
        let mut cid = vec![0x01, 0x82, 0xe2, 0x03, 0x92, 0x20, 0x20];
        cid.extend_from_slice(&raw);
        assert_eq!(commitment("comm_r_old", &cid).unwrap(), raw);
        let err = commitment("comm_d_new", &[1, 2, 3])
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("comm_d_new: is 3 bytes"), "{err}");
    }

    #[test]
    fn request_ids_are_bounded_and_of_curios_alphabet() {
        for ok in ["", "porep-1000-7", "wdpost-1000-0-[b0 b1 b2]", "a:b.c_d"] {
            assert!(check_request_id(ok).is_ok(), "{ok}");
        }
        let long = "x".repeat(MAX_REQUEST_ID + 1);
        assert!(check_request_id(&long).unwrap_err().contains("257 bytes"));
        for bad in ["a\nb", "a\u{1b}[31m", "x@y", "é"] {
            let e = check_request_id(bad).unwrap_err();
            assert!(e.starts_with("request_id: contains"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_digest_covers_every_input_but_not_the_id_or_priority() {
        let base = SubmitProofRequest {
            proof_kind: WireKind::WindowPostPartition as i32,
            request_id: "a".into(),
            vanilla_proofs: vec![vec![1, 2], vec![3]],
            randomness: vec![9; 32],
            ..Default::default()
        };
        let d = digest(&base);
        let mut same = base.clone();
        same.request_id = "b".into();
        same.priority = Priority::Critical as i32;
        assert_eq!(digest(&same), d, "id and priority do not change the proof");
        let changes: [fn(&mut SubmitProofRequest); 8] = [
            |r| r.miner_id = 1,
            |r| r.sector_number = 1,
            |r| r.partition_index = 1,
            |r| r.randomness[0] = 8,
            |r| r.vanilla_proofs[1].push(0),
            // Moving a byte between elements changes it too.
            |r| r.vanilla_proofs = vec![vec![1], vec![2, 3]],
            |r| r.comm_d_new = vec![0; 32],
            |r| r.proof_kind = WireKind::WinningPost as i32,
        ];
        for (i, change) in changes.iter().enumerate() {
            let mut r = base.clone();
            change(&mut r);
            assert_ne!(digest(&r), d, "change {i}");
        }
    }

    #[test]
    fn malformed_requests_name_the_field() {
        let mut req = SubmitProofRequest {
            proof_kind: WireKind::PorepSealCommit as i32,
            ..Default::default()
        };
        let err = |r: &SubmitProofRequest| parse(r).map(|_| ()).unwrap_err().to_string();
        assert!(err(&req).starts_with("vanilla_proof: is empty"));
        req.vanilla_proof = b"{not json".to_vec();
        assert!(
            err(&req).starts_with("vanilla_proof: the C1 input: is not JSON"),
            "{}",
            err(&req)
        );
        req.proof_kind = 0;
        assert!(err(&req).contains("proof_kind: is unspecified"));
        req.proof_kind = 9;
        assert!(err(&req).contains("proof_kind: 9 is not a proof kind"));
        req.proof_kind = WireKind::WinningPost as i32;
        assert!(err(&req).contains("is set, but WinningPoSt"));
        req.vanilla_proof.clear();
        assert!(
            err(&req).starts_with("vanilla_proofs: is empty"),
            "{}",
            err(&req)
        );
        req.registered_proof = 77;
        req.vanilla_proofs = vec![vec![1]];
        assert!(
            err(&req).starts_with("registered_proof: 77 is not a registered PoSt proof"),
            "{}",
            err(&req)
        );
    }
}
