//! PoRep C2: from the C1 output of a sealed sector (filecoin-ffi's JSON, or
//! curio's wrapper around it) to one `StackedCircuit` per partition, proven
//! with the seal parameters and checked with Filecoin's `verify_seal`.

use base64::Engine as _;
use blstrs::Scalar as Fr;
use filecoin_hashers::{Domain, Hasher};
use filecoin_proofs::{DefaultPieceDomain, DefaultPieceHasher, as_safe_commitment, with_shape};
use filecoin_proofs_api::seal::SealCommitPhase1Output;
use filecoin_proofs_api::{ApiFeature, RegisteredSealProof, SectorId};
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_porep::stacked::{
    self, StackedCircuit, StackedCompound, StackedDrg, Tau, generate_replica_id,
};

use crate::ids::{prover_id, sector_size_name};
use crate::porep_circuit::PorepPartition;
use crate::{FilError, FilJob, ProofKind, params};

/// A C1 output as a host sends it.
#[derive(Clone, Debug)]
pub struct C1 {
    pub output: SealCommitPhase1Output,
    /// The sector number curio's wrapper carries, if it came wrapped.
    pub sector: Option<u64>,
    /// The sector size the wrapper declares, if it came wrapped.
    pub declared_size: Option<u64>,
}

/// Curio's wrapper: `{"SectorNum":n,"Phase1Out":"<base64 C1 JSON>","SectorSize":s}`.
#[derive(serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Wrapper {
    pub sector_num: u64,
    pub phase1_out: String,
    pub sector_size: u64,
}

impl C1 {
    /// Parses filecoin-ffi's C1 JSON or curio's wrapper around it, straight
    /// into their types: never through a generic JSON tree, which costs 16-30
    /// times the input's bytes before anything is checked.
    pub fn parse(bytes: &[u8]) -> Result<Self, FilError> {
        /// Only whether the wrapper's key is there; everything else is
        /// skipped without being kept (and the JSON's syntax checked).
        #[derive(serde::Deserialize)]
        struct Probe {
            #[serde(rename = "Phase1Out")]
            phase1_out: Option<serde::de::IgnoredAny>,
        }
        let not_json =
            |e: serde_json::Error| FilError::malformed("the C1 input", format!("is not JSON: {e}"));
        // serde reads a struct from a JSON array too: anything but an object
        // is refused first (its syntax checked without keeping anything).
        if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            serde_json::from_slice::<serde::de::IgnoredAny>(bytes).map_err(not_json)?;
            return Err(FilError::malformed(
                "the C1 input",
                "is not a JSON object (filecoin-ffi's C1 output or curio's wrapper)",
            ));
        }
        let probe: Probe = serde_json::from_slice(bytes).map_err(not_json)?;
        if probe.phase1_out.is_some() {
            let w: Wrapper = serde_json::from_slice(bytes)
                .map_err(|e| FilError::malformed("the C1 wrapper", e))?;
            let inner = base64::engine::general_purpose::STANDARD
                .decode(w.phase1_out.trim())
                .map_err(|e| {
                    FilError::malformed("the C1 wrapper's Phase1Out", format!("is not base64: {e}"))
                })?;
            let output = serde_json::from_slice(&inner).map_err(|e| {
                FilError::malformed(
                    "the C1 output inside the wrapper",
                    format!("is not a SealCommitPhase1Output: {e}"),
                )
            })?;
            return Ok(Self {
                output,
                sector: Some(w.sector_num),
                declared_size: Some(w.sector_size),
            });
        }
        let output = serde_json::from_slice(bytes).map_err(|e| {
            FilError::malformed(
                "the C1 output",
                format!("is not a SealCommitPhase1Output: {e}"),
            )
        })?;
        Ok(Self {
            output,
            sector: None,
            declared_size: None,
        })
    }

    /// Curio's wrapper around this C1 output.
    pub fn wrap(output: &SealCommitPhase1Output, sector: u64) -> Vec<u8> {
        let json = serde_json::to_vec(output).expect("a C1 output serialises");
        serde_json::to_vec(&Wrapper {
            sector_num: sector,
            phase1_out: base64::engine::general_purpose::STANDARD.encode(json),
            sector_size: u64::from(output.registered_proof.sector_size()),
        })
        .expect("the wrapper serialises")
    }

    pub fn sector_size(&self) -> u64 {
        u64::from(self.output.registered_proof.sector_size())
    }
}

