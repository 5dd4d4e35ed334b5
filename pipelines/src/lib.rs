//! cuzk-pipelines: the interlock variants as declaration files, and the
//! registry that turns a configuration into the graph the engine runs.
//!
//! Each built-in variant is a TOML file in `pipelines/graphs/`, embedded in
//! the binary:
//!
//! | variant | what it does differently |
//! |---|---|
//! | `serial` | one device job at a time per device: both device nodes hold the device lock, one worker each |
//! | `single_lock` | several workers per device alternate on one device lock (phase 9); B₂ on the device under it |
//! | `single_lock_cpu_b2` | single_lock with B₂ on the CPU, after the lock is released (phase 9 as the seeds ran it) |
//! | `two_lock` | staging under a memory lock, compute under a compute lock (phase 10) |
//! | `throttled` | single_lock, and synthesis pauses while b_g2_msm runs (phase 11) |
//! | `pce` | single_lock with pre-compiled constraints: witness-only synthesis, A, B, C from a recording |
//!
//! A user's own graph is a file in the same format (`pipeline.graph`) or a
//! table in the config (`[pipeline.declare]`); nothing outside this crate
//! names a node. Device work in every built-in variant runs under a declared
//! per-device lock: sppark's `msm_t` runs on the device's shared streams,
//! so a user graph whose device nodes hold no common lock still has its MSMs
//! serialised on the device.

mod decl;

use std::path::{Path, PathBuf};

use cuzk_config::Config;
use cuzk_engine::{GraphError, GraphSpec};

pub use decl::{Declaration, EdgeDecl, NodeDecl, ResourceDecl};

/// CPU pool names declarations use.
pub mod pools {
    /// Circuit synthesis.
    pub const SYNTH: &str = "synth";
    /// NTTs, MSMs and preparation on the CPU.
    pub const GROTH16: &str = "groth16";
    /// The device stages' threads: on the GPU backend, threads that drive
    /// the devices (they mostly wait on them); on the CPU backend, the
    /// groth16 pool, which does the device stages' work there.
    pub const DEVICE: &str = "device";
    pub const ALL: [&str; 3] = [SYNTH, GROTH16, DEVICE];
}

/// The built-in variants: name and declaration text.
pub const BUILTIN: [(&str, &str); 7] = [
    ("serial", include_str!("../graphs/serial.toml")),
    ("single_lock", include_str!("../graphs/single_lock.toml")),
    (
        "single_lock_cpu_b2",
        include_str!("../graphs/single_lock_cpu_b2.toml"),
    ),
    ("two_lock", include_str!("../graphs/two_lock.toml")),
    ("throttled", include_str!("../graphs/throttled.toml")),
    ("pce", include_str!("../graphs/pce.toml")),
    ("pce_gpu", include_str!("../graphs/pce_gpu.toml")),
];

/// Names of the built-in variants.
pub fn builtin_names() -> Vec<&'static str> {
    BUILTIN.iter().map(|(n, _)| *n).collect()
}

/// The declaration text of a built-in variant.
pub fn builtin(name: &str) -> Option<&'static str> {
    BUILTIN.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// A graph that cannot be had, naming where it came from and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error(
        "config error at `pipeline.variant`: no built-in graph `{name}` (built-in: {known}); or set `pipeline.graph` to a declaration file"
    )]
    UnknownVariant { name: String, known: String },
    #[error("cannot read graph file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{origin}: not a graph declaration: {message}")]
    Parse { origin: String, message: String },
    #[error("{origin}: {message}")]
    Declaration { origin: String, message: String },
    #[error("{origin}: {source}")]
    Invalid {
        origin: String,
        source: Box<GraphError>,
    },
    #[error("config error at `{key}`: graph `{graph}` has no such node (its nodes: {nodes})")]
    UnknownOverride {
        key: String,
        graph: String,
        nodes: String,
    },
}

/// The graph `config` selects: `[pipeline.declare]`, else `pipeline.graph`,
/// else the built-in `pipeline.variant`; resolved and validated.
pub fn graph(config: &Config) -> Result<GraphSpec, PipelineError> {
    if let Some(table) = &config.pipeline.declare {
        let origin = "`pipeline.declare` in the config";
        let text = toml::to_string(table).expect("a TOML table serialises");
        return parse(&text, origin, config);
    }
    if let Some(path) = &config.pipeline.graph {
        return load_file(path, config);
    }
    let name = &config.pipeline.variant;
    let text = builtin(name).ok_or_else(|| PipelineError::UnknownVariant {
        name: name.clone(),
        known: builtin_names().join(", "),
    })?;
    parse(text, &format!("built-in graph `{name}`"), config)
}

/// A declaration file, resolved under `config` and validated.
pub fn load_file(path: &Path, config: &Config) -> Result<GraphSpec, PipelineError> {
    let text = std::fs::read_to_string(path).map_err(|source| PipelineError::Read {
        path: path.into(),
        source,
    })?;
    parse(&text, &format!("graph file {}", path.display()), config)
}

/// Declaration text, resolved under `config` and validated: the graph's
/// shape and resources, and that its stages and pools exist.
pub fn parse(text: &str, origin: &str, config: &Config) -> Result<GraphSpec, PipelineError> {
    let spec = Declaration::parse(text, origin)?.resolve(config, origin)?;
    validate(&spec).map_err(|source| PipelineError::Invalid {
        origin: origin.into(),
        source: Box::new(source),
    })?;
    Ok(spec)
}

/// Whether `text` is a graph declaration (rather than a config file).
pub fn is_declaration(text: &str) -> bool {
    toml::from_str::<toml::Table>(text).is_ok_and(|t| t.contains_key("node"))
}

/// Validates a graph against the stages and pools cuzk has.
pub fn validate(spec: &GraphSpec) -> Result<(), GraphError> {
    spec.validate()?;
    let known = |names: &[&str]| names.join(", ");
    for n in &spec.nodes {
        if !cuzk_stages::names::ALL.contains(&n.stage.as_str()) {
            return Err(GraphError::UnknownStage {
                graph: spec.name.clone(),
                node: n.name.clone(),
                stage: n.stage.clone(),
                known: known(&cuzk_stages::names::ALL),
            });
        }
        if !pools::ALL.contains(&n.pool.as_str()) {
            return Err(GraphError::UnknownPool {
                graph: spec.name.clone(),
                node: n.name.clone(),
                pool: n.pool.clone(),
                known: known(&pools::ALL),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
