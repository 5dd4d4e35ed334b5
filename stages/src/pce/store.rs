//! A recording's bytes: one little-endian layout, built in memory and
//! written once beside the parameters, read back through a memory map.
//!
//! ```text
//! header   HEADER_WORDS u64s (magic, version, SRS id, fingerprint, counts, sizes)
//! table    table_len × 4 u64s (coefficients, Montgomery form)
//! density  A aux, B inputs, B aux bitmaps (u64 words)
//! A, B, C  row_ptr (rows + 1 u32), cols (nnz u32), codes (nnz u16 or u32)
//! digest   32 bytes: [`digest`] of everything before it (files only)
//! ```
//! Every section starts on an 8-byte boundary. The digest makes a file
//! damaged after it was written (a bad disk, a copy cut short, an edit) a
//! stale one, recorded again, rather than a wrong coefficient that would
//! fail every proof of its shape at verification.

use std::path::Path;

use blstrs::Scalar;
use rayon::prelude::*;

use super::matrix::{Builder, Codes, Csr};

const MAGIC: u64 = u64::from_le_bytes(*b"cuzkPCE\x01");
/// Bumped whenever the recorder or the layout changes, so stale files are
/// re-recorded instead of trusted.
pub const VERSION: u64 = 4;

/// Bytes of the digest that ends a recording file.
pub const DIGEST_BYTES: usize = 32;

/// SHA-256 over the SHA-256 of each 8 MiB chunk of `bytes`: a recording of
/// a 32 GiB PoRep partition is ~5 GiB, hashed on every core in a fraction
/// of a second instead of seconds on one.
pub fn digest(bytes: &[u8]) -> [u8; DIGEST_BYTES] {
    use sha2::{Digest, Sha256};
    let chunks: Vec<[u8; 32]> = bytes
        .par_chunks(8 << 20)
        .map(|c| Sha256::digest(c).into())
        .collect();
    let mut all = Sha256::new();
    all.update((bytes.len() as u64).to_le_bytes());
    for c in &chunks {
        all.update(c);
    }
    all.finalize().into()
}
const HEADER_WORDS: usize = 18;

/// What a recording is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    /// The SRS it was recorded with ([`crate::Srs::id`]).
    pub srs_id: u64,
    /// The circuit's structural fingerprint (its sequence of allocations and constraints).
    pub fingerprint: u64,
    /// Inputs including the constant one.
    pub n_inputs: usize,
    pub n_aux: usize,
    /// The circuit's own constraints (without the per-input ones).
    pub constraints: usize,
}

enum Backing {
    Owned(Vec<u64>),
    Mapped(memmap2::Mmap),
}

impl Backing {
    fn bytes(&self) -> &[u8] {
        match self {
            // SAFETY: u64s viewed as their bytes.
            Backing::Owned(v) => unsafe {
                std::slice::from_raw_parts(v.as_ptr().cast(), v.len() * 8)
            },
            Backing::Mapped(m) => m,
        }
    }
}

/// Where each section lies, in bytes.
#[derive(Clone, Copy, Debug)]
struct Sections {
    table: (usize, usize),
    density: [(usize, usize); 3],
    row_ptr: [(usize, usize); 3],
    cols: [(usize, usize); 3],
    codes: [(usize, usize); 3],
    wide: bool,
    total: usize,
}

impl Sections {
    /// The layout a header describes; `None` if its sizes overflow (a
    /// damaged header must be refused, not wrap into a layout that fits).
    fn of(h: &[u64]) -> Option<Self> {
        let word = |i: usize| usize::try_from(h[i]).ok();
        let (table_len, wide) = (word(8)?, h[7] == 32);
        let mut at = HEADER_WORDS * 8;
        let mut take = |bytes: Option<usize>| -> Option<(usize, usize)> {
            let bytes = bytes?;
            let range = (at, bytes);
            at = at.checked_add(bytes.checked_next_multiple_of(8)?)?;
            Some(range)
        };
        let table = take(table_len.checked_mul(32))?;
        let mut density = [(0, 0); 3];
        for (i, d) in density.iter_mut().enumerate() {
            *d = take(word(9 + i)?.checked_mul(8))?;
        }
        let mut row_ptr = [(0, 0); 3];
        let mut cols = [(0, 0); 3];
        let mut codes = [(0, 0); 3];
        for m in 0..3 {
            let (rows, nnz) = (word(12 + m)?, word(15 + m)?);
            row_ptr[m] = take(rows.checked_add(1).and_then(|r| r.checked_mul(4)))?;
            cols[m] = take(nnz.checked_mul(4))?;
            codes[m] = take(nnz.checked_mul(if wide { 4 } else { 2 }))?;
        }
        Some(Self {
            table,
            density,
            row_ptr,
            cols,
            codes,
            wide,
            total: at,
        })
    }
}

