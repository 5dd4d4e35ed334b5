//! The device stages on the GPU.
//!
//! A partition's device state lives in its **device lease** (a [`GpuSlot`]:
//! a stream of its own and reusable device buffers), taken and released by
//! the nodes the graph declares; the stages here only use it:
//!
//! - `gpu_stage_in` uploads the partition from its page-locked arena into
//!   the lease (two_lock holds its memory lock around this);
//! - `gpu_compute` runs the quotient by NTTs and the H, L, A and B₁ MSMs on
//!   the lease's buffers;
//! - `gpu_ntt_msm` does both;
//! - `b_g2_msm` runs the B query in G2 from the same lease.
//!
//! SRS points stay resident on each device when they fit its memory budget;
//! otherwise every MSM streams them from page-locked host memory through
//! the lease's two chunk buffers (`streamed`).

mod abc;
mod slot;
mod stages;
mod streamed;
mod tables;

use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use blstrs::{G1Affine, G2Affine};
use cuzk_gpu::cuda::{DeviceBuffer, Stream};
use cuzk_gpu::fixed::DenseChoice;
use cuzk_gpu::vram::{Reservation, VramBudget};

use crate::srs::{Srs, SrsShape};

pub use abc::{
    DeviceEval, DevicePce, Unsatisfied, evaluate_on_device, evaluate_on_host, pce_device_bytes,
};
pub use slot::{GpuLeases, GpuSlot, partition_device_bytes};
pub use stages::{GpuBG2Msm, GpuCompute, GpuNttMsm, GpuStageIn};
pub use streamed::{ChunkBuffers, DEFAULT_CHUNK_BYTES, chunk_bytes};
pub use tables::{
    MAX_TABLE_POINTS, QUERY_BYTES, SrsTables, TablePolicy, plan_tables, planned_bytes, points_bytes,
};

const G1_BYTES: usize = std::mem::size_of::<G1Affine>();
const G2_BYTES: usize = std::mem::size_of::<G2Affine>();

/// Values kept for each SRS (or recording) while it is alive, keyed by the
/// thing itself.
struct PerKey<K, V>(Vec<(Weak<K>, V)>);

type PerSrs<V> = PerKey<Srs, V>;

impl<K, V> PerKey<K, V> {
    const fn new() -> Self {
        Self(Vec::new())
    }

    /// The value kept for `srs`, after forgetting those of dropped keys.
    fn get(&mut self, srs: &Arc<K>) -> Option<&V> {
        self.0.retain(|(w, _)| w.strong_count() > 0);
        self.0
            .iter()
            .find(|(w, _)| std::ptr::eq(w.as_ptr(), Arc::as_ptr(srs)))
            .map(|(_, v)| v)
    }

    fn insert(&mut self, srs: &Arc<K>, value: V) {
        self.0.push((Arc::downgrade(srs), value));
    }

    fn remove(&mut self, srs: &Arc<K>) -> Option<V> {
        let i = self
            .0
            .iter()
            .position(|(w, _)| std::ptr::eq(w.as_ptr(), Arc::as_ptr(srs)))?;
        Some(self.0.swap_remove(i).1)
    }
}

/// One (logical) device the engine drives.
pub struct GpuDevice {
    /// The CUDA ordinal; several logical devices may share one.
    pub ordinal: i32,
    pub vram: Arc<VramBudget>,
    resident: Mutex<PerSrs<Arc<DeviceSrs>>>,
    /// Pre-compiled constraints resident here, by recording.
    pce: Mutex<PerKey<crate::pce::Recording, Arc<DevicePce>>>,
    /// Partition buffers, lent to device leases.
    buffers: slot::BufferPool,
}

impl GpuDevice {
    pub fn new(ordinal: i32, vram_budget: usize) -> Arc<Self> {
        Arc::new(Self {
            ordinal,
            vram: VramBudget::new(ordinal as usize, vram_budget),
            resident: Mutex::new(PerSrs::new()),
            pce: Mutex::new(PerKey::new()),
            buffers: slot::BufferPool::new(),
        })
    }

    /// Device bytes of the SRSs resident here.
    pub fn resident_bytes(&self) -> usize {
        let mut r = self.resident.lock().unwrap();
        r.0.retain(|(w, _)| w.strong_count() > 0);
        r.0.iter().map(|(_, d)| d.bytes + d.tables().bytes()).sum()
    }

