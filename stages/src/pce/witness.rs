//! Witness-only synthesis: a constraint system that records the input and
//! aux assignments straight into the arena and nothing else. The enforce
//! closures are never called (building their linear combinations is most of
//! what full synthesis costs); constraints are only counted and folded into
//! the circuit's fingerprint.
//!
//! A circuit made of parts that depend only on values computed before them
//! (PoRep's challenges, and within each its labeling layers) can be
//! synthesized in parallel: each part runs into a system of its own, either
//! a [`WitnessPart`] that grows (when the parts' sizes are not known yet) and
//! is copied in by [`WitnessCs::append`], or a window of the arena cut by
//! [`WitnessCs::windows`] once they are, whose results
//! [`WitnessCs::absorb`] checks. Either way the assignment, the counts and the
//! fingerprint are the ones sequential synthesis makes.

use bellperson::{ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;

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

/// A circuit whose rest (after what is already synthesized) is a run of
/// items of one shape, each making the same sequence of parts, which may be
/// synthesized in parallel: PoRep's challenges, PoSt's sectors.
pub trait Parts: Sync {
    type Item: Sync;
    /// Parts per item.
    fn per_item(&self) -> usize;
    /// Synthesizes `items` into `parts` (`per_item` each, in order).
    fn run<P: ConstraintSystem<Scalar> + Send>(
        &self,
        items: &[Self::Item],
        parts: &mut [P],
    ) -> Result<(), SynthesisError>;
}

/// Synthesizes `items` by `parts` into `cs`, in parallel: with `known`
/// part sizes (one item's) straight into windows of the assignment;
/// without, the first item into growable parts to learn them, then the
/// rest into windows. Returns one item's part sizes. A part that does not
/// fill its window exactly fails the synthesis.
pub fn synthesize_parts<T: Parts>(
    cs: &mut WitnessCs<'_>,
    parts: &T,
    items: &[T::Item],
    known: Option<Vec<PartSize>>,
) -> Result<Vec<PartSize>, SynthesisError> {
    let (one, rest) = match known {
        Some(one) => (one, items),
        None => {
            let Some(first) = items.first() else {
                return Ok(Vec::new());
            };
            let mut grown: Vec<WitnessPart> = (0..parts.per_item())
                .map(|_| WitnessPart::default())
                .collect();
            parts.run(std::slice::from_ref(first), &mut grown)?;
            cs.append(&grown)?;
            (grown.iter().map(WitnessPart::size).collect(), &items[1..])
        }
    };
    let sizes = one.repeat(rest.len());
    let done = {
        let mut windows = cs.windows(&sizes).ok_or(SynthesisError::Unsatisfiable)?;
        parts.run(rest, &mut windows)?;
        windows.into_iter().map(WitnessCs::done).collect()
    };
    cs.absorb(done, &sizes)?;
    Ok(one)
}

/// What a part synthesized into a window added (see [`WitnessCs::windows`]).
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
        let mut cs = Self::over(inputs, aux);
        cs.alloc_input(|| "one", || Ok(Scalar::ONE))
            .expect("an SRS has at least one input");
        cs
    }

    /// A system over a window, with nothing allocated.
    fn over(inputs: &'a mut [Scalar], aux: &'a mut [Scalar]) -> Self {
        Self {
            inputs,
            aux,
            n_inputs: 0,
            n_aux: 0,
            constraints: 0,
            fingerprint: Fingerprint::default(),
            error: None,
        }
    }

    /// The auxiliary values written so far, to change: for fault drills
    /// that spoil a witness to show the checks catch it.
    pub fn written_aux_mut(&mut self) -> &mut [Scalar] {
        &mut self.aux[..self.n_aux]
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

    /// Cuts the rest of the assignment into windows of the given sizes, in
    /// order, one per part still to come: each part is synthesized (in
    /// parallel) into its own window, as if it ran after everything
    /// synthesized here so far. None if the sizes do not fit.
    pub fn windows(&mut self, sizes: &[PartSize]) -> Option<Vec<WitnessCs<'_>>> {
        let (mut inputs, mut aux) = (
            &mut self.inputs[self.n_inputs..],
            &mut self.aux[self.n_aux..],
        );
        let mut parts = Vec::with_capacity(sizes.len());
        for s in sizes {
            if s.inputs > inputs.len() || s.aux > aux.len() {
                return None;
            }
            let (i, rest_i) = std::mem::take(&mut inputs).split_at_mut(s.inputs);
            let (a, rest_a) = std::mem::take(&mut aux).split_at_mut(s.aux);
            (inputs, aux) = (rest_i, rest_a);
            parts.push(WitnessCs::over(i, a));
        }
        Some(parts)
    }

    /// A window's result, for [`WitnessCs::absorb`].
    pub fn done(self) -> PartDone {
        PartDone {
            n_inputs: self.n_inputs,
            n_aux: self.n_aux,
            constraints: self.constraints,
            fingerprint: self.fingerprint,
            error: self.error,
        }
    }

    /// Takes in the parts synthesized into [`WitnessCs::windows`] of `sizes`,
    /// in order. Each part must have filled its window exactly.
    pub fn absorb(
        &mut self,
        parts: Vec<PartDone>,
        sizes: &[PartSize],
    ) -> Result<(), SynthesisError> {
        if parts.len() != sizes.len() {
            self.fail(CsError::ShapeMismatch {
                what: "parts synthesized in parallel",
                got: parts.len(),
                expected: sizes.len(),
            });
            return Err(SynthesisError::Unsatisfiable);
        }
        for (p, size) in parts.into_iter().zip(sizes) {
            if let Some(e) = p.error {
                self.fail(e);
                return Err(SynthesisError::Unsatisfiable);
            }
            if p.n_inputs != size.inputs || p.n_aux != size.aux {
                self.fail(CsError::ShapeMismatch {
                    what: "variables of a part synthesized in parallel",
                    got: p.n_inputs + p.n_aux,
                    expected: size.inputs + size.aux,
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

    /// Copies in parts synthesized into [`WitnessPart`]s, in order (the
    /// copies in parallel), with their counts and fingerprints.
    pub fn append(&mut self, parts: &[WitnessPart]) -> Result<(), SynthesisError> {
        let sizes: Vec<PartSize> = parts.iter().map(WitnessPart::size).collect();
        let inputs: usize = sizes.iter().map(|s| s.inputs).sum();
        let (limit_i, limit_a) = (self.inputs.len(), self.aux.len());
        let over_inputs = self.n_inputs + inputs > limit_i;
        let Some(windows) = self.windows(&sizes) else {
            self.fail(match over_inputs {
                true => CsError::TooMany {
                    what: "public inputs",
                    limit: limit_i,
                },
                false => CsError::TooMany {
                    what: "auxiliary variables",
                    limit: limit_a,
                },
            });
            return Err(SynthesisError::Unsatisfiable);
        };
        let done: Vec<PartDone> = windows
            .into_par_iter()
            .zip(parts.par_iter())
            .map(|(mut w, p)| {
                w.inputs.copy_from_slice(&p.inputs);
                w.aux.copy_from_slice(&p.aux);
                w.n_inputs = p.inputs.len();
                w.n_aux = p.aux.len();
                w.constraints = p.constraints;
                w.fingerprint = p.fingerprint;
                w.done()
            })
            .collect();
        self.absorb(done, &sizes)
    }
}

/// The variables one part allocates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PartSize {
    pub inputs: usize,
    pub aux: usize,
}

/// A part of a circuit synthesized apart into buffers of its own, for
/// [`WitnessCs::append`]: for parts whose sizes are not known in advance.
/// Two parts are equal when they allocated the same values in the same
/// order and made the same sequence of operations.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct WitnessPart {
    inputs: Vec<Scalar>,
    aux: Vec<Scalar>,
    constraints: usize,
    fingerprint: Fingerprint,
}

impl WitnessPart {
    /// The auxiliary values this part allocated, in order.
    pub fn aux(&self) -> &[Scalar] {
        &self.aux
    }

    /// The variables this part allocated.
    pub fn size(&self) -> PartSize {
        PartSize {
            inputs: self.inputs.len(),
            aux: self.aux.len(),
        }
    }
}

impl ConstraintSystem<Scalar> for WitnessPart {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.fingerprint.alloc();
        self.aux.push(f()?);
        Ok(Variable::new_unchecked(Index::Aux(self.aux.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.fingerprint.alloc_input();
        self.inputs.push(f()?);
        Ok(Variable::new_unchecked(Index::Input(self.inputs.len() - 1)))
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

/// Native witness generators write through the constraint system, so
/// counts, fingerprint and bounds are kept exactly as for gadgets.
impl cuzk_workloads::WitnessSink for WitnessCs<'_> {
    #[inline]
    fn aux(&mut self, value: Scalar) -> Result<(), SynthesisError> {
        self.alloc(|| "", || Ok(value)).map(drop)
    }
    #[inline]
    fn input(&mut self, value: Scalar) -> Result<(), SynthesisError> {
        self.alloc_input(|| "", || Ok(value)).map(drop)
    }
    #[inline]
    fn constraint(&mut self) {
        self.enforce(|| "", |lc| lc, |lc| lc, |lc| lc);
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

    /// Sequential synthesis: the prelude, then the parts in order.
    fn sequential(z: &mut [Scalar], inputs: usize, parts: usize) -> (Fingerprint, usize) {
        let mut seq = WitnessCs::new(z, inputs);
        let x = prelude(&mut seq);
        for p in 0..parts {
            part(&mut seq, &x, p as u64 + 10);
        }
        assert_eq!(seq.n_inputs + seq.n_aux, z_len(inputs, parts));
        (seq.fingerprint, seq.constraints)
    }

    fn z_len(inputs: usize, parts: usize) -> usize {
        inputs + 1 + parts * 7
    }

    #[test]
    fn parts_synthesized_apart_equal_sequential_synthesis() {
        const PARTS: usize = 4;
        let inputs = 1 + 1 + PARTS;
        let mut z1 = vec![Scalar::ZERO; z_len(inputs, PARTS)];
        let (fp, constraints) = sequential(&mut z1, inputs, PARTS);

        // Growable parts, copied in; their sizes then cut windows.
        let mut z2 = vec![Scalar::ZERO; z1.len()];
        let mut par = WitnessCs::new(&mut z2, inputs);
        let x = prelude(&mut par);
        let mut grown: Vec<WitnessPart> = (0..PARTS).map(|_| WitnessPart::default()).collect();
        grown
            .par_iter_mut()
            .enumerate()
            .for_each(|(p, cs)| part(cs, &x, p as u64 + 10));
        let sizes: Vec<PartSize> = grown.iter().map(WitnessPart::size).collect();
        assert_eq!(sizes[0], PartSize { inputs: 1, aux: 7 });
        par.append(&grown).unwrap();
        assert_eq!((par.fingerprint, par.constraints), (fp, constraints));
        drop(par);
        assert_eq!(z1, z2, "the same assignment, variable for variable");

        // Windows of known sizes, written in place.
        let mut z3 = vec![Scalar::ZERO; z1.len()];
        let mut par = WitnessCs::new(&mut z3, inputs);
        let x = prelude(&mut par);
        let done: Vec<PartDone> = par
            .windows(&sizes)
            .expect("the windows fit")
            .into_par_iter()
            .enumerate()
            .map(|(p, mut cs)| {
                part(&mut cs, &x, p as u64 + 10);
                cs.done()
            })
            .collect();
        par.absorb(done, &sizes).unwrap();
        assert_eq!((par.fingerprint, par.constraints), (fp, constraints));
        drop(par);
        assert_eq!(z1, z3);
    }

    #[test]
    fn parts_that_do_not_fill_their_windows_or_overflow_are_named() {
        let inputs = 1 + 1 + 2;
        let mut z = vec![Scalar::ZERO; z_len(inputs, 2)];
        let mut cs = WitnessCs::new(&mut z, inputs);
        let x = prelude(&mut cs);
        // A window one aux too large: the part leaves it short.
        let sizes = [PartSize { inputs: 1, aux: 8 }];
        let done: Vec<PartDone> = cs
            .windows(&sizes)
            .unwrap()
            .into_iter()
            .map(|mut w| {
                part(&mut w, &x, 1);
                w.done()
            })
            .collect();
        assert!(cs.absorb(done, &sizes).is_err());
        let e = cs.take_error().unwrap().to_string();
        assert!(e.contains("parallel"), "{e}");
        // Three grown parts where two fit: too many inputs, named.
        let mut grown: Vec<WitnessPart> = (0..3).map(|_| WitnessPart::default()).collect();
        for (p, g) in grown.iter_mut().enumerate() {
            part(g, &x, p as u64);
        }
        assert!(cs.windows(&[PartSize { inputs: 9, aux: 0 }]).is_none());
        assert!(cs.append(&grown).is_err());
        let e = cs.take_error().unwrap().to_string();
        assert!(e.contains("public inputs"), "{e}");
    }

    /// The sha256 workload's native witness is the gadget's, variable for
    /// variable, with the same counts and fingerprint: one block (from the
    /// constant IV) and several chained.
    #[test]
    fn native_sha256_witness_equals_the_gadgets() {
        use crate::circuit::NativeWitness;
        use bellperson::Circuit;
        use cuzk_workloads::{Sha256Circuit, WorkloadCircuit};
        for blocks in [1usize, 3] {
            let message: Vec<[u8; 64]> = (0..blocks)
                .map(|b| std::array::from_fn(|i| (i as u8).wrapping_mul(37) ^ (b as u8 * 91)))
                .collect();
            let circuit = Sha256Circuit {
                blocks,
                message: Some(message),
            };
            let len = 30_000 * blocks;
            let (mut z1, mut z2) = (vec![Scalar::ZERO; len], vec![Scalar::ZERO; len]);
            let mut gadget = WitnessCs::new(&mut z1, 3);
            circuit.clone().synthesize(&mut gadget).unwrap();
            let mut native = WitnessCs::new(&mut z2, 3);
            WorkloadCircuit::Sha256(circuit)
                .native_witness(&mut native)
                .unwrap();
            let counts = |cs: &WitnessCs<'_>| (cs.n_inputs, cs.n_aux, cs.constraints);
            assert_eq!(counts(&native), counts(&gadget), "{blocks} blocks");
            assert_eq!(native.fingerprint, gadget.fingerprint, "{blocks} blocks");
            assert!(gadget.n_aux > 25_000 * blocks);
            drop((gadget, native));
            assert_eq!(z1, z2, "{blocks} blocks: the same assignment");
        }
    }
}
