//! The GPU implementations of the device stages, on the partition's device
//! lease ([`GpuSlot`]): staging, compute, both, and B in G2.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use blstrs::{G1Affine, G2Affine, Scalar};
use cuzk_engine::{ArenaLease, ArenaView, DeviceBusy, DeviceFault, Stage, StageContext};
use cuzk_gpu::cpu::ntt::Domain;
use cuzk_gpu::cuda::{DeviceBuffer, Event, Stream};
use cuzk_gpu::fixed::{FixedCurve, FixedTerms, MsmTable};
use cuzk_gpu::ops::{self, G1, G2, QueryCounts, QueryLists, ScalarForm, Select};

use super::abc::{HostAbc, abc_on_host};
use super::slot::{Buffers, DeviceLists, MemoryBusy};
use super::streamed::{self, ChunkBuffers, Dense, Terms};
use super::tables::{self, DensePath};
use super::{GpuContext, GpuSlot, SlotSrs, SrsTables, Unsatisfied};
use crate::cs::popcount;
use crate::partition::{
    G1Results, MsmPlan, PartitionLayout, PartitionWork, QueryPlan, QueryRegions,
};
use crate::prep::{is_dense, note_plan};
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

    /// Runs work queued on `stream` that returns once done, and records its
    /// device time, measured by CUDA events on the stream.
    fn time_on<R>(
        &mut self,
        stream: &Stream,
        label: &'static str,
        f: impl FnOnce() -> anyhow::Result<R>,
    ) -> anyhow::Result<R> {
        let (start, end) = (Event::new(stream.device())?, Event::new(stream.device())?);
        start.record(stream)?;
        let r = f()?;
        end.record(stream)?;
        let took = start.elapsed(&end)?;
        let now = Instant::now();
        self.0
            .push((label, now.checked_sub(took).unwrap_or(now), now));
        Ok(r)
    }

    fn report(self, cx: &mut StageContext<'_>) {
        for (label, start, end) in self.0 {
            cx.device_span(label, start, end);
        }
    }
}

