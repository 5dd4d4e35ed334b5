//! The device stages on the GPU: staging (reserve device memory, upload the
//! partition from its page-locked arena) and compute (the quotient by NTTs,
//! then the H, L, A and B₁ MSMs, H read straight from device memory), and
//! B₂ in G2. Staging and compute are separate steps so the `two_lock`
//! variant can hold a different lock around each.
//!
//! SRS points stay resident on each device when they fit its memory budget;
//! otherwise they are streamed in for every partition.

use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use anyhow::Context;
use blstrs::{G1Affine, G2Affine, Scalar};
use cuzk_engine::{DeviceFault, Stage, StageContext};
use cuzk_gpu::cpu::ntt::Domain;
use cuzk_gpu::cuda::{DeviceBuffer, PinnedGuard, Stream};
use cuzk_gpu::ops::{self, G1, G2, GpuCurve};
use cuzk_gpu::vram::{Reservation, VramBudget};

use crate::partition::{G1Results, PartitionLayout, PartitionWork, QueryPlan, QueryRegions};
use crate::srs::Srs;

const G1_BYTES: usize = std::mem::size_of::<G1Affine>();
const G2_BYTES: usize = std::mem::size_of::<G2Affine>();

/// Values kept for each SRS while it is alive, keyed by the SRS itself.
struct PerSrs<V>(Vec<(Weak<Srs>, V)>);

impl<V> PerSrs<V> {
    const fn new() -> Self {
        Self(Vec::new())
    }

    /// The value kept for `srs`, after forgetting those of dropped SRSs.
    fn get(&mut self, srs: &Arc<Srs>) -> Option<&V> {
        self.0.retain(|(w, _)| w.strong_count() > 0);
        self.0
            .iter()
            .find(|(w, _)| std::ptr::eq(w.as_ptr(), Arc::as_ptr(srs)))
            .map(|(_, v)| v)
    }

    fn insert(&mut self, srs: &Arc<Srs>, value: V) {
        self.0.push((Arc::downgrade(srs), value));
    }
}

/// One (logical) device the engine drives.
pub struct GpuDevice {
    /// The CUDA ordinal; several logical devices may share one.
    pub ordinal: i32,
    pub vram: Arc<VramBudget>,
    resident: Mutex<PerSrs<Arc<DeviceSrs>>>,
}

impl GpuDevice {
    pub fn new(ordinal: i32, vram_budget: usize) -> Arc<Self> {
        Arc::new(Self {
            ordinal,
            vram: VramBudget::new(ordinal as usize, vram_budget),
            resident: Mutex::new(PerSrs::new()),
        })
    }
}

/// What the GPU stages share: the devices and where SRS points live.
pub struct GpuContext {
    /// By logical device; logical devices on one GPU share its entry (and so
    /// its memory budget and resident SRS).
    pub devices: Vec<Arc<GpuDevice>>,
    pub srs_resident: bool,
    /// Whether b_g2_msm runs on the GPU (it then keeps the partition's device
    /// buffers until it is done).
    pub b_g2_on_gpu: bool,
    /// SRSs streamed for every partition are page-locked once, here.
    pinned: Mutex<PerSrs<Vec<PinnedGuard>>>,
}

impl GpuContext {
    pub fn new(devices: Vec<Arc<GpuDevice>>, srs_resident: bool, b_g2_on_gpu: bool) -> Self {
        Self {
            devices,
            srs_resident,
            b_g2_on_gpu,
            pinned: Mutex::new(PerSrs::new()),
        }
    }

    /// Page-locks the SRS's points (once per SRS) so streaming them is DMA.
    fn pin(&self, srs: &Arc<Srs>) -> anyhow::Result<()> {
        let mut pinned = self.pinned.lock().unwrap();
        if pinned.get(srs).is_some() {
            return Ok(());
        }
        let guards = vec![
            PinnedGuard::pin(&srs.h)?,
            PinnedGuard::pin(&srs.l)?,
            PinnedGuard::pin(&srs.a)?,
            PinnedGuard::pin(&srs.b_g1)?,
            PinnedGuard::pin(&srs.b_g2)?,
        ];
        pinned.insert(srs, guards);
        Ok(())
    }
}

/// SRS points on one device.
pub struct DeviceSrs {
    h: DeviceBuffer,
    l: DeviceBuffer,
    a: DeviceBuffer,
    b_g1: DeviceBuffer,
    b_g2: DeviceBuffer,
    _reservation: Reservation,
}

