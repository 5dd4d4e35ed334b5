//! synth_pce: synthesis with pre-compiled constraints ([`crate::pce`]).
//!
//! The first partition of an SRS records its circuit's matrices (full
//! synthesis plus recording); later ones run witness-only and evaluate
//! a = A·z, b = B·z, c = C·z from the recording. A circuit that does not
//! match its recording, or a witness that does not satisfy it, falls back
//! to full synthesis with a warning.
//!
//! synth_witness is the same stage leaving a, b and c to the device: on the
//! GPU backend it stops after the witness (and the densities, copied from
//! the recording), and the device stage evaluates a, b and c from matrices
//! resident in device memory and checks a·b = c there. On the CPU backend
//! the host is the device, and synth_witness is synth_pce.

use std::sync::Arc;

use anyhow::Context;
use cuzk_engine::{ArenaView, Stage, StageContext};

use crate::circuit::ProvableCircuit;
use crate::cs::{ArenaCs, CsError, Finished, Synthesized, check_finished, finish};
use crate::partition::{PartitionLayout, PartitionWork};
use crate::pce::{Mismatch, Origin, PceCache, Recording, RecordingCs, WitnessCs, check_rows};
use crate::scalars::as_scalars;
use crate::setup::MatrixCs;
use crate::srs::SrsShape;
use crate::synth::{done, full, slices, take_circuit};

#[derive(Clone)]
pub struct SynthPce {
    pub cache: Arc<PceCache>,
    /// Leave a, b and c to the device stage ([`PartitionWork::deferred_abc`]).
    pub defer_abc: bool,
}

impl Stage<PartitionWork> for SynthPce {
    fn run(&self, w: &mut PartitionWork, cx: &mut StageContext<'_>) -> anyhow::Result<()> {
        // The arena is sized once the route is known: recording in parts
        // needs none, and a partition going on witness-only (a, b and c left
        // to the device) would otherwise keep a full layout's page-locked
        // arena (19 GiB rather than 7 at 32 GiB PoRep) for the rest of the
        // run. A recording already in memory or on disk is returned at once.
        let circuit = take_circuit(w)?;
        let srs = w.srs.clone();
        let mut circuit = Some(circuit);
        let mut recorded: Option<anyhow::Result<(Synthesized, PartitionLayout)>> = None;
        let (recording, origin) = self.cache.get_or_record(&srs, || {
            let c = circuit.take().expect("the circuit is here until used");
            // In parts where the circuit can; this partition then goes
            // the pre-compiled route as every later one does.
            if let Some(rec) = record_in_parts(&*c, srs.id()) {
                circuit = Some(c);
                return Some(rec);
            }
            let layout = PartitionLayout::new(srs.shape());
            let view = match sized_view(cx, &layout) {
                Ok(view) => view,
                Err(e) => {
                    recorded = Some(Err(e));
                    return None;
                }
            };
            let (result, rec) = record(c, slices(&view, &layout), &layout.shape, srs.id());
            recorded = Some(result.map(|out| (out, layout)));
            rec
        });
        if let Some(result) = recorded {
            cx.note("pce", origin.as_str());
            let (out, layout) = result?;
            done(w, cx, layout, out);
            return Ok(());
        }
        let circuit = circuit.expect("not used by recording");
        let recording = recording.expect("present unless this partition recorded");
        let layout = match self.defer_abc {
            true => PartitionLayout::witness_only(srs.shape()),
            false => PartitionLayout::new(srs.shape()),
        };
        cx.arena()?.ensure_capacity(layout.bytes)?;
        self.witness_or_full(w, cx, circuit, recording, origin, layout)
    }
}

impl SynthPce {
    /// Witness-only synthesis and a, b, c from `recording` (or left to the
    /// device) into `layout`; a circuit that does not match falls back to
    /// full synthesis, in an arena grown to the full layout if need be.
    fn witness_or_full(
        &self,
        w: &mut PartitionWork,
        cx: &mut StageContext<'_>,
        circuit: Box<dyn ProvableCircuit>,
        recording: Arc<Recording>,
        origin: Origin,
        layout: PartitionLayout,
    ) -> anyhow::Result<()> {
        let copy = circuit.duplicate();
        let attempt = {
            let view = cx.arena()?.view();
            from_recording(circuit, &recording, &layout, &view, self.defer_abc)?
        };
        match attempt {
            Ok(out) => {
                cx.note("pce", origin.as_str());
                if self.defer_abc {
                    cx.note("abc", "device");
                    w.deferred_abc = Some(recording);
                }
                done(w, cx, layout, out);
            }
            Err(mismatch) => {
                tracing::warn!(
                    "pre-compiled constraints do not fit this circuit ({mismatch}); falling back to full synthesis"
                );
                cx.note("pce", "fallback");
                cx.note("pce_mismatch", &mismatch);
                let circuit = copy.with_context(|| {
                    format!("pre-compiled constraints do not fit this circuit ({mismatch}) and it cannot be copied to synthesize again (wrap it so it is Clone, or use a graph without synth_pce)")
                })?;
                let layout = PartitionLayout::new(layout.shape);
                cx.arena()?.ensure_capacity(layout.bytes)?;
                let view = cx.arena()?.view();
                let out = full(circuit, slices(&view, &layout), &layout.shape)?;
                done(w, cx, layout, out);
            }
        }
        Ok(())
    }
}

