//! What can be wrong with a Filecoin input, naming the input and the part.

use std::path::PathBuf;

/// A Filecoin proof request that cannot be proven as given.
#[derive(Debug, thiserror::Error)]
pub enum FilError {
    #[error("{what}: {message}")]
    Malformed { what: String, message: String },
    #[error(
        "missing parameter file {file} in {dir} (the parameter cache: `fil.parameter_cache` or FIL_PROOFS_PARAMETER_CACHE); `cuzk fil params --sector-size {sector_size} --dir {dir}` generates test parameters"
    )]
    MissingParameters {
        file: String,
        dir: PathBuf,
        sector_size: String,
    },
    #[error("{0}")]
    Mismatch(String),
    #[error("{kind} is not supported: {why}")]
    Unsupported { kind: String, why: String },
    #[error(
        "partition {partition} of the {kind} proof does not pass Filecoin's verification: {why}"
    )]
    Rejected {
        kind: String,
        partition: usize,
        why: String,
    },
    #[error("{0:#}")]
    Other(#[from] anyhow::Error),
}

impl FilError {
    /// A malformed input: `what` names it (a field, a file), `message` says how.
    pub fn malformed(what: impl Into<String>, message: impl std::fmt::Display) -> Self {
        Self::Malformed {
            what: what.into(),
            message: message.to_string(),
        }
    }
}