fn srs_device_bytes(srs: &Srs) -> usize {
    (srs.h.len() + srs.l.len() + srs.a.len() + srs.b_g1.len()) * G1_BYTES
        + srs.b_g2.len() * G2_BYTES
}

impl DeviceSrs {
    fn upload(stream: &Stream, srs: &Srs, reservation: Reservation) -> anyhow::Result<Self> {
        let s = Self {
            h: DeviceBuffer::upload(stream, &srs.h)?,
            l: DeviceBuffer::upload(stream, &srs.l)?,
            a: DeviceBuffer::upload(stream, &srs.a)?,
            b_g1: DeviceBuffer::upload(stream, &srs.b_g1)?,
            b_g2: DeviceBuffer::upload(stream, &srs.b_g2)?,
            _reservation: reservation,
        };
        stream.sync()?;
        Ok(s)
    }
}

/// A query's index lists on the device.
struct DeviceLists {
    ones: DeviceBuffer,
    sig_base: DeviceBuffer,
    sig_scalar: DeviceBuffer,
}

/// One partition's device buffers, from staging until its last GPU MSM.
pub struct Staged {
    device: usize,
    stream: Stream,
    a: DeviceBuffer,
    b: DeviceBuffer,
    c: DeviceBuffer,
    z: DeviceBuffer,
    lists: [DeviceLists; 3],
    srs: Arc<DeviceSrs>,
    _reservation: Reservation,
}

impl GpuContext {
    fn device(&self, cx: &StageContext<'_>) -> anyhow::Result<(usize, &GpuDevice)> {
        let d = cx.device.unwrap_or(0);
        let dev = self.devices.get(d).with_context(|| {
            format!(
                "device {d} is not one of the engine's {} devices",
                self.devices.len()
            )
        })?;
        Ok((d, dev))
    }

    /// The SRS on `dev`: the resident copy (uploaded on first use) if it fits
    /// the budget, else a copy streamed in for this partition.
    fn srs_on(
        &self,
        dev: &GpuDevice,
        srs: &Arc<Srs>,
        stream: &Stream,
    ) -> anyhow::Result<Arc<DeviceSrs>> {
        let bytes = srs_device_bytes(srs);
        if self.srs_resident {
            let mut cache = dev.resident.lock().unwrap();
            if let Some(d) = cache.get(srs) {
                return Ok(d.clone());
            }
            match dev.vram.reserve(bytes, "the resident SRS") {
                Ok(reservation) => {
                    let started = Instant::now();
                    let d = Arc::new(DeviceSrs::upload(stream, srs, reservation)?);
                    tracing::info!(
                        device = dev.ordinal,
                        bytes,
                        seconds = started.elapsed().as_secs_f64(),
                        "SRS resident on the device"
                    );
                    cache.insert(srs, d.clone());
                    return Ok(d);
                }
                Err(e) => tracing::warn!("{e}; streaming SRS points for each partition instead"),
            }
        }
        let reservation = dev.vram.reserve(bytes, "streamed SRS points")?;
        if let Err(e) = self.pin(srs) {
            // Still correct from pageable memory, only slower.
            tracing::warn!("page-locking SRS points for streaming failed: {e}");
        }
        Ok(Arc::new(DeviceSrs::upload(stream, srs, reservation)?))
    }

