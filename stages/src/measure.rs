//! Synthesis of one partition measured outside the engine: full synthesis
//! against pre-compiled constraints (recording once, then witness-only
//! synthesis and A·z, B·z, C·z), on this machine's cores, and the host bytes
//! a partition holds in flight. `benches/synth` and `cuzk fil synth` print it.

use std::time::{Duration, Instant};

use cuzk_engine::ArenaPool;

use crate::circuit::ProvableCircuit;
use crate::cs::{ArenaCs, CsSlices};
use crate::partition::PartitionLayout;
use crate::pce::{RecordingCs, WitnessCs, check_rows};
use crate::scalars::as_scalars;
use crate::{CircuitShape, synth_slices};

/// What one partition's synthesis costs.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SynthReport {
    pub constraints: usize,
    pub inputs: usize,
    pub aux: usize,
    pub log_domain: u32,
    /// Host bytes of the partition's arena (a, b, c, the assignment, densities
    /// and MSM index lists): what one partition in flight holds.
    pub arena_bytes: usize,
    /// Bytes of the recording (kept once per circuit shape).
    pub recording_bytes: usize,
    pub nonzero_terms: usize,
    pub threads: usize,
    /// Counting pass (the shape), once.
    pub count_s: f64,
    /// Full synthesis (median over repetitions).
    pub full_s: f64,
    /// Recording: full synthesis that records the matrices, once.
    pub record_s: f64,
    /// Witness-only synthesis (median).
    pub witness_s: f64,
    /// A·z, B·z, C·z and the a·b = c check (median).
    pub evaluate_s: f64,
}

impl SynthReport {
    /// Pre-compiled synthesis per partition: witness plus evaluation.
    pub fn pce_s(&self) -> f64 {
        self.witness_s + self.evaluate_s
    }

    pub fn render(&self, name: &str) -> String {
        format!(
            "{name}: {} constraints, {} inputs, {} aux, domain 2^{}; {} threads\n\
             arena per partition {:.2} GiB, recording {:.2} GiB ({} nonzero terms)\n\
             counting pass              {:>9.3} s\n\
             full synthesis             {:>9.3} s\n\
             recording (once)           {:>9.3} s\n\
             witness-only synthesis     {:>9.3} s\n\
             A·z, B·z, C·z and check    {:>9.3} s\n\
             pre-compiled total         {:>9.3} s  ({:.3}x full synthesis)\n",
            self.constraints,
            self.inputs,
            self.aux,
            self.log_domain,
            self.threads,
            self.arena_bytes as f64 / (1u64 << 30) as f64,
            self.recording_bytes as f64 / (1u64 << 30) as f64,
            self.nonzero_terms,
            self.count_s,
            self.full_s,
            self.record_s,
            self.witness_s,
            self.evaluate_s,
            self.pce_s(),
            self.pce_s() / self.full_s
        )
    }
}

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64()
}

/// Measures `make()`'s circuits: `reps` full and pre-compiled syntheses
/// (at least one), the recording once; `full` false skips full synthesis
/// after the recording (for circuits where it takes minutes).
pub fn measure(
    make: impl Fn() -> Box<dyn ProvableCircuit>,
    reps: usize,
    full: bool,
) -> anyhow::Result<SynthReport> {
    let started = Instant::now();
    let shape: CircuitShape = make().shape()?;
    let count_s = started.elapsed().as_secs_f64();
    let srs = shape.srs;
    let layout = PartitionLayout::new(srs);
    let pool = ArenaPool::new(1, layout.bytes.max(1 << 20), None);
    let mut arena = pool.try_acquire().expect("a new pool has a free arena");
    arena.ensure_capacity(layout.bytes)?;
    let slices = |arena: &mut cuzk_engine::ArenaLease| -> CsSlices<'static> {
        let view = arena.view();
        // SAFETY: the arena outlives every use below and each use takes
        // its regions afresh, after the previous one is dropped.
        unsafe {
            std::mem::transmute::<CsSlices<'_>, CsSlices<'static>>(synth_slices(&view, &layout))
        }
    };
    let t = Instant::now();
    let mut rec = RecordingCs::new(ArenaCs::new(slices(&mut arena), &srs));
    make().synthesize_recording(&mut rec)?;
    let (out, recording) = rec.finish(&srs, 0);
    out?;
    let record_s = t.elapsed().as_secs_f64();
    let recording =
        recording.ok_or_else(|| anyhow::anyhow!("the circuit is too large to record"))?;
    let (mut full_t, mut witness_t, mut eval_t) = (vec![], vec![], vec![]);
    for rep in 0..reps.max(1) {
        if full || rep == 0 && reps > 1 {
            let t = Instant::now();
            let mut cs = ArenaCs::new(slices(&mut arena), &srs);
            make().synthesize_into(&mut cs)?;
            cs.finish(&srs)?;
            full_t.push(t.elapsed());
        }
        let view = arena.view();
        let z = as_scalars(view.take(layout.z));
        let t = Instant::now();
        let mut cs = WitnessCs::new(z, srs.inputs);
        make().synthesize_witness(&mut cs)?;
        if let Some(e) = cs.take_error() {
            anyhow::bail!(e);
        }
        recording.matches(&cs)?;
        drop(cs);
        witness_t.push(t.elapsed());
        let (a, b, c) = (
            as_scalars(view.take(layout.a)),
            as_scalars(view.take(layout.b)),
            as_scalars(view.take(layout.c)),
        );
        let t = Instant::now();
        recording.evaluate(z, a, b, c);
        check_rows(a, b, c, recording.meta.constraints)?;
        eval_t.push(t.elapsed());
    }
    Ok(SynthReport {
        constraints: shape.constraints,
        inputs: shape.inputs,
        aux: shape.aux,
        log_domain: srs.log_domain,
        arena_bytes: layout.bytes,
        recording_bytes: recording.bytes(),
        nonzero_terms: recording.nnz(),
        threads: rayon::current_num_threads(),
        count_s,
        full_s: if full_t.is_empty() {
            record_s
        } else {
            median(full_t)
        },
        record_s,
        witness_s: median(witness_t),
        evaluate_s: median(eval_t),
    })
}
