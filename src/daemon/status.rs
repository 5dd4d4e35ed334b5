//! The daemon at one instant: one snapshot serves GetStatus, `/status` and
//! the status page.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use cuzk_filecoin::ProofKind;

use super::core::{Core, rss};
use super::monitor::{BUCKET, RecentJob};
use super::proto;

/// A device and what it runs.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DeviceStatus {
    pub ordinal: usize,
    pub name: String,
    pub vram_total_bytes: u64,
    pub vram_free_bytes: u64,
    pub current_job: String,
    pub current_kind: String,
    /// Taking no partitions now: its stages kept failing on device faults.
    pub quarantined: bool,
}

/// Jobs of one kind and priority.
#[derive(Clone, Debug, serde::Serialize)]
pub struct QueueRow {
    pub kind: String,
    pub priority: u8,
    pub pending: u32,
    pub running: u32,
}

/// One node of the graph now.
#[derive(Clone, Debug, serde::Serialize)]
pub struct StageRow {
    pub node: String,
    pub role: String,
    pub workers: usize,
    /// Partitions waiting in its input edge.
    pub queued: usize,
    /// Partitions it works on now.
    pub busy: usize,
    pub done: u64,
}

/// A parameter file the daemon has seen.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SrsRow {
    pub circuit_id: String,
    pub path: String,
    /// hot (ready: on the GPU, or in memory on the CPU backend), warm (in
    /// host memory, not on the GPU) or cold (on disk only).
    pub tier: &'static str,
    pub host_bytes: u64,
    /// On the devices, its MSM tables included.
    pub device_bytes: u64,
    /// The fixed-base MSM tables beside it on the devices.
    pub table_bytes: u64,
    /// Jobs running with it now.
    pub users: u32,
}

/// Host memory.
#[derive(Clone, Debug, serde::Serialize)]
pub struct MemoryRow {
    /// The one account: parameters, queued inputs and partitions together.
    pub budget_bytes: u64,
    /// Host copies of loaded parameters (evicted ones still in use included).
    pub srs_bytes: u64,
    /// Pre-compiled constraint recordings held.
    pub recording_bytes: u64,
    /// Inputs of jobs waiting for admission.
    pub queued_input_bytes: u64,
    /// Partitions of admitted jobs.
    pub in_flight_bytes: u64,
    pub arenas_mapped_bytes: u64,
    pub rss_bytes: u64,
    pub peak_rss_bytes: u64,
}

/// Everything the page shows.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Snapshot {
    pub uptime_s: u64,
    pub graph: String,
    pub backend: String,
    pub draining: bool,
    /// Why the devices look wedged ([`super::health`]); absent when healthy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unhealthy: Option<String>,
    pub listen: String,
    pub queues: Vec<QueueRow>,
    pub stages: Vec<StageRow>,
    pub devices: Vec<DeviceStatus>,
    /// Per bucket (oldest first): seconds ago, busy fraction per device.
    pub utilisation: Vec<(u64, Vec<f64>)>,
    pub utilisation_bucket_s: u64,
    pub srs: Vec<SrsRow>,
    pub memory: MemoryRow,
    pub completed: u64,
    pub failed: u64,
    pub cancelled: u64,
    pub recent: Vec<RecentJob>,
}

impl Core {
    /// The daemon now.
    pub fn snapshot(&self) -> Snapshot {
        let engine = &self.engine;
        let status = engine.status();
        let jobs = self.jobs.all();
        let mut queues: BTreeMap<(ProofKind, u8), (u32, u32)> = BTreeMap::new();
        for j in &jobs {
            let (pending, running) = (j.is_pending(), j.is_running());
            if pending || running {
                let q = queues.entry((j.kind, j.priority)).or_default();
                q.0 += pending as u32;
                q.1 += running as u32;
            }
        }
        let on_device = self.monitor.on_device();
        let kind_of = |id: &str| {
            jobs.iter()
                .find(|j| j.id == id)
                .map_or(String::new(), |j| j.kind.to_string())
        };
        let devices = engine.backend().devices;
        let device_rows = (0..devices)
            .map(|d| {
                let gpu = engine.backend().gpus.get(d);
                let (free, total) = gpu
                    .and_then(|g| cuzk_gpu::cuda::mem_info(g.ordinal as i32).ok())
                    .unwrap_or((0, 0));
                let current_job = on_device.get(&d).cloned().unwrap_or_default();
                DeviceStatus {
                    ordinal: d,
                    name: gpu
                        .map_or_else(|| format!("cpu (logical device {d})"), |g| g.name.clone()),
                    vram_total_bytes: total as u64,
                    vram_free_bytes: free as u64,
                    current_kind: kind_of(&current_job),
                    current_job,
                    quarantined: status.quarantined_devices.contains(&d),
                }
            })
            .collect();
        let (rss_bytes, peak_rss_bytes) = rss();
        let arenas = engine.arena_stats();
        Snapshot {
            uptime_s: self.started.elapsed().as_secs(),
            graph: status.graph.clone(),
            backend: engine.backend().name().into(),
            draining: self.is_draining(),
            unhealthy: self.health.unhealthy(),
            listen: self.config.daemon.listen.clone(),
            queues: queues
                .into_iter()
                .map(|((kind, priority), (pending, running))| QueueRow {
                    kind: kind.to_string(),
                    priority,
                    pending,
                    running,
                })
                .collect(),
            stages: status
                .nodes
                .iter()
                .map(|n| StageRow {
                    node: n.name.clone(),
                    role: n.role.to_string(),
                    workers: n.workers,
                    queued: n.queued,
                    busy: n.busy,
                    done: n.done,
                })
                .collect(),
            devices: device_rows,
            utilisation: self.monitor.utilisation(devices),
            utilisation_bucket_s: BUCKET.as_secs(),
            srs: self.srs_rows(),
            memory: MemoryRow {
                budget_bytes: self.budget,
                srs_bytes: self.srs.resident_bytes() as u64,
                recording_bytes: self.engine.recording_bytes() as u64,
                queued_input_bytes: self.queue.lock().unwrap().input_bytes(),
                in_flight_bytes: self.in_flight.load(Ordering::SeqCst),
                arenas_mapped_bytes: arenas.mapped_bytes as u64,
                rss_bytes,
                peak_rss_bytes,
            },
            completed: self.completed.load(Ordering::SeqCst),
            failed: self.failed.load(Ordering::SeqCst),
            cancelled: self.cancelled.load(Ordering::SeqCst),
            recent: self.monitor.recent(),
        }
    }

