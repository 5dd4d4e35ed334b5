//! Witness-only synthesis: a constraint system that records the input and
//! aux assignments straight into the arena and nothing else. The enforce
//! closures are never called (building their linear combinations is most of
//! what full synthesis costs); constraints are only counted and folded into
//! the circuit's fingerprint.
//!
//! A circuit made of independent parts of one shape (PoRep's challenges)
//! can be synthesized in parallel: [`WitnessCs::split`] cuts the rest of the
//! assignment into equal windows, one per part; each part is synthesized
//! apart, repeating the shared prelude, whose operations it skips; and
//! [`WitnessCs::absorb`] adds the parts' counts and fingerprints as if they
//! had run one after another.

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
    /// Operations still to skip (a part's repeat of the shared prelude).
    skip: u64,
    error: Option<CsError>,
}

/// What a part synthesized apart added (see [`WitnessCs::split`]).
#[derive(Debug)]
pub struct PartDone {
    n_inputs: usize,
    n_aux: usize,
    constraints: usize,
    fingerprint: Fingerprint,
    error: Option<CsError>,
}

impl<'a> WitnessCs<'a> {
    /// Starts with the constant-one input allocated; `z` is the assignment
    /// region (inputs, then aux) sized by the SRS.
    pub fn new(z: &'a mut [Scalar], inputs: usize) -> Self {
        let (inputs, aux) = z.split_at_mut(inputs);
        Self::over(inputs, aux, 0)
    }