/// The partition's arena, grown to `layout` if need be.
fn sized_view<'a>(
    cx: &'a mut StageContext<'_>,
    layout: &PartitionLayout,
) -> anyhow::Result<ArenaView<'a>> {
    let arena = cx.arena()?;
    arena.ensure_capacity(layout.bytes)?;
    Ok(arena.view())
}

/// The circuit's recording from its matrices recorded without values, its
/// parts in parallel ([`ProvableCircuit::record_matrices`]), for the SRS
/// `srs_id`; `None` where the circuit cannot, or that failed (with a
/// warning: full synthesis records it instead).
fn record_in_parts(circuit: &dyn ProvableCircuit, srs_id: u64) -> Option<Recording> {
    let started = std::time::Instant::now();
    let mut cs = MatrixCs::root();
    if let Err(e) = circuit.record_matrices(&mut cs)? {
        tracing::warn!(
            "recording the circuit in parts failed ({e}); recording it through full synthesis"
        );
        return None;
    }
    let recording = crate::pce::recording_of(cs, srs_id)?;
    tracing::info!(
        constraints = recording.meta.constraints,
        secs = started.elapsed().as_secs_f64(),
        "recorded the circuit's matrices in parts"
    );
    Some(recording)
}

/// Full synthesis that records the matrices: the partition's result, and the
/// recording unless synthesis failed or the matrices are too large.
fn record(
    circuit: Box<dyn ProvableCircuit>,
    slices: crate::cs::CsSlices<'_>,
    shape: &SrsShape,
    srs_id: u64,
) -> (anyhow::Result<Synthesized>, Option<Recording>) {
    let mut cs = RecordingCs::new(ArenaCs::new(slices, shape));
    let result = circuit.synthesize_recording(&mut cs);
    if let Some(e) = cs.take_error() {
        return (Err(e.into()), None);
    }
    if let Err(e) = result {
        return (
            Err(anyhow::Error::new(e).context("the circuit failed to synthesize")),
            None,
        );
    }
    let (out, recording) = cs.finish(shape, srs_id);
    (out.map_err(Into::into), recording)
}

/// Witness-only synthesis and evaluation from `recording`. The outer error
/// is the partition's (a witness the circuit cannot compute, a shape the
/// SRS does not have); the inner one a mismatch with the recording. With
/// `defer_abc`, a, b and c are left to the device stage.
fn from_recording(
    circuit: Box<dyn ProvableCircuit>,
    recording: &Recording,
    layout: &PartitionLayout,
    view: &cuzk_engine::ArenaView<'_>,
    defer_abc: bool,
) -> anyhow::Result<Result<Synthesized, Mismatch>> {
    let shape = &layout.shape;
    let z = as_scalars(view.take(layout.z));
    let mut cs = WitnessCs::new(z, shape.inputs);
    let result = circuit.synthesize_witness(&mut cs);
    if let Some(e) = cs.take_error() {
        return Err(e.into());
    }
    result.context("the circuit failed to compute its witness")?;
    if let Err(m) = recording.matches(&cs) {
        return Ok(Err(m));
    }
    drop(cs);
    for (what, got, expected) in [
        ("public inputs", recording.meta.n_inputs, shape.inputs),
        ("auxiliary variables", recording.meta.n_aux, shape.aux),
    ] {
        if got != expected {
            return Err(CsError::ShapeMismatch {
                what,
                got,
                expected,
            }
            .into());
        }
    }
    let [ra, rbi, rba] = recording.densities();
    let (da, dbi, dba) = (
        view.take(layout.a_aux_density),
        view.take(layout.b_input_density),
        view.take(layout.b_aux_density),
    );
    da.copy_from_slice(ra);
    dbi.copy_from_slice(rbi);
    dba.copy_from_slice(rba);
    let rows = recording.meta.constraints;
    if defer_abc {
        let inputs = &z[..shape.inputs];
        return Ok(Ok(check_finished(inputs, rows, [da, dbi, dba], shape)?));
    }
    let (a, b, c) = (
        as_scalars(view.take(layout.a)),
        as_scalars(view.take(layout.b)),
        as_scalars(view.take(layout.c)),
    );
    recording.evaluate(z, a, b, c);
    if let Err(m) = check_rows(a, b, c, rows) {
        return Ok(Err(m));
    }
    let out = finish(
        Finished {
            a,
            b,
            c,
            inputs: &z[..shape.inputs],
            a_aux_density: da,
            b_input_density: dbi,
            b_aux_density: dba,
            constraints: rows,
        },
        shape,
    )?;
    Ok(Ok(out))
}
