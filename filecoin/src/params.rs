//! Filecoin's parameter cache: where the `.params`/`.vk` files are, what
//! each proof kind's file is called, and generating test-size parameters.
//!
//! filecoin-proofs reads its cache directory once, from
//! `FIL_PROOFS_PARAMETER_CACHE`, the first time it needs it; cuzk sets that
//! variable from `fil.parameter_cache` before then, so the engine's SRS and
//! Filecoin's verifiers read the same files.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use bellperson::Circuit;
use blstrs::Scalar;
use cuzk_stages::setup::{Device, MatrixCs, Toxic};
use filecoin_proofs::{DefaultPieceHasher, PoRepConfig, PoStConfig, PoStType, with_shape};
use filecoin_proofs_api::ApiVersion;
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::parameter_cache::{
    CacheableParameters, parameter_cache_params_path, parameter_cache_verifying_key_path,
    parameter_id,
};
use storage_proofs_porep::stacked::{StackedCircuit, StackedCompound, StackedDrg};
use storage_proofs_post::fallback::{FallbackPoSt, FallbackPoStCircuit, FallbackPoStCompound};
use storage_proofs_update::constants::TreeRHasher;
use storage_proofs_update::{
    EmptySectorUpdate, EmptySectorUpdateCircuit, EmptySectorUpdateCompound,
};

use crate::ids::{self, sector_size_name};
use crate::{FilError, ProofKind};

/// filecoin-proofs' default cache directory.
pub const DEFAULT_CACHE: &str = "/var/tmp/filecoin-proof-parameters";

static CACHE: OnceLock<PathBuf> = OnceLock::new();

/// Fixes this process's parameter cache: `dir`, else `FIL_PROOFS_PARAMETER_CACHE`,
/// else filecoin-proofs' default. Must run before anything reads Filecoin's
/// settings; a second call with another directory is an error.
pub fn use_cache(dir: Option<&Path>) -> Result<PathBuf, FilError> {
    let wanted = dir.map(Path::to_path_buf).unwrap_or_else(|| {
        std::env::var_os("FIL_PROOFS_PARAMETER_CACHE")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_CACHE))
    });
    let chosen = CACHE.get_or_init(|| {
        // SAFETY: called at start, before filecoin-proofs' settings (and any
        // thread reading the environment) exist; later calls do not write.
        unsafe { std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", &wanted) };
        // SDR's parent cache beside it, unless told otherwise.
        if std::env::var_os("FIL_PROOFS_PARENT_CACHE").is_none() {
            let parents = wanted.parent().unwrap_or(&wanted).join("filecoin-parents");
            // SAFETY: as above.
            unsafe { std::env::set_var("FIL_PROOFS_PARENT_CACHE", parents) };
        }
        wanted.clone()
    });
    let settings = PathBuf::from(&storage_proofs_core::settings::SETTINGS.parameter_cache);
    if chosen != &wanted || settings != *chosen {
        return Err(FilError::Mismatch(format!(
            "this process already uses the parameter cache {} ({} asked)",
            settings.display(),
            wanted.display()
        )));
    }
    Ok(chosen.clone())
}

/// The cache directory in use (after [`use_cache`]).
pub fn cache_dir() -> PathBuf {
    PathBuf::from(&storage_proofs_core::settings::SETTINGS.parameter_cache)
}

fn porep_config(sector_size: u64) -> Result<PoRepConfig, FilError> {
    // The identifier has no porep id or API version: every seal proof of a size shares the file.
    Ok(PoRepConfig::new_groth16(
        sector_size,
        [0; 32],
        ApiVersion::V1_1_0,
    ))
}

fn post_config(kind: ProofKind, sector_size: u64) -> Result<PoStConfig, FilError> {
    let rp = match kind {
        ProofKind::WindowPost => ids::window_proof_for(sector_size),
        _ => ids::winning_proof_for(sector_size),
    }
    .map_err(|_| FilError::Unsupported {
        kind: kind.to_string(),
        why: format!("no registered proof for {}", sector_size_name(sector_size)),
    })?;
    Ok(rp.as_v1_config())
}

