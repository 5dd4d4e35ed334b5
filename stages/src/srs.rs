//! The structured reference string: bellperson's parameter file format, read
//! in chunks (never mapped) and decoded in parallel.
//!
//! Layout (all big-endian lengths, points uncompressed): the verifying key
//! (alpha_g1, beta_g1, beta_g2, gamma_g2, delta_g1, delta_g2, then `ic` as a
//! u32 count and G1 points), then `h`, `l`, `a`, `b_g1` (each a u32 count and
//! G1 points) and `b_g2` (a u32 count and G2 points).

use std::fs::File;
use std::path::{Path, PathBuf};

use bellperson::groth16::{Parameters, PreparedVerifyingKey, VerifyingKey, prepare_verifying_key};
use blstrs::{Bls12, G1Affine, G2Affine};
use cuzk_gpu::cuda::{HostSlice, KernelError};
use group::UncompressedEncoding;
use rayon::prelude::*;

const G1_BYTES: usize = 96;
const G2_BYTES: usize = 192;
const VK_FIXED_BYTES: usize = 3 * G1_BYTES + 3 * G2_BYTES;

/// A parameter file that cannot be used, and why.
#[derive(Debug, thiserror::Error)]
pub enum SrsError {
    #[error("cannot open SRS file {path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "SRS file {path} is truncated: {what} needs {need} bytes at offset {offset} but the file has {len}"
    )]
    Truncated {
        path: PathBuf,
        what: &'static str,
        need: usize,
        offset: usize,
        len: usize,
    },
    #[error(
        "SRS file {path} has {extra} bytes after the last section; it is not a bellperson parameter file"
    )]
    TrailingBytes { path: PathBuf, extra: usize },
    #[error("SRS file {path}: {what} point {index} is not a valid curve point")]
    BadPoint {
        path: PathBuf,
        what: &'static str,
        index: usize,
    },
    #[error("SRS file {path}: h has {h} points, so its domain size {m} is not a power of two")]
    NotRadix2 { path: PathBuf, h: usize, m: usize },
    #[error("SRS file {path}: the verifying key is malformed: {source}")]
    VerifyingKey {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("writing SRS file {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The sizes a circuit must match to be proven with an SRS.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SrsShape {
    /// Evaluation domain size (a power of two).
    pub domain: usize,
    pub log_domain: u32,
    /// Public inputs, including the leading constant one.
    pub inputs: usize,
    /// Auxiliary (private) variables.
    pub aux: usize,
    /// Points in the A query (inputs plus aux used in A).
    pub a_len: usize,
    /// Points in the B queries (inputs and aux used in B).
    pub b_len: usize,
}

/// Proving and verifying key, decoded into memory. The point vectors are
/// read-only [`HostSlice`]s, so they can be page-locked for streaming to a
/// device for as long as the SRS lives ([`Srs::pin_host`]).
pub struct Srs {
    pub vk: VerifyingKey<Bls12>,
    pub pvk: PreparedVerifyingKey<Bls12>,
    pub h: HostSlice<G1Affine>,
    pub l: HostSlice<G1Affine>,
    pub a: HostSlice<G1Affine>,
    pub b_g1: HostSlice<G1Affine>,
    pub b_g2: HostSlice<G2Affine>,
    /// Where it was read from, if from a file.
    pub path: Option<PathBuf>,
    id: std::sync::OnceLock<u64>,
}

impl std::fmt::Debug for Srs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Srs")
            .field("path", &self.path)
            .field("shape", &self.shape())
            .finish()
    }
}

/// Reads a parameter file front to back with `read`, never a memory map: a
/// file truncated or replaced while it is read (a re-download) is an error
/// naming what was cut short, not a SIGBUS that would take the daemon and
/// every job in it down.
struct Cursor<'a> {
    file: File,
    /// The file's length when it was opened: every section is checked
    /// against it before it is read.
    len: usize,
    offset: usize,
    path: &'a Path,
}