/// The PoRep C2 job of `c1` for `miner`; `sector` may come from the wrapper.
/// `expect` is the registered proof the host claims, if it sends one.
pub fn job(
    c1: &C1,
    miner: u64,
    sector: Option<u64>,
    expect: Option<RegisteredSealProof>,
) -> Result<FilJob, FilError> {
    let rp = c1.output.registered_proof;
    if let Some(e) = expect
        && e != rp
    {
        return Err(FilError::Mismatch(format!(
            "registered_proof: mismatch: the request says {e:?}, the C1 output was made for {rp:?}"
        )));
    }
    let size = c1.sector_size();
    if let Some(d) = c1.declared_size
        && d != size
    {
        return Err(FilError::Mismatch(format!(
            "vanilla_proof: the wrapper declares a {} sector but the C1 output is for {} ({rp:?})",
            sector_size_name(d),
            sector_size_name(size)
        )));
    }
    let sector = match (sector, c1.sector) {
        (Some(a), Some(b)) if a != b => {
            return Err(FilError::Mismatch(format!(
                "sector_number: sector {a} was asked for but the wrapper is for sector {b}"
            )));
        }
        (Some(s), _) | (None, Some(s)) => s,
        (None, None) => {
            return Err(FilError::malformed(
                "the request",
                "names no sector number (and the C1 output is not wrapped)",
            ));
        }
    };
    if rp.feature_enabled(ApiFeature::NonInteractivePoRep) {
        return Err(FilError::Unsupported {
            kind: "non-interactive PoRep".into(),
            why: "its partitions are aggregated with SnarkPack, which cuzk does not do".into(),
        });
    }
    with_shape!(size, job_for, &c1.output, miner, sector)
}

type PorepPublicInputs<Tree> = stacked::PublicInputs<
    <<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain,
    DefaultPieceDomain,
>;

type PorepPublicParams<Tree> =
    compound_proof::PublicParams<'static, StackedDrg<'static, Tree, DefaultPieceHasher>>;

/// A C1 output's public inputs (commitments decoded, the replica id as it
/// says) and its proof's public parameters.
fn public_of<Tree: 'static + MerkleTreeTrait>(
    c1: &SealCommitPhase1Output,
) -> Result<(PorepPublicInputs<Tree>, PorepPublicParams<Tree>), FilError> {
    let cfg = c1.registered_proof.as_v1_config();
    let bad = |m: String| FilError::malformed("the C1 output", m);
    let comm_d =
        DefaultPieceDomain::try_from_bytes(&c1.comm_d).map_err(|e| bad(format!("comm_d: {e}")))?;
    let comm_r: <Tree::Hasher as Hasher>::Domain =
        as_safe_commitment(&c1.comm_r, "comm_r").map_err(|e| bad(format!("{e}")))?;
    let pub_in = stacked::PublicInputs {
        replica_id: Fr::from(c1.replica_id).into(),
        tau: Some(Tau { comm_d, comm_r }),
        k: None,
        seed: Some(c1.seed),
    };
    let sp = compound_proof::SetupParams {
        vanilla_params: filecoin_proofs::parameters::setup_params(&cfg)?,
        partitions: Some(usize::from(cfg.partitions)),
        priority: false,
    };
    let pp = <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<
        StackedDrg<'_, Tree, DefaultPieceHasher>,
        StackedCircuit<Tree, DefaultPieceHasher>,
    >>::setup(&sp)?;
    Ok((pub_in, pp))
}

/// Partition 0 of a C1 output's proof, decoded without parameters or the
/// checks a job makes: what a setup records the circuit's matrices from
/// (its values do not shape them).
pub(crate) fn first_partition<Tree: 'static + MerkleTreeTrait>(
    c1: &SealCommitPhase1Output,
) -> Result<PorepPartition<Tree>, FilError> {
    let bad = |m: String| FilError::malformed("the C1 output", m);
    let vanilla: Vec<Vec<filecoin_proofs::VanillaSealProof<Tree>>> = c1
        .vanilla_proofs
        .clone()
        .try_into()
        .map_err(|e: anyhow::Error| bad(format!("its vanilla proofs: {e}")))?;
    let proofs = vanilla
        .into_iter()
        .next()
        .filter(|p| !p.is_empty())
        .ok_or_else(|| bad("it has no vanilla proofs".into()))?;
    let (pub_in, pp) = public_of::<Tree>(c1)?;
    Ok(PorepPartition::new(
        std::sync::Arc::new(pub_in),
        std::sync::Arc::new(pp.vanilla_params),
        proofs,
        0,
    ))
}

