//! A Filecoin proof to make: its partition circuits, the parameter file
//! they are proven with, and Filecoin's own verifier for the result.

use std::path::PathBuf;

use bellperson::groth16::{PreparedVerifyingKey, Proof, verify_proof};
use blstrs::{Bls12, Scalar};
use cuzk_stages::ProvableCircuit;

use crate::FilError;

/// The Filecoin proof kinds.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum ProofKind {
    /// PoRep C2 (seal commit phase 2) from the C1 output.
    Porep,
    WindowPost,
    WinningPost,
    /// SnapDeals (empty sector update).
    Snap,
}

impl ProofKind {
    pub const ALL: [ProofKind; 4] = [Self::Porep, Self::WindowPost, Self::WinningPost, Self::Snap];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Porep => "porep",
            Self::WindowPost => "window-post",
            Self::WinningPost => "winning-post",
            Self::Snap => "snap",
        }
    }

    /// A proof of storage with a chain deadline (WindowPoSt, WinningPoSt):
    /// admission lets it pass seals that wait for memory.
    pub fn is_post(self) -> bool {
        matches!(self, Self::WindowPost | Self::WinningPost)
    }

    /// Short names too (`window`, `winning`), as `cuzk fil params --kinds` takes them.
    pub fn parse(s: &str) -> Result<Self, FilError> {
        match s {
            "porep" | "seal" => Ok(Self::Porep),
            "window-post" | "window" | "wpost" => Ok(Self::WindowPost),
            "winning-post" | "winning" => Ok(Self::WinningPost),
            "snap" | "snap-deals" | "update" => Ok(Self::Snap),
            other => Err(FilError::malformed(
                "proof kind",
                format!("`{other}` is not one of porep, window-post, winning-post, snap"),
            )),
        }
    }
}

impl std::fmt::Display for ProofKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Checks finished proof bytes with Filecoin's own verifier.
pub type Verifier = Box<dyn Fn(&[u8]) -> anyhow::Result<bool> + Send + Sync>;

/// A Filecoin proof request turned into partitions.
pub struct FilJob {
    pub kind: ProofKind,
    pub sector_size: u64,
    /// The parameter file (Filecoin's name, in the parameter cache).
    pub params: PathBuf,
    /// One circuit per partition, in partition order.
    pub circuits: Vec<Box<dyn ProvableCircuit>>,
    /// Each partition's public inputs as Filecoin's verifier computes them.
    pub public_inputs: Vec<Vec<Scalar>>,
    /// A label for logs and timelines (`porep-1000-7`).
    pub label: String,
    verifier: Verifier,
}

impl std::fmt::Debug for FilJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilJob")
            .field("kind", &self.kind)
            .field("sector_size", &self.sector_size)
            .field("params", &self.params)
            .field("partitions", &self.circuits.len())
            .finish()
    }
}

/// Filecoin's proof bytes: each partition's 192-byte proof, in order.
pub fn proof_bytes(proofs: &[Proof<Bls12>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(192 * proofs.len());
    for p in proofs {
        p.write(&mut out).expect("writing to a Vec cannot fail");
    }
    out
}

impl FilJob {
    pub(crate) fn new(
        kind: ProofKind,
        sector_size: u64,
        params: PathBuf,
        label: String,
        parts: Vec<(Box<dyn ProvableCircuit>, Vec<Scalar>)>,
        verifier: Verifier,
    ) -> Self {
        let (circuits, public_inputs) = parts.into_iter().unzip();
        Self {
            kind,
            sector_size,
            params,
            circuits,
            public_inputs,
            label,
            verifier,
        }
    }

    pub fn partitions(&self) -> usize {
        self.public_inputs.len()
    }

    /// Runs Filecoin's verifier on `bytes`.
    pub fn verify(&self, bytes: &[u8]) -> anyhow::Result<bool> {
        (self.verifier)(bytes)
    }

    /// The proof bytes of `proofs` if Filecoin's verifier accepts them;
    /// else an error naming the first partition that fails. `synthesized`
    /// are the public inputs synthesis allocated, per partition: they must be
    /// the verifier's.
    pub fn finish(
        &self,
        proofs: &[Proof<Bls12>],
        synthesized: &[Vec<Scalar>],
        pvk: &PreparedVerifyingKey<Bls12>,
    ) -> Result<Vec<u8>, FilError> {
        let kind = self.kind.as_str().to_string();
        for (k, (got, want)) in synthesized.iter().zip(&self.public_inputs).enumerate() {
            if got != want {
                return Err(FilError::Rejected {
                    kind,
                    partition: k,
                    why: format!(
                        "its circuit allocated {} public inputs that differ from the {} the verifier derives",
                        got.len(),
                        want.len()
                    ),
                });
            }
        }
        let bytes = proof_bytes(proofs);
        if self.verify(&bytes).map_err(FilError::Other)? {
            return Ok(bytes);
        }
        // Name the partition: each against the verifier's inputs.
        for (k, (proof, inputs)) in proofs.iter().zip(&self.public_inputs).enumerate() {
            if !verify_proof(pvk, proof, inputs).unwrap_or(false) {
                return Err(FilError::Rejected {
                    kind,
                    partition: k,
                    why: "its Groth16 proof does not verify".into(),
                });
            }
        }
        Err(FilError::Rejected {
            kind,
            partition: 0,
            why: "every partition verifies alone but Filecoin's verifier rejects the whole proof"
                .into(),
        })
    }
}