/// Points decoded per read: bounds the buffer (64 MiB of G1) while one
/// chunk is read as the one before it is decoded on every core.
const CHUNK_POINTS: usize = 1 << 19;

impl<'a> Cursor<'a> {
    fn open(path: &'a Path) -> Result<Self, SrsError> {
        let open = |source| SrsError::Open {
            path: path.into(),
            source,
        };
        let file = File::open(path).map_err(open)?;
        let meta = file.metadata().map_err(open)?;
        if !meta.is_file() {
            return Err(open(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "not a regular file",
            )));
        }
        Ok(Self {
            file,
            len: meta.len() as usize,
            offset: 0,
            path,
        })
    }

    fn truncated(&self, what: &'static str, need: usize) -> SrsError {
        SrsError::Truncated {
            path: self.path.into(),
            what,
            need,
            offset: self.offset,
            len: self.len,
        }
    }

    /// Checks that `n` more bytes lie within the file's length.
    fn room(&self, what: &'static str, n: usize) -> Result<(), SrsError> {
        match self.offset.checked_add(n) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(self.truncated(what, n)),
        }
    }

    /// Reads `buf.len()` bytes; a file that shrank since it was opened is
    /// reported as truncated.
    fn read_into(&mut self, what: &'static str, buf: &mut [u8]) -> Result<(), SrsError> {
        use std::io::Read;
        self.room(what, buf.len())?;
        self.file
            .read_exact(buf)
            .map_err(|_| self.truncated(what, buf.len()))?;
        self.offset += buf.len();
        Ok(())
    }

    fn take(&mut self, what: &'static str, n: usize) -> Result<Vec<u8>, SrsError> {
        self.room(what, n)?;
        let mut buf = vec![0; n];
        self.read_into(what, &mut buf)?;
        Ok(buf)
    }

    fn count(&mut self, what: &'static str) -> Result<usize, SrsError> {
        let b = self.take(what, 4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }

    /// Moves past `n` bytes without reading them.
    fn skip(&mut self, what: &'static str, n: usize) -> Result<(), SrsError> {
        use std::io::Seek;
        self.room(what, n)?;
        self.offset += n;
        self.file
            .seek(std::io::SeekFrom::Start(self.offset as u64))
            .map_err(|_| self.truncated(what, n))?;
        Ok(())
    }

    fn points<P>(
        &mut self,
        what: &'static str,
        size: usize,
        checked: bool,
    ) -> Result<Vec<P>, SrsError>
    where
        P: UncompressedEncoding + Send,
    {
        let n = self.count(what)?;
        self.room(what, n.saturating_mul(size))?;
        let path = self.path;
        let decode = |raw: &[u8], first: usize| -> Result<Vec<P>, SrsError> {
            raw.par_chunks(size)
                .with_min_len(1 << 10)
                .enumerate()
                .map(|(k, chunk)| {
                    let mut repr = P::Uncompressed::default();
                    repr.as_mut().copy_from_slice(chunk);
                    let point = if checked {
                        P::from_uncompressed(&repr)
                    } else {
                        P::from_uncompressed_unchecked(&repr)
                    };
                    Option::<P>::from(point).ok_or_else(|| SrsError::BadPoint {
                        path: path.into(),
                        what,
                        index: first + k,
                    })
                })
                .collect()
        };
        let mut out = Vec::with_capacity(n);
        let (mut current, mut next) = (vec![], vec![]);
        let mut read = 0;
        let mut pending = 0;
        while read < n || pending > 0 {
            // Read the next chunk while the current one decodes.
            let take = CHUNK_POINTS.min(n - read);
            next.resize(take * size, 0);
            let first = out.len();
            let (decoded, got) = rayon::join(
                || decode(&current[..pending * size], first),
                || self.read_into(what, &mut next),
            );
            out.extend(decoded?);
            got?;
            read += take;
            pending = take;
            std::mem::swap(&mut current, &mut next);
        }
        Ok(out)
    }
}