/// A device-side failure, so the runtime retries the partition elsewhere;
/// a witness the constraints reject fails the partition as it is; memory
/// that partitions in flight hold makes the partition wait for it.
fn fault(cx: &StageContext<'_>, e: anyhow::Error) -> anyhow::Error {
    if e.is::<Unsatisfied>() {
        return e;
    }
    let device = cx.device.unwrap_or(0);
    // Memory partitions in flight hold: the partition waits for it.
    let e = match e.downcast::<MemoryBusy>() {
        Ok(busy) => {
            return DeviceBusy {
                device,
                message: busy.message,
                freed: Some(busy.freed),
            }
            .into();
        }
        Err(e) => e,
    };
    DeviceFault {
        device,
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
    /// buffers on the slot's stream, and the SRS if it is not resident. A
    /// partition no prep_msm ran on is prepared here, on the device; one
    /// whose synthesis left a, b and c to the device has them evaluated here.
    fn stage_in(
        &self,
        w: &mut PartitionWork,
        arena: &mut ArenaLease,
        slot: &mut GpuSlot,
        spans: &mut Spans,
    ) -> anyhow::Result<usize> {
        let layout = w.layout()?;
        let srs = self.srs_on(&slot.dev, &w.srs, &slot.stream)?;
        if let SlotSrs::Host(_) = srs {
            let budget = slot.dev.vram.limit();
            slot.chunks(streamed::chunk_bytes(self.stream_chunk, budget))?;
        }
        let chunks = slot.chunks.as_ref().map_or(0, ChunkBuffers::device_bytes);
        let compact = self.compact_for(&slot.dev, &layout.shape, chunks);
        slot.buffers_for(layout.shape, compact)?;
        let (stream, bufs) = (&slot.stream, slot.buffers.as_ref().expect("just made"));
        let view = arena.view();
        let n = layout.shape.inputs + layout.shape.aux;
        // Each arena region is taken once.
        let z = view.take(layout.z);
        let host_plan = w.plan;
        // The assignment and the host's lists, timed on the stream. Compact
        // buffers take the assignment after the quotient; before it only
        // prep on the device reads it.
        spans.time_on(stream, "upload", || {
            if !(bufs.compact && host_plan.is_some()) {
                bufs.z().copy_in(stream, z)?;
            }
            let Some(plan) = host_plan else {
                return Ok(());
            };
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
            upload(&bufs.lists[2], layout.b_query, &plan.b)
        })?;
        if host_plan.is_none() {
            // The MSMs read the canonical form; the arena keeps Montgomery's.
            ops::to_canonical(stream, bufs.z(), n)?;
            // Before a, b and c arrive: prep keeps its counters in a's buffer.
            let plan = spans.time("prep", || prepare_on_device(stream, bufs, &layout, &view))?;
            w.plan = Some(plan);
        }
        let abc = [layout.a, layout.b, layout.c].map(|r| view.take(r));
        let mut abc_from = "synthesis";
        // The arena's assignment is canonical where prep_msm ran on the host.
        let (z_canonical, shape) = (host_plan.is_some(), &layout.shape);
        if bufs.compact {
            let deferred = w.deferred_abc.as_deref();
            if deferred.is_some() {
                abc_from = "host";
            }
            compact_quotient(stream, bufs, shape, deferred, z, z_canonical, abc, spans)?;
            // The assignment again, where b and c were, for the MSMs.
            spans.time_on(stream, "upload", || Ok(bufs.z().copy_in(stream, z)?))?;
            if !z_canonical {
                ops::to_canonical(stream, bufs.z(), n)?;
            }
        } else {
            match &w.deferred_abc {
                // After z's upload (and conversion) on the same stream; returns synchronised.
                Some(r) => {
                    abc_from = "host";
                    if let Some((start, end)) =
                        self.deferred_abc(r, &slot.dev, stream, bufs, shape, z, z_canonical, abc)?
                    {
                        spans.0.push(("pce_eval", start, end));
                        abc_from = "device";
                    }
                }
                None => spans.time_on(stream, "upload_abc", || {
                    let [a, b, c] = abc;
                    bufs.a.copy_in(stream, a)?;
                    bufs.b.copy_in(stream, b)?;
                    Ok(bufs.c()?.copy_in(stream, c)?)
                })?,
            }
        }
        // The arena must not change until the copies land.
        stream.sync()?;
        slot.srs = Some(srs);
        slot.staged = true;
        slot.abc = abc_from;
        Ok(slot.device_bytes())
    }

    /// The quotient and the G1 MSMs on the staged slot, with how many of
    /// the MSMs ran on tables.
    fn compute(
        &self,
        w: &PartitionWork,
        slot: &GpuSlot,
        spans: &mut Spans,
    ) -> anyhow::Result<(G1Results, usize)> {
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
        if !bufs.compact {
            // (Compact buffers ran it while staging, as a, b and c arrived.)
            let z_inv = limbs(Domain::get(shape.log_domain).z_inv_on_coset());
            let c = bufs.c()?;
            let ((), start, end) =
                s.timed(|st| ops::quotient(st, &bufs.a, &bufs.b, c, shape.log_domain, &z_inv))?;
            spans.0.push(("ntt", start, end));
        }
        let chunks = slot.chunks.as_ref();
        let tables = srs.tables();
        let mut on_tables = 0;
        let h = spans.time_on(s, "msm_h", || {
            let n = shape.domain - 1;
            match srs.g1(Query::H, chunks, &tables)? {
                QueryPoints::Device { points, table } => {
                    let all = FixedTerms::Dense {
                        base_offset: 0,
                        scalar_offset: 0,
                    };
                    Ok(tables::msm::<G1>(
                        s,
                        points,
                        table,
                        slot.dense(),
                        all,
                        &bufs.a,
                        n,
                        ScalarForm::Montgomery,
                        &mut on_tables,
                    )?)
                }
                QueryPoints::Host { points, chunks } => {
                    // The quotient's coefficients, in Montgomery form, in a.
                    let terms = Terms {
                        dense: Some(Dense {
                            base: 0,
                            scalar_offset: 0,
                            n,
                        }),
                        gathered: None,
                        ones: None,
                        scalars: &bufs.a,
                        form: ScalarForm::Montgomery,
                    };
                    streamed::msm::<G1, _>(s, chunks, points, &terms)
                }
            }
        })?;
        let mut g1_query = |labels, q: Query, plan, i: usize, tail| {
            query::<G1, _>(
                s,
                srs.g1(q, chunks, &tables)?,
                slot.dense(),
                plan,
                &bufs.lists[i],
                bufs.z(),
                &shape,
                tail,
                (&mut *spans, labels),
            )
            .map(|(p, k)| {
                on_tables += k;
                p
            })
        };
        let tails = plan.host_tails;
        let l = g1_query(&QueryLabels::L, Query::L, &plan.l, 0, tails.l)?;
        let a = g1_query(&QueryLabels::A, Query::A, &plan.a, 1, tails.a)?;
        let b_g1 = g1_query(&QueryLabels::B_G1, Query::BG1, &plan.b, 2, tails.b_g1)?;
        Ok((G1Results { h, l, a, b_g1 }, on_tables))
    }
}

/// The quotient through compact buffers: a into the first, then b and c in
/// turn through the second, each taken to the coset and folded in (H's
/// coefficients left in the first). a, b and c come from the arena, or are
/// evaluated on the host from the recording of a partition whose synthesis
/// left them to the device (`deferred`; the matrices' three outputs do not
/// fit compact buffers). Returns synchronised.
#[allow(clippy::too_many_arguments)]
fn compact_quotient(
    stream: &Stream,
    bufs: &Buffers,
    shape: &SrsShape,
    deferred: Option<&crate::pce::Recording>,
    z: &[[u64; 4]],
    z_canonical: bool,
    abc: [&mut [[u64; 4]]; 3],
    spans: &mut Spans,
) -> anyhow::Result<()> {
    let host = match deferred {
        Some(r) => spans.time("abc_host", || abc_on_host(r, z, z_canonical, abc, shape))?,
        None => HostAbc::Arena(abc),
    };
    let [a, b, c] = host.slices();
    let z_inv = limbs(Domain::get(shape.log_domain).z_inv_on_coset());
    let q = ops::TwoBufferQuotient {
        stream,
        a: &bufs.a,
        scratch: &bufs.b,
        lg: shape.log_domain,
    };
    // Uploads and NTTs in one span: each upload waits for the NTT before it.
    spans.time_on(stream, "upload_ntt", || {
        bufs.a.copy_in(stream, a)?;
        q.a_to_coset()?;
        bufs.b.copy_in(stream, b)?;
        q.combine(ops::Combine::Mul, &z_inv)?;
        bufs.b.copy_in(stream, c)?;
        q.combine(ops::Combine::SubScale, &z_inv)?;
        Ok(q.finish()?)
    })?;
    // The uploads read `host` until the stream passes them.
    stream.sync()?;
    Ok(())
}

/// prep_msm on the device, from the canonical assignment in the slot and the
/// densities in the arena: the L, A and B lists into the slot's buffers, the
/// plan (counts and dense parts) back to the host, deciding as the host does.
fn prepare_on_device(
    stream: &Stream,
    bufs: &Buffers,
    layout: &PartitionLayout,
    view: &ArenaView<'_>,
) -> anyhow::Result<MsmPlan> {
    let (ni, na) = (layout.shape.inputs, layout.shape.aux);
    let density = [
        view.take(layout.a_aux_density),
        view.take(layout.b_input_density),
        view.take(layout.b_aux_density),
    ];
    for (buf, bits) in bufs.densities.iter().zip(&density) {
        buf.copy_in(stream, bits)?;
    }
    let lists = |k: usize| QueryLists {
        ones: &bufs.lists[k].ones,
        sig_base: &bufs.lists[k].sig_base,
        sig_scalar: &bufs.lists[k].sig_scalar,
    };
    let plan_of = |c: QueryCounts, dense_aux_base: Option<usize>| QueryPlan {
        dense_aux_base,
        ones: c.ones,
        significant: c.significant,
        zeros: c.selected - c.ones - c.significant,
    };
    let z = bufs.z();
    // The counters go where a, b and c land after prep: no memory beyond
    // the partition's own (3 GB at 2^27, the room the matrices need on an
    // 80 GB card beside a 32 GiB PoRep SRS).
    let scratch = Some(&bufs.a);
    // L selects every aux variable: its significant terms decide whether
    // each query whose aux part is full is dense.
    let l = ops::prep_query(
        stream,
        z,
        ni,
        na,
        Select::None,
        Select::All,
        &lists(0),
        scratch,
    )?;
    let sig_aux = l.significant;
    let l = match is_dense(true, sig_aux, na) {
        true => plan_of(QueryCounts::default(), Some(0)),
        false => plan_of(l, None),
    };
    let a_dense = is_dense(popcount(density[0]) == na, sig_aux, na);
    let a_aux = match a_dense {
        true => Select::None,
        false => Select::Bitmap(&bufs.densities[0], 0),
    };
    let a = ops::prep_query(stream, z, ni, na, Select::All, a_aux, &lists(1), scratch)?;
    let used_inputs = popcount(density[1]);
    let b_dense = is_dense(popcount(density[2]) == na, sig_aux, na);
    let b_aux = match b_dense {
        true => Select::None,
        false => Select::Bitmap(&bufs.densities[2], 0),
    };
    let b_inputs = Select::Bitmap(&bufs.densities[1], 0);
    let b = ops::prep_query(stream, z, ni, na, b_inputs, b_aux, &lists(2), scratch)?;
    Ok(MsmPlan {
        l,
        a: plan_of(a, a_dense.then_some(ni)),
        b: plan_of(b, b_dense.then_some(used_inputs)),
        on_host: false,
        host_tails: Default::default(),
    })
}

/// The G1 queries of an SRS.
#[derive(Clone, Copy, Debug)]
enum Query {
    H,
    L,
    A,
    BG1,
}

/// Where one query's points are for its MSMs.
enum QueryPoints<'a, T> {
    /// Resident on the device, with the query's table if it has one.
    Device {
        points: &'a DeviceBuffer,
        table: Option<&'a MsmTable>,
    },
    /// In page-locked host memory, streamed through the lease's chunks.
    Host {
        points: &'a [T],
        chunks: &'a ChunkBuffers,
    },
}