    fn srs_rows(&self) -> Vec<SrsRow> {
        let loaded = self.srs.entries();
        let running: Vec<_> = self
            .jobs
            .all()
            .into_iter()
            .filter(|j| j.is_running())
            .collect();
        let users =
            |path: &std::path::Path| running.iter().filter(|j| j.params == path).count() as u32;
        let gpu = self.engine.backend().choice == crate::backend::BackendChoice::Gpu;
        let mut rows: Vec<SrsRow> = loaded
            .iter()
            .map(|e| {
                let srs = self.srs.try_get(&e.path);
                let device_bytes =
                    srs.as_ref().map_or(0, |s| self.engine.srs_device_bytes(s)) as u64;
                let table_bytes = srs.as_ref().map_or(0, |s| self.engine.srs_table_bytes(s)) as u64;
                SrsRow {
                    circuit_id: self.circuit_name(&e.path),
                    path: e.path.display().to_string(),
                    tier: if !gpu || device_bytes > 0 {
                        "hot"
                    } else {
                        "warm"
                    },
                    host_bytes: e.bytes as u64,
                    device_bytes,
                    table_bytes,
                    users: users(&e.path),
                }
            })
            .collect();
        for (path, id) in self.circuit_ids.lock().unwrap().iter() {
            if !loaded.iter().any(|e| &e.path == path) && path.is_file() {
                rows.push(SrsRow {
                    circuit_id: id.clone(),
                    path: path.display().to_string(),
                    tier: "cold",
                    host_bytes: 0,
                    device_bytes: 0,
                    table_bytes: 0,
                    users: 0,
                });
            }
        }
        rows
    }
}

impl Snapshot {
    /// GetStatus's message.
    pub fn to_proto(&self) -> proto::GetStatusResponse {
        let mut per_kind: BTreeMap<&str, (u32, u32)> = BTreeMap::new();
        for q in &self.queues {
            let e = per_kind.entry(&q.kind).or_default();
            e.0 += q.pending;
            e.1 += q.running;
        }
        proto::GetStatusResponse {
            gpus: self
                .devices
                .iter()
                .map(|d| proto::GpuStatus {
                    ordinal: d.ordinal as u32,
                    name: d.name.clone(),
                    vram_total_bytes: d.vram_total_bytes,
                    vram_free_bytes: d.vram_free_bytes,
                    current_job_id: d.current_job.clone(),
                    current_proof_kind: d.current_kind.clone(),
                })
                .collect(),
            loaded_srs: self
                .srs
                .iter()
                .map(|s| proto::SrsStatus {
                    circuit_id: s.circuit_id.clone(),
                    tier: match s.tier {
                        "hot" => proto::srs_status::Tier::Hot,
                        "warm" => proto::srs_status::Tier::Warm,
                        _ => proto::srs_status::Tier::Cold,
                    } as i32,
                    size_bytes: s.host_bytes.max(s.device_bytes),
                    ref_count: s.users,
                })
                .collect(),
            queues: per_kind
                .into_iter()
                .map(|(kind, (pending, in_progress))| proto::QueueStatus {
                    proof_kind: kind.to_string(),
                    pending,
                    in_progress,
                })
                .collect(),
            total_proofs_completed: self.completed,
            total_proofs_failed: self.failed,
            uptime_seconds: self.uptime_s,
            pinned_memory_bytes: if self.backend == "gpu" {
                self.memory.arenas_mapped_bytes
            } else {
                0
            },
            pinned_memory_limit_bytes: self.memory.budget_bytes,
        }
    }
}
