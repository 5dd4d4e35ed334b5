//! The constraint matrices A, B and C in compressed sparse rows: per row,
//! the columns (narrow `u32` indices into the assignment z = inputs ‖ aux)
//! and a coefficient code per term, by class:
//!
//! - `±1`: an addition;
//! - `±2^k` (bit packing, SHA-256's shifted sums): the row's power-of-two
//!   terms are sorted by exponent and summed by Horner's rule, a doubling per
//!   exponent step instead of a multiplication per term;
//! - any other coefficient, small or general: an index into the circuit's
//!   table of distinct coefficients (a lookup beats forming a field element).
//!
//! Codes are `u16` while the table allows, else `u32`.

use std::collections::HashMap;

use bellperson::LinearCombination;
use blstrs::Scalar;
use ff::{Field, PrimeField};
use rayon::prelude::*;

use crate::scalars::{Limbs, as_limbs};

/// Code of a `+1` coefficient.
pub const PLUS_ONE: u32 = 0;
/// Code of a `−1` coefficient.
pub const MINUS_ONE: u32 = 1;
/// `+2^k` is `POW + k`, `−2^k` is `NEG_POW + k`, for k in 1..=255.
pub const POW: u32 = 1;
pub const NEG_POW: u32 = 256;
/// First table code.
pub const TABLE: u32 = 512;

/// The class of a code.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    One,
    /// Power of two, exponent (sorted descending within a row), sign.
    Pow(std::cmp::Reverse<u32>, bool),
    Table,
}

fn class(code: u32) -> Class {
    match code {
        PLUS_ONE | MINUS_ONE => Class::One,
        c if c < NEG_POW + 256 => {
            let neg = c > NEG_POW;
            let k = if neg { c - NEG_POW } else { c - POW };
            Class::Pow(std::cmp::Reverse(k), neg)
        }
        _ => Class::Table,
    }
}

/// Exponent gaps up to this are doublings; longer ones a multiplication.
const DOUBLINGS: u32 = 6;

/// 2^k for k < 256 (the device takes them for long exponent gaps).
pub fn powers_of_two() -> &'static [Scalar; 256] {
    static POWERS: std::sync::OnceLock<[Scalar; 256]> = std::sync::OnceLock::new();
    POWERS.get_or_init(|| {
        let mut p = [Scalar::ONE; 256];
        for k in 1..256 {
            p[k] = p[k - 1].double();
        }
        p
    })
}

/// x ← x·2^k, by doublings or, for a long gap, one multiplication.
#[inline]
fn shift(x: &mut Scalar, k: u32) {
    if k <= DOUBLINGS {
        for _ in 0..k {
            *x = x.double();
        }
    } else {
        *x *= powers_of_two()[k as usize];
    }
}

/// Marks an input column until the number of inputs is known.
const INPUT: u32 = 1 << 31;

/// One matrix's coefficient codes.
#[derive(Clone, Copy, Debug)]
pub enum Codes<'a> {
    Narrow(&'a [u16]),
    Wide(&'a [u32]),
}

impl Codes<'_> {
    /// The code of term `i`.
    #[inline]
    pub fn get(&self, i: usize) -> u32 {
        match self {
            Codes::Narrow(c) => u32::from(c[i]),
            Codes::Wide(c) => c[i],
        }
    }
}

/// One matrix, borrowed from a recording.
#[derive(Clone, Copy, Debug)]
pub struct Csr<'a> {
    pub row_ptr: &'a [u32],
    pub cols: &'a [u32],
    pub codes: Codes<'a>,
}

/// Rows per task of parallel evaluation.
const ROWS_PER_TASK: usize = 1 << 12;

