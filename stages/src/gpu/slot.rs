//! The GPU's device lease: a stream of its own, and device buffers sized for
//! a partition of some SRS shape that the device lends it from staging until
//! the lease goes back. The device keeps returned buffers for the next
//! partition (device memory is reserved from the device's budget when a pool
//! grows, not per partition, and freeing it, which synchronises the whole
//! device on CUDA, is rare); when memory is short and other partitions hold
//! buffers, a partition waits for them instead of failing.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use cuzk_engine::{DeviceFault, DeviceSlot, LeaseProvider};
use cuzk_gpu::cuda::{DeviceBuffer, Stream};
use cuzk_gpu::fixed::DenseChoice;
use cuzk_gpu::ops;
use cuzk_gpu::vram::{Reservation, VramError};

use super::streamed::ChunkBuffers;
use super::tables::DensePath;
use super::{GpuContext, GpuDevice, SlotSrs};
use crate::srs::SrsShape;

/// A query's index lists on the device.
pub(super) struct DeviceLists {
    pub ones: DeviceBuffer,
    pub sig_base: DeviceBuffer,
    pub sig_scalar: DeviceBuffer,
}

impl DeviceLists {
    fn alloc(device: i32, capacity: usize) -> anyhow::Result<Self> {
        let bytes = capacity.max(1) * 4;
        Ok(Self {
            ones: DeviceBuffer::alloc(device, bytes)?,
            sig_base: DeviceBuffer::alloc(device, bytes)?,
            sig_scalar: DeviceBuffer::alloc(device, bytes)?,
        })
    }
}

/// The buffers of one partition. Full: A, B, C over the domain (A then
/// holds H) and the assignment in a fourth. Compact: two over the domain,
/// the first taking A then H, the second B, then C, then the assignment.
/// Both: the L, A and B index lists at their largest.
pub(super) struct Buffers {
    shape: SrsShape,
    pub compact: bool,
    pub a: DeviceBuffer,
    pub b: DeviceBuffer,
    c: Option<DeviceBuffer>,
    z: Option<DeviceBuffer>,
    /// L, A and B.
    pub lists: [DeviceLists; 3],
    /// The density bitmaps (A aux, B inputs, B aux), for prep on the device.
    pub densities: [DeviceBuffer; 3],
    _reservation: Reservation,
}

/// Device bytes of a partition's buffers for `shape`, full or `compact`,
/// with the scratch of prep on the device beyond what a's buffer holds
/// (prep runs before a is filled and keeps its counters there).
pub fn partition_device_bytes(shape: &SrsShape, compact: bool) -> usize {
    let n = shape.inputs + shape.aux;
    let bitmaps = (2 * shape.aux.div_ceil(64) + shape.inputs.div_ceil(64) + 3) * 8;
    let prep_beyond_a = ops::prep_scratch_bytes(n).saturating_sub(shape.domain * 32);
    let vectors = match compact {
        // The assignment waits in the second domain buffer (n <= domain).
        true => 2 * shape.domain,
        false => 3 * shape.domain + n,
    };
    vectors * 32 + 3 * 4 * (shape.aux + 2 * n) + bitmaps + prep_beyond_a
}

impl Buffers {
    fn alloc(
        d: i32,
        shape: SrsShape,
        compact: bool,
        reservation: Reservation,
    ) -> anyhow::Result<Self> {
        let n = shape.inputs + shape.aux;
        let domain = || DeviceBuffer::alloc(d, shape.domain * 32);
        Ok(Self {
            shape,
            compact,
            a: domain()?,
            b: domain()?,
            c: (!compact).then(domain).transpose()?,
            z: (!compact)
                .then(|| DeviceBuffer::alloc(d, n * 32))
                .transpose()?,
            lists: [
                DeviceLists::alloc(d, shape.aux)?,
                DeviceLists::alloc(d, n)?,
                DeviceLists::alloc(d, n)?,
            ],
            densities: [
                DeviceBuffer::alloc(d, shape.aux.div_ceil(64).max(1) * 8)?,
                DeviceBuffer::alloc(d, shape.inputs.div_ceil(64).max(1) * 8)?,
                DeviceBuffer::alloc(d, shape.aux.div_ceil(64).max(1) * 8)?,
            ],
            _reservation: reservation,
        })
    }

    /// The assignment: its own buffer (full), or the second domain buffer
    /// once the quotient is done with it (compact).
    pub fn z(&self) -> &DeviceBuffer {
        self.z.as_ref().unwrap_or(&self.b)
    }

