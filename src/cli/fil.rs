//! `cuzk fil`: Filecoin's proofs. Fixtures from a freshly sealed sector,
//! test-size parameters, circuit counts, and proving PoRep C2, WindowPoSt,
//! WinningPoSt and SnapDeals through the configured graph, each checked by
//! Filecoin's own verifier.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use cuzk::config::Loaded;
use cuzk::filecoin::fixtures::Meta;
use cuzk::filecoin::ids::{self, from_hex, sector_size_name};
use cuzk::filecoin::{FilJob, ProofKind, params, porep, post, snap};
use cuzk::stages::setup::Device;

#[derive(clap::Subcommand)]
pub enum Action {
    /// Generate test-size parameters (Filecoin's file names, this machine's
    /// randomness) into a directory of their own.
    Params {
        #[arg(long, default_value = "2KiB")]
        sector_size: String,
        /// porep, window, winning, snap (default: all).
        #[arg(long, value_delimiter = ',')]
        kinds: Vec<String>,
        /// The parameter cache to write (default: `fil.parameter_cache`).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Where the generators' multiples are computed: auto (a usable
        /// GPU, else the CPU), gpu or cpu.
        #[arg(long, default_value = "auto")]
        device: String,
    },
    /// Seal random sectors and write every input a host sends (C1 output and
    /// curio's wrapper, PoSt and SnapDeals vanilla proofs) and meta.json.
    Gen {
        #[arg(long, default_value = "2KiB")]
        sector_size: String,
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value_t = 1000)]
        miner: u64,
        /// Keep the sealed sectors beside the inputs.
        #[arg(long)]
        keep_sectors: bool,
        /// Make a PoRep C1 output of a sector that was never sealed (any
        /// size, 32 GiB and 64 GiB included; seconds, no disk): all-zero
        /// data, only the challenged nodes, their parents and paths made.
        #[arg(long)]
        synthetic: bool,
        /// With --synthetic: the sector number.
        #[arg(long, default_value_t = 1)]
        sector: u64,
        /// With --synthetic: sectors in the WindowPoSt vanilla proofs
        /// (a full 32 GiB partition is 2,349).
        #[arg(long, default_value_t = 2)]
        window_sectors: u64,
    },
    /// Constraints, public inputs and partitions per proof kind, counted from
    /// the circuits (no parameters needed), and the SRS each needs.
    Info {
        #[arg(long, default_value = "2KiB")]
        sector_size: String,
        /// Only these kinds (default: all).
        #[arg(long, value_delimiter = ',')]
        kinds: Vec<String>,
        #[arg(long)]
        json: bool,
        /// Also plan each kind's device memory on a card with this much
        /// (e.g. 24GiB): resident or streamed SRS, full or compact buffers.
        #[arg(long)]
        vram: Option<cuzk::config::ByteSize>,
    },
    /// Synthesis of one PoRep partition of a production shape at a test
    /// sector size (no parameters needed): seconds of full and pre-compiled
    /// synthesis on this machine's cores, and the host bytes per partition
    /// in flight. 16KiB has 32GiB's tree shape; --layers 11 --challenges 18
    /// gives 32GiB's layers and challenges per partition.
    Synth {
        #[arg(long, default_value = "16KiB")]
        sector_size: String,
        #[arg(long, default_value_t = 11)]
        layers: usize,
        #[arg(long, default_value_t = 18)]
        challenges: usize,
        /// Repetitions of the witness-only path (the recording is made once).
        #[arg(long, default_value_t = 1)]
        reps: usize,
        /// Skip full synthesis after the recording (minutes at this size).
        #[arg(long)]
        no_full: bool,
        /// Also write the figures as JSON.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Prove a Filecoin proof, check it with Filecoin's verifier, write its bytes.
    Prove {
        #[command(subcommand)]
        kind: ProveKind,
    },
}

/// What every `prove` takes.
#[derive(clap::Args, Clone)]
pub struct Common {
    /// Where the proof bytes go.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// A fixtures directory (`cuzk fil gen`): inputs not given are read from its meta.json.
    #[arg(long)]
    pub fixtures: Option<PathBuf>,
    #[arg(long)]
    pub miner: Option<u64>,
    /// Write TIMELINE events to this file.
    #[arg(long)]
    pub timeline: Option<PathBuf>,
}