impl Csr<'_> {
    pub fn rows(&self) -> usize {
        self.row_ptr.len() - 1
    }

    pub fn nnz(&self) -> usize {
        self.cols.len()
    }

    /// One row's Σ coeff·z[col]; its terms come ±1 first, then powers of two
    /// by falling exponent (Horner), then table coefficients. Most rows of
    /// bit-heavy circuits have one to three terms, so the first term of
    /// each kind is taken as it is rather than added to zero.
    #[inline]
    fn row(
        &self,
        terms: std::ops::Range<usize>,
        table: &[Scalar],
        z: &[Scalar],
        limbs: &[Limbs],
    ) -> Scalar {
        let (mut acc, mut has_acc) = (Scalar::ZERO, false);
        // Horner accumulator of the power-of-two terms and its exponent.
        let (mut horner, mut exp, mut has_horner) = (Scalar::ZERO, 0u32, false);
        for t in terms {
            let col = self.cols[t] as usize;
            // Zero terms add nothing (about half the bits of a bit-heavy
            // witness); a skipped power of two leaves the Horner exponent
            // where it was, so the next term's shift covers the gap.
            if limbs[col] == [0; 4] {
                continue;
            }
            let v = z[col];
            match self.codes.get(t) {
                PLUS_ONE if has_acc => acc += v,
                PLUS_ONE => (acc, has_acc) = (v, true),
                MINUS_ONE if has_acc => acc -= v,
                MINUS_ONE => (acc, has_acc) = (-v, true),
                code if code < TABLE => {
                    let (k, neg) = if code > NEG_POW {
                        (code - NEG_POW, true)
                    } else {
                        (code - POW, false)
                    };
                    let v = if neg { -v } else { v };
                    if has_horner {
                        shift(&mut horner, exp - k.min(exp));
                        horner += v;
                    } else {
                        (horner, has_horner) = (v, true);
                    }
                    exp = k;
                }
                code => {
                    let v = v * table[(code - TABLE) as usize];
                    if has_acc {
                        acc += v;
                    } else {
                        (acc, has_acc) = (v, true);
                    }
                }
            }
        }
        if !has_horner {
            return acc;
        }
        shift(&mut horner, exp);
        if has_acc { acc + horner } else { horner }
    }

    /// out[r] = Σ coeff·z[col] over row r, for every row, in parallel.
    pub fn eval(&self, table: &[Scalar], z: &[Scalar], out: &mut [Scalar]) {
        let limbs = as_limbs(z);
        out[..self.rows()]
            .par_chunks_mut(ROWS_PER_TASK)
            .enumerate()
            .for_each(|(task, chunk)| {
                let first = task * ROWS_PER_TASK;
                for (k, out) in chunk.iter_mut().enumerate() {
                    let r = first + k;
                    let (s, e) = (self.row_ptr[r] as usize, self.row_ptr[r + 1] as usize);
                    *out = self.row(s..e, table, z, limbs);
                }
            });
    }
}

/// A matrix being recorded.
#[derive(Default)]
pub struct MatrixBuilder {
    pub row_ptr: Vec<u32>,
    pub cols: Vec<u32>,
    pub codes: Vec<u32>,
}

/// How many coefficients of each class a recording holds (for reports).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ClassCounts {
    pub plus_one: u64,
    pub minus_one: u64,
    /// Other coefficients below 2^64.
    pub small: u64,
    pub general: u64,
}

/// Records A, B and C as the circuit enforces its constraints.
pub struct Builder {
    pub mats: [MatrixBuilder; 3],
    pub table: Vec<Scalar>,
    index: HashMap<[u8; 32], u32>,
    pub classes: ClassCounts,
    overflow: bool,
}

impl Default for Builder {
    fn default() -> Self {
        let mut mats: [MatrixBuilder; 3] = Default::default();
        for m in &mut mats {
            m.row_ptr.push(0);
        }
        Self {
            mats,
            table: vec![],
            index: HashMap::new(),
            classes: ClassCounts::default(),
            overflow: false,
        }
    }
}

fn is_small(s: &Scalar) -> bool {
    s.to_repr().as_ref()[8..].iter().all(|&b| b == 0)
}