fn job_for<Tree: 'static + MerkleTreeTrait>(
    c1: &SealCommitPhase1Output,
    miner: u64,
    sector: u64,
) -> Result<FilJob, FilError> {
    type Compound<T> = StackedCompound<T, DefaultPieceHasher>;
    let rp = c1.registered_proof;
    let cfg = rp.as_v1_config();
    // Before anything is decoded: no parameters, no work.
    let params = params::require(ProofKind::Porep, u64::from(cfg.sector_size))?;
    let bad = |m: String| FilError::malformed("the C1 output", m);
    for (name, v) in [
        ("comm_d", &c1.comm_d),
        ("comm_r", &c1.comm_r),
        ("seed", &c1.seed),
    ] {
        if *v == [0; 32] {
            return Err(bad(format!("{name} is all zeroes")));
        }
    }
    let vanilla: Vec<Vec<filecoin_proofs::VanillaSealProof<Tree>>> = c1
        .vanilla_proofs
        .clone()
        .try_into()
        .map_err(|e: anyhow::Error| bad(format!("its vanilla proofs are not for {rp:?}: {e}")))?;
    let partitions = usize::from(cfg.partitions);
    if vanilla.len() != partitions || vanilla.iter().any(Vec::is_empty) {
        return Err(bad(format!(
            "it has {} partitions of vanilla proofs; {rp:?} has {partitions}",
            vanilla.len()
        )));
    }
    let (pub_in, pp) = public_of::<Tree>(c1)?;
    let prover = prover_id(miner);
    let comm_d = pub_in
        .tau
        .as_ref()
        .map(|t| t.comm_d)
        .expect("public_of sets tau");
    let expected =
        generate_replica_id::<Tree::Hasher, _>(&prover, sector, &c1.ticket, comm_d, &cfg.porep_id);
    if expected != pub_in.replica_id {
        return Err(FilError::Mismatch(format!(
            "miner_id, sector_number: the C1 output was not made for miner {miner} and sector {sector}: its replica id does not match theirs"
        )));
    }
    let pub_in = std::sync::Arc::new(pub_in);
    let vanilla_params = std::sync::Arc::new(pp.vanilla_params.clone());
    let mut parts: Vec<(Box<dyn cuzk_stages::ProvableCircuit>, Vec<Fr>)> = vec![];
    for (k, proofs) in vanilla.into_iter().enumerate() {
        let partition = PorepPartition::new(pub_in.clone(), vanilla_params.clone(), proofs, k);
        // Built once here so inconsistent vanilla proofs fail now, not in synthesis.
        partition
            .circuit()
            .map_err(|e| bad(format!("partition {k}'s vanilla proofs: {e}")))?;
        let inputs = <Compound<Tree> as CompoundProof<
            StackedDrg<'_, Tree, DefaultPieceHasher>,
            StackedCircuit<Tree, DefaultPieceHasher>,
        >>::generate_public_inputs(&pub_in, &pp.vanilla_params, Some(k))?;
        parts.push((Box::new(partition), inputs));
    }
    let size = u64::from(cfg.sector_size);
    let (comm_r_bytes, comm_d_bytes, ticket, seed) = (c1.comm_r, c1.comm_d, c1.ticket, c1.seed);
    let verifier = Box::new(move |bytes: &[u8]| {
        filecoin_proofs_api::seal::verify_seal(
            rp,
            comm_r_bytes,
            comm_d_bytes,
            prover,
            SectorId::from(sector),
            ticket,
            seed,
            bytes,
        )
    });
    Ok(FilJob::new(
        ProofKind::Porep,
        size,
        params,
        format!("porep-{miner}-{sector}"),
        parts,
        verifier,
    ))
}
