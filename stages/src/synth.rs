//! synth: runs the partition's circuit into its arena (A, B, C evaluations,
//! the assignment and the query densities).

use anyhow::Context;
use cuzk_engine::{Stage, StageContext};

use crate::cs::{ArenaCs, CsSlices};
use crate::partition::{PartitionLayout, PartitionWork};
use crate::scalars::as_scalars;

pub struct Synth;

impl Stage<PartitionWork> for Synth {
    fn run(&self, w: &mut PartitionWork, cx: &mut StageContext<'_>) -> anyhow::Result<()> {
        let circuit = w
            .circuit
            .take()
            .context("the partition has no circuit left to synthesize")?;
        let shape = w.srs.shape();
        let layout = PartitionLayout::new(shape);
        let arena = cx.arena()?;
        arena.ensure_capacity(layout.bytes)?;
        let view = arena.view();
        let mut cs = ArenaCs::new(
            CsSlices {
                a: as_scalars(view.take(layout.a)),
                b: as_scalars(view.take(layout.b)),
                c: as_scalars(view.take(layout.c)),
                z: as_scalars(view.take(layout.z)),
                a_aux_density: view.take(layout.a_aux_density),
                b_input_density: view.take(layout.b_input_density),
                b_aux_density: view.take(layout.b_aux_density),
            },
            &shape,
        );
        let result = circuit.synthesize_into(&mut cs);
        if let Some(e) = cs.take_error() {
            return Err(e.into());
        }
        result.context("the circuit failed to synthesize")?;
        let out = cs.finish(&shape)?;
        w.public_inputs = out.public_inputs;
        w.constraints = out.constraints;
        w.layout = Some(layout);
        cx.note("constraints", out.constraints);
        cx.note("arena_bytes", layout.bytes);
        Ok(())
    }
}
