//! A bellperson `ConstraintSystem` that evaluates each constraint's A, B and C
//! linear combinations against the witness and writes them, the assignment
//! and the query densities straight into the partition's arena.
//!
//! It also checks every constraint (a·b = c) as it goes, so a wrong witness or
//! a wrong public input is reported at the constraint that fails instead of
//! producing a proof that does not verify.

use bellperson::{ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;

use crate::srs::SrsShape;

/// Why synthesis into the arena could not complete.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CsError {
    #[error(
        "constraint {index} (`{annotation}`) is not satisfied: the witness or the public inputs are wrong"
    )]
    Unsatisfied { index: usize, annotation: String },
    #[error(
        "the circuit has more {what} than the SRS allows ({limit}): the SRS was generated for a different circuit"
    )]
    TooMany { what: &'static str, limit: usize },
    #[error(
        "the circuit has {got} {what} but the SRS expects {expected}: the SRS was generated for a different circuit"
    )]
    ShapeMismatch {
        what: &'static str,
        got: usize,
        expected: usize,
    },
}

/// Writes one partition's constraint system into arena slices.
pub struct ArenaCs<'a> {
    a: &'a mut [Scalar],
    b: &'a mut [Scalar],
    c: &'a mut [Scalar],
    inputs: &'a mut [Scalar],
    aux: &'a mut [Scalar],
    a_aux_density: &'a mut [u64],
    b_input_density: &'a mut [u64],
    b_aux_density: &'a mut [u64],
    constraints: usize,
    n_inputs: usize,
    n_aux: usize,
    error: Option<CsError>,
}

/// Sets bit `i` of a density bitmap.
pub(crate) fn set_bit(bits: &mut [u64], i: usize) {
    bits[i / 64] |= 1 << (i % 64);
}

/// Number of set bits among the first `len` of a bitmap.
pub fn popcount(bits: &[u64]) -> usize {
    bits.iter().map(|w| w.count_ones() as usize).sum()
}

/// Whether bit `i` is set.
pub fn bit(bits: &[u64], i: usize) -> bool {
    bits[i / 64] >> (i % 64) & 1 == 1
}

/// The arena slices a constraint system writes.
pub struct CsSlices<'a> {
    pub a: &'a mut [Scalar],
    pub b: &'a mut [Scalar],
    pub c: &'a mut [Scalar],
    pub z: &'a mut [Scalar],
    pub a_aux_density: &'a mut [u64],
    pub b_input_density: &'a mut [u64],
    pub b_aux_density: &'a mut [u64],
}

/// What synthesis produced.
#[derive(Debug)]
pub struct Synthesized {
    /// Constraints including the one per public input.
    pub constraints: usize,
    /// Public inputs without the leading one.
    pub public_inputs: Vec<Scalar>,
}

impl<'a> ArenaCs<'a> {
    /// Starts a system with the constant-one input allocated. Density bitmaps
    /// are cleared; evaluation slices are overwritten as constraints arrive.
    pub fn new(s: CsSlices<'a>, shape: &SrsShape) -> Self {
        let (inputs, aux) = s.z.split_at_mut(shape.inputs);
        s.a_aux_density.fill(0);
        s.b_input_density.fill(0);
        s.b_aux_density.fill(0);
        let mut cs = Self {
            a: s.a,
            b: s.b,
            c: s.c,
            inputs,
            aux,
            a_aux_density: s.a_aux_density,
            b_input_density: s.b_input_density,
            b_aux_density: s.b_aux_density,
            constraints: 0,
            n_inputs: 0,
            n_aux: 0,
            error: None,
        };
        cs.alloc_input(|| "one", || Ok(Scalar::ONE))
            .expect("an SRS has at least one input");
        cs
    }

    /// Inputs, aux variables and constraints allocated so far.
    pub(crate) fn counts(&self) -> (usize, usize, usize) {
        (self.n_inputs, self.n_aux, self.constraints)
    }

    /// The A-aux, B-input and B-aux density bitmaps so far.
    pub(crate) fn densities(&self) -> [&[u64]; 3] {
        [self.a_aux_density, self.b_input_density, self.b_aux_density]
    }

    /// The first problem recorded while the circuit ran, if any.
    pub fn take_error(&mut self) -> Option<CsError> {
        self.error.take()
    }

    fn fail(&mut self, e: CsError) {
        if self.error.is_none() {
            self.error = Some(e);
        }
    }