impl SlotSrs {
    fn g1<'a>(
        &'a self,
        q: Query,
        chunks: Option<&'a ChunkBuffers>,
        tables: &'a SrsTables,
    ) -> anyhow::Result<QueryPoints<'a, G1Affine>> {
        Ok(match self {
            SlotSrs::Resident(d) => {
                let (points, table) = match q {
                    Query::H => (&d.h, &tables.h),
                    Query::L => (&d.l, &tables.l),
                    Query::A => (&d.a, &tables.a),
                    Query::BG1 => (&d.b_g1, &tables.b_g1),
                };
                QueryPoints::Device {
                    points,
                    table: table.as_ref(),
                }
            }
            SlotSrs::Host(srs) => QueryPoints::Host {
                points: match q {
                    Query::H => &srs.h,
                    Query::L => &srs.l,
                    Query::A => &srs.a,
                    Query::BG1 => &srs.b_g1,
                },
                chunks: chunks.context("no chunk buffers for the streamed SRS")?,
            },
        })
    }

    fn b_g2<'a>(
        &'a self,
        chunks: Option<&'a ChunkBuffers>,
        tables: &'a SrsTables,
    ) -> anyhow::Result<QueryPoints<'a, G2Affine>> {
        Ok(match self {
            SlotSrs::Resident(d) => QueryPoints::Device {
                points: &d.b_g2,
                table: tables.b_g2.as_ref(),
            },
            SlotSrs::Host(srs) => QueryPoints::Host {
                points: &srs.b_g2,
                chunks: chunks.context("no chunk buffers for the streamed SRS")?,
            },
        })
    }
}

