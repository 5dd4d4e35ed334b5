//! The GPU's device lease: a stream of its own and device buffers sized for
//! a partition of some SRS shape, kept across partitions (device memory is
//! reserved from the device's budget when a slot grows, not per partition,
//! and freeing it, which synchronises the whole device on CUDA, is rare).

use std::sync::Arc;

use cuzk_engine::{DeviceFault, DeviceSlot, LeaseProvider};
use cuzk_gpu::cuda::{DeviceBuffer, Stream};
use cuzk_gpu::vram::Reservation;

use super::{DeviceSrs, GpuContext, GpuDevice};
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

/// The buffers of one partition: A, B, C over the domain (A then holds H),
/// the assignment, and the L, A and B index lists at their largest.
pub(super) struct Buffers {
    shape: SrsShape,
    pub a: DeviceBuffer,
    pub b: DeviceBuffer,
    pub c: DeviceBuffer,
    pub z: DeviceBuffer,
    /// L, A and B.
    pub lists: [DeviceLists; 3],
    /// The density bitmaps (A aux, B inputs, B aux), for prep on the device.
    pub densities: [DeviceBuffer; 3],
    _reservation: Reservation,
}

/// Device bytes of a partition's buffers for `shape`, with the scratch of
/// prep on the device (two 12-byte counters per variable).
pub fn partition_device_bytes(shape: &SrsShape) -> usize {
    let n = shape.inputs + shape.aux;
    let bitmaps = (2 * shape.aux.div_ceil(64) + shape.inputs.div_ceil(64) + 3) * 8;
    (3 * shape.domain + n) * 32 + 3 * 4 * (shape.aux + 2 * n) + bitmaps + 24 * n
}

impl Buffers {
    fn alloc(dev: &GpuDevice, shape: SrsShape) -> anyhow::Result<Self> {
        let reservation = dev.vram.reserve(
            partition_device_bytes(&shape),
            "a partition's device buffers",
        )?;
        let d = dev.ordinal;
        let n = shape.inputs + shape.aux;
        Ok(Self {
            shape,
            a: DeviceBuffer::alloc(d, shape.domain * 32)?,
            b: DeviceBuffer::alloc(d, shape.domain * 32)?,
            c: DeviceBuffer::alloc(d, shape.domain * 32)?,
            z: DeviceBuffer::alloc(d, n * 32)?,
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

    /// Whether a partition of `shape` fits (kernels are told their lengths,
    /// so larger buffers do).
    fn fits(&self, shape: &SrsShape) -> bool {
        let have = &self.shape;
        have.domain >= shape.domain
            && have.aux >= shape.aux
            && have.inputs + have.aux >= shape.inputs + shape.aux
    }
}

/// One device lease on the GPU.
pub struct GpuSlot {
    pub(super) dev: Arc<GpuDevice>,
    pub(super) stream: Stream,
    pub(super) buffers: Option<Buffers>,
    /// The SRS on the device for the partition staged here.
    pub(super) srs: Option<Arc<DeviceSrs>>,
    /// Whether a partition is staged (uploaded) in the buffers.
    pub(super) staged: bool,
}

impl GpuSlot {
    fn new(dev: Arc<GpuDevice>) -> anyhow::Result<Self> {
        Ok(Self {
            stream: Stream::new(dev.ordinal)?,
            dev,
            buffers: None,
            srs: None,
            staged: false,
        })
    }

    /// Buffers for `shape`: these, or new ones (the old ones freed first, so
    /// their budget is back before the new reservation).
    pub(super) fn buffers_for(&mut self, shape: SrsShape) -> anyhow::Result<&mut Buffers> {
        if !self.buffers.as_ref().is_some_and(|b| b.fits(&shape)) {
            self.buffers = None;
            self.buffers = Some(Buffers::alloc(&self.dev, shape)?);
        }
        Ok(self.buffers.as_mut().expect("just made"))
    }

    /// Device bytes this slot holds.
    pub fn device_bytes(&self) -> usize {
        self.buffers
            .as_ref()
            .map_or(0, |b| partition_device_bytes(&b.shape))
    }
}

impl DeviceSlot for GpuSlot {
    fn reset(&mut self) {
        // A streamed SRS copy is freed here; the buffers and stream stay.
        self.srs = None;
        self.staged = false;
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
        let slot = GpuSlot::new(dev).map_err(|e| DeviceFault {
            device,
            message: format!("creating a stream for a device lease: {e:#}"),
        })?;
        Ok(Box::new(slot))
    }
}