fn porep_id<Tree: 'static + MerkleTreeTrait>(cfg: PoRepConfig) -> anyhow::Result<String> {
    cfg.get_cache_identifier::<Tree>()
}

fn post_id<Tree: 'static + MerkleTreeTrait>(cfg: PoStConfig) -> anyhow::Result<String> {
    cfg.get_cache_identifier::<Tree>()
}

fn update_id<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    sector_size: u64,
) -> anyhow::Result<String> {
    let pp = storage_proofs_update::PublicParams::from_sector_size(sector_size);
    Ok(<EmptySectorUpdateCompound<Tree> as CacheableParameters<
        EmptySectorUpdateCircuit<Tree>,
        _,
    >>::cache_identifier(&pp))
}

/// Filecoin's cache identifier of a kind's parameters at a sector size.
pub fn identifier(kind: ProofKind, sector_size: u64) -> Result<String, FilError> {
    ids::sector_size(&sector_size.to_string())?;
    Ok(match kind {
        ProofKind::Porep => with_shape!(sector_size, porep_id, porep_config(sector_size)?)?,
        ProofKind::WindowPost | ProofKind::WinningPost => {
            with_shape!(sector_size, post_id, post_config(kind, sector_size)?)?
        }
        ProofKind::Snap => with_shape!(sector_size, update_id, sector_size)?,
    })
}

/// The parameter file of a kind at a sector size, in the cache directory.
pub fn params_path(kind: ProofKind, sector_size: u64) -> Result<PathBuf, FilError> {
    Ok(cache_dir().join(parameter_id(&identifier(kind, sector_size)?)))
}

/// The parameter file, or an error naming it and the directory.
pub fn require(kind: ProofKind, sector_size: u64) -> Result<PathBuf, FilError> {
    let path = params_path(kind, sector_size)?;
    if !path.is_file() {
        return Err(FilError::MissingParameters {
            file: path
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default(),
            dir: cache_dir(),
            sector_size: sector_size_name(sector_size),
        });
    }
    check_published_vk(&path)?;
    Ok(path)
}

/// Checks the verifying key beside `params` against Filecoin's published
/// digest (its `parameters.json`), when the file carries a published name:
/// Filecoin's verifier, which checks every proof before it leaves, reads
/// that key, so a damaged or replaced one could pass proofs that fail on
/// chain. A key in a directory marked as locally generated
/// (`LOCALLY-GENERATED.txt`, written by `cuzk fil params`; followed through
/// links) is a test key and is not checked; neither is a name Filecoin
/// never published.
pub fn check_published_vk(params: &Path) -> Result<(), FilError> {
    let vk = params.with_extension("vk");
    let Some(name) = vk.file_name().and_then(|n| n.to_str()) else {
        return Ok(());
    };
    let Some(published) = storage_proofs_core::parameter_cache::PARAMETERS.get(name) else {
        return Ok(());
    };
    // Where the key really lives (a directory of links to test parameters
    // is exempt as they are).
    let real = std::fs::canonicalize(&vk).unwrap_or_else(|_| vk.clone());
    if real.parent().is_some_and(|d| d.join(LOCAL_NOTE).is_file()) {
        return Ok(());
    }
    let bytes = match std::fs::read(&vk) {
        Ok(b) => b,
        // Filecoin derives a missing key from the parameters themselves.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(FilError::Other(anyhow::anyhow!(
                "reading {}: {e}",
                vk.display()
            )));
        }
    };
    let digest = blake2b_simd::Params::new().hash(&bytes).to_hex();
    // parameters.json keeps the first 256 bits of the BLAKE2b-512 digest.
    if digest[..32] != published.digest {
        return Err(FilError::Mismatch(format!(
            "{}: its digest {} is not Filecoin's published {} (parameters.json): the file is damaged or was replaced; download it again",
            vk.display(),
            &digest[..32],
            published.digest
        )));
    }
    Ok(())
}