impl Builder {
    fn code(&mut self, coeff: &Scalar) -> u32 {
        if *coeff == Scalar::ONE {
            self.classes.plus_one += 1;
            return PLUS_ONE;
        }
        if *coeff == -Scalar::ONE {
            self.classes.minus_one += 1;
            return MINUS_ONE;
        }
        if is_small(coeff) {
            self.classes.small += 1;
        } else {
            self.classes.general += 1;
        }
        self.intern(coeff)
    }

    /// The table code of `coeff`, added to the table where it is new.
    fn intern(&mut self, coeff: &Scalar) -> u32 {
        let key: [u8; 32] = coeff.to_repr();
        // Provisional: every other coefficient is a table entry until `finalize`.
        let next = self.table.len() as u32 + TABLE;
        *self.index.entry(key).or_insert_with(|| {
            self.table.push(*coeff);
            next
        })
    }

    /// Appends the rows `part` recorded after this builder's: a part of the
    /// circuit recorded on its own, its columns already numbered for the
    /// whole system. Its table codes are re-interned in its order, so parts
    /// appended in the circuit's order give the table one recording of the
    /// whole circuit would.
    pub fn append(&mut self, part: Builder) {
        let Builder {
            mats,
            table,
            classes,
            overflow,
            ..
        } = part;
        let codes: Vec<u32> = table.iter().map(|c| self.intern(c)).collect();
        for (mine, theirs) in self.mats.iter_mut().zip(mats) {
            let base = mine.cols.len() as u64;
            mine.cols.extend_from_slice(&theirs.cols);
            mine.codes
                .extend(theirs.codes.iter().map(|&c| match c.checked_sub(TABLE) {
                    Some(t) => codes[t as usize],
                    None => c,
                }));
            for &end in &theirs.row_ptr[1..] {
                match u32::try_from(base + u64::from(end)) {
                    Ok(end) => mine.row_ptr.push(end),
                    Err(_) => {
                        self.overflow = true;
                        mine.row_ptr.push(u32::MAX);
                    }
                }
            }
        }
        self.classes.plus_one += classes.plus_one;
        self.classes.minus_one += classes.minus_one;
        self.classes.small += classes.small;
        self.classes.general += classes.general;
        self.overflow |= overflow;
    }

    /// Appends one row of matrix `m` (0 = A, 1 = B, 2 = C), skipping zero
    /// coefficients as the prover does.
    pub fn push_row(&mut self, m: usize, lc: &LinearCombination<Scalar>) {
        let mut terms = Vec::new();
        for (&i, coeff) in lc.iter_inputs() {
            if !coeff.is_zero_vartime() {
                terms.push((INPUT | i as u32, *coeff));
            }
        }
        for (&j, coeff) in lc.iter_aux() {
            if !coeff.is_zero_vartime() {
                terms.push((j as u32, *coeff));
            }
        }
        for (col, coeff) in terms {
            let code = self.code(&coeff);
            let mat = &mut self.mats[m];
            mat.cols.push(col);
            mat.codes.push(code);
        }
        let mat = &mut self.mats[m];
        match u32::try_from(mat.cols.len()) {
            Ok(n) => mat.row_ptr.push(n),
            Err(_) => {
                self.overflow = true;
                mat.row_ptr.push(u32::MAX);
            }
        }
    }

    /// Whether a matrix outgrew 32-bit row pointers (the recording is then unusable).
    pub fn overflowed(&self) -> bool {
        self.overflow
    }

