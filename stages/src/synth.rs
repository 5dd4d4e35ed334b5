//! synth: runs the partition's circuit into its arena (A, B, C evaluations,
//! the assignment and the query densities).

use anyhow::Context;
use cuzk_engine::{ArenaView, Stage, StageContext};

use crate::circuit::ProvableCircuit;
use crate::cs::{ArenaCs, CsSlices, Synthesized};
use crate::partition::{PartitionLayout, PartitionWork};
use crate::scalars::as_scalars;
use crate::srs::SrsShape;

pub struct Synth;

/// The regions a constraint system writes, from a fresh view.
pub fn slices<'a>(view: &ArenaView<'a>, layout: &PartitionLayout) -> CsSlices<'a> {
    CsSlices {
        a: as_scalars(view.take(layout.a)),
        b: as_scalars(view.take(layout.b)),
        c: as_scalars(view.take(layout.c)),
        z: as_scalars(view.take(layout.z)),
        a_aux_density: view.take(layout.a_aux_density),
        b_input_density: view.take(layout.b_input_density),
        b_aux_density: view.take(layout.b_aux_density),
    }
}

/// Full synthesis of `circuit` into `slices`.
pub(crate) fn full(
    circuit: Box<dyn ProvableCircuit>,
    slices: CsSlices<'_>,
    shape: &SrsShape,
) -> anyhow::Result<Synthesized> {
    let mut cs = ArenaCs::new(slices, shape);
    let result = circuit.synthesize_into(&mut cs);
    if let Some(e) = cs.take_error() {
        return Err(e.into());
    }
    result.context("the circuit failed to synthesize")?;
    Ok(cs.finish(shape)?)
}

/// Takes the partition's circuit out of it.
pub(crate) fn take_circuit(w: &mut PartitionWork) -> anyhow::Result<Box<dyn ProvableCircuit>> {
    w.circuit
        .take()
        .context("the partition has no circuit left to synthesize")
}

/// Takes the partition's circuit and sizes its arena for the SRS shape.
pub(crate) fn begin(
    w: &mut PartitionWork,
    cx: &mut StageContext<'_>,
) -> anyhow::Result<(Box<dyn ProvableCircuit>, PartitionLayout)> {
    let circuit = take_circuit(w)?;
    let layout = PartitionLayout::new(w.srs.shape());
    cx.arena()?.ensure_capacity(layout.bytes)?;
    Ok((circuit, layout))
}

/// Stores what synthesis produced.
pub(crate) fn done(
    w: &mut PartitionWork,
    cx: &mut StageContext<'_>,
    layout: PartitionLayout,
    out: Synthesized,
) {
    w.public_inputs = out.public_inputs;
    w.constraints = out.constraints;
    w.layout = Some(layout);
    cx.note("constraints", out.constraints);
    cx.note("arena_bytes", layout.bytes);
}

impl Stage<PartitionWork> for Synth {
    fn run(&self, w: &mut PartitionWork, cx: &mut StageContext<'_>) -> anyhow::Result<()> {
        let (circuit, layout) = begin(w, cx)?;
        let shape = layout.shape;
        let view = cx.arena()?.view();
        let out = full(circuit, slices(&view, &layout), &shape)?;
        done(w, cx, layout, out);
        Ok(())
    }
}
