//! Synthesis of one partition measured outside the engine: full synthesis
//! against pre-compiled constraints (recording once, then witness-only
//! synthesis and A·z, B·z, C·z), on this machine's cores, and the host bytes
//! a partition holds in flight. `benches/synth` and `cuzk fil synth` print it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use blstrs::Scalar;

use cuzk_engine::ArenaPool;

use crate::circuit::ProvableCircuit;
use crate::cs::append_input_rows;
use crate::cs::{ArenaCs, CsSlices};
use crate::gpu;
use crate::partition::PartitionLayout;
use crate::pce::{Recording, RecordingCs, WitnessCs, check_rows};
use crate::scalars::{as_scalars, to_canonical};
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
    /// The same where the device evaluates a, b and c (pce_gpu, after the
    /// recording): without them.
    pub arena_witness_only_bytes: usize,
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
    /// The recording made from the matrices alone, the circuit's parts in
    /// parallel (`ProvableCircuit::record_matrices`), where the circuit can.
    pub record_parts_s: Option<f64>,
    /// That recording equals full synthesis's, byte for byte.
    pub record_parts_equal: Option<bool>,
    /// Witness-only synthesis (median).
    pub witness_s: f64,
    /// Each repetition's witness-only synthesis, in order (the first of a
    /// circuit that learns its parts' sizes, PoRep's, differs).
    pub witness_each_s: Vec<f64>,
    /// Witness-only synthesis through the gadgets (median), for circuits
    /// whose witness is computed natively: what `witness_s` is held to.
    pub witness_gadgets_s: Option<f64>,
    /// The native witness equals the gadgets', variable for variable (every
    /// repetition).
    pub witness_equal: Option<bool>,
    /// The first variable (inputs, then aux) where they differ.
    pub witness_first_difference: Option<usize>,
    /// Its gadget path, where the circuit says (`ProvableCircuit::aux_name`).
    pub witness_first_difference_name: Option<String>,
    /// A·z, B·z, C·z and the a·b = c check (median).
    pub evaluate_s: f64,
    /// The same on the GPU, when one was usable.
    pub device: Option<DeviceReport>,
    /// The witness's scalars as the L, A and B MSMs take them: how many of
    /// each query's terms are 0, 1 or anything else (H's are dense).
    pub scalars: [ScalarShares; 3],
}

/// One MSM query's terms by scalar: zero (skipped), one (batch addition)
/// or other (a scalar multiplication).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ScalarShares {
    pub query: &'static str,
    pub terms: usize,
    pub zeros: usize,
    pub ones: usize,
    pub other: usize,
}

impl ScalarShares {
    fn count(
        query: &'static str,
        values: impl rayon::iter::ParallelIterator<Item = Scalar>,
    ) -> Self {
        use ff::Field;
        use rayon::prelude::*;
        let (zeros, ones, other): (usize, usize, usize) = values
            .map(|v| match v {
                v if v == Scalar::ZERO => (1, 0, 0),
                v if v == Scalar::ONE => (0, 1, 0),
                _ => (0, 0, 1),
            })
            .reduce(|| (0, 0, 0), |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2));
        Self {
            query,
            terms: zeros + ones + other,
            zeros,
            ones,
            other,
        }
    }

    fn render(&self) -> String {
        let pct = |k: usize| 100.0 * k as f64 / self.terms.max(1) as f64;
        format!(
            "{} {} terms: {:.1}% zero, {:.1}% one, {:.1}% other",
            self.query,
            self.terms,
            pct(self.zeros),
            pct(self.ones),
            pct(self.other)
        )
    }
}