    /// C's buffer (full buffers only).
    pub fn c(&self) -> anyhow::Result<&DeviceBuffer> {
        self.c
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("compact buffers hold no C buffer"))
    }

    /// Whether a partition of `shape` fits (kernels are told their lengths,
    /// so larger buffers do), in this layout.
    fn fits(&self, shape: &SrsShape, compact: bool) -> bool {
        let have = &self.shape;
        self.compact == compact
            && have.domain >= shape.domain
            && have.aux >= shape.aux
            && have.inputs + have.aux >= shape.inputs + shape.aux
    }
}

/// Device memory is short now, but partitions in flight on the device hold
/// buffers they will give back: the stage answers [`cuzk_engine::DeviceBusy`]
/// and the partition waits for them (see `fault`).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(super) struct MemoryBusy {
    pub message: String,
    pub freed: tokio::sync::watch::Receiver<u64>,
}

/// Partition buffers of one device: kept when their lease goes back, so the
/// next partition reuses them (freeing device memory synchronises the whole
/// device on CUDA), and given up when something else needs the memory.
pub(super) struct BufferPool {
    spare: Mutex<Vec<Buffers>>,
    /// Buffers leases hold now.
    lent: AtomicUsize,
    /// Changes each time a lease gives its buffers back.
    freed: tokio::sync::watch::Sender<u64>,
}

impl BufferPool {
    pub(super) fn new() -> Self {
        Self {
            spare: Mutex::new(Vec::new()),
            lent: AtomicUsize::new(0),
            freed: tokio::sync::watch::channel(0).0,
        }
    }

    /// Frees one spare; false if none was left.
    fn give_up_one(&self) -> bool {
        self.spare.lock().unwrap().pop().is_some()
    }
}

impl GpuDevice {
    /// Reserves `bytes` for `what`, giving up spare partition buffers, then
    /// the MSM tables, while the budget is short (a resident SRS or matrices
    /// serve every partition; spare buffers only spare an allocation, tables
    /// only speed MSMs up).
    pub(super) fn reserve(&self, bytes: usize, what: &str) -> Result<Reservation, VramError> {
        loop {
            match self.vram.reserve(bytes, what) {
                Err(e) if self.buffers.give_up_one() || self.drop_tables(what) => drop(e),
                r => return r,
            }
        }
    }

    /// Like [`Self::reserve`], but while leases hold buffers a shortage is
    /// [`MemoryBusy`]: they will give them back.
    pub(super) fn reserve_or_wait(&self, bytes: usize, what: &str) -> anyhow::Result<Reservation> {
        // Subscribed first, so a release after the shortage is not missed.
        let freed = self.buffers.freed.subscribe();
        self.reserve(bytes, what)
            .map_err(|e| self.busy_or(e, freed))
    }

    /// `e` as [`MemoryBusy`] when leases hold buffers, else as it is: with
    /// none in flight, waiting would not help.
    fn busy_or(&self, e: VramError, freed: tokio::sync::watch::Receiver<u64>) -> anyhow::Error {
        match self.buffers.lent.load(Ordering::SeqCst) {
            0 => e.into(),
            lent => MemoryBusy {
                message: format!(
                    "{e}; waiting for the buffers of the {lent} partition(s) in flight on it"
                ),
                freed,
            }
            .into(),
        }
    }

    /// Buffers for a partition of `shape`: a spare that fits, else new ones.
    fn lend_buffers(&self, shape: SrsShape, compact: bool) -> anyhow::Result<Buffers> {
        let taken = {
            let mut spare = self.buffers.spare.lock().unwrap();
            spare
                .iter()
                .position(|b| b.fits(&shape, compact))
                .map(|i| spare.swap_remove(i))
        };
        let buffers = match taken {
            Some(b) => b,
            None => {
                // A spare returned since the look above is given up here.
                let reservation = self.reserve_or_wait(
                    partition_device_bytes(&shape, compact),
                    "a partition's device buffers",
                )?;
                Buffers::alloc(self.ordinal, shape, compact, reservation)?
            }
        };
        self.buffers.lent.fetch_add(1, Ordering::SeqCst);
        Ok(buffers)
    }

