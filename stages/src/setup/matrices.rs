//! A circuit's constraint matrices, recorded without a witness.
//!
//! The same compact rows the pre-compiled constraints keep (`pce::matrix`),
//! recorded from a blank circuit: no value is ever asked for.

use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;

use super::SetupError;
use crate::pce::matrix::{Builder, Codes, Csr};

/// A and B and C of a circuit, columns in the assignment's layout (inputs,
/// then aux), with Groth16's input rows (`x_i · 0 = 0`, one per public
/// input, the constant one included) after the circuit's own.
pub struct Matrices {
    builder: Builder,
    /// Public inputs, the constant one included.
    pub n_inputs: usize,
    pub n_aux: usize,
    /// Rows, the input rows included.
    pub rows: usize,
}

impl Matrices {
    /// Records `circuit`'s constraints. Fails as the circuit's synthesis
    /// fails, or if a matrix outgrows the recording's 32-bit row pointers.
    pub fn record<C: Circuit<Scalar>>(circuit: C) -> Result<Self, SetupError> {
        let mut cs = MatrixCs {
            builder: Builder::default(),
            n_inputs: 1,
            n_aux: 0,
            rows: 0,
        };
        circuit.synthesize(&mut cs)?;
        let MatrixCs {
            mut builder,
            n_inputs,
            n_aux,
            mut rows,
        } = cs;
        // As bellperson's generator: every input in A once more, so the IC
        // query is fully dense.
        let none = LinearCombination::zero();
        for i in 0..n_inputs {
            let x = LinearCombination::zero() + Variable::new_unchecked(Index::Input(i));
            builder.push_row(0, &x);
            builder.push_row(1, &none);
            builder.push_row(2, &none);
            rows += 1;
        }
        let too_large = |b: &Builder| {
            b.overflowed().then(|| SetupError::TooLarge {
                rows,
                terms: b.mats.iter().map(|m| m.cols.len()).max().unwrap_or(0),
            })
        };
        if let Some(e) = too_large(&builder) {
            return Err(e);
        }
        builder.finalize(n_inputs);
        if let Some(e) = too_large(&builder) {
            return Err(e);
        }
        Ok(Self {
            builder,
            n_inputs,
            n_aux,
            rows,
        })
    }

    /// Variables: inputs and aux.
    pub fn vars(&self) -> usize {
        self.n_inputs + self.n_aux
    }

    /// Matrix `m` (0 = A, 1 = B, 2 = C).
    pub fn matrix(&self, m: usize) -> Csr<'_> {
        let mat = &self.builder.mats[m];
        Csr {
            row_ptr: &mat.row_ptr,
            cols: &mat.cols,
            codes: Codes::Wide(&mat.codes),
        }
    }

    /// The coefficients that codes at or above `matrix::TABLE` index.
    pub fn table(&self) -> &[Scalar] {
        &self.builder.table
    }
}

/// Records rows; never evaluates a value.
struct MatrixCs {
    builder: Builder,
    n_inputs: usize,
    n_aux: usize,
    rows: usize,
}

impl ConstraintSystem<Scalar> for MatrixCs {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.n_aux += 1;
        Ok(Variable::new_unchecked(Index::Aux(self.n_aux - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.n_inputs += 1;
        Ok(Variable::new_unchecked(Index::Input(self.n_inputs - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.builder.push_row(0, &a(LinearCombination::zero()));
        self.builder.push_row(1, &b(LinearCombination::zero()));
        self.builder.push_row(2, &c(LinearCombination::zero()));
        self.rows += 1;
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

    fn is_extensible() -> bool {
        false
    }
}
