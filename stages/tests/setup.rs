//! Our parameter generator against bellperson's, bit for bit, from the same
//! secrets; and proofs made with ours verify.

use bellperson::groth16::{
    Parameters, create_random_proof, generate_parameters as bellperson_generate,
    prepare_verifying_key, verify_proof,
};
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::{Bls12, Scalar};
use cuzk_stages::Workload;
use cuzk_stages::setup::{SetupError, Toxic, generate_parameters};
use ff::Field;
use rand::SeedableRng;

fn bellperson_parameters<C: Circuit<Scalar>>(circuit: C, t: &Toxic) -> Parameters<Bls12> {
    bellperson_generate::<Bls12, _>(
        circuit, t.g1, t.g2, t.alpha, t.beta, t.gamma, t.delta, t.tau,
    )
    .expect("bellperson's setup")
}

fn bytes(p: &Parameters<Bls12>) -> Vec<u8> {
    let mut out = vec![];
    p.write(&mut out).expect("writing to memory");
    out
}

fn assert_same(ours: &Parameters<Bls12>, theirs: &Parameters<Bls12>, what: &str) {
    // Field by field first, so a failure names the query.
    assert_eq!(ours.vk, theirs.vk, "{what}: verifying key");
    assert_eq!(ours.h, theirs.h, "{what}: H query");
    assert_eq!(ours.l, theirs.l, "{what}: L query");
    assert_eq!(ours.a, theirs.a, "{what}: A query");
    assert_eq!(ours.b_g1, theirs.b_g1, "{what}: B query in G1");
    assert_eq!(ours.b_g2, theirs.b_g2, "{what}: B query in G2");
    assert_eq!(bytes(ours), bytes(theirs), "{what}: the parameter file");
    let mut parallel = vec![];
    cuzk_stages::setup::write_parameters(ours, &mut parallel).unwrap();
    assert!(
        parallel == bytes(theirs),
        "{what}: the parallel writer's file differs"
    );
}

fn toxic(seed: u64) -> Toxic {
    Toxic::random(&mut rand::rngs::StdRng::seed_from_u64(seed))
}

#[test]
fn chain_and_sha256_parameters_equal_bellpersons() {
    for (workload, log_size) in [
        (Workload::Chain, 8),
        (Workload::Chain, 11),
        (Workload::Sha256, 16),
    ] {
        let t = toxic(log_size as u64);
        let ours = generate_parameters(workload.blank(log_size), &t).expect("our setup");
        let theirs = bellperson_parameters(workload.blank(log_size), &t);
        assert_same(
            &ours,
            &theirs,
            &format!("{} at 2^{log_size}", workload.name()),
        );
    }
}

/// x³ + 5·x + c·y = out with a general coefficient c, three public inputs,
/// a variable in no constraint's A (so the A query is filtered), and
/// coefficients of every class (±1, powers of two, table entries).
#[derive(Clone)]
struct Example {
    x: Option<Scalar>,
    y: Option<Scalar>,
}

fn coefficient() -> Scalar {
    Scalar::from(0x1234_5678_9abc_def0u64).square()
}

impl Example {
    fn out(&self) -> Option<Scalar> {
        let (x, y) = (self.x?, self.y?);
        Some(x * x * x + Scalar::from(5u64) * x + coefficient() * y)
    }
}

impl Circuit<Scalar> for Example {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let x = cs.alloc(|| "x", || self.x.ok_or(SynthesisError::AssignmentMissing))?;
        let y = cs.alloc_input(|| "y", || self.y.ok_or(SynthesisError::AssignmentMissing))?;
        let x2v = self.x.map(|x| x.square());
        let x2 = cs.alloc(|| "x2", || x2v.ok_or(SynthesisError::AssignmentMissing))?;
        cs.enforce(|| "x2", |lc| lc + x, |lc| lc + x, |lc| lc + x2);
        let x3v = x2v.zip(self.x).map(|(a, b)| a * b);
        let x3 = cs.alloc(|| "x3", || x3v.ok_or(SynthesisError::AssignmentMissing))?;
        cs.enforce(|| "x3", |lc| lc + x2, |lc| lc + x, |lc| lc + x3);
        let out = cs.alloc_input(
            || "out",
            || self.out().ok_or(SynthesisError::AssignmentMissing),
        )?;
        let twice = cs.alloc_input(
            || "twice",
            || {
                self.x
                    .map(|x| x.double())
                    .ok_or(SynthesisError::AssignmentMissing)
            },
        )?;
        cs.enforce(
            || "out",
            |lc| {
                lc + x3 + (Scalar::from(5u64), x) + (coefficient(), y) - (Scalar::from(4u64), twice)
                    + (Scalar::from(8u64), x)
            },
            |lc| lc + CS::one(),
            |lc| lc + out,
        );
        Ok(())
    }
}

#[test]
fn a_circuit_with_every_coefficient_class_gets_bellpersons_parameters_and_proves() {
    let blank = Example { x: None, y: None };
    let t = toxic(99);
    let ours = generate_parameters(blank.clone(), &t).expect("our setup");
    assert_same(
        &ours,
        &bellperson_parameters(blank, &t),
        "the example circuit",
    );

    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let c = Example {
        x: Some(Scalar::random(&mut rng)),
        y: Some(Scalar::random(&mut rng)),
    };
    let inputs = [c.y.unwrap(), c.out().unwrap(), c.x.unwrap().double()];
    let proof = create_random_proof(c, &ours, &mut rng).expect("a proof");
    let pvk = prepare_verifying_key(&ours.vk);
    assert!(verify_proof(&pvk, &proof, &inputs).expect("verification runs"));
    let mut wrong = inputs;
    wrong[1] += Scalar::ONE;
    assert!(!verify_proof(&pvk, &proof, &wrong).expect("verification runs"));
}

