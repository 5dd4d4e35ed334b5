//! Embedding cuzk in a host service: a tokio program with a circuit of its
//! own, proving a job of three partitions and verifying them.
//!
//! `cargo run --release --example embed`

use std::sync::Arc;

use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use cuzk::config::Config;
use cuzk::stages::Srs;
use cuzk::stages::setup::{Toxic, generate_parameters};
use cuzk::{Engine, Job};
use ff::Field;

/// "I know x such that x^(2^rounds) = y", y public: a toy VDF-like circuit.
#[derive(Clone)]
struct RepeatedSquaring {
    rounds: usize,
    x: Option<Scalar>,
}

impl RepeatedSquaring {
    fn output(&self) -> Option<Scalar> {
        self.x.map(|x| (0..self.rounds).fold(x, |v, _| v.square()))
    }
}

impl Circuit<Scalar> for RepeatedSquaring {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut value = self.x;
        let mut var = cs.alloc(|| "x", || value.ok_or(SynthesisError::AssignmentMissing))?;
        for i in 0..self.rounds {
            let next_value = value.map(|v| v.square());
            let next = if i + 1 == self.rounds {
                cs.alloc_input(
                    || "y",
                    || next_value.ok_or(SynthesisError::AssignmentMissing),
                )?
            } else {
                cs.alloc(
                    || "square",
                    || next_value.ok_or(SynthesisError::AssignmentMissing),
                )?
            };
            cs.enforce(
                || "v*v = next",
                |lc| lc + var,
                |lc| lc + var,
                |lc| lc + next,
            );
            (var, value) = (next, next_value);
        }
        Ok(())
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let rounds = 1000;
    // A host would load a parameter file with `Srs::read`; here we make one
    // (test parameters from this process's randomness).
    let toxic = Toxic::random(&mut rand::rngs::OsRng);
    let params = generate_parameters(RepeatedSquaring { rounds, x: None }, &toxic)?;
    let srs = Arc::new(Srs::from_parameters(params));

    let engine = Engine::from_config(Config::default())?;
    let circuits: Vec<_> = (1..=3u64)
        .map(|i| RepeatedSquaring {
            rounds,
            x: Some(Scalar::from(i)),
        })
        .collect();
    let expected: Vec<_> = circuits.iter().map(|c| c.output().unwrap()).collect();
    let job = circuits
        .into_iter()
        .fold(Job::new(srs.clone()).label("example"), |job, c| {
            job.partition(c)
        });

    let handle = engine.submit(job);
    println!(
        "submitted job {}; status: {:?}",
        handle.id(),
        engine.status().jobs_running
    );
    let proofs = handle.await?;
    proofs.verify(&srs)?;
    for (p, y) in proofs.partitions.iter().zip(expected) {
        assert_eq!(p.public_inputs, [y]);
    }
    println!(
        "proved and verified {} partitions in {:.3} s on the {} backend",
        proofs.partitions.len(),
        proofs.elapsed.as_secs_f64(),
        engine.backend().name()
    );
    engine.shutdown().await;
    Ok(())
}
