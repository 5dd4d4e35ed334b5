//! Groth16 parameters (a trusted setup for tests and benchmarks) made from
//! a circuit's recorded matrices.
//!
//! The same parameters bellperson's `generate_parameters` makes from the
//! same secrets, bit for bit, in a fraction of its time: the matrices are
//! recorded once in compact rows, the Lagrange basis at τ is taken in closed
//! form, each variable's A(τ), B(τ), C(τ) is a transposed sparse product, and
//! the multiples of the generators come from fixed-base tables (additions
//! only) instead of a double-and-add per point.
//!
//! These parameters come from one party's randomness: proofs made with them
//! verify only against them. They are never Filecoin's published ones.

mod fixed_base;
mod matrices;
mod qap;
mod write;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bellperson::groth16::{Parameters, VerifyingKey};
use bellperson::{Circuit, SynthesisError};
use blstrs::{Bls12, G1Affine, G1Projective, G2Projective, Scalar};
use ff::Field;
use group::{Curve, Group};
use rand_core::RngCore;
use rayon::prelude::*;

pub use fixed_base::{Device, FixedBase, SetupCurve, window_for};
pub use matrices::{Matrices, MatrixCs};
pub use qap::{Domain, evaluate_columns};
pub use write::write_parameters;

/// Why parameters could not be made.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("synthesizing the circuit: {0}")]
    Synthesis(#[from] SynthesisError),
    #[error(
        "the circuit is too large to record ({rows} rows, {terms} terms in a matrix; 2^32 is the limit)"
    )]
    TooLarge { rows: usize, terms: usize },
    #[error("the circuit's {rows} constraints need a domain beyond 2^32")]
    DomainTooLarge { rows: usize },
    #[error("τ is a root of unity of the domain: draw other secrets")]
    TauInDomain,
    #[error("γ or δ is zero: draw other secrets")]
    ZeroSecret,
    #[error("aux variable {var} appears in no constraint (its L query point would be at infinity)")]
    Unconstrained { var: usize },
}

/// The secrets of a setup: two generators and α, β, γ, δ, τ.
#[derive(Clone, Debug)]
pub struct Toxic {
    pub g1: G1Projective,
    pub g2: G2Projective,
    pub alpha: Scalar,
    pub beta: Scalar,
    pub gamma: Scalar,
    pub delta: Scalar,
    pub tau: Scalar,
}

impl Toxic {
    /// Fresh secrets, drawn in bellperson's order, so one RNG state gives
    /// what `generate_random_parameters` would.
    pub fn random<R: RngCore>(rng: &mut R) -> Self {
        Self {
            g1: G1Projective::random(&mut *rng),
            g2: G2Projective::random(&mut *rng),
            alpha: Scalar::random(&mut *rng),
            beta: Scalar::random(&mut *rng),
            gamma: Scalar::random(&mut *rng),
            delta: Scalar::random(&mut *rng),
            tau: Scalar::random(&mut *rng),
        }
    }
}

/// Where a setup's time went.
#[derive(Clone, Debug, Default)]
pub struct SetupTimes {
    /// Recording the matrices (the circuit synthesized without a witness).
    pub record: Duration,
    /// The Lagrange basis and A(τ), B(τ), C(τ) of every variable.
    pub evaluate: Duration,
    /// The G1 table and the H, IC/L, A and B₁ queries.
    pub g1: Duration,
    /// The G2 table and the B₂ query.
    pub g2: Duration,
}

/// Parameters for `circuit` from `toxic`, on the CPU.
pub fn generate_parameters<C: Circuit<Scalar>>(
    circuit: C,
    toxic: &Toxic,
) -> Result<Parameters<Bls12>, SetupError> {
    generate_timed(circuit, toxic, Device::Cpu).map(|(p, _)| p)
}

/// Parameters for `circuit` from `toxic`, the multiples of the generators
/// on `device`, with where the time went.
pub fn generate_timed<C: Circuit<Scalar>>(
    circuit: C,
    toxic: &Toxic,
    device: Device,
) -> Result<(Parameters<Bls12>, SetupTimes), SetupError> {
    generate_timed_with(|cs| circuit.synthesize(cs), toxic, device)
}

/// As [`generate_timed`], the matrices recorded by `synthesize` (one that
/// records a circuit's independent parts in parallel: [`MatrixCs::record_parts`]).
pub fn generate_timed_with(
    synthesize: impl FnOnce(&mut MatrixCs) -> Result<(), SynthesisError>,
    toxic: &Toxic,
    device: Device,
) -> Result<(Parameters<Bls12>, SetupTimes), SetupError> {
    let started = Instant::now();
    let matrices = Matrices::record_with(synthesize)?;
    let record = started.elapsed();
    tracing::info!(
        rows = matrices.rows,
        vars = matrices.vars(),
        secs = record.as_secs_f64(),
        "setup: matrices recorded"
    );
    let (params, mut times) = from_matrices(&matrices, toxic, device)?;
    times.record = record;
    Ok((params, times))
}