/// Pre-compiled constraints of one circuit shape.
pub struct Recording {
    pub meta: Meta,
    data: Backing,
    sections: Sections,
}

impl std::fmt::Debug for Recording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recording")
            .field("meta", &self.meta)
            .field("bytes", &self.sections.total)
            .field("mapped", &matches!(self.data, Backing::Mapped(_)))
            .finish()
    }
}

/// Copies `src` as bytes into `dst` at byte offset `at`.
fn put<T: Copy>(dst: &mut [u8], at: usize, src: &[T]) {
    let n = std::mem::size_of_val(src);
    // SAFETY: plain data viewed as bytes.
    let bytes = unsafe { std::slice::from_raw_parts(src.as_ptr().cast::<u8>(), n) };
    dst[at..at + n].copy_from_slice(bytes);
}

impl Recording {
    /// Lays out a finished recording in memory.
    pub fn build(meta: Meta, builder: &Builder, densities: [&[u64]; 3]) -> Self {
        let wide = builder.table.len() + super::matrix::TABLE as usize > usize::from(u16::MAX) + 1;
        let mut h = [0u64; HEADER_WORDS];
        h[0] = MAGIC;
        h[1] = VERSION;
        h[2] = meta.srs_id;
        h[3] = meta.fingerprint;
        h[4] = meta.n_inputs as u64;
        h[5] = meta.n_aux as u64;
        h[6] = meta.constraints as u64;
        h[7] = if wide { 32 } else { 16 };
        h[8] = builder.table.len() as u64;
        for (i, d) in densities.iter().enumerate() {
            h[9 + i] = d.len() as u64;
        }
        for (m, mat) in builder.mats.iter().enumerate() {
            h[12 + m] = (mat.row_ptr.len() - 1) as u64;
            h[15 + m] = mat.cols.len() as u64;
        }
        let s = Sections::of(&h).expect("sizes of a built recording fit");
        let mut words = vec![0u64; s.total / 8];
        // SAFETY: the u64 buffer viewed as bytes.
        let bytes =
            unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), s.total) };
        put(bytes, 0, &h);
        put(bytes, s.table.0, &builder.table);
        for (i, d) in densities.iter().enumerate() {
            put(bytes, s.density[i].0, d);
        }
        for (m, mat) in builder.mats.iter().enumerate() {
            put(bytes, s.row_ptr[m].0, &mat.row_ptr);
            put(bytes, s.cols[m].0, &mat.cols);
            if wide {
                put(bytes, s.codes[m].0, &mat.codes);
            } else {
                let narrow: Vec<u16> = mat.codes.iter().map(|&c| c as u16).collect();
                put(bytes, s.codes[m].0, &narrow);
            }
        }
        Self {
            meta,
            data: Backing::Owned(words),
            sections: s,
        }
    }

    /// The recording's bytes as written (without the file's digest).
    pub fn content(&self) -> &[u8] {
        &self.data.bytes()[..self.sections.total]
    }

    /// Writes the recording to `path`: a temp file made durable (fsync),
    /// renamed over, and the rename made durable too, so a power loss leaves
    /// the old file or the whole new one, never a torn one that every job
    /// of the shape would then trip on.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        use std::io::Write;
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        let mut file = std::fs::File::create(&tmp)?;
        let body = self.content();
        file.write_all(body)?;
        file.write_all(&digest(body))?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, path)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    }

    /// Maps a recording written by [`Recording::write`]; `None` if the file
    /// is not one (wrong magic, version, size or digest), so it is recorded
    /// again.
    pub fn open(path: &Path) -> std::io::Result<Option<Self>> {
        let file = std::fs::File::open(path)?;
        // SAFETY: read-only; the file is written once by rename and never
        // changed in place.
        let map = unsafe { memmap2::Mmap::map(&file) }?;
        if map.len() < HEADER_WORDS * 8 {
            return Ok(None);
        }
        let h: Vec<u64> = map[..HEADER_WORDS * 8]
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        if h[0] != MAGIC || h[1] != VERSION {
            return Ok(None);
        }
        let Some(s) = Sections::of(&h).filter(|s| s.total + DIGEST_BYTES == map.len()) else {
            return Ok(None);
        };
        if digest(&map[..s.total]) != map[s.total..] {
            tracing::warn!(path = %path.display(), "pre-compiled constraints fail their digest (damaged after they were written)");
            return Ok(None);
        }
        Ok(Some(Self {
            meta: Meta {
                srs_id: h[2],
                fingerprint: h[3],
                n_inputs: h[4] as usize,
                n_aux: h[5] as usize,
                constraints: h[6] as usize,
            },
            data: Backing::Mapped(map),
            sections: s,
        }))
    }

    fn slice<T>(&self, (at, bytes): (usize, usize)) -> &[T] {
        let data = self.data.bytes();
        assert!(at + bytes <= data.len() && at % std::mem::align_of::<T>() == 0);
        // SAFETY: in bounds and aligned (checked; sections are 8-aligned in
        // an 8-aligned buffer or a page-aligned map); every type read here
        // (u16, u32, u64, Scalar limbs) accepts any bits.
        unsafe {
            std::slice::from_raw_parts(
                data.as_ptr().add(at).cast(),
                bytes / std::mem::size_of::<T>(),
            )
        }
    }

    /// The coefficient table.
    pub fn table(&self) -> &[Scalar] {
        self.slice(self.sections.table)
    }

    /// The A-aux, B-input and B-aux density bitmaps.
    pub fn densities(&self) -> [&[u64]; 3] {
        [0, 1, 2].map(|i| self.slice(self.sections.density[i]))
    }

    /// Matrix `m`: 0 = A, 1 = B, 2 = C.
    pub fn matrix(&self, m: usize) -> Csr<'_> {
        let s = &self.sections;
        Csr {
            row_ptr: self.slice(s.row_ptr[m]),
            cols: self.slice(s.cols[m]),
            codes: if s.wide {
                Codes::Wide(self.slice(s.codes[m]))
            } else {
                Codes::Narrow(self.slice(s.codes[m]))
            },
        }
    }

    /// Bytes the recording takes.
    pub fn bytes(&self) -> usize {
        self.sections.total
    }

    /// Checks that every index the matrices hold is in bounds: row pointers
    /// rising to the term count, columns inside the assignment, codes inside
    /// the table. The device reads a recording without bounds checks, so one
    /// is validated before it is uploaded (a damaged file is an error, not an
    /// out-of-bounds read).
    pub fn validate(&self) -> Result<(), String> {
        let n = self.meta.n_inputs + self.meta.n_aux;
        let codes_end = super::matrix::TABLE as usize + self.table().len();
        for (m, name) in ["A", "B", "C"].into_iter().enumerate() {
            let csr = self.matrix(m);
            if csr.rows() != self.meta.constraints {
                return Err(format!(
                    "matrix {name} has {} rows for {} constraints",
                    csr.rows(),
                    self.meta.constraints
                ));
            }
            let ptr = csr.row_ptr;
            if ptr[0] != 0
                || ptr[ptr.len() - 1] as usize != csr.nnz()
                || ptr.par_windows(2).any(|w| w[0] > w[1])
            {
                return Err(format!(
                    "matrix {name}'s row pointers are not rising to its term count"
                ));
            }
            if let Some(col) = csr.cols.par_iter().find_any(|&&c| c as usize >= n) {
                return Err(format!(
                    "matrix {name} has column {col} beyond the {n} variables"
                ));
            }
            let bad_code = match csr.codes {
                Codes::Narrow(c) => c.par_iter().any(|&c| c as usize >= codes_end),
                Codes::Wide(c) => c.par_iter().any(|&c| c as usize >= codes_end),
            };
            if bad_code {
                return Err(format!(
                    "matrix {name} has a coefficient code beyond its table"
                ));
            }
        }
        Ok(())
    }

    /// Whether coefficient codes are `u32` (else `u16`).
    pub fn wide_codes(&self) -> bool {
        self.sections.wide
    }

    pub fn is_mapped(&self) -> bool {
        matches!(self.data, Backing::Mapped(_))
    }
}
