//! Witness-only synthesis: a constraint system that records the input and
//! aux assignments straight into the arena and nothing else. The enforce
//! closures are never called (building their linear combinations is most of
//! what full synthesis costs); constraints are only counted and folded into
//! the circuit's fingerprint.

use bellperson::{ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;

use super::Fingerprint;
use crate::cs::CsError;

/// Writes one partition's assignment into arena slices.
pub struct WitnessCs<'a> {
    inputs: &'a mut [Scalar],
    aux: &'a mut [Scalar],
    pub(super) n_inputs: usize,
    pub(super) n_aux: usize,
    pub(super) constraints: usize,
    pub(super) fingerprint: Fingerprint,
    error: Option<CsError>,
}

impl<'a> WitnessCs<'a> {
    /// Starts with the constant-one input allocated; `z` is the assignment
    /// region (inputs, then aux) sized by the SRS.
    pub fn new(z: &'a mut [Scalar], inputs: usize) -> Self {
        let (inputs, aux) = z.split_at_mut(inputs);
        let mut cs = Self {
            inputs,
            aux,
            n_inputs: 0,
            n_aux: 0,
            constraints: 0,
            fingerprint: Fingerprint::default(),
            error: None,
        };
        cs.alloc_input(|| "one", || Ok(Scalar::ONE))
            .expect("an SRS has at least one input");
        cs
    }

    /// The first problem met (more variables than the SRS has).
    pub fn take_error(&mut self) -> Option<CsError> {
        self.error.take()
    }

    /// The inputs allocated (starting with the one).
    pub fn inputs(&self) -> &[Scalar] {
        &self.inputs[..self.n_inputs]
    }

    fn fail(&mut self, e: CsError) {
        if self.error.is_none() {
            self.error = Some(e);
        }
    }
}

impl ConstraintSystem<Scalar> for WitnessCs<'_> {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let i = self.n_aux;
        self.fingerprint.alloc();
        if i == self.aux.len() {
            self.fail(CsError::TooMany {
                what: "auxiliary variables",
                limit: self.aux.len(),
            });
            return Err(SynthesisError::Unsatisfiable);
        }
        self.aux[i] = f()?;
        self.n_aux += 1;
        Ok(Variable::new_unchecked(Index::Aux(i)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let i = self.n_inputs;
        self.fingerprint.alloc_input();
        if i == self.inputs.len() {
            self.fail(CsError::TooMany {
                what: "public inputs",
                limit: self.inputs.len(),
            });
            return Err(SynthesisError::Unsatisfiable);
        }
        self.inputs[i] = f()?;
        self.n_inputs += 1;
        Ok(Variable::new_unchecked(Index::Input(i)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.fingerprint.enforce();
        self.constraints += 1;
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}