fn take<T: Clone>(v: std::sync::Arc<Vec<T>>) -> HostSlice<T> {
    HostSlice::new(std::sync::Arc::try_unwrap(v).unwrap_or_else(|shared| (*shared).clone()))
}

impl Srs {
    /// Reads a parameter file (with `read`; see [`Cursor`]). With `checked`, every
    /// point is also checked to lie in its prime-order subgroup (slow; files
    /// this engine wrote itself need not be).
    pub fn read(path: &Path, checked: bool) -> Result<Self, SrsError> {
        let mut c = Cursor::open(path)?;
        let fixed = c.take("verifying key", VK_FIXED_BYTES)?;
        let ic = c.count("verifying key ic")?;
        let ic_bytes = c.take("verifying key ic", ic.saturating_mul(G1_BYTES))?;
        let vk_bytes = [&fixed[..], &(ic as u32).to_be_bytes()[..], &ic_bytes[..]].concat();
        let vk = VerifyingKey::read(&vk_bytes[..]).map_err(|source| SrsError::VerifyingKey {
            path: path.into(),
            source,
        })?;
        let h = c.points::<G1Affine>("h", G1_BYTES, checked)?;
        let l = c.points::<G1Affine>("l", G1_BYTES, checked)?;
        let a = c.points::<G1Affine>("a", G1_BYTES, checked)?;
        let b_g1 = c.points::<G1Affine>("b_g1", G1_BYTES, checked)?;
        let b_g2 = c.points::<G2Affine>("b_g2", G2_BYTES, checked)?;
        if c.offset != c.len {
            return Err(SrsError::TrailingBytes {
                path: path.into(),
                extra: c.len - c.offset,
            });
        }
        let m = h.len() + 1;
        if !m.is_power_of_two() {
            return Err(SrsError::NotRadix2 {
                path: path.into(),
                h: h.len(),
                m,
            });
        }
        Ok(Self {
            pvk: prepare_verifying_key(&vk),
            vk,
            h: HostSlice::new(h),
            l: HostSlice::new(l),
            a: HostSlice::new(a),
            b_g1: HostSlice::new(b_g1),
            b_g2: HostSlice::new(b_g2),
            path: Some(path.into()),
            id: std::sync::OnceLock::new(),
        })
    }

    /// Points in each query (h, l, a, b_g1, b_g2) of a parameter file, from
    /// its length prefixes alone (nothing decoded).
    pub fn query_lengths(path: &Path) -> Result<[usize; 5], SrsError> {
        let mut c = Cursor::open(path)?;
        c.skip("verifying key", VK_FIXED_BYTES)?;
        let ic = c.count("verifying key ic")?;
        c.skip("verifying key ic", ic.saturating_mul(G1_BYTES))?;
        let mut lengths = [0; 5];
        for (i, (what, bytes)) in [
            ("h", G1_BYTES),
            ("l", G1_BYTES),
            ("a", G1_BYTES),
            ("b_g1", G1_BYTES),
            ("b_g2", G2_BYTES),
        ]
        .into_iter()
        .enumerate()
        {
            lengths[i] = c.count(what)?;
            c.skip(what, lengths[i].saturating_mul(bytes))?;
        }
        Ok(lengths)
    }

    /// Points in each query (h, l, a, b_g1, b_g2).
    pub fn query_lens(&self) -> [usize; 5] {
        [
            self.h.len(),
            self.l.len(),
            self.a.len(),
            self.b_g1.len(),
            self.b_g2.len(),
        ]
    }

    /// Takes parameters already in memory (as bellperson generated them).
    pub fn from_parameters(params: Parameters<Bls12>) -> Self {
        Self {
            pvk: prepare_verifying_key(&params.vk),
            vk: params.vk,
            h: take(params.h),
            l: take(params.l),
            a: take(params.a),
            b_g1: take(params.b_g1),
            b_g2: take(params.b_g2),
            path: None,
            id: std::sync::OnceLock::new(),
        }
    }

