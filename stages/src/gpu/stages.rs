//! The GPU implementations of the device stages, on the partition's device
//! lease ([`GpuSlot`]): staging, compute, both, and B in G2.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use blstrs::Scalar;
use cuzk_engine::{ArenaLease, DeviceFault, Stage, StageContext};
use cuzk_gpu::cpu::ntt::Domain;
use cuzk_gpu::cuda::{DeviceBuffer, Stream};
use cuzk_gpu::ops::{self, G1, G2, GpuCurve};

use super::slot::DeviceLists;
use super::{G1_BYTES, G2_BYTES, GpuContext, GpuSlot, Unsatisfied};
use crate::partition::{G1Results, PartitionWork, QueryPlan, QueryRegions};
use crate::srs::SrsShape;

/// Device work a stage timed, kept until the slot's borrow of the context ends.
#[derive(Default)]
struct Spans(Vec<(&'static str, Instant, Instant)>);

impl Spans {
    /// Runs a synchronous device call and records it.
    fn time<R>(
        &mut self,
        label: &'static str,
        f: impl FnOnce() -> anyhow::Result<R>,
    ) -> anyhow::Result<R> {
        let start = Instant::now();
        let r = f()?;
        self.0.push((label, start, Instant::now()));
        Ok(r)
    }

    fn report(self, cx: &mut StageContext<'_>) {
        for (label, start, end) in self.0 {
            cx.device_span(label, start, end);
        }
    }
}

/// A device-side failure, so the runtime retries the partition elsewhere;
/// a witness the constraints reject fails the partition as it is.
fn fault(cx: &StageContext<'_>, e: anyhow::Error) -> anyhow::Error {
    if e.is::<Unsatisfied>() {
        return e;
    }
    DeviceFault {
        device: cx.device.unwrap_or(0),
        message: format!("{e:#}"),
    }
    .into()
}

/// A scalar's Montgomery limbs, as the kernels take it.
fn limbs(s: Scalar) -> [u64; 4] {
    // SAFETY: Scalar is repr(transparent) over blst_fr, four u64 limbs in Montgomery form.
    unsafe { std::mem::transmute::<Scalar, [u64; 4]>(s) }
}

impl GpuContext {
    /// Uploads the partition from its page-locked arena into the slot's
    /// buffers on the slot's stream, and the SRS if it is not resident.
    fn stage_in(
        &self,
        w: &PartitionWork,
        arena: &mut ArenaLease,
        slot: &mut GpuSlot,
        spans: &mut Spans,
    ) -> anyhow::Result<usize> {
        let layout = w.layout()?;
        let plan = w.plan()?;
        let srs = self.srs_on(&slot.dev, &w.srs, &slot.stream)?;
        slot.buffers_for(layout.shape)?;
        let (stream, bufs) = (&slot.stream, slot.buffers.as_ref().expect("just made"));
        let view = arena.view();
        let upload =
            |lists: &DeviceLists, regions: QueryRegions, q: &QueryPlan| -> anyhow::Result<()> {
                lists
                    .ones
                    .copy_in(stream, &view.take(regions.ones)[..q.ones])?;
                lists
                    .sig_base
                    .copy_in(stream, &view.take(regions.sig_base)[..q.significant])?;
                lists
                    .sig_scalar
                    .copy_in(stream, &view.take(regions.sig_scalar)[..q.significant])?;
                Ok(())
            };
        upload(&bufs.lists[0], layout.l, &plan.l)?;
        upload(&bufs.lists[1], layout.a_query, &plan.a)?;
        upload(&bufs.lists[2], layout.b_query, &plan.b)?;
        bufs.z.copy_in(stream, view.take(layout.z))?;
        match &w.deferred_abc {
            // After z's upload on the same stream; returns synchronised.
            Some(r) => {
                if let Some((start, end)) =
                    self.deferred_abc(r, &slot.dev, stream, bufs, &layout, &view)?
                {
                    spans.0.push(("pce_eval", start, end));
                }
            }
            None => {
                bufs.a.copy_in(stream, view.take(layout.a))?;
                bufs.b.copy_in(stream, view.take(layout.b))?;
                bufs.c.copy_in(stream, view.take(layout.c))?;
            }
        }
        // The arena must not change until the copies land.
        stream.sync()?;
        slot.srs = Some(srs);
        slot.staged = true;
        Ok(slot.device_bytes())
    }

    /// The quotient and the G1 MSMs on the staged slot.
    fn compute(
        &self,
        w: &PartitionWork,
        slot: &GpuSlot,
        spans: &mut Spans,
    ) -> anyhow::Result<G1Results> {
        anyhow::ensure!(
            slot.staged,
            "the device lease holds no staged partition: gpu_stage_in has not run"
        );
        let plan = w.plan()?;
        let shape = w.layout()?.shape;
        let (s, bufs) = (
            &slot.stream,
            slot.buffers.as_ref().context("no device buffers")?,
        );
        let srs = slot.srs.as_ref().context("no SRS on the device")?;
        let z_inv = limbs(Domain::get(shape.log_domain).z_inv_on_coset());
        let ((), start, end) =
            s.timed(|st| ops::quotient(st, &bufs.a, &bufs.b, &bufs.c, shape.log_domain, &z_inv))?;
        spans.0.push(("ntt", start, end));
        let h = spans.time("msm_h", || {
            Ok(ops::msm::<G1>(
                s,
                &srs.h,
                0,
                G1_BYTES,
                &bufs.a,
                0,
                shape.domain - 1,
                true,
            )?)
        })?;
        let l = spans.time("msm_l", || {
            query::<G1>(
                s,
                &srs.l,
                G1_BYTES,
                &plan.l,
                &bufs.lists[0],
                &bufs.z,
                &shape,
            )
        })?;
        let a = spans.time("msm_a", || {
            query::<G1>(
                s,
                &srs.a,
                G1_BYTES,
                &plan.a,
                &bufs.lists[1],
                &bufs.z,
                &shape,
            )
        })?;
        let b_g1 = spans.time("msm_b_g1", || {
            query::<G1>(
                s,
                &srs.b_g1,
                G1_BYTES,
                &plan.b,
                &bufs.lists[2],
                &bufs.z,
                &shape,
            )
        })?;
        Ok(G1Results { h, l, a, b_g1 })
    }
}

/// One query on the device: the dense aux part, the gathered tail of
/// significant terms and the batch addition of ones.
fn query<C>(
    stream: &Stream,
    points: &DeviceBuffer,
    point_size: usize,
    plan: &QueryPlan,
    lists: &DeviceLists,
    z: &DeviceBuffer,
    shape: &SrsShape,
) -> anyhow::Result<C::Projective>
where
    C: GpuCurve,
    C::Projective: std::ops::Add<Output = C::Projective>,
{
    let (n_inputs, aux) = (shape.inputs, shape.aux);
    // Dense parts read the canonical assignment in place (mont = false).
    let dense = match plan.dense_aux_base {
        Some(base) => ops::msm::<C>(stream, points, base, point_size, z, n_inputs, aux, false)?,
        None => ops::msm::<C>(stream, points, 0, point_size, z, 0, 0, false)?,
    };
    let tail = ops::msm_gathered::<C>(
        stream,
        points,
        &lists.sig_base,
        z,
        &lists.sig_scalar,
        plan.significant,
        false,
    )?;
    let ones = ops::sum::<C>(stream, points, &lists.ones, plan.ones)?;
    Ok(dense + tail + ones)
}

fn note_points(w: &PartitionWork, cx: &mut StageContext<'_>) {
    cx.note("backend", "gpu");
    cx.note(
        "points",
        w.srs.h.len() + w.srs.l.len() + w.srs.a.len() + w.srs.b_g1.len(),
    );
}

/// gpu_ntt_msm on the GPU: staging and compute in one step.
pub struct GpuNttMsm(pub Arc<GpuContext>);

impl Stage<PartitionWork> for GpuNttMsm {
    fn run(&self, w: &mut PartitionWork, cx: &mut StageContext<'_>) -> anyhow::Result<()> {
        let mut spans = Spans::default();
        let (arena, slot) = cx.arena_and_device_slot::<GpuSlot>()?;
        let staged = self.0.stage_in(w, arena, slot, &mut spans);
        let result = staged.and_then(|bytes| Ok((bytes, self.0.compute(w, slot, &mut spans)?)));
        spans.report(cx);
        let (bytes, g1) = result.map_err(|e| fault(cx, e))?;
        w.g1 = Some(g1);
        cx.note("device_bytes", bytes);
        note_points(w, cx);
        Ok(())
    }

    fn device_timed(&self) -> bool {
        true
    }
}

/// The staging half (two_lock: under the memory lock).
pub struct GpuStageIn(pub Arc<GpuContext>);

impl Stage<PartitionWork> for GpuStageIn {
    fn run(&self, w: &mut PartitionWork, cx: &mut StageContext<'_>) -> anyhow::Result<()> {
        let mut spans = Spans::default();
        let (arena, slot) = cx.arena_and_device_slot::<GpuSlot>()?;
        let staged = self.0.stage_in(w, arena, slot, &mut spans);
        spans.report(cx);
        let bytes = staged.map_err(|e| fault(cx, e))?;
        cx.note("backend", "gpu");
        cx.note("device_bytes", bytes);
        Ok(())
    }
}

/// The compute half (two_lock: under the compute lock).
pub struct GpuCompute(pub Arc<GpuContext>);

impl Stage<PartitionWork> for GpuCompute {
    fn run(&self, w: &mut PartitionWork, cx: &mut StageContext<'_>) -> anyhow::Result<()> {
        let mut spans = Spans::default();
        let slot = cx.device_slot::<GpuSlot>()?;
        let result = self.0.compute(w, slot, &mut spans);
        spans.report(cx);
        w.g1 = Some(result.map_err(|e| fault(cx, e))?);
        note_points(w, cx);
        Ok(())
    }

    fn device_timed(&self) -> bool {
        true
    }
}

/// b_g2_msm on the GPU, from the partition's device lease (the assignment
/// and the B lists staged there).
pub struct GpuBG2Msm;

impl Stage<PartitionWork> for GpuBG2Msm {
    fn run(&self, w: &mut PartitionWork, cx: &mut StageContext<'_>) -> anyhow::Result<()> {
        let plan = w.plan()?;
        let layout = w.layout()?;
        let mut spans = Spans::default();
        let slot = cx.device_slot::<GpuSlot>()?;
        let result = (|| {
            anyhow::ensure!(slot.staged, "the device lease holds no staged partition");
            let bufs = slot.buffers.as_ref().context("no device buffers")?;
            let srs = slot.srs.as_ref().context("no SRS on the device")?;
            spans.time("msm_b_g2", || {
                query::<G2>(
                    &slot.stream,
                    &srs.b_g2,
                    G2_BYTES,
                    &plan.b,
                    &bufs.lists[2],
                    &bufs.z,
                    &layout.shape,
                )
            })
        })();
        spans.report(cx);
        w.b_g2 = Some(result.map_err(|e| fault(cx, e))?);
        cx.note("backend", "gpu");
        cx.note("points", w.srs.b_g2.len());
        Ok(())
    }

    fn device_timed(&self) -> bool {
        true
    }
}