    fn take_back_buffers(&self, b: Buffers) {
        self.buffers.spare.lock().unwrap().push(b);
        self.buffers.lent.fetch_sub(1, Ordering::SeqCst);
        self.buffers.freed.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// One device lease on the GPU.
pub struct GpuSlot {
    pub(super) dev: Arc<GpuDevice>,
    pub(super) stream: Stream,
    /// Lent by the device from staging until the lease goes back.
    pub(super) buffers: Option<Buffers>,
    /// The SRS the partition staged here reads.
    pub(super) srs: Option<SlotSrs>,
    /// Chunk buffers for streamed SRS points, made on the first partition
    /// whose SRS is not resident and kept for the lease's later ones.
    pub(super) chunks: Option<ChunkBuffers>,
    /// Whether a partition is staged (uploaded) in the buffers.
    pub(super) staged: bool,
    /// Where the staged partition's a, b and c came from: "synthesis",
    /// "device" (the matrices on the device) or "host" (the matrices on
    /// the host, when they do not fit the device).
    pub(super) abc: &'static str,
    /// Which dense MSMs without a table run on our Pippenger.
    dense: DenseChoice,
}

impl GpuSlot {
    fn new(dev: Arc<GpuDevice>, dense: DenseChoice) -> anyhow::Result<Self> {
        Ok(Self {
            stream: Stream::new(dev.ordinal)?,
            dense,
            dev,
            buffers: None,
            srs: None,
            chunks: None,
            staged: false,
            abc: "synthesis",
        })
    }

    /// Where this lease's dense MSMs without a table may run on our
    /// Pippenger, within its device's budget.
    pub(super) fn dense(&self) -> DensePath<'_> {
        DensePath {
            choice: self.dense,
            budget: &self.dev.vram,
        }
    }

    /// Buffers for `shape`, full or `compact`: these, or ones the device
    /// lends (these given back first). [`MemoryBusy`] while partitions in
    /// flight hold the memory they need.
    pub(super) fn buffers_for(
        &mut self,
        shape: SrsShape,
        compact: bool,
    ) -> anyhow::Result<&mut Buffers> {
        if !self
            .buffers
            .as_ref()
            .is_some_and(|b| b.fits(&shape, compact))
        {
            if let Some(b) = self.buffers.take() {
                self.dev.take_back_buffers(b);
            }
            self.buffers = Some(self.dev.lend_buffers(shape, compact)?);
        }
        Ok(self.buffers.as_mut().expect("just made"))
    }

    /// Device bytes this slot holds.
    pub fn device_bytes(&self) -> usize {
        let buffers = self
            .buffers
            .as_ref()
            .map_or(0, |b| partition_device_bytes(&b.shape, b.compact));
        buffers + self.chunks.as_ref().map_or(0, ChunkBuffers::device_bytes)
    }

    /// The chunk buffers streamed SRS points pass through, made if need be
    /// (each `bytes`).
    pub(super) fn chunks(&mut self, bytes: usize) -> anyhow::Result<&ChunkBuffers> {
        if self.chunks.is_none() {
            self.chunks = Some(ChunkBuffers::new(&self.dev, bytes)?);
        }
        Ok(self.chunks.as_ref().expect("just made"))
    }
}

impl DeviceSlot for GpuSlot {
    fn reset(&mut self) {
        // The buffers go back to the device (a partition waiting for memory
        // hears of it); the stream and any chunk buffers stay.
        self.srs = None;
        self.staged = false;
        if let Some(b) = self.buffers.take() {
            self.dev.take_back_buffers(b);
        }
    }
}

/// Makes GPU slots for the graph's device leases.
pub struct GpuLeases(pub Arc<GpuContext>);

impl LeaseProvider for GpuLeases {
    fn create(&self, _: &str, device: usize) -> anyhow::Result<Box<dyn DeviceSlot>> {
        let dev = self.0.devices.get(device).cloned().ok_or_else(|| {
            anyhow::anyhow!(
                "device {device} is not one of the engine's {} devices",
                self.0.devices.len()
            )
        })?;
        let slot = GpuSlot::new(dev, self.0.dense).map_err(|e| DeviceFault {
            device,
            message: format!("creating a stream for a device lease: {e:#}"),
        })?;
        Ok(Box::new(slot))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 32 GiB PoRep partition (2^27 domain, ~130 M variables): ~21.7 GB of
    /// full buffers, which no 24 GB card's budget holds beside the chunks;
    /// compact ~13.3 GB, which with two 128 MiB chunks fits the ~14 GB a
    /// 16 GB card leaves (90% of what is free).
    #[test]
    fn compact_buffers_bring_a_32gib_partition_under_a_16gb_card() {
        let shape = SrsShape {
            domain: 1 << 27,
            log_domain: 27,
            inputs: 329,
            aux: 130_278_000,
            a_len: 0,
            b_len: 0,
        };
        let (full, compact) = (
            partition_device_bytes(&shape, false),
            partition_device_bytes(&shape, true),
        );
        assert!((21_500_000_000..22_000_000_000).contains(&full), "{full}");
        assert!(compact < 13_400_000_000, "{compact}");
        assert!(compact + 2 * (128 << 20) < 14_000_000_000);
        assert!(full + 2 * (512 << 20) > 21_600_000_000);
    }
}
