//! SupraSeal (through bellperson's `cuda-supraseal` feature) proving a
//! built-in workload from a parameter file cuzk wrote: `c` proofs of `P`
//! partitions, `j` at a time, printed as s/proof like `cuzk bench`.
//!
//! supraseal-bench PARAMS WORKLOAD LOG_SIZE PARTITIONS C J

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use bellperson::groth16::{SuprasealParameters, VerifyingKey, create_random_proof_batch, prepare_verifying_key, verify_proof};
use blstrs::Bls12;
use cuzk_workloads::Workload;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    assert_eq!(args.len(), 7, "usage: supraseal-bench PARAMS WORKLOAD LOG_SIZE PARTITIONS C J");
    let path = std::path::PathBuf::from(&args[1]);
    let workload = Workload::parse(&args[2]).unwrap();
    let log_size: u32 = args[3].parse().unwrap();
    let partitions: u64 = args[4].parse().unwrap();
    let proofs: usize = args[5].parse().unwrap();
    let in_flight: usize = args[6].parse().unwrap();

    let t = Instant::now();
    let params = Arc::new(SuprasealParameters::<Bls12>::new(path.clone()).expect("loading parameters"));
    let vk = VerifyingKey::<Bls12>::read(std::fs::File::open(&path).unwrap()).unwrap();
    let pvk = prepare_verifying_key(&vk);
    println!("supraseal: parameters loaded in {:.1} s", t.elapsed().as_secs_f64());

    let job = |i: usize| -> (Vec<_>, Vec<_>) {
        (0..partitions)
            .map(|p| {
                let inst = workload.instance(log_size, 7_000_003 * (i as u64 + 1) + p);
                (inst.circuit, inst.public_inputs)
            })
            .unzip()
    };
    // One warm-up proof: the first run JIT-compiles SupraSeal's PTX for this GPU.
    let (circuits, _) = job(usize::MAX - 1);
    let t = Instant::now();
    create_random_proof_batch(circuits, &params, &mut rand::rngs::OsRng).unwrap();
    println!("supraseal: warm-up proof {:.1} s", t.elapsed().as_secs_f64());

    let next = AtomicUsize::new(0);
    let verified = AtomicUsize::new(0);
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..in_flight {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= proofs {
                        break;
                    }
                    let (circuits, inputs) = job(i);
                    let out = create_random_proof_batch(circuits, &params, &mut rand::rngs::OsRng).unwrap();
                    let ok = out.iter().zip(&inputs).all(|(p, x)| verify_proof(&pvk, p, x).unwrap());
                    verified.fetch_add(ok as usize, Ordering::SeqCst);
                }
            });
        }
    });
    let wall = started.elapsed().as_secs_f64();
    println!(
        "supraseal: {} at 2^{log_size} x {partitions}, c={proofs} j={in_flight}: {:.3} s/proof ({wall:.1} s), verified {}/{proofs}",
        workload.name(),
        wall / proofs as f64,
        verified.load(Ordering::SeqCst)
    );
}