    /// Finishes the matrices: columns into the assignment's layout (inputs,
    /// then aux); coefficients that are sums of at most [`MAX_DIGITS`] signed
    /// powers of two (bit packing merges shifted copies of a variable) split
    /// into ±1 and ±2^k terms; the table down to the other coefficients; and
    /// each row's terms in evaluation order.
    pub fn finalize(&mut self, n_inputs: usize) {
        // Recorded codes are 0, 1 or TABLE + index: what each table entry becomes.
        let mut kept = vec![];
        let expand: Vec<Vec<u32>> = self
            .table
            .iter()
            .map(|c| match signed_digits(c) {
                Some(digits) => digits,
                None => {
                    kept.push(*c);
                    vec![TABLE + kept.len() as u32 - 1]
                }
            })
            .collect();
        self.table = kept;
        for m in &mut self.mats {
            let old = std::mem::take(m);
            m.row_ptr.push(0);
            let mut row: Vec<(Class, u32, u32)> = vec![];
            for r in 0..old.row_ptr.len() - 1 {
                row.clear();
                for t in old.row_ptr[r] as usize..old.row_ptr[r + 1] as usize {
                    let col = if old.cols[t] & INPUT != 0 {
                        old.cols[t] & !INPUT
                    } else {
                        old.cols[t] + n_inputs as u32
                    };
                    match old.codes[t] {
                        code @ (PLUS_ONE | MINUS_ONE) => row.push((class(code), col, code)),
                        code => {
                            for &d in &expand[(code - TABLE) as usize] {
                                row.push((class(d), col, d));
                            }
                        }
                    }
                }
                row.sort_unstable();
                m.cols.extend(row.iter().map(|&(_, col, _)| col));
                m.codes.extend(row.iter().map(|&(_, _, code)| code));
                m.row_ptr
                    .push(u32::try_from(m.cols.len()).unwrap_or(u32::MAX));
            }
            if m.cols.len() > u32::MAX as usize {
                self.overflow = true;
            }
        }
    }
}

/// Most signed powers of two a coefficient is split into.
pub const MAX_DIGITS: usize = 3;

/// The codes of `s` as a sum of at most [`MAX_DIGITS`] signed powers of two
/// (its non-adjacent form, or that of −s negated), if it is one.
fn signed_digits(s: &Scalar) -> Option<Vec<u32>> {
    let naf = |x: &Scalar| -> Option<Vec<(u32, bool)>> {
        // The canonical integer, little-endian 64-bit limbs, plus a carry limb.
        let repr = x.to_repr();
        let mut n = [0u64; 5];
        for (i, chunk) in repr.as_ref().chunks(8).enumerate() {
            n[i] = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        }
        let mut digits = vec![];
        let mut k = 0u32;
        while n.iter().any(|&w| w != 0) {
            if n[0] & 1 == 1 {
                // Digit ±1: 1 if n ≡ 1 (mod 4), else −1 (n + 1 is then ≡ 0 mod 4).
                let neg = n[0] & 3 == 3;
                digits.push((k, neg));
                if digits.len() > MAX_DIGITS {
                    return None;
                }
                if neg {
                    add_one(&mut n);
                } else {
                    n[0] -= 1;
                }
            }
            shift_right(&mut n);
            k += 1;
        }
        Some(digits)
    };
    let (digits, flip) = match (naf(s), naf(&-*s)) {
        (Some(a), Some(b)) if b.len() < a.len() => (b, true),
        (Some(a), _) => (a, false),
        (None, Some(b)) => (b, true),
        (None, None) => return None,
    };
    if digits.len() <= 1 && !flip && digits.first().is_none_or(|&(k, _)| k == 0) {
        // 0 and ±1 never reach the table; nothing to gain.
        return None;
    }
    Some(
        digits
            .into_iter()
            .map(|(k, neg)| {
                let neg = neg ^ flip;
                match (k, neg) {
                    (0, false) => PLUS_ONE,
                    (0, true) => MINUS_ONE,
                    (k, false) => POW + k,
                    (k, true) => NEG_POW + k,
                }
            })
            .collect(),
    )
}

fn add_one(n: &mut [u64; 5]) {
    for w in n.iter_mut() {
        let (v, carry) = w.overflowing_add(1);
        *w = v;
        if !carry {
            return;
        }
    }
}

fn shift_right(n: &mut [u64; 5]) {
    for i in 0..5 {
        n[i] = (n[i] >> 1) | if i + 1 < 5 { n[i + 1] << 63 } else { 0 };
    }
}
