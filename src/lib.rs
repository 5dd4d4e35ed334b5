//! cuzk: a staged GPU Groth16 proving engine for Filecoin-style workloads.
//!
//! Embed it in a host service:
//!
//! ```no_run
//! # async fn run() -> anyhow::Result<()> {
//! use std::sync::Arc;
//! use cuzk::{Engine, Job, config::Config, stages::{Srs, workloads::ChainCircuit}};
//! use ff::Field;
//!
//! let engine = Engine::from_config(Config::default())?;
//! let srs = Arc::new(Srs::read("chain-k10.params".as_ref(), false)?);
//! let job = Job::new(srs.clone())
//!     .partition(ChainCircuit::new(10, blstrs::Scalar::ONE))
//!     .partition(ChainCircuit::new(10, blstrs::Scalar::from(2u64)));
//! let proofs = engine.submit(job).await?;
//! proofs.verify(&srs)?;
//! # Ok(()) }
//! ```

pub mod backend;
pub mod bench;
#[cfg(feature = "daemon")]
pub mod daemon;
pub mod engine;
pub mod faults;
pub mod fil;
pub mod graph_view;
pub mod host;
pub mod metrics;
pub mod params;
pub mod report;
pub mod srs_cache;
#[cfg(feature = "otlp")]
pub mod telemetry;
pub mod waterfall;

pub use cuzk_config as config;
pub use cuzk_engine as runtime;
pub use cuzk_filecoin as filecoin;
pub use cuzk_pipelines as pipelines;
pub use cuzk_stages as stages;
pub use engine::{
    Engine, EngineError, EngineOptions, Job, JobProofs, PartitionProof, ProofHandle, ProveError,
};
