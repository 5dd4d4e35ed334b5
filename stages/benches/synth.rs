//! Synthesis time per partition: full synthesis against pre-compiled
//! constraints (witness-only synthesis, then A·z, B·z, C·z), on the CPU.
//!
//! `cargo bench -p cuzk-stages --bench synth` (CUZK_SYNTH_LOG=16 by default,
//! CUZK_SYNTH_WORKLOAD=sha256|chain, CUZK_SYNTH_REPS=5)

use std::time::{Duration, Instant};

use cuzk_engine::ArenaPool;
use cuzk_stages::circuit::ProvableCircuit;
use cuzk_stages::cs::{ArenaCs, CsSlices};
use cuzk_stages::partition::PartitionLayout;
use cuzk_stages::pce::{RecordingCs, WitnessCs};
use cuzk_stages::scalars::as_scalars;
use cuzk_stages::{SrsShape, Workload};

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let workload = Workload::parse(&env("CUZK_SYNTH_WORKLOAD", "sha256".to_string())).unwrap();
    let log: u32 = env("CUZK_SYNTH_LOG", 16);
    let reps: usize = env("CUZK_SYNTH_REPS", 5);
    let shape: SrsShape = cuzk_stages::shape_of(workload.instance(log, 0).circuit)
        .unwrap()
        .srs;
    let layout = PartitionLayout::new(shape);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let pool = ArenaPool::new(1, 1 << 34, None);
    let mut arena = rt.block_on(pool.acquire());
    arena.ensure_capacity(layout.bytes).unwrap();
    let slices = |arena: &mut cuzk_engine::ArenaLease| -> CsSlices<'static> {
        let view = arena.view();
        // SAFETY (bench only): the arena outlives every use below and each
        // use takes the regions afresh.
        unsafe {
            std::mem::transmute::<CsSlices<'_>, CsSlices<'static>>(cuzk_stages::synth_slices(
                &view, &layout,
            ))
        }
    };
    let circuit = |seed| Box::new(workload.instance(log, seed).circuit) as Box<dyn ProvableCircuit>;

    // Record once.
    let mut rec = RecordingCs::new(ArenaCs::new(slices(&mut arena), &shape));
    circuit(0).synthesize_recording(&mut rec).unwrap();
    let (out, recording) = rec.finish(&shape, 0);
    out.unwrap();
    let recording = recording.unwrap();

    // CUZK_SYNTH_ONLY=pce times the pre-compiled path alone (for profilers).
    let only_pce = std::env::var("CUZK_SYNTH_ONLY").is_ok_and(|v| v == "pce");
    let (mut full, mut witness, mut eval) = (vec![], vec![], vec![]);
    for rep in 0..reps {
        let t = Instant::now();
        if !only_pce || rep == 0 {
            let mut cs = ArenaCs::new(slices(&mut arena), &shape);
            circuit(rep as u64 + 1).synthesize_into(&mut cs).unwrap();
            cs.finish(&shape).unwrap();
        }
        full.push(t.elapsed());

        let view = arena.view();
        let z = as_scalars(view.take(layout.z));
        let t = Instant::now();
        let mut cs = WitnessCs::new(z, shape.inputs);
        circuit(rep as u64 + 1).synthesize_witness(&mut cs).unwrap();
        recording.matches(&cs).unwrap();
        drop(cs);
        witness.push(t.elapsed());
        let (a, b, c) = (
            as_scalars(view.take(layout.a)),
            as_scalars(view.take(layout.b)),
            as_scalars(view.take(layout.c)),
        );
        let t = Instant::now();
        recording.evaluate(z, a, b, c);
        cuzk_stages::pce::check_rows(a, b, c, recording.meta.constraints).unwrap();
        eval.push(t.elapsed());
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let (f, w, e) = (median(full), median(witness), median(eval));
    println!(
        "{} 2^{log}: {} constraints, {} nonzero terms, recording {:.1} MiB, {} rayon threads",
        workload.name(),
        recording.meta.constraints,
        recording.nnz(),
        recording.bytes() as f64 / (1 << 20) as f64,
        rayon::current_num_threads()
    );
    if std::env::var("CUZK_SYNTH_CLASSES").is_ok() {
        classes(&recording);
        table_sample(&recording);
    }
    println!("full synthesis            {:>9.2} ms", ms(f));
    println!("witness-only synthesis    {:>9.2} ms", ms(w));
    println!("A·z, B·z, C·z and check   {:>9.2} ms", ms(e));
    println!(
        "pre-compiled total        {:>9.2} ms  ({:.3}x full synthesis)",
        ms(w + e),
        (w + e).as_secs_f64() / f.as_secs_f64()
    );
}

/// Terms of each coefficient class, per matrix.
fn classes(recording: &cuzk_stages::pce::Recording) {
    for m in 0..3 {
        let mat = recording.matrix(m);
        let (mut one, mut p2, mut other, mut longest) = (0, 0, 0, 0);
        for r in 0..mat.rows() {
            let (s, e) = (mat.row_ptr[r] as usize, mat.row_ptr[r + 1] as usize);
            longest = longest.max(e - s);
            for t in s..e {
                let code = match mat.codes {
                    cuzk_stages::pce::Codes::Narrow(c) => u32::from(c[t]),
                    cuzk_stages::pce::Codes::Wide(c) => c[t],
                };
                match code {
                    0 | 1 => one += 1,
                    c if c < cuzk_stages::pce::TABLE => p2 += 1,
                    _ => other += 1,
                }
            }
        }
        println!("matrix {m}: ±1 {one}, ±2^k {p2}, other {other}, longest row {longest}");
    }
}

#[allow(dead_code)]
fn table_sample(recording: &cuzk_stages::pce::Recording) {
    use ff::PrimeField;
    for c in recording.table().iter().take(6) {
        let r = c.to_repr();
        println!("coeff {:02x?}", r.as_ref());
    }
}