/// Parameters for recorded matrices from `toxic`, the multiples on `device`.
pub fn from_matrices(
    m: &Matrices,
    toxic: &Toxic,
    device: Device,
) -> Result<(Parameters<Bls12>, SetupTimes), SetupError> {
    let mut times = SetupTimes::default();
    let started = Instant::now();
    let Toxic {
        alpha,
        beta,
        gamma,
        delta,
        tau,
        ..
    } = *toxic;
    let gamma_inv = Option::<Scalar>::from(gamma.invert()).ok_or(SetupError::ZeroSecret)?;
    let delta_inv = Option::<Scalar>::from(delta.invert()).ok_or(SetupError::ZeroSecret)?;
    let domain = Domain::for_rows(m.rows)?;
    let basis = domain.lagrange_at(&tau)?;
    let [at, bt, ct] =
        [0, 1, 2].map(|k| evaluate_columns(m.matrix(k), m.table(), &basis, m.vars()));
    drop(basis);
    // (β·A + α·B + C)/γ for inputs (IC), /δ for aux (L).
    let mut ext: Vec<Scalar> = at
        .par_iter()
        .zip(&bt)
        .zip(&ct)
        .map(|((a, b), c)| beta * a + alpha * b + c)
        .collect();
    drop(ct);
    let (ic, l) = ext.split_at_mut(m.n_inputs);
    ic.par_iter_mut().for_each(|e| *e *= gamma_inv);
    l.par_iter_mut().for_each(|e| *e *= delta_inv);
    if let Some(var) = l.iter().position(|e| bool::from(e.is_zero())) {
        return Err(SetupError::Unconstrained { var });
    }
    let h_scalars = domain.h_scalars(&tau, &delta_inv);
    times.evaluate = started.elapsed();
    tracing::info!(
        secs = times.evaluate.as_secs_f64(),
        "setup: QAP evaluated at τ"
    );

    let started = Instant::now();
    let g1 = FixedBase::new(toxic.g1, h_scalars.len() + 3 * m.vars());
    let multiples = |scalars: &[Scalar]| {
        let mut out = fixed_base::identities::<G1Affine>(scalars.len());
        g1.mul_many(device, scalars, &mut out);
        out
    };
    // Each query's time in the log: where a slow setup's G1 phase went.
    let logged = |query: &str, f: &dyn Fn() -> Vec<G1Affine>| {
        let t = Instant::now();
        let points = f();
        tracing::info!(
            query,
            points = points.len(),
            secs = t.elapsed().as_secs_f64(),
            %device,
            "setup: G1 multiples"
        );
        points
    };
    let h = logged("h", &|| multiples(&h_scalars));
    drop(h_scalars);
    let ic = logged("ic", &|| multiples(&ext[..m.n_inputs]));
    let l = logged("l", &|| multiples(&ext[m.n_inputs..]));
    drop(ext);
    let a = logged("a", &|| g1.mul_nonzero(device, &at));
    drop(at);
    let b_g1 = logged("b_g1", &|| g1.mul_nonzero(device, &bt));
    drop(g1);
    times.g1 = started.elapsed();
    tracing::info!(secs = times.g1.as_secs_f64(), %device, "setup: G1 queries");

    let started = Instant::now();
    let b_g2 = FixedBase::new(toxic.g2, bt.len()).mul_nonzero(device, &bt);
    times.g2 = started.elapsed();
    tracing::info!(secs = times.g2.as_secs_f64(), %device, "setup: G2 query");

    let (g1, g2) = (toxic.g1.to_affine(), toxic.g2.to_affine());
    let vk = VerifyingKey::<Bls12> {
        alpha_g1: (g1 * alpha).to_affine(),
        beta_g1: (g1 * beta).to_affine(),
        beta_g2: (g2 * beta).to_affine(),
        gamma_g2: (g2 * gamma).to_affine(),
        delta_g1: (g1 * delta).to_affine(),
        delta_g2: (g2 * delta).to_affine(),
        ic,
    };
    Ok((
        Parameters {
            vk,
            h: Arc::new(h),
            l: Arc::new(l),
            a: Arc::new(a),
            b_g1: Arc::new(b_g1),
            b_g2: Arc::new(b_g2),
        },
        times,
    ))
}
