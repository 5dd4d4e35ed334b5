//! Circuits the engine can prove: any bellperson circuit over BLS12-381's
//! scalar field, erased behind one object-safe trait so a job can carry
//! partitions of any circuit type, and synthesized into any of the engine's
//! constraint systems (full, witness-only, or recording its matrices).

use bellperson::{Circuit, SynthesisError};
use blstrs::Scalar;

use crate::cs::ArenaCs;
use crate::pce::{RecordingCs, WitnessCs};
use crate::setup::MatrixCs;
use crate::shape::{CircuitShape, shape_of};

/// A circuit ready to be synthesized once, into a partition's arena.
///
/// Implemented for every `bellperson::Circuit<Scalar> + Clone + Send`;
/// wrap a circuit that is not `Clone` in [`Once`].
pub trait ProvableCircuit: Send {
    /// Full synthesis: A, B, C evaluations, the assignment and densities.
    fn synthesize_into(self: Box<Self>, cs: &mut ArenaCs<'_>) -> Result<(), SynthesisError>;
    /// The assignment alone (pre-compiled constraints compute A, B and C).
    fn synthesize_witness(self: Box<Self>, cs: &mut WitnessCs<'_>) -> Result<(), SynthesisError>;
    /// The assignment through the circuit's gadgets, for circuits whose
    /// [`synthesize_witness`](Self::synthesize_witness) computes some of
    /// it natively: the route the native one is measured and compared
    /// against. `None` where the two are the same route.
    fn synthesize_witness_gadgets(
        self: Box<Self>,
        _cs: &mut WitnessCs<'_>,
    ) -> Option<Result<(), SynthesisError>> {
        None
    }
    /// The gadget path of aux variable `index` as full synthesis allocates
    /// it (`crate::pce::aux_name`): where a witness that differs there went
    /// wrong. `None` where the circuit does not say.
    fn aux_name(self: Box<Self>, _index: usize) -> Option<Result<Option<String>, SynthesisError>> {
        None
    }
    /// Full synthesis that also records the constraint matrices.
    fn synthesize_recording(
        self: Box<Self>,
        cs: &mut RecordingCs<'_>,
    ) -> Result<(), SynthesisError>;
    /// Records the circuit's matrices without values, its independent
    /// parts in parallel ([`MatrixCs::record_parts`]), where the circuit
    /// can: the first partition of a shape then records in seconds rather
    /// than through full synthesis on one thread. `None` where it cannot.
    fn record_matrices(&self, _cs: &mut MatrixCs) -> Option<Result<(), SynthesisError>> {
        None
    }
    /// A copy to synthesize again (to fall back from pre-compiled
    /// constraints that do not match), if the circuit can be copied.
    fn duplicate(&self) -> Option<Box<dyn ProvableCircuit>>;
    /// Its counts and the SRS shape it needs (a synthesis that computes no
    /// witness).
    fn shape(self: Box<Self>) -> Result<CircuitShape, SynthesisError>;
}

impl<C: Circuit<Scalar> + Clone + Send + 'static> ProvableCircuit for C {
    fn synthesize_into(self: Box<Self>, cs: &mut ArenaCs<'_>) -> Result<(), SynthesisError> {
        (*self).synthesize(cs)
    }
    fn synthesize_witness(self: Box<Self>, cs: &mut WitnessCs<'_>) -> Result<(), SynthesisError> {
        (*self).synthesize(cs)
    }
    fn synthesize_recording(
        self: Box<Self>,
        cs: &mut RecordingCs<'_>,
    ) -> Result<(), SynthesisError> {
        (*self).synthesize(cs)
    }
    fn aux_name(self: Box<Self>, index: usize) -> Option<Result<Option<String>, SynthesisError>> {
        Some(crate::pce::aux_name(*self, index))
    }
    fn duplicate(&self) -> Option<Box<dyn ProvableCircuit>> {
        Some(Box::new(self.clone()))
    }
    fn shape(self: Box<Self>) -> Result<CircuitShape, SynthesisError> {
        shape_of(*self)
    }
}

/// A circuit that is not `Clone`: provable all the same, but a mismatch
/// with its pre-compiled constraints fails the partition instead of
/// falling back to full synthesis.
pub struct Once<C>(pub C);

impl<C: Circuit<Scalar> + Send + 'static> ProvableCircuit for Once<C> {
    fn synthesize_into(self: Box<Self>, cs: &mut ArenaCs<'_>) -> Result<(), SynthesisError> {
        self.0.synthesize(cs)
    }
    fn synthesize_witness(self: Box<Self>, cs: &mut WitnessCs<'_>) -> Result<(), SynthesisError> {
        self.0.synthesize(cs)
    }
    fn synthesize_recording(
        self: Box<Self>,
        cs: &mut RecordingCs<'_>,
    ) -> Result<(), SynthesisError> {
        self.0.synthesize(cs)
    }
    fn duplicate(&self) -> Option<Box<dyn ProvableCircuit>> {
        None
    }
    fn shape(self: Box<Self>) -> Result<CircuitShape, SynthesisError> {
        shape_of(self.0)
    }
}

/// A circuit that can compute its witness-only assignment natively, without
/// running its gadgets: what witness-only synthesis would write, variable
/// for variable, with every allocation and constraint reported in the same
/// order. Held to that like any witness: the recording's counts and
/// fingerprint, and a·b = c on every row.
pub trait NativeWitness: Circuit<Scalar> + Clone + Send + 'static {
    fn native_witness(self, cs: &mut WitnessCs<'_>) -> Result<(), SynthesisError>;
}

/// A circuit proved as any other, except that witness-only synthesis (the
/// pre-compiled constraint graphs) runs its [`NativeWitness`].
#[derive(Clone)]
pub struct Native<C>(pub C);

impl<C: NativeWitness> ProvableCircuit for Native<C> {
    fn synthesize_into(self: Box<Self>, cs: &mut ArenaCs<'_>) -> Result<(), SynthesisError> {
        self.0.synthesize(cs)
    }
    fn synthesize_witness(self: Box<Self>, cs: &mut WitnessCs<'_>) -> Result<(), SynthesisError> {
        self.0.native_witness(cs)
    }
    fn synthesize_witness_gadgets(
        self: Box<Self>,
        cs: &mut WitnessCs<'_>,
    ) -> Option<Result<(), SynthesisError>> {
        Some(self.0.synthesize(cs))
    }
    fn synthesize_recording(
        self: Box<Self>,
        cs: &mut RecordingCs<'_>,
    ) -> Result<(), SynthesisError> {
        self.0.synthesize(cs)
    }
    fn duplicate(&self) -> Option<Box<dyn ProvableCircuit>> {
        Some(Box::new(self.clone()))
    }
    fn shape(self: Box<Self>) -> Result<CircuitShape, SynthesisError> {
        shape_of(self.0)
    }
}

/// The built-in workloads: sha256 computes its witness natively; chain's
/// gadget (one squaring per constraint) is as cheap as native code would be.
impl NativeWitness for cuzk_workloads::WorkloadCircuit {
    fn native_witness(self, cs: &mut WitnessCs<'_>) -> Result<(), SynthesisError> {
        match self {
            Self::Chain(c) => c.synthesize(cs),
            Self::Sha256(c) => c.witness(cs),
        }
    }
}