fn gen_porep<Tree: 'static + MerkleTreeTrait>(
    cfg: PoRepConfig,
    device: Device,
) -> anyhow::Result<Phases> {
    type C<T> = StackedCompound<T, DefaultPieceHasher>;
    let pp = filecoin_proofs::parameters::public_params::<Tree>(&cfg)?;
    let blank = <C<Tree> as CompoundProof<
        StackedDrg<'_, Tree, DefaultPieceHasher>,
        StackedCircuit<Tree, DefaultPieceHasher>,
    >>::blank_circuit(&pp);
    <C<Tree> as CacheableParameters<StackedCircuit<Tree, DefaultPieceHasher>, _>>::get_param_metadata(blank.clone(), &pp)?;
    let id = <C<Tree> as CacheableParameters<StackedCircuit<Tree, DefaultPieceHasher>, _>>::cache_identifier(&pp);
    // The blank circuit records on one thread (minutes at 32 GiB); a
    // synthetic sector's first partition has the same matrices (values do
    // not shape them; a test checks it) and records its challenges in parallel.
    match synthetic_partition::<Tree>(&cfg, &pp) {
        Ok(partition) => write_generated_with(&id, |cs| partition.record_in_parts(cs), device),
        Err(e) => {
            tracing::warn!(
                "recording the PoRep circuit in parallel: {e:#}; recording the blank circuit on one thread"
            );
            write_generated(&id, blank, device)
        }
    }
}

/// Partition 0 of a synthetic sector of `cfg`'s size, if its circuit has
/// `expected`'s shape (layers, nodes, challenges per partition).
fn synthetic_partition<Tree: 'static + MerkleTreeTrait>(
    cfg: &PoRepConfig,
    expected: &storage_proofs_porep::stacked::PublicParams<Tree>,
) -> anyhow::Result<crate::porep_circuit::PorepPartition<Tree>> {
    use storage_proofs_core::drgraph::Graph;
    let spec = crate::synthetic::SectorSpec {
        sector_size: u64::from(cfg.sector_size),
        miner: 1000,
        sector: 1,
        ticket: [1; 32],
        seed: [2; 32],
    };
    let synthetic = crate::synthetic::porep_c1(&spec)?;
    let partition = crate::porep::first_partition::<Tree>(&synthetic.c1)?;
    let shape = |p: &storage_proofs_porep::stacked::PublicParams<Tree>| {
        (
            p.num_layers,
            p.graph.size(),
            p.challenges.num_challenges_per_partition(),
        )
    };
    let (ours, theirs) = (shape(partition.params()), shape(expected));
    anyhow::ensure!(
        ours == theirs && partition.challenges() == theirs.2,
        "a synthetic sector's partition has (layers, nodes, challenges) {ours:?} and {} challenges, the parameters' circuit {theirs:?}",
        partition.challenges()
    );
    Ok(partition)
}

/// Makes parameters for `blank` with cuzk's setup from fresh secrets (the
/// generators' multiples on `device`) and writes Filecoin's `.params` and `.vk` for the cache identifier `id`.
fn write_generated<C: Circuit<Scalar>>(
    id: &str,
    blank: C,
    device: Device,
) -> anyhow::Result<Phases> {
    write_generated_with(id, |cs| blank.synthesize(cs), device)
}

/// As [`write_generated`], the matrices recorded by `synthesize`.
fn write_generated_with(
    id: &str,
    synthesize: impl FnOnce(&mut MatrixCs) -> Result<(), bellperson::SynthesisError>,
    device: Device,
) -> anyhow::Result<Phases> {
    let toxic = Toxic::random(&mut rand::rngs::OsRng);
    let (params, times) = cuzk_stages::setup::generate_timed_with(synthesize, &toxic, device)?;
    let started = Instant::now();
    tracing::info!(
        id,
        record_s = times.record.as_secs_f64(),
        evaluate_s = times.evaluate.as_secs_f64(),
        g1_s = times.g1.as_secs_f64(),
        g2_s = times.g2.as_secs_f64(),
        "parameters generated"
    );
    write_durably(&parameter_cache_params_path(id), |f| {
        cuzk_stages::setup::write_parameters(&params, f)
    })?;
    write_durably(&parameter_cache_verifying_key_path(id), |f| {
        params.vk.write(f)
    })?;
    Ok(Phases {
        setup: times,
        write: started.elapsed(),
    })
}