    /// Reserves device memory and uploads the partition (asynchronously,
    /// from its page-locked arena) on a stream of its own.
    fn stage_in(&self, w: &PartitionWork, cx: &mut StageContext<'_>) -> anyhow::Result<Staged> {
        let layout = w.layout()?;
        let plan = w.plan()?;
        let (d, dev) = self.device(cx)?;
        let stream = Stream::new(dev.ordinal)?;
        let srs = self.srs_on(dev, &w.srs, &stream)?;
        let shape = layout.shape;
        let list_terms = |q: &QueryPlan| q.ones + 2 * q.significant;
        let bytes = (3 * shape.domain + shape.inputs + shape.aux) * 32
            + 4 * (list_terms(&plan.l) + list_terms(&plan.a) + list_terms(&plan.b));
        let reservation = dev.vram.reserve(bytes, "partition buffers")?;
        let view = cx.arena()?.view();
        let upload_lists = |regions: QueryRegions, q: &QueryPlan| -> anyhow::Result<DeviceLists> {
            Ok(DeviceLists {
                ones: DeviceBuffer::upload(&stream, &view.take(regions.ones)[..q.ones])?,
                sig_base: DeviceBuffer::upload(
                    &stream,
                    &view.take(regions.sig_base)[..q.significant],
                )?,
                sig_scalar: DeviceBuffer::upload(
                    &stream,
                    &view.take(regions.sig_scalar)[..q.significant],
                )?,
            })
        };
        let lists = [
            upload_lists(layout.l, &plan.l)?,
            upload_lists(layout.a_query, &plan.a)?,
            upload_lists(layout.b_query, &plan.b)?,
        ];
        let staged = Staged {
            device: d,
            a: DeviceBuffer::upload(&stream, view.take(layout.a))?,
            b: DeviceBuffer::upload(&stream, view.take(layout.b))?,
            c: DeviceBuffer::upload(&stream, view.take(layout.c))?,
            z: DeviceBuffer::upload(&stream, view.take(layout.z))?,
            lists,
            srs,
            stream,
            _reservation: reservation,
        };
        // The arena must not change until the copies land.
        staged.stream.sync()?;
        cx.note("backend", "gpu");
        cx.note("device_bytes", bytes);
        Ok(staged)
    }

    /// The quotient and the G1 MSMs, timed on the device.
    fn compute(
        &self,
        layout: &PartitionLayout,
        w: &PartitionWork,
        s: &Staged,
        cx: &mut StageContext<'_>,
    ) -> anyhow::Result<G1Results> {
        let plan = w.plan()?;
        let shape = layout.shape;
        let z_inv = limbs(Domain::get(shape.log_domain).z_inv_on_coset());
        let ((), start, end) = s
            .stream
            .timed(|st| ops::quotient(st, &s.a, &s.b, &s.c, shape.log_domain, &z_inv))?;
        cx.device_span("ntt", start, end);
        let h = device_timed(cx, "msm_h", || {
            Ok(ops::msm::<G1>(
                &s.srs.h,
                0,
                G1_BYTES,
                &s.a,
                0,
                shape.domain - 1,
                true,
            )?)
        })?;
        let ni = shape.inputs;
        let l = device_timed(cx, "msm_l", || {
            query::<G1>(&s.srs.l, G1_BYTES, &plan.l, &s.lists[0], &s.z, ni)
        })?;
        let a = device_timed(cx, "msm_a", || {
            query::<G1>(&s.srs.a, G1_BYTES, &plan.a, &s.lists[1], &s.z, ni)
        })?;
        let b_g1 = device_timed(cx, "msm_b_g1", || {
            query::<G1>(&s.srs.b_g1, G1_BYTES, &plan.b, &s.lists[2], &s.z, ni)
        })?;
        cx.note("backend", "gpu");
        cx.note(
            "points",
            w.srs.h.len() + w.srs.l.len() + w.srs.a.len() + w.srs.b_g1.len(),
        );
        Ok(G1Results { h, l, a, b_g1 })
    }
}

/// A scalar's Montgomery limbs, as the kernels take it.
fn limbs(s: Scalar) -> [u64; 4] {
    // SAFETY: Scalar is repr(transparent) over blst_fr, four u64 limbs in Montgomery form.
    unsafe { std::mem::transmute::<Scalar, [u64; 4]>(s) }
}

/// Runs a synchronous device call and records it as device time.
fn device_timed<R>(
    cx: &mut StageContext<'_>,
    label: &'static str,
    f: impl FnOnce() -> anyhow::Result<R>,
) -> anyhow::Result<R> {
    let start = Instant::now();
    let r = f()?;
    cx.device_span(label, start, Instant::now());
    Ok(r)
}

/// One query on the device: the dense aux part, the gathered tail of
/// significant terms and the batch addition of ones.
fn query<C>(
    points: &DeviceBuffer,
    point_size: usize,
    plan: &QueryPlan,
    lists: &DeviceLists,
    z: &DeviceBuffer,
    n_inputs: usize,
) -> anyhow::Result<C::Projective>
where
    C: GpuCurve,
    C::Projective: std::ops::Add<Output = C::Projective>,
{
    let aux = z.bytes() / 32 - n_inputs;
    // Dense parts read the canonical assignment in place (mont = false).
    let dense = match plan.dense_aux_base {
        Some(base) => ops::msm::<C>(points, base, point_size, z, n_inputs, aux, false)?,
        None => ops::msm::<C>(points, 0, point_size, z, 0, 0, false)?,
    };
    let tail = ops::msm_gathered::<C>(
        points,
        &lists.sig_base,
        z,
        &lists.sig_scalar,
        plan.significant,
        false,
    )?;
    let ones = ops::sum::<C>(points, &lists.ones, plan.ones)?;
    Ok(dense + tail + ones)
}