    /// Device bytes of `srs`'s resident copy here (0 if it is not resident),
    /// its MSM tables included.
    pub fn resident_bytes_of(&self, srs: &Arc<Srs>) -> usize {
        self.resident
            .lock()
            .unwrap()
            .get(srs)
            .map_or(0, |d| d.bytes + d.tables().bytes())
    }

    /// Device bytes of the MSM tables beside `srs`'s resident copy here.
    pub fn table_bytes_of(&self, srs: &Arc<Srs>) -> usize {
        self.resident
            .lock()
            .unwrap()
            .get(srs)
            .map_or(0, |d| d.tables().bytes())
    }

    /// Device bytes of the pre-compiled matrices resident here.
    pub fn pce_bytes(&self) -> usize {
        let mut r = self.pce.lock().unwrap();
        r.0.retain(|(w, _)| w.strong_count() > 0);
        r.0.iter().map(|(_, d)| d.bytes).sum()
    }

    /// Gives up the MSM tables beside every resident SRS here (each freed
    /// once no partition in flight uses it): tables only speed MSMs up, and
    /// the memory is worth more to what needs it (pre-compiled matrices, an
    /// SRS, partition buffers). False if there were none, or if the resident
    /// set is busy (an SRS going resident holds it; it gives tables up itself).
    pub(super) fn drop_tables(&self, what: &str) -> bool {
        match self.resident.try_lock() {
            Ok(r) => give_up_tables(&r, self.ordinal, what),
            Err(_) => false,
        }
    }

    /// Forgets the resident copy of `srs` (freed once no partition uses it);
    /// the bytes it held, if it was resident.
    pub fn evict(&self, srs: &Arc<Srs>) -> Option<usize> {
        self.resident.lock().unwrap().remove(srs).map(|d| d.bytes)
    }
}

/// [`GpuDevice::drop_tables`] over the resident set the caller holds.
fn give_up_tables(resident: &PerSrs<Arc<DeviceSrs>>, device: i32, what: &str) -> bool {
    let mut bytes = 0;
    for (_, d) in &resident.0 {
        let mut t = d.tables.lock().unwrap();
        bytes += t.bytes();
        *t = Arc::new(SrsTables::default());
    }
    if bytes > 0 {
        tracing::info!(
            device,
            bytes,
            "MSM tables given up for {what} (freed as partitions in flight finish)"
        );
    }
    bytes > 0
}

/// What the GPU stages share: the devices and where SRS points live.
pub struct GpuContext {
    /// By logical device; logical devices on one GPU share its entry (and so
    /// its memory budget and resident SRS).
    pub devices: Vec<Arc<GpuDevice>>,
    pub srs_resident: bool,
    /// MSM tables beside resident SRSs.
    pub tables: TablePolicy,
    /// Pre-compiled constraint matrices on the device (else a, b and c of a
    /// pce_gpu partition are evaluated on the host).
    pub pce_matrices: bool,
    /// Bytes of each chunk buffer streamed SRS points pass through (0: see
    /// [`chunk_bytes`]).
    pub stream_chunk: usize,
    /// How partitions' device buffers are laid out.
    pub partition_buffers: BufferLayout,
    /// Which dense MSMs without a table run on our Pippenger
    /// (`gpu.dense_msm_min_log`, `gpu.dense_msm_window`).
    pub dense: DenseChoice,
}

/// How a partition's device buffers are laid out (`gpu.partition_buffers`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BufferLayout {
    /// Full where its buffers fit beside what the device keeps, else compact.
    #[default]
    Auto,
    /// a, b, c and the assignment each in a buffer of its own.
    Full,
    /// Two domain-sized buffers that a, b, c and then the assignment pass
    /// through (a, b and c evaluated on the host).
    Compact,
}

/// The SRS a staged partition's MSMs read: resident on the device, or left
/// in page-locked host memory and streamed through the lease's chunks.
pub(super) enum SlotSrs {
    Resident(Arc<DeviceSrs>),
    Host(Arc<Srs>),
}

/// SRS points on one device.
pub struct DeviceSrs {
    h: DeviceBuffer,
    l: DeviceBuffer,
    a: DeviceBuffer,
    b_g1: DeviceBuffer,
    b_g2: DeviceBuffer,
    bytes: usize,
    /// Fixed-base MSM tables (resident copies only); given up when the
    /// device needs the memory.
    tables: Mutex<Arc<SrsTables>>,
    _reservation: Reservation,
}