/// A query's span labels: the whole query (streamed SRS: one pass serves
/// every part) and each part on the device, so the waterfall shows which
/// part of a query holds the device.
struct QueryLabels {
    whole: &'static str,
    dense: &'static str,
    tail: &'static str,
    ones: &'static str,
}

impl QueryLabels {
    const L: Self = Self::of("msm_l", "msm_l_dense", "msm_l_tail", "msm_l_ones");
    const A: Self = Self::of("msm_a", "msm_a_dense", "msm_a_tail", "msm_a_ones");
    const B_G1: Self = Self::of(
        "msm_b_g1",
        "msm_b_g1_dense",
        "msm_b_g1_tail",
        "msm_b_g1_ones",
    );
    const B_G2: Self = Self::of(
        "msm_b_g2",
        "msm_b_g2_dense",
        "msm_b_g2_tail",
        "msm_b_g2_ones",
    );

    const fn of(
        whole: &'static str,
        dense: &'static str,
        tail: &'static str,
        ones: &'static str,
    ) -> Self {
        Self {
            whole,
            dense,
            tail,
            ones,
        }
    }
}

/// One query on the device: the dense aux part, the gathered tail of
/// significant terms (both on the query's table when it pays) and the batch
/// addition of ones, unless prep_msm summed that tail on the host
/// (`host_tail`); with how many MSMs ran on the table. Each part is timed
/// into `spans` under its label.
#[allow(clippy::too_many_arguments)]
fn query<C, T>(
    stream: &Stream,
    points: QueryPoints<'_, T>,
    dense_path: DensePath<'_>,
    plan: &QueryPlan,
    lists: &DeviceLists,
    z: &DeviceBuffer,
    shape: &SrsShape,
    host_tail: Option<C::Projective>,
    (spans, labels): (&mut Spans, &QueryLabels),
) -> anyhow::Result<(C::Projective, usize)>
where
    C: FixedCurve,
    C::Projective: group::Group,
    T: Copy,
{
    let (n_inputs, aux) = (shape.inputs, shape.aux);
    let (points, table) = match points {
        QueryPoints::Device { points, table } => (points, table),
        QueryPoints::Host { points, chunks } => {
            // The same terms, each chunk of points serving all of them.
            let lists_on_device = host_tail.is_none();
            let terms = Terms {
                dense: plan.dense_aux_base.map(|base| Dense {
                    base,
                    scalar_offset: n_inputs,
                    n: aux,
                }),
                gathered: lists_on_device.then_some((
                    &lists.sig_base,
                    &lists.sig_scalar,
                    plan.significant,
                )),
                ones: lists_on_device.then_some((&lists.ones, plan.ones)),
                scalars: z,
                form: ScalarForm::Canonical,
            };
            let sum = spans.time_on(stream, labels.whole, || {
                streamed::msm::<C, T>(stream, chunks, points, &terms)
            })?;
            return Ok((
                sum + host_tail.unwrap_or_else(<C::Projective as group::Group>::identity),
                0,
            ));
        }
    };
    let mut on_tables = 0;
    // Dense parts read the canonical assignment in place.
    let dense = FixedTerms::Dense {
        base_offset: plan.dense_aux_base.unwrap_or(0),
        scalar_offset: n_inputs,
    };
    let n = if plan.dense_aux_base.is_some() {
        aux
    } else {
        0
    };
    let mut part = |label, terms, n| {
        if n == 0 {
            return Ok(<C::Projective as group::Group>::identity());
        }
        spans.time_on(stream, label, || {
            let form = ScalarForm::Canonical;
            Ok(tables::msm::<C>(
                stream,
                points,
                table,
                dense_path,
                terms,
                z,
                n,
                form,
                &mut on_tables,
            )?)
        })
    };
    let dense = part(labels.dense, dense, n)?;
    if let Some(tail) = host_tail {
        return Ok((dense + tail, on_tables));
    }
    let gathered = FixedTerms::Gathered {
        base_idx: &lists.sig_base,
        scalar_idx: &lists.sig_scalar,
    };
    let tail = part(labels.tail, gathered, plan.significant)?;
    let ones = spans.time_on(stream, labels.ones, || {
        Ok(ops::sum::<C>(stream, points, &lists.ones, plan.ones)?)
    })?;
    Ok((dense + tail + ones, on_tables))
}

