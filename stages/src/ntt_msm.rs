//! gpu_ntt_msm on the CPU backend: the H polynomial by NTTs and the G1 MSMs
//! for H, L, A and B. The GPU backend replaces this stage's work, not its
//! place in the graph.

use cuzk_engine::{Stage, StageContext};
use cuzk_gpu::cpu::msm::{G1, Terms, g1_raw, msm};
use cuzk_gpu::cpu::ntt::Domain;

use crate::partition::{G1Results, PartitionWork};
use crate::prep::prepare;
use crate::query::{PackedQuery, query_msm};
use crate::scalars::{as_bytes, as_scalars, to_canonical};

pub struct CpuNttMsm;

impl Stage<PartitionWork> for CpuNttMsm {
    fn run(&self, w: &mut PartitionWork, cx: &mut StageContext<'_>) -> anyhow::Result<()> {
        if w.plan.is_none() {
            // A graph that leaves prep_msm to the device: here, the CPU.
            prepare(w, cx)?;
        }
        let layout = w.layout()?;
        let plan = w.host_plan()?;
        let shape = layout.shape;
        let srs = w.srs.clone();
        let cancelled = cx.cancel_flag();
        let view = cx.arena()?.view();
        let (a, b, c) = (
            view.take(layout.a),
            view.take(layout.b),
            view.take(layout.c),
        );
        Domain::get(shape.log_domain).quotient(as_scalars(a), as_scalars(b), as_scalars(c));
        cancelled.check()?;

        // H has domain - 1 coefficients (the last is zero), matching the SRS's h.
        let h_coeffs = &mut a[..shape.domain - 1];
        to_canonical(h_coeffs);
        let z = as_bytes(view.take(layout.z));
        let ni = shape.inputs;
        let l = PackedQuery::from_arena(&view, layout.l, &plan.l);
        let aq = PackedQuery::from_arena(&view, layout.a_query, &plan.a);
        let bq = PackedQuery::from_arena(&view, layout.b_query, &plan.b);
        let h = msm::<G1>(Terms::Dense {
            bases: g1_raw(&srs.h),
            scalars: as_bytes(h_coeffs),
        });
        let tails = plan.host_tails;
        let l = query_msm::<G1>(g1_raw(&srs.l), &plan.l, &l, z, ni, tails.l);
        let a = query_msm::<G1>(g1_raw(&srs.a), &plan.a, &aq, z, ni, tails.a);
        let b_g1 = query_msm::<G1>(g1_raw(&srs.b_g1), &plan.b, &bq, z, ni, tails.b_g1);
        w.g1 = Some(G1Results { h, l, a, b_g1 });
        cx.note("backend", "cpu");
        cx.note(
            "points",
            srs.h.len() + srs.l.len() + srs.a.len() + srs.b_g1.len(),
        );
        Ok(())
    }
}

/// The staging half of gpu_ntt_msm on the CPU backend: host memory is
/// already where the CPU computes, so there is nothing to upload.
pub struct CpuStageIn;

impl Stage<PartitionWork> for CpuStageIn {
    fn run(&self, w: &mut PartitionWork, cx: &mut StageContext<'_>) -> anyhow::Result<()> {
        w.layout()?;
        if w.plan.is_none() {
            prepare(w, cx)?;
        }
        cx.note("backend", "cpu");
        Ok(())
    }
}