#[derive(clap::Subcommand)]
pub enum ProveKind {
    /// PoRep C2 from the C1 output (filecoin-ffi's JSON or curio's wrapper).
    Porep {
        #[arg(long)]
        c1: Option<PathBuf>,
        /// The sector number (taken from curio's wrapper if it has one).
        #[arg(long)]
        sector: Option<u64>,
        #[command(flatten)]
        common: Common,
    },
    /// One WindowPoSt partition from bincode FallbackPoStSectorProofs.
    WindowPost {
        #[command(flatten)]
        post: PostArgs,
    },
    /// WinningPoSt from its bincode FallbackPoStSectorProof.
    WinningPost {
        #[command(flatten)]
        post: PostArgs,
    },
    /// SnapDeals (empty sector update) from bincode partition proofs.
    Snap {
        /// Partition proof files, in partition order.
        #[arg(long = "vanilla", num_args = 1..)]
        vanilla: Vec<PathBuf>,
        #[arg(long)]
        comm_r_old: Option<String>,
        #[arg(long)]
        comm_r_new: Option<String>,
        #[arg(long)]
        comm_d_new: Option<String>,
        /// Lotus's registered update proof number.
        #[arg(long)]
        registered_proof: Option<u64>,
        #[command(flatten)]
        common: Common,
    },
}

#[derive(clap::Args, Clone)]
pub struct PostArgs {
    /// Vanilla proof files, one per sector.
    #[arg(long = "vanilla", num_args = 1..)]
    pub vanilla: Vec<PathBuf>,
    /// 32 bytes of hex.
    #[arg(long)]
    pub randomness: Option<String>,
    /// Lotus's registered PoSt proof number.
    #[arg(long)]
    pub registered_proof: Option<u64>,
    #[arg(long)]
    pub partition: Option<u32>,
    #[command(flatten)]
    pub common: Common,
}

fn kinds(names: &[String]) -> anyhow::Result<Vec<ProofKind>> {
    if names.is_empty() {
        return Ok(ProofKind::ALL.to_vec());
    }
    Ok(names
        .iter()
        .map(|n| ProofKind::parse(n))
        .collect::<Result<_, _>>()?)
}

/// `cuzk fil gen --synthetic`: a never-sealed sector's C1 output.
fn gen_synthetic(
    size: u64,
    miner: u64,
    sector: u64,
    window_sectors: u64,
    out: &Path,
    started: Instant,
) -> anyhow::Result<ExitCode> {
    use rand::RngCore;
    let mut ticket = [0u8; 32];
    let mut seed = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut ticket);
    rand::rngs::OsRng.fill_bytes(&mut seed);
    seed[31] &= 0x3f;
    let spec = cuzk::filecoin::synthetic::SectorSpec {
        sector_size: size,
        miner,
        sector,
        ticket,
        seed,
    };
    let mut post_randomness = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut post_randomness);
    post_randomness[31] &= 0x3f;
    let meta = cuzk::filecoin::synthetic::write(&spec, window_sectors, post_randomness, out)?;
    println!(
        "made a synthetic {} sector {sector} for miner {miner} in {:.1} s ({} challenged nodes, {} parents' columns; checked with Filecoin's vanilla verifier); inputs in {}:",
        sector_size_name(size),
        started.elapsed().as_secs_f64(),
        meta.challenged,
        meta.parent_columns,
        out.display()
    );
    println!(
        "  porep:   {} and {} (comm_r {})",
        meta.porep.c1, meta.porep.wrapper, meta.porep.comm_r
    );
    println!(
        "  winning: {} (randomness {})",
        meta.winning.vanilla.join(" "),
        meta.winning.randomness
    );
    println!(
        "  window:  {} sector(s), {} ... (randomness {})",
        meta.window.vanilla.len(),
        meta.window.vanilla[0],
        meta.window.randomness
    );
    println!("  synthetic.json");
    Ok(ExitCode::SUCCESS)
}

fn read(path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
}

fn meta(common: &Common) -> anyhow::Result<Option<(Meta, PathBuf)>> {
    common
        .fixtures
        .as_ref()
        .map(|dir| Ok((Meta::read(dir)?, dir.clone())))
        .transpose()
}