/// The staged partition's buffer layout, for its notes.
fn buffers_note(slot: &GpuSlot) -> &'static str {
    match &slot.buffers {
        Some(b) if b.compact => "compact",
        Some(_) => "full",
        None => "none",
    }
}

/// Where the staged partition's SRS points are read from, for its notes.
fn srs_note(slot: &GpuSlot) -> &'static str {
    match slot.srs {
        Some(SlotSrs::Resident(..)) => "resident",
        Some(SlotSrs::Host(_)) => "streamed",
        None => "none",
    }
}

/// Notes a plan made on the device, as prep_msm notes its own.
fn note_prep(w: &PartitionWork, cx: &mut StageContext<'_>, prepared_here: bool) {
    if let (true, Some(plan)) = (prepared_here, &w.plan) {
        cx.note("prep", "device");
        note_plan(cx, plan);
    }
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
        let prepared_here = w.plan.is_none();
        let staged = self.0.stage_in(w, arena, slot, &mut spans);
        let result = staged.and_then(|bytes| Ok((bytes, self.0.compute(w, slot, &mut spans)?)));
        let (srs, buffers, abc) = (srs_note(slot), buffers_note(slot), slot.abc);
        spans.report(cx);
        cx.note("srs", srs);
        cx.note("buffers", buffers);
        cx.note("abc_source", abc);
        let (bytes, (g1, on_tables)) = result.map_err(|e| fault(cx, e))?;
        w.g1 = Some(g1);
        cx.note("msm_tables", on_tables);
        note_prep(w, cx, prepared_here);
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
        let prepared_here = w.plan.is_none();
        let (arena, slot) = cx.arena_and_device_slot::<GpuSlot>()?;
        let staged = self.0.stage_in(w, arena, slot, &mut spans);
        let (srs, buffers, abc) = (srs_note(slot), buffers_note(slot), slot.abc);
        spans.report(cx);
        cx.note("srs", srs);
        cx.note("buffers", buffers);
        cx.note("abc_source", abc);
        let bytes = staged.map_err(|e| fault(cx, e))?;
        note_prep(w, cx, prepared_here);
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
        let (g1, on_tables) = result.map_err(|e| fault(cx, e))?;
        w.g1 = Some(g1);
        cx.note("msm_tables", on_tables);
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
            let tables = srs.tables();
            query::<G2, _>(
                &slot.stream,
                srs.b_g2(slot.chunks.as_ref(), &tables)?,
                slot.dense(),
                &plan.b,
                &bufs.lists[2],
                bufs.z(),
                &layout.shape,
                plan.host_tails.b_g2,
                (&mut spans, &QueryLabels::B_G2),
            )
        })();
        spans.report(cx);
        let (b_g2, on_tables) = result.map_err(|e| fault(cx, e))?;
        w.b_g2 = Some(b_g2);
        cx.note("backend", "gpu");
        cx.note("msm_tables", on_tables);
        cx.note("points", w.srs.b_g2.len());
        Ok(())
    }

    fn device_timed(&self) -> bool {
        true
    }
}
