//! Recording synthesis: full synthesis into the arena (as [`ArenaCs`]) that
//! also records every constraint's linear combinations into A, B and C.

use bellperson::{ConstraintSystem, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;

use super::Fingerprint;
use super::matrix::Builder;
use super::store::{Meta, Recording};
use crate::cs::{ArenaCs, CsError, Synthesized, set_bit};
use crate::setup::MatrixCs;
use crate::srs::SrsShape;

/// Full synthesis that records the matrices on the way.
pub struct RecordingCs<'a> {
    inner: ArenaCs<'a>,
    builder: Builder,
    fingerprint: Fingerprint,
}

impl<'a> RecordingCs<'a> {
    pub fn new(inner: ArenaCs<'a>) -> Self {
        // The constant one was allocated by `ArenaCs::new`; count it as the
        // witness system does.
        let mut fingerprint = Fingerprint::default();
        fingerprint.alloc_input();
        Self {
            inner,
            builder: Builder::default(),
            fingerprint,
        }
    }
}

impl RecordingCs<'_> {
    /// The first problem met while the circuit ran, if any.
    pub fn take_error(&mut self) -> Option<CsError> {
        self.inner.take_error()
    }

    /// Finishes synthesis (as [`ArenaCs::finish`]) and the recording, made
    /// for the SRS `srs_id`; no recording if a matrix outgrew 32-bit row pointers.
    pub fn finish(
        mut self,
        shape: &SrsShape,
        srs_id: u64,
    ) -> (Result<Synthesized, CsError>, Option<Recording>) {
        let (n_inputs, n_aux, constraints) = self.inner.counts();
        let recording = (!self.builder.overflowed()).then(|| {
            self.builder.finalize(n_inputs);
            let meta = Meta {
                srs_id,
                fingerprint: self.fingerprint.value(),
                n_inputs,
                n_aux,
                constraints,
            };
            Recording::build(meta, &self.builder, self.inner.densities())
        });
        if recording.is_none() {
            tracing::warn!(
                "the circuit's matrices outgrow 32-bit row pointers; not pre-compiling it"
            );
        }
        (self.inner.finish(shape), recording)
    }
}

impl ConstraintSystem<Scalar> for RecordingCs<'_> {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, annotation: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.fingerprint.alloc();
        self.inner.alloc(annotation, f)
    }

    fn alloc_input<F, A, AR>(&mut self, annotation: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.fingerprint.alloc_input();
        self.inner.alloc_input(annotation, f)
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, annotation: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        let (la, lb, lc) = (
            a(LinearCombination::zero()),
            b(LinearCombination::zero()),
            c(LinearCombination::zero()),
        );
        self.fingerprint.enforce();
        self.builder.push_row(0, &la);
        self.builder.push_row(1, &lb);
        self.builder.push_row(2, &lc);
        self.inner.enforce_lcs(annotation, &la, &lb, &lc);
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}

/// The recording of a circuit recorded without values (a [`MatrixCs`]
/// whose parts may have run in parallel, [`MatrixCs::record_parts`]): the
/// matrices, densities and fingerprint full synthesis with [`RecordingCs`]
/// records, made for the SRS `srs_id`; `None` if a matrix outgrew 32-bit
/// row pointers.
pub fn recording_of(cs: MatrixCs, srs_id: u64) -> Option<Recording> {
    let (mut builder, n_inputs, n_aux, constraints, fingerprint) = cs.into_recorded();
    if builder.overflowed() {
        return None;
    }
    builder.finalize(n_inputs);
    if builder.overflowed() {
        return None;
    }
    let densities = densities_of(&builder, n_inputs, n_aux);
    let meta = Meta {
        srs_id,
        fingerprint: fingerprint.value(),
        n_inputs,
        n_aux,
        constraints,
    };
    Some(Recording::build(
        meta,
        &builder,
        densities.each_ref().map(Vec::as_slice),
    ))
}

/// The A-aux, B-input and B-aux density bitmaps full synthesis marks (a
/// variable with a non-zero coefficient in A or B), from finalized
/// matrices (columns: inputs, then aux).
fn densities_of(b: &Builder, n_inputs: usize, n_aux: usize) -> [Vec<u64>; 3] {
    let words = |bits: usize| vec![0u64; bits.div_ceil(64)];
    let (mut a_aux, mut b_input, mut b_aux) = (words(n_aux), words(n_inputs), words(n_aux));
    for &col in &b.mats[0].cols {
        if let Some(j) = (col as usize).checked_sub(n_inputs) {
            set_bit(&mut a_aux, j);
        }
    }
    for &col in &b.mats[1].cols {
        match (col as usize).checked_sub(n_inputs) {
            Some(j) => set_bit(&mut b_aux, j),
            None => set_bit(&mut b_input, col as usize),
        }
    }
    [a_aux, b_input, b_aux]
}