/// A device-side failure, so the runtime retries the partition elsewhere.
fn fault(cx: &StageContext<'_>, e: anyhow::Error) -> anyhow::Error {
    DeviceFault {
        device: cx.device.unwrap_or(0),
        message: format!("{e:#}"),
    }
    .into()
}

/// gpu_ntt_msm on the GPU: staging and compute in one step.
pub struct GpuNttMsm(pub Arc<GpuContext>);

impl Stage<PartitionWork> for GpuNttMsm {
    fn run(&self, w: &mut PartitionWork, cx: &mut StageContext<'_>) -> anyhow::Result<()> {
        let staged = self.0.stage_in(w, cx).map_err(|e| fault(cx, e))?;
        finish_compute(&self.0, w, staged, cx).map_err(|e| fault(cx, e))
    }

    fn device_timed(&self) -> bool {
        true
    }
}

/// The staging half (two_lock: under the memory lock).
pub struct GpuStageIn(pub Arc<GpuContext>);

impl Stage<PartitionWork> for GpuStageIn {
    fn run(&self, w: &mut PartitionWork, cx: &mut StageContext<'_>) -> anyhow::Result<()> {
        let staged = self.0.stage_in(w, cx).map_err(|e| fault(cx, e))?;
        w.staged = Some(Box::new(staged));
        Ok(())
    }
}

/// The compute half (two_lock: under the compute lock).
pub struct GpuCompute(pub Arc<GpuContext>);

impl Stage<PartitionWork> for GpuCompute {
    fn run(&self, w: &mut PartitionWork, cx: &mut StageContext<'_>) -> anyhow::Result<()> {
        let staged = *w
            .staged
            .take()
            .context("no staged device buffers: gpu_stage_in has not run")?;
        finish_compute(&self.0, w, staged, cx).map_err(|e| fault(cx, e))
    }

    fn device_timed(&self) -> bool {
        true
    }
}

fn finish_compute(
    ctx: &GpuContext,
    w: &mut PartitionWork,
    staged: Staged,
    cx: &mut StageContext<'_>,
) -> anyhow::Result<()> {
    let layout = w.layout()?;
    let device = staged.device;
    let g1 = ctx
        .compute(&layout, w, &staged, cx)
        .with_context(|| format!("on device {device}"))?;
    w.g1 = Some(g1);
    if ctx.b_g2_on_gpu {
        // b_g2_msm needs the assignment and the B lists still on the device.
        w.staged = Some(Box::new(staged));
    }
    Ok(())
}

/// b_g2_msm on the GPU, on the device the partition was staged on; on the
/// CPU (from the arena) if the device fails, so the proof still completes.
pub struct GpuBG2Msm;

impl Stage<PartitionWork> for GpuBG2Msm {
    fn run(&self, w: &mut PartitionWork, cx: &mut StageContext<'_>) -> anyhow::Result<()> {
        let plan = w.plan()?;
        let layout = w.layout()?;
        let Some(staged) = w.staged.take() else {
            return crate::b_g2::CpuBG2Msm.run(w, cx);
        };
        let result = device_timed(cx, "msm_b_g2", || {
            query::<G2>(
                &staged.srs.b_g2,
                G2_BYTES,
                &plan.b,
                &staged.lists[2],
                &staged.z,
                layout.shape.inputs,
            )
        });
        drop(staged);
        match result {
            Ok(b_g2) => {
                w.b_g2 = Some(b_g2);
                cx.note("backend", "gpu");
                cx.note("points", w.srs.b_g2.len());
                Ok(())
            }
            Err(e) => {
                tracing::warn!("b_g2_msm failed on the GPU ({e:#}); computing it on the CPU");
                crate::b_g2::CpuBG2Msm.run(w, cx)
            }
        }
    }

    fn device_timed(&self) -> bool {
        true
    }
}