    /// The first 8 bytes of the SHA-256 of a verifying key.
    fn vk_id(vk: &VerifyingKey<Bls12>) -> u64 {
        use sha2::Digest;
        let mut bytes = vec![];
        vk.write(&mut bytes).expect("writing to a Vec cannot fail");
        let digest = sha2::Sha256::digest(&bytes);
        u64::from_le_bytes(digest[..8].try_into().expect("8 bytes"))
    }

    /// Writes parameters in bellperson's format, atomically (temp file, rename).
    pub fn write_parameters(params: &Parameters<Bls12>, path: &Path) -> Result<(), SrsError> {
        let err = |source| SrsError::Write {
            path: path.into(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        let file = File::create(&tmp).map_err(err)?;
        let mut w = std::io::BufWriter::with_capacity(1 << 22, file);
        crate::setup::write_parameters(params, &mut w).map_err(err)?;
        drop(w);
        std::fs::rename(&tmp, path).map_err(err)
    }

    pub fn shape(&self) -> SrsShape {
        let domain = self.h.len() + 1;
        SrsShape {
            domain,
            log_domain: domain.trailing_zeros(),
            inputs: self.vk.ic.len(),
            aux: self.l.len(),
            a_len: self.a.len(),
            b_len: self.b_g1.len(),
        }
    }

    /// A stable identity: the first 8 bytes of the SHA-256 of the verifying
    /// key (which fixes the circuit), for keying what is derived from an SRS.
    pub fn id(&self) -> u64 {
        *self.id.get_or_init(|| Self::vk_id(&self.vk))
    }

    /// [`Self::id`] of the parameter file at `path`, from its verifying key
    /// alone (the points are not read).
    pub fn file_id(path: &Path) -> Result<u64, SrsError> {
        let file = File::open(path).map_err(|source| SrsError::Open {
            path: path.into(),
            source,
        })?;
        let vk = VerifyingKey::<Bls12>::read(std::io::BufReader::new(file)).map_err(|source| {
            SrsError::VerifyingKey {
                path: path.into(),
                source,
            }
        })?;
        Ok(Self::vk_id(&vk))
    }

    /// Page-locks every point vector (once), so streaming them to a device
    /// is DMA. The registrations live exactly as long as the points.
    pub fn pin_host(&self) -> Result<(), KernelError> {
        self.h.pin()?;
        self.l.pin()?;
        self.a.pin()?;
        self.b_g1.pin()?;
        self.b_g2.pin()
    }

    /// Bytes the decoded points take in memory.
    pub fn memory_bytes(&self) -> usize {
        (self.h.len() + self.l.len() + self.a.len() + self.b_g1.len())
            * std::mem::size_of::<G1Affine>()
            + self.b_g2.len() * std::mem::size_of::<G2Affine>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A file cut short after it was opened (a re-download replacing it) is
    /// an error naming the section; with a memory map it was a SIGBUS.
    #[test]
    fn a_file_truncated_while_it_is_read_is_an_error_not_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cut.params");
        let mut f = File::create(&path).unwrap();
        f.write_all(&1000u32.to_be_bytes()).unwrap();
        f.write_all(&vec![0u8; 1000 * G1_BYTES]).unwrap();
        drop(f);
        let mut c = Cursor::open(&path).unwrap();
        File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(500)
            .unwrap();
        let err = c.points::<G1Affine>("h", G1_BYTES, false).unwrap_err();
        assert!(
            matches!(err, SrsError::Truncated { what: "h", .. }),
            "{err}"
        );
    }

    #[test]
    fn a_directory_is_not_a_parameter_file() {
        let dir = tempfile::tempdir().unwrap();
        let err = Srs::read(dir.path(), false).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
    }
}
