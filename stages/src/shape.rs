//! A circuit's shape without parameters or a witness: the counts an SRS for
//! it would have (domain, inputs, aux, A and B query lengths) and its
//! constraint count, by synthesizing it into a system that only counts.
//! `cuzk fil info` and parameter-free synthesis measurements use it.

use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;

use crate::cs::{bit, popcount};
use crate::srs::SrsShape;

/// Counts what a circuit allocates and which variables its A and B use.
#[derive(Default)]
struct ShapeCs {
    inputs: usize,
    aux: usize,
    constraints: usize,
    a_aux: Vec<u64>,
    b_inputs: Vec<u64>,
    b_aux: Vec<u64>,
}

fn mark(bits: &mut Vec<u64>, i: usize) {
    if bits.len() <= i / 64 {
        bits.resize(i / 64 + 1, 0);
    }
    bits[i / 64] |= 1 << (i % 64);
}

impl ShapeCs {
    fn uses(&mut self, lc: &LinearCombination<Scalar>, query: u8) {
        for (&i, c) in lc.iter_inputs() {
            if query == 1 && !c.is_zero_vartime() {
                mark(&mut self.b_inputs, i);
            }
        }
        for (&j, c) in lc.iter_aux() {
            if c.is_zero_vartime() {
                continue;
            }
            match query {
                0 => mark(&mut self.a_aux, j),
                1 => mark(&mut self.b_aux, j),
                _ => {}
            }
        }
    }
}

impl ConstraintSystem<Scalar> for ShapeCs {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.aux += 1;
        Ok(Variable::new_unchecked(Index::Aux(self.aux - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.inputs += 1;
        Ok(Variable::new_unchecked(Index::Input(self.inputs - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.uses(&a(LinearCombination::zero()), 0);
        self.uses(&b(LinearCombination::zero()), 1);
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

/// A circuit's counts, as an SRS for it has them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct CircuitShape {
    /// The circuit's own constraints.
    pub constraints: usize,
    /// Public inputs including the constant one.
    pub inputs: usize,
    pub aux: usize,
    /// The SRS shape (domain: constraints plus one per input, to a power of two).
    pub srs: SrsShape,
}

/// Synthesizes `circuit` (witness values are never asked for) and counts.
pub fn shape_of<C: Circuit<Scalar>>(circuit: C) -> Result<CircuitShape, SynthesisError> {
    let mut cs = ShapeCs {
        inputs: 1,
        ..ShapeCs::default()
    };
    circuit.synthesize(&mut cs)?;
    let domain = (cs.constraints + cs.inputs).next_power_of_two();
    let b_inputs = (0..cs.inputs)
        .filter(|&i| cs.b_inputs.len() > i / 64 && bit(&cs.b_inputs, i))
        .count();
    Ok(CircuitShape {
        constraints: cs.constraints,
        inputs: cs.inputs,
        aux: cs.aux,
        srs: SrsShape {
            domain,
            log_domain: domain.trailing_zeros(),
            inputs: cs.inputs,
            aux: cs.aux,
            a_len: cs.inputs + popcount(&cs.a_aux),
            b_len: b_inputs + popcount(&cs.b_aux),
        },
    })
}