/// Device bytes an SRS's points take.
pub fn srs_device_bytes(srs: &Srs) -> usize {
    tables::points_bytes(srs.query_lens())
}

impl SlotSrs {
    /// The MSM tables as they are now (none for a streamed SRS), for the
    /// MSMs about to run: a device that gives them up meanwhile frees them
    /// once these are done.
    pub(super) fn tables(&self) -> Arc<SrsTables> {
        match self {
            SlotSrs::Resident(d) => d.tables(),
            SlotSrs::Host(_) => Arc::new(SrsTables::default()),
        }
    }
}

impl DeviceSrs {
    /// The tables as they are now.
    fn tables(&self) -> Arc<SrsTables> {
        self.tables.lock().unwrap().clone()
    }

    fn upload(stream: &Stream, srs: &Srs, reservation: Reservation) -> anyhow::Result<Self> {
        let s = Self {
            h: DeviceBuffer::upload(stream, &srs.h)?,
            l: DeviceBuffer::upload(stream, &srs.l)?,
            a: DeviceBuffer::upload(stream, &srs.a)?,
            b_g1: DeviceBuffer::upload(stream, &srs.b_g1)?,
            b_g2: DeviceBuffer::upload(stream, &srs.b_g2)?,
            bytes: srs_device_bytes(srs),
            tables: Mutex::new(Arc::new(SrsTables::default())),
            _reservation: reservation,
        };
        // Other leases' streams read a resident copy: it must be complete
        // before any of them is told it exists.
        stream.sync()?;
        Ok(s)
    }
}

impl GpuContext {
    pub fn new(devices: Vec<Arc<GpuDevice>>, srs_resident: bool, tables: TablePolicy) -> Self {
        Self {
            devices,
            srs_resident,
            tables,
            pce_matrices: true,
            stream_chunk: 0,
            partition_buffers: BufferLayout::Auto,
            dense: DenseChoice::default(),
        }
    }

    /// Whether a partition of `shape` on `dev` gets compact buffers: as
    /// configured, or (auto) when its full buffers do not fit beside what
    /// the device keeps (resident SRSs and their tables, resident matrices)
    /// and the lease's chunk buffers (`chunks` bytes).
    fn compact_for(&self, dev: &GpuDevice, shape: &SrsShape, chunks: usize) -> bool {
        match self.partition_buffers {
            BufferLayout::Full => false,
            BufferLayout::Compact => true,
            BufferLayout::Auto => {
                let kept = dev.resident_bytes() + dev.pce_bytes() + chunks;
                kept + partition_device_bytes(shape, false) > dev.vram.limit()
            }
        }
    }

    /// The SRS on `dev`: the resident copy (uploaded on first use) if it fits
    /// the budget, else the host's points, page-locked, for the MSMs to
    /// stream.
    fn srs_on(&self, dev: &GpuDevice, srs: &Arc<Srs>, stream: &Stream) -> anyhow::Result<SlotSrs> {
        let bytes = srs_device_bytes(srs);
        if self.srs_resident {
            let mut cache = dev.resident.lock().unwrap();
            if let Some(d) = cache.get(srs) {
                return Ok(SlotSrs::Resident(d.clone()));
            }
            let what = "the resident SRS";
            let reserved = dev.reserve(bytes, what).or_else(|e| {
                match give_up_tables(&cache, dev.ordinal, what) {
                    true => dev.reserve(bytes, what),
                    false => Err(e),
                }
            });
            match reserved {
                Ok(reservation) => {
                    let started = Instant::now();
                    let mut d = DeviceSrs::upload(stream, srs, reservation)?;
                    tracing::info!(
                        device = dev.ordinal,
                        bytes,
                        seconds = started.elapsed().as_secs_f64(),
                        "SRS resident on the device"
                    );
                    let tables = SrsTables::build(&dev.vram, stream, &d, srs, self.tables);
                    *d.tables.get_mut().unwrap() = Arc::new(tables);
                    let d = Arc::new(d);
                    cache.insert(srs, d.clone());
                    return Ok(SlotSrs::Resident(d));
                }
                Err(e) => tracing::warn!(
                    "{e}; the MSMs stream SRS points from host memory through chunk buffers instead"
                ),
            }
        }
        if let Err(e) = srs.pin_host() {
            // Still correct from pageable memory, only slower.
            tracing::warn!("page-locking SRS points for streaming failed: {e}");
        }
        Ok(SlotSrs::Host(srs.clone()))
    }
}