/// The L, A and B queries' scalars in the assignment `z` (`n_inputs`
/// inputs, then aux) under the recording's densities (A's aux, B's inputs,
/// B's aux; bit i of word i/64): L takes every aux variable, A every input
/// and the aux its density selects, B the inputs and aux its densities do.
pub fn scalar_shares(z: &[Scalar], n_inputs: usize, densities: [&[u64]; 3]) -> [ScalarShares; 3] {
    use rayon::prelude::*;
    let bit = |bits: &[u64], i: usize| (bits[i / 64] >> (i % 64)) & 1 == 1;
    let (inputs, aux) = z.split_at(n_inputs);
    let [a_aux, b_inputs, b_aux] = densities;
    let l = ScalarShares::count("L", aux.par_iter().copied());
    let a = ScalarShares::count(
        "A",
        inputs.par_iter().copied().chain(
            aux.par_iter()
                .enumerate()
                .filter(|(i, _)| bit(a_aux, *i))
                .map(|(_, v)| *v),
        ),
    );
    let b = ScalarShares::count(
        "B",
        inputs
            .par_iter()
            .enumerate()
            .filter(|(i, _)| bit(b_inputs, *i))
            .map(|(_, v)| *v)
            .chain(
                aux.par_iter()
                    .enumerate()
                    .filter(|(i, _)| bit(b_aux, *i))
                    .map(|(_, v)| *v),
            ),
    );
    [l, a, b]
}

/// The evaluation on the GPU (graphs with synth_witness).
#[derive(Clone, Debug, serde::Serialize)]
pub struct DeviceReport {
    /// Device bytes of the recording's matrices, resident once per shape.
    pub matrices_bytes: usize,
    /// Uploading them (once).
    pub matrices_upload_s: f64,
    /// Uploading the assignment (median).
    pub z_upload_s: f64,
    /// A·z, B·z, C·z and the a·b = c check on the device (median).
    pub evaluate_s: f64,
    /// a, b and c from the device equal the host's, bit for bit.
    pub equal_to_host: bool,
}

impl SynthReport {
    /// Pre-compiled synthesis per partition: witness plus evaluation.
    pub fn pce_s(&self) -> f64 {
        self.witness_s + self.evaluate_s
    }

    pub fn render(&self, name: &str) -> String {
        let mut text = format!(
            "{name}: {} constraints, {} inputs, {} aux, domain 2^{}; {} threads\n\
             arena per partition {:.2} GiB ({:.2} GiB with a, b, c on the device), recording {:.2} GiB ({} nonzero terms)\n\
             counting pass              {:>9.3} s\n\
             full synthesis             {:>9.3} s\n\
             recording (once)           {:>9.3} s{}\n\
             witness-only synthesis     {:>9.3} s  (each: {})\n\
             {}A·z, B·z, C·z and check    {:>9.3} s\n\
             pre-compiled total         {:>9.3} s  ({:.3}x full synthesis)\n",
            self.constraints,
            self.inputs,
            self.aux,
            self.log_domain,
            self.threads,
            self.arena_bytes as f64 / (1u64 << 30) as f64,
            self.arena_witness_only_bytes as f64 / (1u64 << 30) as f64,
            self.recording_bytes as f64 / (1u64 << 30) as f64,
            self.nonzero_terms,
            self.count_s,
            self.full_s,
            self.record_s,
            match (self.record_parts_s, self.record_parts_equal) {
                (Some(t), Some(eq)) => format!(
                    "  (in parts: {t:.3} s, {:.1}x; {})",
                    self.record_s / t,
                    if eq {
                        "the same recording"
                    } else {
                        "A DIFFERENT RECORDING"
                    }
                ),
                _ => String::new(),
            },
            self.witness_s,
            self.witness_each_s
                .iter()
                .map(|s| format!("{s:.3}"))
                .collect::<Vec<_>>()
                .join(", "),
            self.render_gadgets(),
            self.evaluate_s,
            self.pce_s(),
            self.pce_s() / self.full_s
        );
        match &self.device {
            Some(d) => {
                text += &format!(
                    "on the GPU: matrices {:.2} GiB resident (uploaded once in {:.3} s)\n\
                 assignment upload          {:>9.3} s\n\
                 A·z, B·z, C·z and check    {:>9.3} s  (a, b, c {} the host's)\n\
                 pre-compiled total (GPU)   {:>9.3} s  ({:.3}x full synthesis; witness and upload)\n",
                    d.matrices_bytes as f64 / (1u64 << 30) as f64,
                    d.matrices_upload_s,
                    d.z_upload_s,
                    d.evaluate_s,
                    if d.equal_to_host {
                        "equal to"
                    } else {
                        "DIFFER FROM"
                    },
                    self.witness_s + d.z_upload_s + d.evaluate_s,
                    (self.witness_s + d.z_upload_s + d.evaluate_s) / self.full_s,
                )
            }
            None => text += "on the GPU: not measured (no usable GPU)\n",
        }
        text += &format!(
            "MSM scalars: {}\n",
            self.scalars
                .iter()
                .map(ScalarShares::render)
                .collect::<Vec<_>>()
                .join("; ")
        );
        text
    }
}

