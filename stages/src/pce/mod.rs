//! Pre-compiled constraints (the seeds' PCE): a circuit's A, B and C are
//! recorded once per circuit shape, and later partitions of that shape are
//! synthesized witness-only (the circuit computes its assignment z; no
//! linear combination is built), with a = A·z, b = B·z, c = C·z evaluated
//! from the recording in parallel.
//!
//! A recording is keyed by the SRS it was made with (the SRS fixes the
//! circuit) and checked against every circuit before use: the counts of
//! inputs, aux variables and constraints, and the circuit's structural
//! fingerprint (its sequence of allocations and constraints). After
//! evaluation every row is checked, a·b = c; a circuit that does not match
//! falls back to full synthesis with a warning, never to a wrong proof.
//! Recordings live in memory and on disk beside the parameters, read back
//! through a memory map.

pub mod matrix;
mod names;
mod record;
pub mod store;
mod witness;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use blstrs::Scalar;
use ff::Field;

use crate::scalars::{Limbs, as_limbs};
use rayon::prelude::*;

pub use matrix::{ClassCounts, Codes, Csr, TABLE, powers_of_two};
pub use names::aux_name;
pub use record::{RecordingCs, recording_of};
pub use store::{Meta, Recording};
pub use witness::{PartDone, PartSize, Parts, WitnessCs, WitnessPart, synthesize_parts};

use crate::srs::Srs;

/// A running hash of a circuit's structure: the sequence of input and aux
/// allocations and constraints, as the circuit's code makes them. Costs a
/// multiply per call, so witness-only synthesis can afford it.
///
/// A polynomial hash (h ← h·R + op, mod 2^64), so the hash of a sequence
/// made of parts synthesized apart (in parallel) is composed from theirs:
/// h(A‖B) = h(A)·R^|B| + h(B) ([`Fingerprint::then`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fingerprint {
    hash: u64,
    /// Operations folded in.
    ops: u64,
}

/// The hash's multiplier (odd, so every power of it is invertible mod 2^64).
const R: u64 = 0x0000_0100_0000_01b3;

fn r_pow(mut e: u64) -> u64 {
    let (mut base, mut acc) = (R, 1u64);
    while e > 0 {
        if e & 1 == 1 {
            acc = acc.wrapping_mul(base);
        }
        base = base.wrapping_mul(base);
        e >>= 1;
    }
    acc
}

impl Fingerprint {
    #[inline]
    fn mix(&mut self, op: u64) {
        self.hash = self.hash.wrapping_mul(R).wrapping_add(op);
        self.ops += 1;
    }
    #[inline]
    pub fn alloc(&mut self) {
        self.mix(1);
    }
    #[inline]
    pub fn alloc_input(&mut self) {
        self.mix(2);
    }
    #[inline]
    pub fn enforce(&mut self) {
        self.mix(3);
    }
    /// The fingerprint of this sequence followed by `next`'s.
    pub fn then(self, next: Fingerprint) -> Fingerprint {
        Fingerprint {
            hash: self
                .hash
                .wrapping_mul(r_pow(next.ops))
                .wrapping_add(next.hash),
            ops: self.ops + next.ops,
        }
    }
    /// Operations folded in so far.
    pub fn ops(self) -> u64 {
        self.ops
    }
    pub fn value(self) -> u64 {
        self.hash ^ self.ops.rotate_left(32)
    }
}

/// Why a recording does not fit a circuit.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Mismatch {
    #[error("the circuit has {got} {what}, its recording {recorded}")]
    Count {
        what: &'static str,
        got: usize,
        recorded: usize,
    },
    #[error(
        "the circuit's structure (fingerprint {got:016x}) differs from its recording's ({recorded:016x})"
    )]
    Fingerprint { got: u64, recorded: u64 },
    #[error("constraint {row} is not satisfied by the witness under the recorded matrices")]
    Unsatisfied { row: usize },
}

impl Recording {
    /// Checks a witness-only synthesis against this recording.
    pub fn matches(&self, cs: &WitnessCs<'_>) -> Result<(), Mismatch> {
        let m = &self.meta;
        for (what, got, recorded) in [
            ("public inputs", cs.n_inputs, m.n_inputs),
            ("auxiliary variables", cs.n_aux, m.n_aux),
            ("constraints", cs.constraints, m.constraints),
        ] {
            if got != recorded {
                return Err(Mismatch::Count {
                    what,
                    got,
                    recorded,
                });
            }
        }
        if cs.fingerprint.value() != m.fingerprint {
            return Err(Mismatch::Fingerprint {
                got: cs.fingerprint.value(),
                recorded: m.fingerprint,
            });
        }
        Ok(())
    }

    /// a, b, c over the circuit's own constraints from the assignment z.
    pub fn evaluate(&self, z: &[Scalar], a: &mut [Scalar], b: &mut [Scalar], c: &mut [Scalar]) {
        let table = self.table();
        let (ma, mb, mc) = (self.matrix(0), self.matrix(1), self.matrix(2));
        rayon::join(
            || ma.eval(table, z, a),
            || rayon::join(|| mb.eval(table, z, b), || mc.eval(table, z, c)),
        );
    }

