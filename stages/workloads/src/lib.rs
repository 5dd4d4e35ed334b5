//! cuzk-workloads: built-in circuits to benchmark and test the engine with.
//! A crate of its own (no GPU code) so anchor benchmarks can prove the same
//! circuits with other provers.

pub mod chain;
pub mod sha256;
pub mod sha256_witness;

use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;
use rand::{RngCore, SeedableRng};

pub use chain::ChainCircuit;
pub use sha256::Sha256Circuit;

/// Where a native witness generator (one that computes a circuit's
/// assignment without running its gadgets, like
/// [`Sha256Circuit::witness`]) writes: the values in allocation order, and
/// each constraint counted where the gadget would enforce it, so a
/// witness-only constraint system sees the gadget's sequence of operations.
pub trait WitnessSink {
    /// The next auxiliary variable.
    fn aux(&mut self, value: Scalar) -> Result<(), SynthesisError>;
    /// The next public input.
    fn input(&mut self, value: Scalar) -> Result<(), SynthesisError>;
    /// A constraint enforced here.
    fn constraint(&mut self);
}

/// A built-in workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Workload {
    /// x_{i+1} = x_i² + c: dense scalars.
    Chain,
    /// Chained SHA-256 compressions: bit-heavy scalars, like PoRep.
    Sha256,
}

/// Either built-in circuit, so parameter generation has one concrete type.
#[derive(Clone, Debug)]
pub enum WorkloadCircuit {
    Chain(ChainCircuit),
    Sha256(Sha256Circuit),
}

impl Circuit<Scalar> for WorkloadCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        match self {
            Self::Chain(c) => c.synthesize(cs),
            Self::Sha256(c) => c.synthesize(cs),
        }
    }
}

/// One partition's circuit and the public inputs a verifier checks it with.
pub struct Instance {
    pub circuit: WorkloadCircuit,
    pub public_inputs: Vec<Scalar>,
}

impl Workload {
    pub const ALL: [Workload; 2] = [Workload::Chain, Workload::Sha256];

    pub fn name(self) -> &'static str {
        match self {
            Self::Chain => "chain",
            Self::Sha256 => "sha256",
        }
    }

    pub fn parse(name: &str) -> anyhow::Result<Self> {
        Self::ALL
            .into_iter()
            .find(|w| w.name() == name)
            .ok_or_else(|| anyhow::anyhow!("unknown workload `{name}` (known: chain, sha256)"))
    }

    /// The smallest domain (log2) the workload fits in.
    pub fn min_log_size(self) -> u32 {
        match self {
            Self::Chain => 2,
            Self::Sha256 => Sha256Circuit::min_log_size(),
        }
    }

    /// Errors unless the workload fits a domain of 2^log_size.
    pub fn check_log_size(self, log_size: u32) -> anyhow::Result<()> {
        let min = self.min_log_size();
        anyhow::ensure!(
            (min..=28).contains(&log_size),
            "workload `{}` needs --log-size between {min} and 28 (got {log_size})",
            self.name()
        );
        Ok(())
    }

    /// What one partition computes at this size.
    pub fn describe(self, log_size: u32) -> String {
        match self {
            Self::Chain => format!("{} squarings", ChainCircuit::steps_for(log_size)),
            Self::Sha256 => format!(
                "{} SHA-256 compressions",
                Sha256Circuit::blocks_for(log_size)
            ),
        }
    }

    /// The circuit's shape without a witness, for parameter generation.
    pub fn blank(self, log_size: u32) -> WorkloadCircuit {
        match self {
            Self::Chain => WorkloadCircuit::Chain(ChainCircuit::blank(log_size)),
            Self::Sha256 => WorkloadCircuit::Sha256(Sha256Circuit::blank(log_size)),
        }
    }

    /// A partition with a witness drawn from `seed` and its true public inputs.
    pub fn instance(self, log_size: u32, seed: u64) -> Instance {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        match self {
            Self::Chain => {
                let c = ChainCircuit::new(log_size, Scalar::random(&mut rng));
                Instance {
                    public_inputs: vec![c.output.expect("instances have outputs")],
                    circuit: WorkloadCircuit::Chain(c),
                }
            }
            Self::Sha256 => {
                let blocks = Sha256Circuit::blocks_for(log_size);
                let message: Vec<sha256::Block> = (0..blocks)
                    .map(|_| {
                        let mut b = [0u8; 64];
                        rng.fill_bytes(&mut b);
                        b
                    })
                    .collect();
                Instance {
                    public_inputs: sha256::public_inputs(&message),
                    circuit: WorkloadCircuit::Sha256(Sha256Circuit::new(log_size, message)),
                }
            }
        }
    }
}

/// Counts a circuit's constraints (plus one per public input), without a witness.
pub fn count_constraints<C: Circuit<Scalar>>(circuit: C) -> usize {
    #[derive(Default)]
    struct Counter {
        constraints: usize,
        inputs: usize,
        aux: usize,
    }
    impl ConstraintSystem<Scalar> for Counter {
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
        fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
        where
            A: FnOnce() -> AR,
            AR: Into<String>,
            LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
            LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
            LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        {
            self.constraints += 1;
        }
        fn push_namespace<NR, N>(&mut self, _: N)
        where
            NR: Into<String>,
            N: FnOnce() -> NR,
        {
        }
        fn pop_namespace(&mut self) {}
        fn get_root(&mut self) -> &mut Self {
            self
        }
    }
    let mut cs = Counter {
        inputs: 1,
        ..Counter::default()
    };
    circuit
        .synthesize(&mut cs)
        .expect("shape-only synthesis succeeds");
    cs.constraints + cs.inputs
}