fn hex32(what: &str, s: &str) -> anyhow::Result<[u8; 32]> {
    Ok(ids::bytes32(what, &from_hex(what, s)?)?)
}

/// Builds the job a `prove` subcommand asks for.
fn job(kind: &ProveKind) -> anyhow::Result<(FilJob, Common)> {
    match kind {
        ProveKind::Porep { c1, sector, common } => {
            let m = meta(common)?;
            let path = c1
                .clone()
                .or_else(|| m.as_ref().map(|(m, d)| d.join(&m.porep.wrapper)))
                .context("--c1 FILE (or --fixtures DIR) is needed")?;
            let miner = common
                .miner
                .or(m.as_ref().map(|(m, _)| m.miner))
                .context("--miner is needed")?;
            let c1 = porep::C1::parse(&read(&path)?)?;
            let sector = sector.or(m.as_ref().map(|(m, _)| m.porep.sector));
            Ok((porep::job(&c1, miner, sector, None)?, common.clone()))
        }
        ProveKind::WindowPost { post: a } | ProveKind::WinningPost { post: a } => {
            let window = matches!(kind, ProveKind::WindowPost { .. });
            let m = meta(&a.common)?;
            let pm = m
                .as_ref()
                .map(|(m, d)| (if window { &m.window } else { &m.winning }, d));
            let vanilla: Vec<PathBuf> = if a.vanilla.is_empty() {
                pm.map(|(p, d)| p.vanilla.iter().map(|v| d.join(v)).collect())
                    .unwrap_or_default()
            } else {
                a.vanilla.clone()
            };
            let req = post::PostRequest {
                registered_proof: ids::post_proof(
                    a.registered_proof
                        .or(pm.map(|(p, _)| p.registered_proof))
                        .context("--registered-proof is needed")?,
                )?,
                miner: a
                    .common
                    .miner
                    .or(m.as_ref().map(|(m, _)| m.miner))
                    .context("--miner is needed")?,
                randomness: hex32(
                    "randomness",
                    &a.randomness
                        .clone()
                        .or(pm.map(|(p, _)| p.randomness.clone()))
                        .context("--randomness is needed")?,
                )?,
                vanilla_proofs: vanilla
                    .iter()
                    .map(|p| read(p))
                    .collect::<anyhow::Result<_>>()?,
                partition: a.partition.or(pm.map(|(p, _)| p.partition)).unwrap_or(0) as usize,
            };
            let job = if window {
                post::window_job(&req)?
            } else {
                post::winning_job(&req)?
            };
            Ok((job, a.common.clone()))
        }
        ProveKind::Snap {
            vanilla,
            comm_r_old,
            comm_r_new,
            comm_d_new,
            registered_proof,
            common,
        } => {
            let m = meta(common)?;
            let sm = m
                .as_ref()
                .and_then(|(m, d)| m.snap.as_ref().map(|s| (s, d)));
            let files: Vec<PathBuf> = if vanilla.is_empty() {
                sm.map(|(s, d)| s.vanilla.iter().map(|v| d.join(v)).collect())
                    .unwrap_or_default()
            } else {
                vanilla.clone()
            };
            let pick = |given: &Option<String>,
                        from: fn(&cuzk::filecoin::fixtures::SnapMeta) -> &String,
                        name: &str| {
                given
                    .clone()
                    .or(sm.map(|(s, _)| from(s).clone()))
                    .with_context(|| format!("--{name} is needed"))
                    .and_then(|h| hex32(name, &h))
            };
            let req = snap::SnapRequest {
                registered_proof: ids::update_proof(
                    registered_proof
                        .or(sm.map(|(s, _)| s.registered_proof))
                        .context("--registered-proof is needed")?,
                )?,
                partition_proofs: files
                    .iter()
                    .map(|p| read(p))
                    .collect::<anyhow::Result<_>>()?,
                comm_r_old: pick(comm_r_old, |s| &s.comm_r_old, "comm-r-old")?,
                comm_r_new: pick(comm_r_new, |s| &s.comm_r_new, "comm-r-new")?,
                comm_d_new: pick(comm_d_new, |s| &s.comm_d_new, "comm-d-new")?,
            };
            Ok((snap::job(&req)?, common.clone()))
        }
    }
}

