//! `chain`: x_{i+1} = x_i² + c, with x_0 private and the last value public.
//! Dense scalars: every aux value is a random-looking field element.

use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use ff::Field;

/// The constant added at every step.
pub const C: u64 = 7;

/// A chain of `steps` squarings. With the constant-one input and the public
/// output, it has exactly `steps + 2` constraints, so `steps = 2^k - 2`
/// fills a domain of 2^k.
#[derive(Clone, Debug)]
pub struct ChainCircuit {
    pub steps: usize,
    /// The private start, `None` when only the shape is needed (setup).
    pub x0: Option<Scalar>,
    /// The public output the prover claims.
    pub output: Option<Scalar>,
}

impl ChainCircuit {
    pub fn steps_for(log_size: u32) -> usize {
        (1usize << log_size) - 2
    }

    /// The shape alone, for parameter generation.
    pub fn blank(log_size: u32) -> Self {
        Self {
            steps: Self::steps_for(log_size),
            x0: None,
            output: None,
        }
    }

    /// An instance with its true output.
    pub fn new(log_size: u32, x0: Scalar) -> Self {
        let steps = Self::steps_for(log_size);
        Self {
            steps,
            x0: Some(x0),
            output: Some(Self::evaluate(steps, x0)),
        }
    }

    pub fn evaluate(steps: usize, x0: Scalar) -> Scalar {
        let c = Scalar::from(C);
        (0..steps).fold(x0, |x, _| x.square() + c)
    }
}

impl Circuit<Scalar> for ChainCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        assert!(self.steps >= 1, "a chain needs at least one step");
        let c = Scalar::from(C);
        let mut value = self.x0;
        let mut var = cs.alloc(|| "x0", || value.ok_or(SynthesisError::AssignmentMissing))?;
        for i in 1..self.steps {
            let next_value = value.map(|x| x.square() + c);
            let next = cs.alloc(
                || format!("x{i}"),
                || next_value.ok_or(SynthesisError::AssignmentMissing),
            )?;
            cs.enforce(
                || format!("step {i}"),
                |lc| lc + var,
                |lc| lc + var,
                |lc| lc + next - (c, CS::one()),
            );
            (var, value) = (next, next_value);
        }
        let out = cs.alloc_input(
            || "output",
            || self.output.ok_or(SynthesisError::AssignmentMissing),
        )?;
        cs.enforce(
            || "output",
            |lc| lc + var,
            |lc| lc + var,
            |lc| lc + out - (c, CS::one()),
        );
        Ok(())
    }
}