    /// Non-zero terms of A, B and C together.
    pub fn nnz(&self) -> usize {
        (0..3).map(|m| self.matrix(m).nnz()).sum()
    }
}

/// Checks a·b = c over the first `rows` rows; the first row that fails.
/// Where a or b is 0 or 1 (most rows of bit-heavy circuits: booleanity,
/// xor, and) the product is not formed; limbs are compared, not values.
pub fn check_rows(a: &[Scalar], b: &[Scalar], c: &[Scalar], rows: usize) -> Result<(), Mismatch> {
    let (la, lb, lc) = (as_limbs(a), as_limbs(b), as_limbs(c));
    let zero: Limbs = [0; 4];
    let one = as_limbs(&[Scalar::ONE])[0];
    let satisfied = |r: usize| {
        let (x, y, z) = (&la[r], &lb[r], &lc[r]);
        if *x == zero || *y == zero {
            *z == zero
        } else if *y == one {
            x == z
        } else if *x == one {
            y == z
        } else {
            a[r] * b[r] == c[r]
        }
    };
    let bad = (0..rows)
        .into_par_iter()
        .with_min_len(1 << 12)
        .find_first(|&r| !satisfied(r));
    match bad {
        Some(row) => Err(Mismatch::Unsatisfied { row }),
        None => Ok(()),
    }
}

/// Recordings by SRS, in memory, backed by files beside the parameters (or
/// in `dir`). One lock per SRS, so the first partition of a shape records
/// it while the others wait, instead of all recording at once.
#[derive(Default)]
pub struct PceCache {
    dir: Option<PathBuf>,
    slots: Mutex<HashMap<u64, Slot>>,
}

/// One SRS's recording, once made or read; its lock is held while making it.
type Slot = Arc<Mutex<Option<Arc<Recording>>>>;

impl PceCache {
    /// Files go beside each SRS's parameter file, or into `dir` if given.
    pub fn new(dir: Option<PathBuf>) -> Self {
        Self {
            dir,
            slots: Mutex::default(),
        }
    }

    /// The file an SRS's recording lives in, if it has a place on disk.
    pub fn path_for(&self, srs: &Srs) -> Option<PathBuf> {
        self.path_of(srs.id(), srs.path.as_deref())
    }

    /// Where the recording of the SRS with `id`, read from `params`, is kept.
    pub fn path_of(&self, id: u64, params: Option<&std::path::Path>) -> Option<PathBuf> {
        let name = format!("{id:016x}.v{}.pce", store::VERSION);
        match (&self.dir, params) {
            (Some(dir), _) => Some(dir.join(name)),
            (None, Some(params)) => Some(params.with_extension(name)),
            (None, None) => None,
        }
    }

    fn slot(&self, srs: &Srs) -> Slot {
        self.slots
            .lock()
            .unwrap()
            .entry(srs.id())
            .or_default()
            .clone()
    }

    /// The recording for `srs`: in memory, else read from disk, else made
    /// by `record` (and written to disk, best effort). Other callers for the
    /// same SRS wait meanwhile. `record` returning `None` leaves none.
    pub fn get_or_record(
        &self,
        srs: &Srs,
        record: impl FnOnce() -> Option<Recording>,
    ) -> (Option<Arc<Recording>>, Origin) {
        let slot = self.slot(srs);
        let mut held = slot.lock().unwrap();
        if let Some(r) = held.as_ref() {
            return (Some(r.clone()), Origin::Memory);
        }
        let path = self.path_for(srs);
        if let Some(p) = path.as_ref().filter(|p| p.is_file()) {
            match Recording::open(p) {
                Ok(Some(r)) if r.meta.srs_id == srs.id() => {
                    let r = Arc::new(r);
                    *held = Some(r.clone());
                    return (Some(r), Origin::Disk);
                }
                Ok(_) => {
                    tracing::warn!(path = %p.display(), "stale pre-compiled constraints; recording again")
                }
                Err(e) => {
                    tracing::warn!(path = %p.display(), "cannot read pre-compiled constraints ({e}); recording again")
                }
            }
        }
        let Some(r) = record() else {
            return (None, Origin::Recorded);
        };
        if let Some(p) = &path
            && let Err(e) = r.write(p)
        {
            tracing::warn!(path = %p.display(), "cannot write pre-compiled constraints ({e}); keeping them in memory only");
        }
        let r = Arc::new(r);
        *held = Some(r.clone());
        (Some(r), Origin::Recorded)
    }

    /// Forgets an SRS's recording (its file stays).
    pub fn evict(&self, srs: &Srs) {
        self.slots.lock().unwrap().remove(&srs.id());
    }

    /// Bytes of the recordings held (in memory or mapped); one being made
    /// counts once it is done.
    pub fn resident_bytes(&self) -> usize {
        let slots: Vec<Slot> = self.slots.lock().unwrap().values().cloned().collect();
        slots
            .iter()
            .filter_map(|s| s.try_lock().ok()?.as_ref().map(|r| r.bytes()))
            .sum()
    }
}

/// Where a recording came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    Memory,
    Disk,
    Recorded,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Memory => "memory",
            Origin::Disk => "disk",
            Origin::Recorded => "recorded",
        }
    }
}