fn prove(loaded: Loaded, kind: ProveKind) -> anyhow::Result<ExitCode> {
    let (job, common) = job(&kind)?;
    let session = super::Session::start(&loaded.config, common.timeline.as_deref())?;
    let rt = &session.rt;
    let _guard = rt.enter();
    let engine = cuzk::Engine::with_options(
        loaded.config.clone(),
        session.engine_options(&loaded.config),
    )
    .context("starting the engine")?;
    let (kind, size, partitions) = (job.kind, job.sector_size, job.partitions());
    println!(
        "cuzk fil prove {kind}: {} sector, {partitions} partition(s); graph {}; backend {} ({})",
        sector_size_name(size),
        engine.graph().name,
        engine.backend().name(),
        engine.backend().reason
    );
    println!("parameters: {}", job.params.display());
    let srs = cuzk::srs_cache::SrsCache::new();
    let started = Instant::now();
    let result = rt.block_on(cuzk::fil::prove(&engine, &srs, job));
    rt.block_on(engine.shutdown());
    let proof = match result {
        Ok(p) => p,
        Err(e) => {
            println!("Filecoin's verification: FAILED ({e})");
            return Ok(ExitCode::FAILURE);
        }
    };
    println!(
        "proved in {:.3} s (parameters loaded in {:.3} s)",
        started.elapsed().as_secs_f64(),
        proof.srs_load.as_secs_f64()
    );
    print!(
        "{}",
        cuzk::report::stage_table(&cuzk::report::summarise(
            proof.partitions.iter().map(|p| &p.timings[..])
        ))
    );
    println!(
        "Filecoin's verification: OK ({} bytes, {} partition(s) × 192)",
        proof.bytes.len(),
        proof.partitions.len()
    );
    if let Some(out) = &common.out {
        std::fs::write(out, &proof.bytes).with_context(|| format!("writing {}", out.display()))?;
        println!("proof written to {}", out.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// A closure making the job of `kind` from a fixtures directory, again and
/// again (for benchmarks).
pub fn fixture_jobs(
    dir: &Path,
    kind: &str,
) -> anyhow::Result<Box<dyn Fn() -> Result<FilJob, cuzk::filecoin::FilError> + Send + Sync>> {
    let common = Common {
        out: None,
        fixtures: Some(dir.to_path_buf()),
        miner: None,
        timeline: None,
    };
    let post = PostArgs {
        vanilla: vec![],
        randomness: None,
        registered_proof: None,
        partition: None,
        common: common.clone(),
    };
    let prove = match ProofKind::parse(kind)? {
        ProofKind::Porep => ProveKind::Porep {
            c1: None,
            sector: None,
            common,
        },
        ProofKind::WindowPost => ProveKind::WindowPost { post },
        ProofKind::WinningPost => ProveKind::WinningPost { post },
        ProofKind::Snap => ProveKind::Snap {
            vanilla: vec![],
            comm_r_old: None,
            comm_r_new: None,
            comm_d_new: None,
            registered_proof: None,
            common,
        },
    };
    job(&prove)?;
    Ok(Box::new(move || {
        job(&prove)
            .map(|(j, _)| j)
            .map_err(|e| match e.downcast::<cuzk::filecoin::FilError>() {
                Ok(f) => f,
                Err(e) => cuzk::filecoin::FilError::Other(e),
            })
    }))
}

/// Fixes the parameter cache for this process (before filecoin-proofs reads it).
pub fn use_cache(loaded: &Loaded, dir: Option<&Path>) -> anyhow::Result<PathBuf> {
    Ok(params::use_cache(
        dir.or(loaded.config.fil.parameter_cache.as_deref()),
    )?)
}

pub fn run(loaded: Loaded, action: Action) -> anyhow::Result<ExitCode> {
    // Proving starts a session (logs and trace export); the rest only log.
    if !matches!(action, Action::Prove { .. }) {
        cuzk::telemetry::init_logs(&loaded.config)?;
    }
    match action {
        Action::Params {
            sector_size,
            kinds: k,
            dir,
            device,
        } => {
            let device = Device::parse(&device).map_err(anyhow::Error::msg)?;
            let dir = use_cache(&loaded, dir.as_deref())?;
            let size = ids::sector_size(&sector_size)?;
            println!(
                "generating {} parameters into {} on {device} (locally generated from this machine's randomness: test parameters, not Filecoin's published ones)",
                sector_size_name(size),
                dir.display()
            );
            for g in params::generate(&kinds(&k)?, size, device)? {
                let how = match (g.took, &g.phases) {
                    (Some(t), Some(p)) => format!("generated in {:.1} s: {p}", t.as_secs_f64()),
                    (Some(t), None) => format!("generated in {:.1} s", t.as_secs_f64()),
                    (None, _) => "already there".into(),
                };
                println!(
                    "  {:<13} {} ({:.1} MiB, {how})",
                    g.kind.as_str(),
                    g.path
                        .file_name()
                        .map(|f| f.to_string_lossy())
                        .unwrap_or_default(),
                    g.bytes as f64 / (1 << 20) as f64
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Action::Gen {
            sector_size,
            out,
            miner,
            keep_sectors,
            synthetic,
            sector,
            window_sectors,
        } => {
            use_cache(&loaded, None)?;
            let size = ids::sector_size(&sector_size)?;
            let started = Instant::now();
            if synthetic {
                return gen_synthetic(size, miner, sector, window_sectors, &out, started);
            }
            let meta = cuzk::filecoin::fixtures::generate(size, miner, &out, keep_sectors)?;
            println!(
                "sealed {} sectors of {} for miner {miner} in {:.1} s; inputs in {}:",
                2,
                sector_size_name(size),
                started.elapsed().as_secs_f64(),
                out.display()
            );
            println!(
                "  porep:   {} and {} (sector {})",
                meta.porep.c1, meta.porep.wrapper, meta.porep.sector
            );
            println!(
                "  window:  {} (randomness {})",
                meta.window.vanilla.join(" "),
                meta.window.randomness
            );
            println!(
                "  winning: {} (randomness {})",
                meta.winning.vanilla.join(" "),
                meta.winning.randomness
            );
            if let Some(snap) = &meta.snap {
                println!("  snap:    {}", snap.vanilla.join(" "));
            }
            println!("  meta.json");
            Ok(ExitCode::SUCCESS)
        }
        Action::Info {
            sector_size,
            kinds: k,
            json,
            vram,
        } => {
            let size = ids::sector_size(&sector_size)?;
            let infos = kinds(&k)?
                .into_iter()
                .map(|kind| cuzk::filecoin::info::kind(kind, size))
                .collect::<Result<Vec<_>, _>>()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&infos)?);
            } else {
                print!("{}", cuzk::filecoin::info::render(&infos));
            }
            if let Some(v) = vram {
                for i in &infos {
                    println!("{} {}:", i.kind.as_str(), sector_size_name(size));
                    super::info::plan_shape(&i.shape.srs, v.bytes() as usize, &loaded.config);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Action::Synth {
            sector_size,
            layers,
            challenges,
            reps,
            no_full,
            json,
        } => {
            let size = ids::sector_size(&sector_size)?;
            let work = tempfile::tempdir()?;
            let started = Instant::now();
            let shaped =
                cuzk::filecoin::shaped::porep_partition(size, layers, challenges, work.path())?;
            println!(
                "sealed a {} sector with {layers} layers and gathered {challenges} challenges in {:.1} s",
                sector_size_name(size),
                started.elapsed().as_secs_f64()
            );
            let circuit = std::sync::Mutex::new(Some(shaped.circuit));
            let make = || {
                let guard = circuit.lock().unwrap();
                guard
                    .as_ref()
                    .and_then(|c| c.duplicate())
                    .expect("a PoRep partition copies")
            };
            let report = cuzk::stages::measure::measure(make, reps, !no_full)?;
            print!(
                "{}",
                report.render(&format!(
                    "PoRep partition, {} sector, {layers} layers, {challenges} challenges",
                    sector_size_name(size)
                ))
            );
            if let Some(path) = json {
                std::fs::write(&path, serde_json::to_string_pretty(&report)?)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Action::Prove { kind } => {
            use_cache(&loaded, None)?;
            prove(loaded, kind)
        }
    }
}