/// Writes `path` through a temporary file, synced and renamed over, so a
/// run cut short leaves no partial file under Filecoin's name.
fn write_durably(
    path: &Path,
    write: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let written = (|| -> std::io::Result<()> {
        let mut f = std::io::BufWriter::with_capacity(8 << 20, std::fs::File::create(&tmp)?);
        write(&mut f)?;
        f.flush()?;
        f.get_ref().sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        anyhow::bail!("writing {}: {e}", path.display());
    }
    Ok(())
}

/// A PoSt kind's blank circuit (no witness) and its public parameters.
pub(crate) fn blank_post<Tree: 'static + MerkleTreeTrait>(
    cfg: &PoStConfig,
) -> anyhow::Result<(
    FallbackPoStCircuit<Tree>,
    storage_proofs_post::fallback::PublicParams,
)> {
    let pp = match cfg.typ {
        PoStType::Window => filecoin_proofs::parameters::window_post_public_params::<Tree>(cfg)?,
        PoStType::Winning => filecoin_proofs::parameters::winning_post_public_params::<Tree>(cfg)?,
    };
    let blank = <FallbackPoStCompound<Tree> as CompoundProof<
        FallbackPoSt<'_, Tree>,
        FallbackPoStCircuit<Tree>,
    >>::blank_circuit(&pp);
    Ok((blank, pp))
}

fn gen_post<Tree: 'static + MerkleTreeTrait>(
    cfg: PoStConfig,
    device: Device,
) -> anyhow::Result<Phases> {
    let (blank, pp) = blank_post::<Tree>(&cfg)?;
    <FallbackPoStCompound<Tree> as CacheableParameters<FallbackPoStCircuit<Tree>, _>>::get_param_metadata(blank.clone(), &pp)?;
    let id = <FallbackPoStCompound<Tree> as CacheableParameters<FallbackPoStCircuit<Tree>, _>>::cache_identifier(&pp);
    // Sectors recorded in parallel (2,349 of them in a 32 GiB WindowPoSt).
    write_generated_with(
        &id,
        |cs| crate::post_witness::record_sectors(&blank, cs),
        device,
    )
}

fn gen_update<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    sector_size: u64,
    device: Device,
) -> anyhow::Result<Phases> {
    let pp = storage_proofs_update::PublicParams::from_sector_size(sector_size);
    let blank = <EmptySectorUpdateCompound<Tree> as CompoundProof<
        EmptySectorUpdate<Tree>,
        EmptySectorUpdateCircuit<Tree>,
    >>::blank_circuit(&pp);
    write_generated(&update_id::<Tree>(sector_size)?, blank, device)
}

/// What generating one kind's parameters did.
#[derive(Clone, Debug)]
pub struct Generated {
    pub kind: ProofKind,
    pub path: PathBuf,
    /// None: the file was already there.
    pub took: Option<Duration>,
    /// Where the time went, when it was made.
    pub phases: Option<Phases>,
    pub bytes: u64,
}

/// Where a parameter file's generation went: the setup's phases, then
/// writing the files.
#[derive(Clone, Debug)]
pub struct Phases {
    pub setup: cuzk_stages::setup::SetupTimes,
    pub write: Duration,
}

impl std::fmt::Display for Phases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = &self.setup;
        write!(
            f,
            "recording {:.1} s, A/B/C(τ) {:.1} s, G1 {:.1} s, G2 {:.1} s, writing {:.1} s",
            t.record.as_secs_f64(),
            t.evaluate.as_secs_f64(),
            t.g1.as_secs_f64(),
            t.g2.as_secs_f64(),
            self.write.as_secs_f64()
        )
    }
}

/// The note written beside locally generated parameters.
pub const LOCAL_NOTE: &str = "LOCALLY-GENERATED.txt";

