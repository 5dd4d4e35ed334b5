//! The configuration schema. Every section has defaults; a TOML file and
//! `CUZK_*` environment variables override them (see `crate::load`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::bytes::ByteSize;

/// The whole configuration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub pipeline: PipelineConfig,
    pub stages: StagesConfig,
    pub channels: ChannelsConfig,
    pub arenas: ArenasConfig,
    pub threads: ThreadsConfig,
    pub gpu: GpuConfig,
    pub memory: MemoryConfig,
    pub srs: SrsConfig,
    pub pce: PceConfig,
    pub fil: FilConfig,
    pub daemon: DaemonConfig,
    pub engine: EngineConfig,
    pub timeline: TimelineConfig,
    pub tracing: TracingConfig,
    pub metrics: MetricsConfig,
    pub logging: LoggingConfig,
}

/// Which graph runs. In order of precedence: a graph declared inline
/// (`[pipeline.declare]`, the declaration format of `pipelines/*.toml`), a
/// declaration file (`graph`), or a built-in variant by name (`variant`;
/// `cuzk graph list` names them).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PipelineConfig {
    pub variant: String,
    /// A graph declaration file, instead of a built-in variant.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graph: Option<PathBuf>,
    /// A graph declared in the config itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub declare: Option<toml::Table>,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        Self {
            variant: "serial".into(),
            graph: None,
            declare: None,
        }
    }
}

/// Workers of one CPU stage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StageConfig {
    pub workers: usize,
}

impl Default for StageConfig {
    fn default() -> Self {
        Self { workers: 1 }
    }
}

/// Worker counts by node name, overriding the graph's declaration
/// (`[stages.synth] workers = 8`; per device for per-device nodes). A name
/// the graph does not have is an error naming it.
pub type StagesConfig = BTreeMap<String, StageConfig>;

/// Edge capacities: `default` for every edge, `into.<node>` for the edge into
/// one node (node names depend on the variant; `cuzk config show` lists them).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ChannelsConfig {
    pub default: usize,
    pub into: BTreeMap<String, usize>,
}

impl Default for ChannelsConfig {
    fn default() -> Self {
        Self {
            default: 2,
            into: BTreeMap::new(),
        }
    }
}

/// Arenas bound host memory: at most `count` partitions hold one at a time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ArenasConfig {
    /// How many arenas (0 = the graph's in-flight bound: every worker from
    /// the first arena-taking node on holding one, and every edge after it full).
    pub count: usize,
    /// Largest arena (0 = derived: `memory.budget` where one is set, else
    /// the host's memory, cgroup-aware, so a partition that fits the host
    /// fits an arena). A job whose partitions need more is refused at
    /// submit, naming both sizes.
    pub max_bytes: ByteSize,
}

impl Default for ArenasConfig {
    fn default() -> Self {
        Self {
            count: 0,
            max_bytes: ByteSize(0),
        }
    }
}

/// CPU pool sizes (0 = the number of cores).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ThreadsConfig {
    /// Threads running circuit synthesis.
    pub synthesis: usize,
    /// Threads running NTTs, MSMs and preparation on the CPU.
    pub groth16: usize,
    /// Nice levels the synthesis and groth16 threads run below the
    /// process, so a WinningPoSt's express threads (at the process's
    /// priority) take the cores while a PoRep's CPU work runs. Unset: 10 on
    /// the CPU backend, where both prove on the same cores; 0 on a GPU,
    /// where WinningPoSt's CPU work is small and niced threads would also
    /// yield to the host's other work (sealing tasks).
    pub bulk_nice: Option<u8>,
}

