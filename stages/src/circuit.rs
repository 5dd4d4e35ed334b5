//! Circuits the engine can prove: any bellperson circuit over BLS12-381's
//! scalar field, erased behind one object-safe trait so a job can carry
//! partitions of any circuit type.

use bellperson::{Circuit, SynthesisError};
use blstrs::Scalar;

use crate::cs::ArenaCs;

/// A circuit ready to be synthesized once, into a partition's arena.
///
/// Implemented for every `bellperson::Circuit<Scalar> + Send`.
pub trait ProvableCircuit: Send {
    fn synthesize_into(self: Box<Self>, cs: &mut ArenaCs<'_>) -> Result<(), SynthesisError>;
}

impl<C: Circuit<Scalar> + Send> ProvableCircuit for C {
    fn synthesize_into(self: Box<Self>, cs: &mut ArenaCs<'_>) -> Result<(), SynthesisError> {
        (*self).synthesize(cs)
    }
}