/// Generates (test) parameters for `kinds` at `sector_size` into the cache
/// directory with cuzk's setup (`cuzk_stages::setup`, bellperson's
/// parameters from the same secrets, several times faster), skipping files
/// already there. They carry Filecoin's file names
/// but come from this machine's randomness, not the published ceremony:
/// keep them in a directory of their own (a note saying so is written there).
pub fn generate(
    kinds: &[ProofKind],
    sector_size: u64,
    device: Device,
) -> Result<Vec<Generated>, FilError> {
    let dir = cache_dir();
    std::fs::create_dir_all(&dir)
        .map_err(|e| FilError::Other(anyhow::anyhow!("creating {}: {e}", dir.display())))?;
    std::fs::write(
        dir.join(LOCAL_NOTE),
        "The parameter files in this directory were generated locally by `cuzk fil params`\n\
         from this machine's randomness. They carry Filecoin's file names but are NOT the\n\
         published parameters: proofs made with them verify only against them. Use them for\n\
         tests, never beside the real ones.\n",
    )
    .map_err(|e| FilError::Other(e.into()))?;
    let mut out = vec![];
    for &kind in kinds {
        let path = params_path(kind, sector_size)?;
        let existed = path.is_file();
        let started = Instant::now();
        let mut phases = None;
        if !existed {
            tracing::info!(%kind, path = %path.display(), "generating parameters");
            phases = Some(match kind {
                ProofKind::Porep => {
                    with_shape!(sector_size, gen_porep, porep_config(sector_size)?, device)?
                }
                ProofKind::WindowPost | ProofKind::WinningPost => with_shape!(
                    sector_size,
                    gen_post,
                    post_config(kind, sector_size)?,
                    device
                )?,
                ProofKind::Snap => with_shape!(sector_size, gen_update, sector_size, device)?,
            });
        }
        let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        out.push(Generated {
            kind,
            path,
            took: (!existed).then(|| started.elapsed()),
            phases,
            bytes,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use blstrs::Bls12;
    use filecoin_proofs::SectorShape2KiB;
    use rand::SeedableRng;

    /// Ours and bellperson's parameter files from the same secrets.
    fn assert_same_as_bellperson<C: Circuit<Scalar> + Clone>(blank: C) {
        let t = Toxic::random(&mut rand::rngs::StdRng::seed_from_u64(28));
        let ours = cuzk_stages::setup::generate_parameters(blank.clone(), &t).unwrap();
        let theirs = bellperson::groth16::generate_parameters::<Bls12, _>(
            blank, t.g1, t.g2, t.alpha, t.beta, t.gamma, t.delta, t.tau,
        )
        .unwrap();
        let bytes = |p: &bellperson::groth16::Parameters<Bls12>| {
            let mut out = vec![];
            p.write(&mut out).unwrap();
            out
        };
        assert_eq!(ours.vk, theirs.vk, "verifying keys");
        assert!(bytes(&ours) == bytes(&theirs), "parameter files differ");
    }

    /// The setup's PoRep recording (a synthetic sector's first partition,
    /// its challenges in parallel) against the blank circuit's on one thread.
    fn porep_parts_equal_the_blank_circuit<Tree: 'static + MerkleTreeTrait>(cfg: PoRepConfig) {
        use cuzk_stages::setup::Matrices;
        let pp = filecoin_proofs::parameters::public_params::<Tree>(&cfg).unwrap();
        let blank = <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<
            StackedDrg<'_, Tree, DefaultPieceHasher>,
            StackedCircuit<Tree, DefaultPieceHasher>,
        >>::blank_circuit(&pp);
        let serial = Matrices::record(blank).unwrap();
        let partition = synthetic_partition::<Tree>(&cfg, &pp).unwrap();
        let parallel = Matrices::record_with(|cs| partition.record_in_parts(cs)).unwrap();
        assert_same_matrices(&parallel, &serial);
    }

    /// The setup's PoSt recordings (the blank circuit's sectors in
    /// parallel) against the blank circuit's on one thread.
    #[test]
    fn post_matrices_recorded_in_parallel_equal_the_blank_circuits() {
        use cuzk_stages::setup::Matrices;
        for kind in [ProofKind::WindowPost, ProofKind::WinningPost] {
            let cfg = post_config(kind, 2048).unwrap();
            let (blank, _) = blank_post::<SectorShape2KiB>(&cfg).unwrap();
            let serial = Matrices::record(blank.clone()).unwrap();
            let parallel =
                Matrices::record_with(|cs| crate::post_witness::record_sectors(&blank, cs))
                    .unwrap();
            assert_same_matrices(&parallel, &serial);
        }
    }

    /// Two recordings' variables, rows, coefficient tables and matrices.
    fn assert_same_matrices(
        parallel: &cuzk_stages::setup::Matrices,
        serial: &cuzk_stages::setup::Matrices,
    ) {
        assert_eq!(
            (parallel.n_inputs, parallel.n_aux, parallel.rows),
            (serial.n_inputs, serial.n_aux, serial.rows),
            "inputs, aux variables and rows"
        );
        assert!(parallel.table() == serial.table(), "coefficient tables");
        for m in 0..3 {
            let (p, s) = (parallel.matrix(m), serial.matrix(m));
            assert!(p.row_ptr == s.row_ptr, "matrix {m}'s rows");
            assert!(p.cols == s.cols, "matrix {m}'s columns");
            assert!(
                (0..s.nnz()).all(|t| p.codes.get(t) == s.codes.get(t)),
                "matrix {m}'s coefficients"
            );
        }
    }

    #[test]
    fn porep_matrices_recorded_in_parallel_equal_the_blank_circuits() {
        porep_parts_equal_the_blank_circuit::<SectorShape2KiB>(porep_config(2048).unwrap());
    }

    #[test]
    fn a_published_verifying_key_that_is_not_the_published_one_is_refused() {
        let name = storage_proofs_core::parameter_cache::PARAMETERS
            .keys()
            .find(|k| k.ends_with(".vk"))
            .expect("parameters.json lists verifying keys");
        let dir = tempfile::tempdir().unwrap();
        let params = dir.path().join(name).with_extension("params");
        std::fs::write(dir.path().join(name), b"not the published key").unwrap();
        let err = check_published_vk(&params).unwrap_err().to_string();
        assert!(err.contains("is not Filecoin's published"), "{err}");
        assert!(err.contains(name.as_str()), "{err}");
        // A link to it from elsewhere is checked as the file it leads to,
        let links = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(dir.path().join(name), links.path().join(name)).unwrap();
        let linked = links.path().join(name).with_extension("params");
        assert!(check_published_vk(&linked).is_err());
        // and in a directory of locally generated test parameters it is not checked,
        std::fs::write(dir.path().join(LOCAL_NOTE), "test parameters").unwrap();
        check_published_vk(&params).unwrap();
        check_published_vk(&linked).unwrap();
        // nor is a name Filecoin never published.
        let other = tempfile::tempdir().unwrap();
        std::fs::write(other.path().join("mine.vk"), b"anything").unwrap();
        check_published_vk(&other.path().join("mine.params")).unwrap();
    }

    #[test]
    fn window_post_parameters_at_2kib_equal_bellpersons() {
        let cfg = post_config(ProofKind::WindowPost, 2048).unwrap();
        assert_same_as_bellperson(blank_post::<SectorShape2KiB>(&cfg).unwrap().0);
    }

    #[test]
    #[ignore = "bellperson takes ~6 minutes on 2 cores: cargo test -p cuzk-filecoin -- --ignored"]
    fn porep_parameters_at_2kib_equal_bellpersons() {
        type C = StackedCompound<SectorShape2KiB, DefaultPieceHasher>;
        let pp = filecoin_proofs::parameters::public_params::<SectorShape2KiB>(
            &porep_config(2048).unwrap(),
        )
        .unwrap();
        let blank = <C as CompoundProof<
            StackedDrg<'_, SectorShape2KiB, DefaultPieceHasher>,
            StackedCircuit<SectorShape2KiB, DefaultPieceHasher>,
        >>::blank_circuit(&pp);
        assert_same_as_bellperson(blank);
    }
}