impl SynthReport {
    /// The gadgets' route beside the native one, where there are two.
    fn render_gadgets(&self) -> String {
        let Some(gadgets) = self.witness_gadgets_s else {
            return String::new();
        };
        let equal = match (self.witness_equal, self.witness_first_difference) {
            (Some(true), _) => "equal".to_string(),
            (_, Some(i)) => match &self.witness_first_difference_name {
                Some(name) => format!("DIFFER from variable {i}, {name}"),
                None => format!("DIFFER from variable {i}"),
            },
            _ => "DIFFER".to_string(),
        };
        format!(
            "  through the gadgets       {gadgets:>9.3} s  (native {:.1}x faster; witnesses {equal})\n",
            gadgets / self.witness_s
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
    // Page-locked where a GPU will read it, as the engine's arenas are.
    let locker: Option<Arc<dyn cuzk_engine::PageLocker>> = cuzk_gpu::device::usable_device()
        .is_ok()
        .then(|| Arc::new(cuzk_gpu::cuda::CudaPageLocker) as Arc<dyn cuzk_engine::PageLocker>);
    let pool = ArenaPool::new(1, layout.bytes.max(1 << 20), locker);
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
        Arc::new(recording.ok_or_else(|| anyhow::anyhow!("the circuit is too large to record"))?);
    let (mut record_parts_s, mut record_parts_equal) = (None, None);
    {
        let t = Instant::now();
        let mut cs = crate::setup::MatrixCs::root();
        if let Some(result) = make().record_matrices(&mut cs) {
            result?;
            let parts = crate::pce::recording_of(cs, 0)
                .ok_or_else(|| anyhow::anyhow!("the circuit is too large to record"))?;
            record_parts_s = Some(t.elapsed().as_secs_f64());
            record_parts_equal = Some(parts.content() == recording.content());
        }
    }
    let (mut full_t, mut witness_t, mut eval_t) = (vec![], vec![], vec![]);
    let (mut gadgets_t, mut first_difference, mut compared) = (vec![], None, false);
    let mut first_difference_name = None;
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
        // The gadgets' witness first, where the circuit has a native one,
        // so what is evaluated below is the native witness the engine uses.
        // Each timed run follows a witness run (an untimed one here): first
        // in a repetition, the same gadgets measured 2.6 s against 1.1 s
        // (16 KiB, 11 layers, 2 challenges, 2 cores).
        {
            let mut cs = WitnessCs::new(z, srs.inputs);
            make().synthesize_witness(&mut cs)?;
        }
        let t = Instant::now();
        let mut cs = WitnessCs::new(z, srs.inputs);
        let gadgets = make().synthesize_witness_gadgets(&mut cs);
        let reference = match gadgets {
            Some(result) => {
                result?;
                if let Some(e) = cs.take_error() {
                    anyhow::bail!(e);
                }
                recording.matches(&cs)?;
                drop(cs);
                gadgets_t.push(t.elapsed());
                Some(z.to_vec())
            }
            None => None,
        };
        let t = Instant::now();
        let mut cs = WitnessCs::new(z, srs.inputs);
        make().synthesize_witness(&mut cs)?;
        if let Some(e) = cs.take_error() {
            anyhow::bail!(e);
        }
        recording.matches(&cs)?;
        drop(cs);
        witness_t.push(t.elapsed());
        if let Some(reference) = reference {
            compared = true;
            if first_difference.is_none() {
                first_difference = reference.iter().zip(&*z).position(|(r, n)| r != n);
                // Where it is in the gadgets (aux indices count from the
                // assignment's first aux).
                first_difference_name = first_difference
                    .and_then(|i| i.checked_sub(srs.inputs))
                    .and_then(|aux| make().aux_name(aux))
                    .transpose()?
                    .flatten();
            }
        }
        let (a, b, c) = (
            as_scalars(view.take(layout.a)),
            as_scalars(view.take(layout.b)),
            as_scalars(view.take(layout.c)),
        );
        let t = Instant::now();
        recording.evaluate(z, a, b, c);
        // A native witness that breaks a row says where it left the gadgets'.
        check_rows(a, b, c, recording.meta.constraints).with_context(|| {
            match (first_difference, &first_difference_name) {
                (Some(i), Some(name)) => format!(
                    "the native witness differs from the gadgets' from variable {i}, {name}"
                ),
                (Some(i), None) => {
                    format!("the native witness differs from the gadgets' from variable {i}")
                }
                _ => "the witness breaks a constraint".to_string(),
            }
        })?;
        eval_t.push(t.elapsed());
    }
    // The last repetition left the native witness, checked, in the arena.
    let scalars = {
        let view = arena.view();
        let z = as_scalars(view.take(layout.z));
        scalar_shares(
            &z[..srs.inputs + srs.aux],
            srs.inputs,
            recording.densities(),
        )
    };
    let device = on_device(&recording, &layout, &mut arena, reps)?;
    Ok(SynthReport {
        constraints: shape.constraints,
        inputs: shape.inputs,
        aux: shape.aux,
        log_domain: srs.log_domain,
        arena_bytes: layout.bytes,
        arena_witness_only_bytes: PartitionLayout::witness_only(layout.shape).bytes,
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
        record_parts_s,
        record_parts_equal,
        witness_each_s: witness_t.iter().map(Duration::as_secs_f64).collect(),
        witness_s: median(witness_t),
        witness_gadgets_s: (!gadgets_t.is_empty()).then(|| median(gadgets_t)),
        witness_equal: compared.then_some(first_difference.is_none()),
        witness_first_difference: first_difference,
        witness_first_difference_name: first_difference_name,
        evaluate_s: median(eval_t),
        device,
        scalars,
    })
}

/// The evaluation on the first usable GPU against the host's (left in the
/// arena by the last repetition), or `None` without one.
fn on_device(
    recording: &Arc<Recording>,
    layout: &PartitionLayout,
    arena: &mut cuzk_engine::ArenaLease,
    reps: usize,
) -> anyhow::Result<Option<DeviceReport>> {
    let device = match cuzk_gpu::device::usable_device() {
        Ok(d) => d.ordinal as i32,
        Err(why) => {
            tracing::info!("not measuring the GPU evaluation: {why}");
            return Ok(None);
        }
    };
    let view = arena.view();
    let (rows, inputs) = (recording.meta.constraints, layout.shape.inputs);
    // Each region is taken from the view once.
    let z = view.take(layout.z);
    let (a, b, c) = (
        view.take(layout.a),
        view.take(layout.b),
        view.take(layout.c),
    );
    // The per-input rows and the padding the engine's finish adds.
    let abc = [&mut *a, &mut *b, &mut *c].map(as_scalars);
    append_input_rows(abc, &as_scalars(&mut *z)[..inputs], rows);
    let host = [a.to_vec(), b.to_vec(), c.to_vec()];
    to_canonical(z);
    let d = gpu::evaluate_on_device(device, recording, z, layout.shape.domain, reps)?;
    anyhow::ensure!(
        d.unsatisfied.is_none(),
        "the device found constraint {} unsatisfied where the host found none",
        d.unsatisfied.unwrap_or(0)
    );
    Ok(Some(DeviceReport {
        matrices_bytes: gpu::pce_device_bytes(recording),
        matrices_upload_s: d.matrices_upload.as_secs_f64(),
        z_upload_s: d.z_upload.as_secs_f64(),
        evaluate_s: d.eval.as_secs_f64(),
        equal_to_host: d.abc == host,
    }))
}

#[cfg(test)]
mod shares_tests {
    use super::*;

