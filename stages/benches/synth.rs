//! Synthesis time per partition: full synthesis against pre-compiled
//! constraints (witness-only synthesis, then A·z, B·z, C·z), on the CPU.
//!
//! `cargo bench -p cuzk-stages --bench synth` (CUZK_SYNTH_LOG=16 by default,
//! CUZK_SYNTH_WORKLOAD=sha256|chain, CUZK_SYNTH_REPS=5)

use cuzk_stages::Workload;
use cuzk_stages::circuit::{Native, ProvableCircuit};

mod common;

use common::env;

fn main() {
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return;
    }
    let workload = Workload::parse(&env("CUZK_SYNTH_WORKLOAD", "sha256".to_string())).unwrap();
    let log: u32 = env("CUZK_SYNTH_LOG", 16);
    let reps: usize = env("CUZK_SYNTH_REPS", 5);
    let seed = std::sync::atomic::AtomicU64::new(0);
    let make = || {
        let s = seed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Box::new(Native(workload.instance(log, s).circuit)) as Box<dyn ProvableCircuit>
    };
    let report = cuzk_stages::measure::measure(make, reps, true).unwrap();
    print!("{}", report.render(&format!("{} 2^{log}", workload.name())));
}
