//! Parameter files for the built-in workloads: generated on first use into a
//! cache directory and reused after.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use cuzk_stages::setup::{Device, Toxic};
use cuzk_stages::{Srs, Workload};

/// The file name a workload's parameters are cached under.
pub fn file_name(workload: Workload, log_size: u32) -> String {
    format!("{}-k{log_size}.params", workload.name())
}

/// Generates parameters for `workload` at 2^log_size (cuzk's setup, from
/// fresh secrets, the generators' multiples on `device`) and writes them to
/// `path`.
pub fn generate(
    workload: Workload,
    log_size: u32,
    path: &Path,
    device: Device,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    workload.check_log_size(log_size)?;
    let toxic = Toxic::random(&mut rand::rngs::OsRng);
    let (params, _) = cuzk_stages::setup::generate_timed(workload.blank(log_size), &toxic, device)
        .with_context(|| {
            format!(
                "generating parameters for {} at 2^{log_size}",
                workload.name()
            )
        })?;
    Srs::write_parameters(&params, path)?;
    Ok(started.elapsed())
}

/// Where the parameters came from.
#[derive(Clone, Debug)]
pub enum Provenance {
    Cached,
    Generated(Duration),
}

/// The cached parameter file of `workload` at 2^log_size in `dir`,
/// generated first if it is not there (on a usable GPU, else the CPU).
pub fn ensure(
    dir: &Path,
    workload: Workload,
    log_size: u32,
) -> anyhow::Result<(PathBuf, Provenance)> {
    workload.check_log_size(log_size)?;
    let path = dir.join(file_name(workload, log_size));
    if path.is_file() {
        return Ok((path, Provenance::Cached));
    }
    tracing::info!(path = %path.display(), "generating parameters (first use)");
    let took = generate(workload, log_size, &path, Device::auto())?;
    Ok((path, Provenance::Generated(took)))
}

/// Loads the cached parameters of `workload` at 2^log_size from `dir`,
/// generating them first if they are not there.
pub fn load_or_generate(
    dir: &Path,
    workload: Workload,
    log_size: u32,
) -> anyhow::Result<(Arc<Srs>, PathBuf, Provenance)> {
    let (path, provenance) = ensure(dir, workload, log_size)?;
    let srs = Srs::read(&path, false).with_context(|| format!("loading {}", path.display()))?;
    Ok((Arc::new(srs), path, provenance))
}
