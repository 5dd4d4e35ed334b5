//! Fault drills: stages made to fail the ways real ones can (a panic, an
//! error, a device fault, a stall, a hang until cancelled, a proof corrupted
//! after assembly, a witness wrong in one wire), for the daemon's chaos tests and for operators checking
//! what their deployment does. Each drill names a stage and the jobs it hits
//! (their labels, which in the daemon are the job ids, contain a pattern);
//! every other job runs untouched.

use std::sync::Arc;
use std::time::Duration;

use bellperson::SynthesisError;
use blstrs::Scalar;
use cuzk_engine::{DeviceFault, Stage, StageContext, StageRegistry};
use cuzk_stages::circuit::ProvableCircuit;
use cuzk_stages::cs::ArenaCs;
use cuzk_stages::partition::PartitionWork;
use cuzk_stages::pce::{RecordingCs, WitnessCs};
use ff::Field;
use group::{Curve, Group};

/// What a drilled stage does.
#[derive(Clone, Debug)]
pub enum FaultKind {
    Panic,
    Error,
    /// A device fault: the partition is retried on another device, if any.
    DeviceFault,
    /// Runs, late by this much.
    Delay(Duration),
    /// Never returns until its job is cancelled (a wedged GPU call).
    HangUntilCancel,
    /// Runs, then spoils the proof (assemble): the verifier must catch it.
    CorruptProof,
    /// Computes the witness wrong in one wire (a synth stage of a graph
    /// with pre-compiled constraints): the recording's row check must
    /// catch it, name the row, and fall back to full synthesis.
    WrongWitness,
}

/// One drill: `kind` in `stage` for jobs whose label contains `job`.
#[derive(Clone, Debug)]
pub struct Fault {
    pub stage: String,
    pub job: String,
    pub kind: FaultKind,
}

struct Drilled {
    inner: Arc<dyn Stage<PartitionWork>>,
    faults: Vec<Fault>,
}

impl Stage<PartitionWork> for Drilled {
    fn run(&self, w: &mut PartitionWork, cx: &mut StageContext<'_>) -> anyhow::Result<()> {
        let Some(fault) = self.faults.iter().find(|f| w.job_label.contains(&f.job)) else {
            return self.inner.run(w, cx);
        };
        let node = cx.node;
        match &fault.kind {
            FaultKind::Panic => panic!("injected panic in `{node}` (fault drill)"),
            FaultKind::Error => anyhow::bail!("injected error in `{node}` (fault drill)"),
            FaultKind::DeviceFault => Err(DeviceFault {
                device: cx.device.unwrap_or(0),
                message: format!("injected device fault in `{node}` (fault drill)"),
            }
            .into()),
            FaultKind::Delay(d) => {
                std::thread::sleep(*d);
                self.inner.run(w, cx)
            }
            FaultKind::HangUntilCancel => loop {
                cx.check_cancelled()?;
                std::thread::sleep(Duration::from_millis(10));
            },
            FaultKind::WrongWitness => {
                if let Some(c) = w.circuit.take() {
                    w.circuit = Some(Box::new(WrongWire(c)));
                }
                self.inner.run(w, cx)
            }
            FaultKind::CorruptProof => {
                self.inner.run(w, cx)?;
                if let Some(p) = &mut w.proof {
                    let c = blstrs::G1Projective::from(p.c) + blstrs::G1Projective::generator();
                    p.c = c.to_affine();
                }
                Ok(())
            }
        }
    }

    fn device_timed(&self) -> bool {
        self.inner.device_timed()
    }
}

/// A circuit whose witness-only synthesis is wrong in one wire (the middle
/// auxiliary variable, plus one); everything else, its copies included, is
/// the circuit's own.
struct WrongWire(Box<dyn ProvableCircuit>);

impl ProvableCircuit for WrongWire {
    fn synthesize_into(self: Box<Self>, cs: &mut ArenaCs<'_>) -> Result<(), SynthesisError> {
        self.0.synthesize_into(cs)
    }
    fn synthesize_witness(self: Box<Self>, cs: &mut WitnessCs<'_>) -> Result<(), SynthesisError> {
        self.0.synthesize_witness(cs)?;
        let aux = cs.written_aux_mut();
        if let Some(wire) = aux.get_mut(aux.len() / 2) {
            *wire += Scalar::ONE;
        }
        Ok(())
    }
    fn synthesize_recording(
        self: Box<Self>,
        cs: &mut RecordingCs<'_>,
    ) -> Result<(), SynthesisError> {
        self.0.synthesize_recording(cs)
    }
    fn duplicate(&self) -> Option<Box<dyn ProvableCircuit>> {
        self.0.duplicate()
    }
    fn shape(self: Box<Self>) -> Result<cuzk_stages::CircuitShape, SynthesisError> {
        self.0.shape()
    }
}

/// Wraps each drilled stage of `stages` with its drills.
pub fn install(stages: &mut StageRegistry<PartitionWork>, faults: &[Fault]) {
    let mut by_stage: std::collections::BTreeMap<&str, Vec<Fault>> = Default::default();
    for f in faults {
        by_stage.entry(&f.stage).or_default().push(f.clone());
    }
    for (stage, faults) in by_stage {
        stages.wrap(stage, |inner| Arc::new(Drilled { inner, faults }));
    }
}