    fn over(inputs: &'a mut [Scalar], aux: &'a mut [Scalar], skip: u64) -> Self {
        let mut cs = Self {
            inputs,
            aux,
            n_inputs: 0,
            n_aux: 0,
            constraints: 0,
            fingerprint: Fingerprint::default(),
            skip,
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

    /// Whether this operation belongs to a skipped prelude.
    fn skipped(&mut self) -> bool {
        if self.skip > 0 {
            self.skip -= 1;
            return true;
        }
        false
    }

    /// Cuts the rest of the assignment into `parts` equal windows, one per
    /// part of the circuit still to come, each to be synthesized (in
    /// parallel) by a system that first skips everything synthesized here so
    /// far: each part repeats that prelude before its own work. None if the
    /// rest does not divide into `parts` equal windows.
    pub fn split(&mut self, parts: usize) -> Option<Vec<WitnessCs<'_>>> {
        let (inputs, aux) = (
            &mut self.inputs[self.n_inputs..],
            &mut self.aux[self.n_aux..],
        );
        if parts == 0 || inputs.len() % parts != 0 || aux.len() % parts != 0 {
            return None;
        }
        let (li, la) = (inputs.len() / parts, aux.len() / parts);
        let prelude = self.fingerprint.ops();
        Some(
            windows(inputs, li, parts)
                .zip(windows(aux, la, parts))
                .map(|(i, a)| WitnessCs::over(i, a, prelude))
                .collect(),
        )
    }

    /// A part's result, for [`WitnessCs::absorb`].
    pub fn done(self) -> PartDone {
        PartDone {
            n_inputs: self.n_inputs,
            n_aux: self.n_aux,
            constraints: self.constraints,
            fingerprint: self.fingerprint,
            error: self.error,
        }
    }

    /// Takes in the parts [`WitnessCs::split`] made, in order: their
    /// variables and constraints follow this system's, and the fingerprint
    /// is the one sequential synthesis would have made. Each part must have
    /// filled its window exactly.
    pub fn absorb(&mut self, parts: Vec<PartDone>) -> Result<(), SynthesisError> {
        let n = parts.len();
        let (window_inputs, window_aux) = (
            (self.inputs.len() - self.n_inputs) / n.max(1),
            (self.aux.len() - self.n_aux) / n.max(1),
        );
        for p in parts {
            if let Some(e) = p.error {
                self.fail(e);
                return Err(SynthesisError::Unsatisfiable);
            }
            if p.n_inputs != window_inputs || p.n_aux != window_aux {
                self.fail(CsError::ShapeMismatch {
                    what: "variables of a part synthesized in parallel",
                    got: p.n_inputs + p.n_aux,
                    expected: window_inputs + window_aux,
                });
                return Err(SynthesisError::Unsatisfiable);
            }
            self.n_inputs += p.n_inputs;
            self.n_aux += p.n_aux;
            self.constraints += p.constraints;
            self.fingerprint = self.fingerprint.then(p.fingerprint);
        }
        Ok(())
    }
}

/// `n` windows of `len` elements each (empty ones when `len` is 0).
fn windows(s: &mut [Scalar], len: usize, n: usize) -> impl Iterator<Item = &mut [Scalar]> {
    s.chunks_mut(len.max(1))
        .take(if len == 0 { 0 } else { n })
        .chain(std::iter::repeat_with(|| &mut [][..]))
        .take(n)
}

impl ConstraintSystem<Scalar> for WitnessCs<'_> {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        if self.skipped() {
            // The caller still needs the value (AllocatedNum keeps it).
            f()?;
            return Ok(Variable::new_unchecked(Index::Aux(0)));
        }
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
        if self.skipped() {
            f()?;
            return Ok(Variable::new_unchecked(Index::Input(0)));
        }
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
        if self.skipped() {
            return;
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use bellperson::gadgets::num::AllocatedNum;

    /// A prelude, then `parts` identical parts each squaring the prelude's
    /// number `k` times and exposing the result.
    fn prelude<CS: ConstraintSystem<Scalar>>(cs: &mut CS) -> AllocatedNum<Scalar> {
        let x = AllocatedNum::alloc(cs.namespace(|| "x"), || Ok(Scalar::from(3u64))).unwrap();
        x.inputize(cs.namespace(|| "x in")).unwrap();
        x
    }

    fn part<CS: ConstraintSystem<Scalar>>(cs: &mut CS, x: &AllocatedNum<Scalar>, salt: u64) {
        let mut y = x.clone();
        for i in 0..5 {
            y = y.square(cs.namespace(|| format!("sq {i}"))).unwrap();
        }
        let s = AllocatedNum::alloc(cs.namespace(|| "salt"), || Ok(Scalar::from(salt))).unwrap();
        let out = y.mul(cs.namespace(|| "out"), &s).unwrap();
        out.inputize(cs.namespace(|| "out in")).unwrap();
    }

    #[test]
    fn parts_synthesized_apart_equal_sequential_synthesis() {
        const PARTS: usize = 4;
        // Sequential: prelude, then the parts in order.
        let (inputs, aux) = (1 + 1 + PARTS, 1 + PARTS * 7);
        let mut z1 = vec![Scalar::ZERO; inputs + aux];
        let mut seq = WitnessCs::new(&mut z1, inputs);
        let x = prelude(&mut seq);
        for p in 0..PARTS {
            part(&mut seq, &x, p as u64 + 10);
        }
        let (fp, c) = (seq.fingerprint, seq.constraints);
        assert_eq!((seq.n_inputs, seq.n_aux), (inputs, aux));
        // In parallel: each part repeats (and skips) the prelude.
        let mut z2 = vec![Scalar::ZERO; inputs + aux];
        let mut par = WitnessCs::new(&mut z2, inputs);
        prelude(&mut par);
        let done: Vec<PartDone> = {
            let parts = par.split(PARTS).expect("equal windows");
            std::thread::scope(|s| {
                let handles: Vec<_> = parts
                    .into_iter()
                    .enumerate()
                    .map(|(p, mut cs)| {
                        s.spawn(move || {
                            let x = prelude(&mut cs);
                            part(&mut cs, &x, p as u64 + 10);
                            cs.done()
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            })
        };
        par.absorb(done).unwrap();
        assert_eq!(par.fingerprint, fp);
        assert_eq!(par.constraints, c);
        drop((seq, par));
        assert_eq!(z1, z2, "the same assignment, variable for variable");
    }
}