/// An aux variable no constraint mentions.
struct Loose;

impl Circuit<Scalar> for Loose {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let a = cs.alloc(|| "a", || Ok(Scalar::ONE))?;
        cs.alloc(|| "loose", || Ok(Scalar::ONE))?;
        cs.enforce(|| "a", |lc| lc + a, |lc| lc + a, |lc| lc + a);
        Ok(())
    }
}

#[test]
fn an_unconstrained_variable_is_named() {
    let Err(err) = generate_parameters(Loose, &toxic(1)) else {
        panic!("parameters for a circuit with a loose variable")
    };
    assert!(matches!(err, SetupError::Unconstrained { var: 1 }), "{err}");
}

/// The device's multiples against the CPU's, for every window the setup
/// picks at these sizes, G1 and G2, and whole parameter files from both.
/// `scalars`' multiples of a random point on the device, in chunks of
/// 150,001 (both streams in turn, the last short), equal the CPU's.
fn chunks_agree<G>(device: i32, rng: &mut rand::rngs::StdRng, scalars: &[Scalar], group: &str)
where
    G: cuzk_stages::setup::SetupCurve,
    G::Affine: Send + Sync + PartialEq,
{
    use group::prime::PrimeCurveAffine;
    let table = cuzk_stages::setup::FixedBase::with_window(G::random(rng), 16);
    let (mut gpu, mut cpu) = (
        vec![G::Affine::identity(); scalars.len()],
        vec![G::Affine::identity(); scalars.len()],
    );
    cuzk_gpu::fixed_base::fixed_base_mul_in_chunks::<G::Gpu>(
        device,
        table.table(),
        16,
        scalars,
        &mut gpu,
        150_001,
    )
    .unwrap_or_else(|e| panic!("{group} in chunks on the device: {e}"));
    table.mul_many_on_cpu(scalars, &mut cpu);
    assert!(gpu == cpu, "{group} multiples in chunks differ");
}

#[test]
fn gpu_setup_equals_cpu_setup() {
    use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective};
    use cuzk_stages::setup::{Device, FixedBase, generate_timed};
    use group::Group;
    use group::prime::PrimeCurveAffine;
    let device = match cuzk_gpu::device::usable_device() {
        Ok(d) => d.ordinal as i32,
        Err(why) => {
            eprintln!("skipping GPU test: {why}");
            return;
        }
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let mut scalars: Vec<Scalar> = (0..5000).map(|_| Scalar::random(&mut rng)).collect();
    scalars.extend([
        Scalar::ZERO,
        Scalar::ONE,
        -Scalar::ONE,
        Scalar::from(2u64).pow_vartime([254]),
    ]);
    for window in [2, 7, 12, 16] {
        let t1 = FixedBase::with_window(G1Projective::random(&mut rng), window);
        let (mut gpu, mut cpu) = (
            vec![G1Affine::identity(); scalars.len()],
            vec![G1Affine::identity(); scalars.len()],
        );
        cuzk_gpu::fixed_base::fixed_base_mul::<cuzk_gpu::fixed_base::G1>(
            device,
            t1.table(),
            window,
            &scalars,
            &mut gpu,
        )
        .expect("G1 on the device");
        t1.mul_many_on_cpu(&scalars, &mut cpu);
        assert!(gpu == cpu, "G1 multiples differ at window {window}");
        let t2 = FixedBase::with_window(G2Projective::random(&mut rng), window);
        let (mut gpu, mut cpu) = (
            vec![G2Affine::identity(); scalars.len()],
            vec![G2Affine::identity(); scalars.len()],
        );
        cuzk_gpu::fixed_base::fixed_base_mul::<cuzk_gpu::fixed_base::G2>(
            device,
            t2.table(),
            window,
            &scalars,
            &mut gpu,
        )
        .expect("G2 on the device");
        t2.mul_many_on_cpu(&scalars, &mut cpu);
        assert!(gpu == cpu, "G2 multiples differ at window {window}");
    }
    // Enough scalars that every lane makes several points affine with one
    // inversion, in chunks that take both streams in turn (an odd size, so
    // the last is short); zeros among them (infinity inside a lane's run).
    let mut many: Vec<Scalar> = (0..600_000).map(|_| Scalar::random(&mut rng)).collect();
    for i in (0..many.len()).step_by(9_973) {
        many[i] = Scalar::ZERO;
    }
    many.extend_from_slice(&scalars);
    chunks_agree::<G1Projective>(device, &mut rng, &many, "G1");
    chunks_agree::<G2Projective>(device, &mut rng, &many, "G2");
    let t = toxic(3);
    let (on_gpu, _) =
        generate_timed(Workload::Sha256.blank(16), &t, Device::Gpu(device as usize)).unwrap();
    let (on_cpu, _) = generate_timed(Workload::Sha256.blank(16), &t, Device::Cpu).unwrap();
    assert_same(&on_gpu, &on_cpu, "sha256 2^16 on the GPU");
}