    #[test]
    fn each_query_counts_the_terms_its_densities_select() {
        // One input (the constant 1), aux: 0, 1, 5, 1, 0.
        let z: Vec<Scalar> = [1u64, 0, 1, 5, 1, 0].map(Scalar::from).to_vec();
        // A takes aux 1, 2; B's input 0 and aux 0, 2, 3.
        let [l, a, b] = scalar_shares(&z, 1, [&[0b00110], &[0b1], &[0b01101]]);
        assert_eq!((l.terms, l.zeros, l.ones, l.other), (5, 2, 2, 1));
        assert_eq!((a.terms, a.zeros, a.ones, a.other), (3, 0, 2, 1));
        assert_eq!((b.terms, b.zeros, b.ones, b.other), (4, 1, 2, 1));
        assert!(
            l.render()
                .starts_with("L 5 terms: 40.0% zero, 40.0% one, 20.0% other")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellperson::gadgets::num::AllocatedNum;
    use bellperson::{Circuit, ConstraintSystem, SynthesisError};
    use blstrs::Scalar;

    /// x, then in the gadget `square`, x²; its "native" witness writes x²
    /// wrong when `wrong`.
    #[derive(Clone)]
    struct Square {
        wrong: bool,
    }

    /// The gadgets' route (not `Clone`, so not itself a `ProvableCircuit`).
    struct Gadgets;

    impl Circuit<Scalar> for Gadgets {
        fn synthesize<CS: ConstraintSystem<Scalar>>(
            self,
            cs: &mut CS,
        ) -> Result<(), SynthesisError> {
            let x = AllocatedNum::alloc(cs.namespace(|| "x"), || Ok(Scalar::from(7)))?;
            x.square(cs.namespace(|| "square"))?;
            Ok(())
        }
    }

    impl ProvableCircuit for Square {
        fn synthesize_into(self: Box<Self>, cs: &mut ArenaCs<'_>) -> Result<(), SynthesisError> {
            Gadgets.synthesize(cs)
        }
        fn synthesize_witness(
            self: Box<Self>,
            cs: &mut WitnessCs<'_>,
        ) -> Result<(), SynthesisError> {
            let x = AllocatedNum::alloc(cs.namespace(|| "x"), || Ok(Scalar::from(7)))?;
            let x2 = Scalar::from(if self.wrong { 48 } else { 49 });
            let y = AllocatedNum::alloc(cs.namespace(|| "x²"), || Ok(x2))?;
            cs.enforce(
                || "x·x = y",
                |lc| lc + x.get_variable(),
                |lc| lc + x.get_variable(),
                |lc| lc + y.get_variable(),
            );
            Ok(())
        }
        fn synthesize_witness_gadgets(
            self: Box<Self>,
            cs: &mut WitnessCs<'_>,
        ) -> Option<Result<(), SynthesisError>> {
            Some(Gadgets.synthesize(cs))
        }
        fn synthesize_recording(
            self: Box<Self>,
            cs: &mut RecordingCs<'_>,
        ) -> Result<(), SynthesisError> {
            Gadgets.synthesize(cs)
        }
        fn aux_name(
            self: Box<Self>,
            index: usize,
        ) -> Option<Result<Option<String>, SynthesisError>> {
            Some(crate::pce::aux_name(Gadgets, index))
        }
        fn duplicate(&self) -> Option<Box<dyn ProvableCircuit>> {
            Some(Box::new(self.clone()))
        }
        fn shape(self: Box<Self>) -> Result<CircuitShape, SynthesisError> {
            crate::shape_of(Gadgets)
        }
    }

    #[test]
    fn a_native_witness_that_leaves_the_gadgets_is_named_where_it_does() {
        let right = measure(|| Box::new(Square { wrong: false }), 1, false).unwrap();
        assert_eq!(right.witness_equal, Some(true));
        // L takes both aux variables, 7 and 49: neither zero nor one.
        let l = right.scalars[0];
        assert_eq!((l.terms, l.zeros, l.ones, l.other), (2, 0, 0, 2));
        let err = measure(|| Box::new(Square { wrong: true }), 1, false).unwrap_err();
        let message = format!("{err:#}");
        assert!(
            message.contains("differs from the gadgets' from variable 2, square/squared num"),
            "{message}"
        );
    }
}