impl ThreadsConfig {
    /// The nice offset of bulk pools for a backend (see `bulk_nice`).
    pub fn bulk_nice_for(&self, gpu: bool) -> u8 {
        self.bulk_nice.unwrap_or(if gpu { 0 } else { 10 })
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// The GPU where one is found and the binary carries kernels, else the CPU.
    #[default]
    Auto,
    Cpu,
    /// Fail at start if no GPU can be used.
    Gpu,
}

/// How a partition's buffers are laid out on the device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PartitionBuffers {
    /// Full where a partition's full buffers fit beside what the device
    /// keeps (SRS, matrices, tables, chunks), else compact.
    #[default]
    Auto,
    /// a, b and c in three domain-sized buffers and the assignment in a
    /// fourth: every upload before the NTTs.
    Full,
    /// Two domain-sized buffers: a, b and c pass through them in turn (each
    /// taken to the coset and folded in as it arrives), and the assignment
    /// replaces them after the NTTs; a, b and c are evaluated on the host.
    Compact,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GpuConfig {
    pub backend: Backend,
    /// Device ordinals to use; empty means every device found.
    pub devices: Vec<usize>,
    /// Present the CPU backend (or one GPU) as this many logical devices, each
    /// with its own workers and locks (0 = one per physical device).
    pub logical_devices: usize,
    /// Device memory the engine may use per device (0 = 90% of what is free at start).
    pub vram_budget: ByteSize,
    /// Keep SRS points in device memory when they fit the budget. Off (or
    /// when they do not fit), every MSM streams its points from page-locked
    /// host memory through two chunk buffers of `stream_chunk` bytes.
    pub srs_resident: bool,
    /// Bytes of each of the two device buffers SRS points stream through
    /// when the SRS is not resident (0 = 512 MiB, or a sixteenth of the
    /// budget if less).
    pub stream_chunk: ByteSize,
    /// A partition's device buffers: `auto`, `full` or `compact` (about 60%
    /// of full's memory, for cards smaller than a partition's full buffers).
    pub partition_buffers: PartitionBuffers,
    /// Beside a resident SRS, keep tables of precomputed multiples of its
    /// points for the fixed-base MSM (off: every MSM on sppark's Pippenger).
    pub msm_tables: bool,
    /// Device memory for one SRS's tables (0 = auto: half of the budget the
    /// resident SRS leaves). Each query gets a share in proportion to its
    /// points; a query whose share holds less than one copy goes without.
    pub msm_table_budget: ByteSize,
    /// Dense MSMs of 2^`dense_msm_min_log` terms or more that no table
    /// serves (a 32 GiB PoRep's H MSM: 2^27 terms) run on cuzk's Pippenger
    /// over the points as they are; 0 = never (sppark's `msm_t`).
    pub dense_msm_min_log: u32,
    /// Their window in bits (0 = by size: 20 from 2^26 terms, as measured).
    pub dense_msm_window: u32,
    /// For graphs that evaluate a, b and c on the device (pce_gpu): keep the
    /// pre-compiled constraint matrices in device memory. Off (or when they
    /// do not fit), a, b and c are evaluated on the host and uploaded.
    pub pce_matrices: bool,
    /// Device faults in a row (no stage succeeding between) after which a
    /// device takes no partitions for `quarantine_s`, while another device
    /// is healthy. 0 = never.
    pub quarantine_after: u32,
    pub quarantine_s: u64,
}

impl Default for GpuConfig {
    fn default() -> Self {
        Self {
            backend: Backend::Auto,
            devices: vec![],
            logical_devices: 0,
            vram_budget: ByteSize(0),
            srs_resident: true,
            stream_chunk: ByteSize(0),
            partition_buffers: PartitionBuffers::Auto,
            msm_tables: true,
            msm_table_budget: ByteSize(0),
            dense_msm_min_log: 26,
            dense_msm_window: 0,
            pce_matrices: true,
            quarantine_after: 3,
            quarantine_s: 300,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryConfig {
    /// Host memory for partitions in flight. In `cuzk prove`/`bench` it caps
    /// what the arenas may map in total (0 = no limit beyond `arenas`); the
    /// daemon admits jobs while their partitions' bytes fit it (0 = auto:
    /// total RAM minus `margin`).
    pub budget: ByteSize,
    /// What the daemon's automatic budget leaves to the rest of the host
    /// (the SRS, the OS, other processes).
    pub margin: ByteSize,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            budget: ByteSize(0),
            margin: ByteSize::gib(4),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SrsConfig {
    /// Where `cuzk prove` and `cuzk bench` keep generated parameter files.
    pub cache_dir: PathBuf,
}

impl Default for SrsConfig {
    fn default() -> Self {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .unwrap_or_else(std::env::temp_dir);
        Self {
            cache_dir: base.join("cuzk").join("params"),
        }
    }
}

/// Filecoin proofs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FilConfig {
    /// Filecoin's parameter cache (the `.params`/`.vk` files by Filecoin's
    /// names); unset: `FIL_PROOFS_PARAMETER_CACHE`, else
    /// `/var/tmp/filecoin-proof-parameters`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameter_cache: Option<PathBuf>,
}

/// `cuzk daemon`: the `cuzk.v1.ProvingEngine` gRPC service Curio talks to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DaemonConfig {
    /// Where the gRPC service listens: `HOST:PORT` (TCP) or
    /// `unix:///path/to.sock` (a unix socket, mode 0660).
    pub listen: String,
    /// A bearer token every call must carry (`authorization: Bearer ...`),
    /// and every request to the status endpoint; a non-loopback address
    /// needs it or `allow_from`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Client networks a TCP listener serves (`["10.0.0.0/8"]`): peers
    /// elsewhere are refused (loopback always served). With it, a
    /// non-loopback address may go without a token, for Curio's tokenless
    /// client on another host; with a token too, both must hold.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow_from: Vec<String>,
    /// TLS for a TCP listener and the status page: the server's certificate
    /// chain (PEM). With `tls_key`; without both, they serve plain text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of `tls_cert` (PEM).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_key: Option<PathBuf>,
    /// With TLS, clients must present a certificate issued by one of these
    /// CAs (PEM): mutual TLS, which authenticates a client on another host
    /// as a token does (a non-loopback address may go without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_client_ca: Option<PathBuf>,
    /// Jobs waiting for admission beyond which SubmitProof and Prove answer
    /// RESOURCE_EXHAUSTED.
    pub max_queued: usize,
    /// Seconds SIGTERM/SIGINT waits for accepted jobs before failing those
    /// still unfinished and exiting.
    pub drain_timeout_s: u64,
    /// The status page and `/status` JSON (e.g. "127.0.0.1:9821"); off when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_listen: Option<SocketAddr>,
    /// Host memory for loaded parameters (SRS) before the least recently used
    /// idle one is evicted (0 = auto: half of `memory.budget`).
    pub srs_budget: ByteSize,
    /// Seconds a waiting job takes to gain one priority level, in admission
    /// and in every queue of the engine's graph (so low priorities are not
    /// starved); aging stops below CRITICAL, so nothing overtakes a
    /// WinningPoSt by waiting.
    pub aging_s: u64,
    /// Finished jobs remembered for AwaitProof and idempotent resubmission.
    pub keep_finished: usize,
    /// Host memory that seals (PoRep, SnapDeals) leave free for WindowPoSt
    /// and WinningPoSt, so a proof with a chain deadline is admitted beside
    /// running seals; at most a quarter of the memory budget is held back.
    /// A PoSt that fits what other PoSt in flight leave of it is admitted
    /// whatever else holds memory, a seal admitted alone beyond the budget
    /// (a 32 GiB PoRep on a 128 GiB host) included.
    pub reserve_post: ByteSize,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:9820".into(),
            token: None,
            allow_from: vec![],
            tls_cert: None,
            tls_key: None,
            tls_client_ca: None,
            max_queued: 1024,
            drain_timeout_s: 600,
            status_listen: None,
            srs_budget: ByteSize(0),
            aging_s: 60,
            keep_finished: 4096,
            reserve_post: ByteSize::gib(4),
        }
    }
}

/// Pre-compiled constraints (graphs with a `synth_pce` or `synth_witness` node).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PceConfig {
    /// Where recordings are kept; by default beside each parameter file
    /// (`<params>.<srs id>.v<version>.pce`), or in memory only for SRSs
    /// that were not read from a file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EngineConfig {
    /// Verify every proof with bellperson's verifier before returning it; a
    /// proof that fails fails its job and is never handed out.
    pub self_verify: bool,
    /// Give CRITICAL jobs (WinningPoSt) an express lane: edges take them
    /// when full, every node keeps a worker for them alone, they get the
    /// next free lock, lease and arena, and a CPU pool of their own.
    pub express_lane: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            self_verify: true,
            express_lane: true,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TimelineConfig {
    /// Emit TIMELINE events.
    pub enabled: bool,
    /// Write them to this file instead of stderr.
    pub path: Option<PathBuf>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TracingConfig {
    /// Export spans over OTLP/gRPC.
    pub otlp: bool,
    pub endpoint: String,
    pub service_name: String,
}

impl Default for TracingConfig {
    fn default() -> Self {
        Self {
            otlp: false,
            endpoint: "http://127.0.0.1:4317".into(),
            service_name: "cuzk".into(),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Serve Prometheus metrics here (e.g. "127.0.0.1:9464").
    pub listen: Option<SocketAddr>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    #[default]
    Human,
    Json,
}

/// Our info, filecoin-proofs' warnings (its info lines narrate every proof).
pub const DEFAULT_LOG_LEVEL: &str = "info,filecoin_proofs=warn,storage_proofs_core=warn,storage_proofs_porep=warn,storage_proofs_post=warn,storage_proofs_update=warn";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LoggingConfig {
    pub format: LogFormat,
    /// A tracing filter, like "info" or "cuzk=debug".
    pub level: String,
}

impl Default for LoggingConfig {
    fn default() -> Self {
        Self {
            format: LogFormat::Human,
            level: DEFAULT_LOG_LEVEL.into(),
        }
    }
}
