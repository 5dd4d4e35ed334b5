//! b_g2_msm: the B query in G2, the one MSM outside gpu_ntt_msm (G2
//! arithmetic is about three times G1's, so placing it matters).

use cuzk_engine::{Stage, StageContext};
use cuzk_gpu::cpu::msm::{G2, g2_raw};

use crate::partition::PartitionWork;
use crate::query::{PackedQuery, query_msm};
use crate::scalars::as_bytes;

pub struct CpuBG2Msm;

impl Stage<PartitionWork> for CpuBG2Msm {
    fn run(&self, w: &mut PartitionWork, cx: &mut StageContext<'_>) -> anyhow::Result<()> {
        let layout = w.layout()?;
        let plan = w.host_plan()?;
        let srs = w.srs.clone();
        let view = cx.arena()?.view();
        let z = as_bytes(view.take(layout.z));
        let bq = PackedQuery::from_arena(&view, layout.b_query, &plan.b);
        w.b_g2 = Some(query_msm::<G2>(
            g2_raw(&srs.b_g2),
            &plan.b,
            &bq,
            z,
            layout.shape.inputs,
            plan.host_tails.b_g2,
        ));
        cx.note("backend", "cpu");
        cx.note("points", srs.b_g2.len());
        Ok(())
    }
}