    /// Appends the per-input constraints (input · 0 = 0, which give inputs
    /// full density in A), zero-pads to the domain and checks the shape
    /// against the SRS.
    pub fn finish(mut self, shape: &SrsShape) -> Result<Synthesized, CsError> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        for (what, got, expected) in [
            ("public inputs", self.n_inputs, shape.inputs),
            ("auxiliary variables", self.n_aux, shape.aux),
        ] {
            if got != expected {
                return Err(CsError::ShapeMismatch {
                    what,
                    got,
                    expected,
                });
            }
        }
        finish(
            Finished {
                a: self.a,
                b: self.b,
                c: self.c,
                inputs: self.inputs,
                a_aux_density: self.a_aux_density,
                b_input_density: self.b_input_density,
                b_aux_density: self.b_aux_density,
                constraints: self.constraints,
            },
            shape,
        )
    }

    /// Records one constraint from its linear combinations: evaluates them
    /// (marking densities), checks a·b = c, writes the row.
    pub(crate) fn enforce_lcs<A, AR>(
        &mut self,
        annotation: A,
        la: &LinearCombination<Scalar>,
        lb: &LinearCombination<Scalar>,
        lc: &LinearCombination<Scalar>,
    ) where
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let k = self.constraints;
        // Leave room for one constraint per public input after the circuit's own.
        if k + self.inputs.len() >= self.a.len() {
            self.fail(CsError::TooMany {
                what: "constraints (counting one per public input)",
                limit: self.a.len(),
            });
            return;
        }
        let va = self.eval(la, Query::A);
        let vb = self.eval(lb, Query::B);
        let vc = self.eval(lc, Query::C);
        if va * vb != vc {
            self.fail(CsError::Unsatisfied {
                index: k,
                annotation: annotation().into(),
            });
        }
        self.a[k] = va;
        self.b[k] = vb;
        self.c[k] = vc;
        self.constraints += 1;
    }

    /// Evaluates `lc`, marking the variables it uses (with non-zero
    /// coefficients, as bellperson's prover does) in the density bitmaps.
    fn eval(&mut self, lc: &LinearCombination<Scalar>, query: Query) -> Scalar {
        let mut acc = Scalar::ZERO;
        for (&i, coeff) in lc.iter_inputs() {
            if coeff.is_zero_vartime() {
                continue;
            }
            acc += term(self.inputs[i], coeff);
            if query == Query::B {
                set_bit(self.b_input_density, i);
            }
        }
        for (&i, coeff) in lc.iter_aux() {
            if coeff.is_zero_vartime() {
                continue;
            }
            acc += term(self.aux[i], coeff);
            match query {
                Query::A => set_bit(self.a_aux_density, i),
                Query::B => set_bit(self.b_aux_density, i),
                Query::C => {}
            }
        }
        acc
    }
}

/// A synthesized partition's slices and counts, for [`finish`].
pub(crate) struct Finished<'s> {
    pub a: &'s mut [Scalar],
    pub b: &'s mut [Scalar],
    pub c: &'s mut [Scalar],
    /// The allocated inputs (starting with the constant one).
    pub inputs: &'s [Scalar],
    pub a_aux_density: &'s [u64],
    pub b_input_density: &'s [u64],
    pub b_aux_density: &'s [u64],
    /// The circuit's own constraints.
    pub constraints: usize,
}

/// Appends the per-input constraints (input · 0 = 0, which give inputs full
/// density in A), zero-pads to the domain and checks the densities against
/// the SRS. Variable counts are checked by the caller.
pub(crate) fn finish(f: Finished<'_>, shape: &SrsShape) -> Result<Synthesized, CsError> {
    let out = check_finished(
        f.inputs,
        f.constraints,
        [f.a_aux_density, f.b_input_density, f.b_aux_density],
        shape,
    )?;
    append_input_rows([f.a, f.b, f.c], f.inputs, f.constraints);
    Ok(out)
}

/// After a circuit's `constraints` rows of a, b and c: one row per public
/// input (a = the input, b = c = 0, as bellperson's prover adds them), then
/// zeros to the end of the domain.
pub fn append_input_rows([a, b, c]: [&mut [Scalar]; 3], inputs: &[Scalar], constraints: usize) {
    let total = constraints + inputs.len();
    a[constraints..total].copy_from_slice(inputs);
    for v in [&mut *b, &mut *c] {
        v[constraints..total].fill(Scalar::ZERO);
    }
    for v in [a, b, c] {
        v[total..].fill(Scalar::ZERO);
    }
}

/// What [`finish`] checks, without writing a, b and c (for a partition
/// whose a, b and c the device evaluates): the constraints and per-input
/// ones fit the domain, and the A- and B-query term counts (from the
/// densities: A-aux, B-input, B-aux) are the SRS's.
pub(crate) fn check_finished(
    inputs: &[Scalar],
    constraints: usize,
    [a_aux_density, b_input_density, b_aux_density]: [&[u64]; 3],
    shape: &SrsShape,
) -> Result<Synthesized, CsError> {
    let n_inputs = inputs.len();
    let total = constraints + n_inputs;
    if total > shape.domain {
        return Err(CsError::TooMany {
            what: "constraints (counting one per public input)",
            limit: shape.domain,
        });
    }
    let a_len = n_inputs + popcount(a_aux_density);
    let b_len = popcount(b_input_density) + popcount(b_aux_density);
    for (what, got, expected) in [
        ("A-query terms", a_len, shape.a_len),
        ("B-query terms", b_len, shape.b_len),
    ] {
        if got != expected {
            return Err(CsError::ShapeMismatch {
                what,
                got,
                expected,
            });
        }
    }
    Ok(Synthesized {
        constraints: total,
        public_inputs: inputs[1..].to_vec(),
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Query {
    A,
    B,
    C,
}

fn term(value: Scalar, coeff: &Scalar) -> Scalar {
    if *coeff == Scalar::ONE {
        value
    } else {
        value * coeff
    }
}

impl ConstraintSystem<Scalar> for ArenaCs<'_> {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let i = self.n_aux;
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

    fn enforce<A, AR, LA, LB, LC>(&mut self, annotation: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.enforce_lcs(
            annotation,
            &a(LinearCombination::zero()),
            &b(LinearCombination::zero()),
            &c(LinearCombination::zero()),
        );
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
        // Names cost an allocation each; a failure names the constraint instead.
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}
