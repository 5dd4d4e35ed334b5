//! Parameters in bellperson's file format, the points serialized on every
//! core: a 32 GiB PoRep's ~500 M points take minutes one by one.

use std::io::{self, Write};

use bellperson::groth16::Parameters;
use blstrs::{Bls12, G1Affine, G2Affine};
use rayon::prelude::*;

/// Points serialized per parallel batch (bounds the buffer: 256 MiB of G2).
const BATCH: usize = 1 << 20;

/// Writes `params` exactly as `Parameters::write` does.
pub fn write_parameters<W: Write>(params: &Parameters<Bls12>, mut w: W) -> io::Result<()> {
    params.vk.write(&mut w)?;
    write_points(&mut w, &params.h)?;
    write_points(&mut w, &params.l)?;
    write_points(&mut w, &params.a)?;
    write_points(&mut w, &params.b_g1)?;
    write_points(&mut w, &params.b_g2)?;
    w.flush()
}

/// A point's uncompressed bytes.
trait Uncompressed: Sync {
    const BYTES: usize;
    fn put(&self, out: &mut [u8]);
}

impl Uncompressed for G1Affine {
    const BYTES: usize = 96;
    fn put(&self, out: &mut [u8]) {
        out.copy_from_slice(self.to_uncompressed().as_ref());
    }
}

impl Uncompressed for G2Affine {
    const BYTES: usize = 192;
    fn put(&self, out: &mut [u8]) {
        out.copy_from_slice(self.to_uncompressed().as_ref());
    }
}

fn write_points<W: Write, P: Uncompressed>(w: &mut W, points: &[P]) -> io::Result<()> {
    let len = u32::try_from(points.len()).map_err(|_| {
        io::Error::other(format!(
            "{} points do not fit the format's length",
            points.len()
        ))
    })?;
    w.write_all(&len.to_be_bytes())?;
    let mut buf = vec![0u8; BATCH.min(points.len()) * P::BYTES];
    for batch in points.chunks(BATCH) {
        let bytes = &mut buf[..batch.len() * P::BYTES];
        bytes
            .par_chunks_mut(P::BYTES * 1024)
            .zip(batch.par_chunks(1024))
            .for_each(|(out, points)| {
                for (o, p) in out.chunks_mut(P::BYTES).zip(points) {
                    p.put(o);
                }
            });
        w.write_all(bytes)?;
    }
    Ok(())
}
