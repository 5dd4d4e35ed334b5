//! cuzk-filecoin: Filecoin's proofs as engine jobs.
//!
//! Each request, in the form hosts send it today (the C1 output or curio's
//! wrapper for PoRep; bincode vanilla proofs for WindowPoSt, WinningPoSt and
//! SnapDeals), becomes a [`FilJob`]: one filecoin-proofs 19.1 circuit per
//! partition, the parameter file (Filecoin's name in Filecoin's parameter
//! cache) and Filecoin's own verifier. The engine proves the partitions;
//! [`FilJob::finish`] turns them into Filecoin's proof bytes (192 bytes per
//! partition, in order) only if Filecoin's verifier accepts them, else names
//! the partition that fails.
//!
//! Also here: parameter file names and test-size parameter generation
//! ([`params`]), fixtures from a freshly sealed sector ([`fixtures`]) and
//! circuit counts per proof kind without parameters ([`info`]).

mod error;
pub mod fixtures;
pub mod ids;
pub mod info;
mod job;
pub mod params;
pub mod porep;
pub mod porep_circuit;
mod porep_native;
mod porep_witness;
mod poseidon_native;
pub mod post;
mod post_witness;
pub mod shaped;
pub mod snap;
mod snap_witness;
pub mod synthetic;

pub use error::FilError;
pub use job::{FilJob, ProofKind, Verifier, proof_bytes};

/// A 32-byte commitment (or randomness) as its domain, refused naming
/// `name` unless it is a field element: a non-canonical one would make
/// Filecoin's code panic further on.
pub(crate) fn safe_commitment<D: filecoin_hashers::Domain>(
    bytes: &[u8; 32],
    name: &str,
) -> Result<D, FilError> {
    filecoin_proofs::as_safe_commitment(bytes, name)
        .map_err(|e| FilError::malformed(name, format!("{e:#}")))
}

/// Decodes bincode that must be exactly one `T` (bincode's default reads a
/// `T` and ignores what follows, so bytes appended to a vanilla proof would
/// pass unnoticed). Length prefixes are checked against the bytes left, so
/// no prefix can make it allocate more than the input holds.
pub(crate) fn bincode_exact<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
) -> Result<T, bincode::Error> {
    use bincode::Options;
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .reject_trailing_bytes()
        .deserialize(bytes)
}
