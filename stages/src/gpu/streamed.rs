//! MSMs over SRS points left in page-locked host memory, for an SRS that is
//! not resident on the device (a card smaller than the SRS): each query's
//! points pass through two device chunk buffers, the next chunk uploading
//! on a copy stream while this chunk's MSMs run, so a partition needs two
//! chunks of device memory for its points instead of the whole SRS.
//!
//! A chunk serves every kind of term that reads its points: the dense part
//! (a range of points), and the gathered tail and the ones (index lists,
//! ascending, cut where each chunk starts and made relative to it while the
//! chunk's MSMs run).

use std::ops::Range;

use cuzk_gpu::cuda::{DeviceBuffer, Stream};
use cuzk_gpu::fixed::FixedCurve;
use cuzk_gpu::ops::{self, ScalarForm};
use cuzk_gpu::vram::Reservation;

use super::GpuDevice;

/// Bytes of each chunk buffer unless configured: large enough that sppark's
/// per-call bucket reduction is small beside a chunk's accumulation.
pub const DEFAULT_CHUNK_BYTES: usize = 512 << 20;

/// The chunk size for a device with `budget` bytes: `configured`, else the
/// default or a sixteenth of the budget if less (never under 256 KiB).
pub fn chunk_bytes(configured: usize, budget: usize) -> usize {
    match configured {
        0 => DEFAULT_CHUNK_BYTES.min(budget / 16).max(256 << 10),
        c => c,
    }
}

/// Two device buffers SRS points stream through, and the stream that
/// uploads them. Kept by a device lease for the partitions it runs.
pub struct ChunkBuffers {
    bufs: [DeviceBuffer; 2],
    copy: Stream,
    /// Bytes of each buffer.
    bytes: usize,
    _reservation: Reservation,
}

impl ChunkBuffers {
    /// Two buffers of `bytes` on `dev`, waiting (as partition buffers do)
    /// while partitions in flight hold the memory.
    pub(super) fn new(dev: &GpuDevice, bytes: usize) -> anyhow::Result<Self> {
        let reservation =
            dev.reserve_or_wait(2 * bytes, "chunk buffers for streamed SRS points")?;
        Ok(Self {
            bufs: [
                DeviceBuffer::alloc(dev.ordinal, bytes)?,
                DeviceBuffer::alloc(dev.ordinal, bytes)?,
            ],
            copy: Stream::new(dev.ordinal)?,
            bytes,
            _reservation: reservation,
        })
    }

    /// Device bytes both buffers take.
    pub fn device_bytes(&self) -> usize {
        2 * self.bytes
    }
}

/// The dense part of a query: points `base..base + n` against scalars
/// `scalar_offset..scalar_offset + n`.
#[derive(Clone, Copy, Debug)]
pub struct Dense {
    pub base: usize,
    pub scalar_offset: usize,
    pub n: usize,
}

/// One query's terms on the device, as the resident path splits them.
pub struct Terms<'a> {
    pub dense: Option<Dense>,
    /// Significant terms: base and scalar index lists and their length.
    pub gathered: Option<(&'a DeviceBuffer, &'a DeviceBuffer, usize)>,
    /// Terms whose scalar is one: a base index list and its length.
    pub ones: Option<(&'a DeviceBuffer, usize)>,
    pub scalars: &'a DeviceBuffer,
    pub form: ScalarForm,
}

/// The chunks of `len` points, `per_chunk` each (the last shorter).
pub fn chunk_ranges(len: usize, per_chunk: usize) -> Vec<Range<usize>> {
    assert!(per_chunk > 0, "a chunk holds at least one point");
    (0..len)
        .step_by(per_chunk)
        .map(|s| s..(s + per_chunk).min(len))
        .collect()
}

/// Where each chunk's entries start and end in an ascending index list:
/// `bounds[j]..bounds[j + 1]` are chunk j's (from the list's lower bounds of
/// every chunk's start and of the end).
pub fn list_cuts(bounds: &[u64]) -> Vec<Range<usize>> {
    bounds
        .windows(2)
        .map(|w| w[0] as usize..w[1] as usize)
        .collect()
}

/// The part of the dense range `d` inside `chunk`: (first point relative to
/// the chunk, first scalar, count), or None.
pub fn dense_in(d: &Dense, chunk: &Range<usize>) -> Option<(usize, usize, usize)> {
    let lo = d.base.max(chunk.start);
    let hi = (d.base + d.n).min(chunk.end);
    (lo < hi).then(|| (lo - chunk.start, d.scalar_offset + (lo - d.base), hi - lo))
}

/// `terms` over `points` (a query's affine points in host memory,
/// page-locked for DMA), streamed through `chunks`; MSMs on `stream`.
pub fn msm<C, T>(
    stream: &Stream,
    chunks: &ChunkBuffers,
    points: &[T],
    terms: &Terms<'_>,
) -> anyhow::Result<C::Projective>
where
    C: FixedCurve,
    C::Projective: group::Group,
    T: Copy,
{
    assert_eq!(
        std::mem::size_of::<T>(),
        C::POINT_BYTES,
        "host points of the curve's size"
    );
    let per_chunk = chunks.bytes / C::POINT_BYTES;
    anyhow::ensure!(
        per_chunk > 0,
        "a chunk buffer of {} bytes holds no point",
        chunks.bytes
    );
    let ranges = chunk_ranges(points.len(), per_chunk);
    // Each list's entries per chunk, from one search over the chunk starts.
    let cut = |list: &DeviceBuffer, n: usize| -> anyhow::Result<Vec<Range<usize>>> {
        let mut starts: Vec<u32> = ranges.iter().map(|r| r.start as u32).collect();
        starts.push(points.len() as u32);
        let bounds = ops::lower_bounds(stream, list, n, &starts)?;
        Ok(list_cuts(&bounds))
    };
    let none = vec![0..0; ranges.len()];
    let gathered_cuts = match terms.gathered {
        Some((base, _, n)) if n > 0 => cut(base, n)?,
        _ => none.clone(),
    };
    let ones_cuts = match terms.ones {
        Some((idx, n)) if n > 0 => cut(idx, n)?,
        _ => none,
    };
    // Chunks some term reads; the others are never uploaded.
    let active: Vec<usize> = (0..ranges.len())
        .filter(|&j| {
            terms
                .dense
                .is_some_and(|d| dense_in(&d, &ranges[j]).is_some())
                || !gathered_cuts[j].is_empty()
                || !ones_cuts[j].is_empty()
        })
        .collect();
    let upload =
        |j: usize, buf: &DeviceBuffer| buf.copy_in(&chunks.copy, &points[ranges[j].clone()]);
    let mut total = <C::Projective as group::Group>::identity();
    if let Some(&first) = active.first() {
        upload(first, &chunks.bufs[0])?;
    }
    for (i, &j) in active.iter().enumerate() {
        // This chunk has landed; the other buffer's MSMs returned already
        // (every MSM returns with its result on the host), so the next
        // chunk may overwrite it while this one's run.
        chunks.copy.sync()?;
        if let Some(&next) = active.get(i + 1) {
            upload(next, &chunks.bufs[(i + 1) % 2])?;
        }
        let buf = &chunks.bufs[i % 2];
        let chunk = &ranges[j];
        if let Some((at, scalar, n)) = terms.dense.and_then(|d| dense_in(&d, chunk)) {
            total += ops::msm::<C>(
                stream,
                buf,
                at,
                C::POINT_BYTES,
                terms.scalars,
                scalar,
                n,
                terms.form,
            )?;
        }
        // Lists hold indices into the query: made relative to the chunk for
        // its MSMs, then restored (on the stream, before any later reader).
        let to_chunk = (chunk.start as u32).wrapping_neg();
        let back = chunk.start as u32;
        if let Some((base, scalar_idx, _)) = terms.gathered
            && !gathered_cuts[j].is_empty()
        {
            let t = gathered_cuts[j].clone();
            ops::shift_indices(stream, base, t.clone(), to_chunk)?;
            let r = ops::msm_gathered_range::<C>(
                stream,
                buf,
                base,
                terms.scalars,
                scalar_idx,
                t.clone(),
                terms.form,
            );
            ops::shift_indices(stream, base, t, back)?;
            total += r?;
        }
        if let Some((idx, _)) = terms.ones
            && !ones_cuts[j].is_empty()
        {
            let t = ones_cuts[j].clone();
            ops::shift_indices(stream, idx, t.clone(), to_chunk)?;
            let r = ops::sum_range::<C>(stream, buf, idx, t.clone());
            ops::shift_indices(stream, idx, t, back)?;
            total += r?;
        }
    }
    // Before the buffers' next use and the lists' next reader.
    chunks.copy.sync()?;
    stream.sync()?;
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_points_once_in_order() {
        assert_eq!(chunk_ranges(10, 4), vec![0..4, 4..8, 8..10]);
        assert_eq!(chunk_ranges(8, 4), vec![0..4, 4..8]);
        assert_eq!(chunk_ranges(3, 4), vec![0..3]);
        assert!(chunk_ranges(0, 4).is_empty());
    }

    #[test]
    fn a_dense_range_is_cut_at_chunk_edges() {
        // Points 5..15 against scalars from 100, chunks of 4.
        let d = Dense {
            base: 5,
            scalar_offset: 100,
            n: 10,
        };
        let got: Vec<_> = chunk_ranges(20, 4)
            .iter()
            .map(|c| dense_in(&d, c))
            .collect();
        assert_eq!(
            got,
            vec![
                None,
                Some((1, 100, 3)), // points 5..8
                Some((0, 103, 4)), // 8..12
                Some((0, 107, 3)), // 12..15
                None,
            ]
        );
        let covered: usize = got.iter().flatten().map(|x| x.2).sum();
        assert_eq!(covered, d.n);
    }

    /// The device's lower bound, on the host, for the test below.
    fn lower_bound(list: &[u32], v: u32) -> u64 {
        list.partition_point(|&x| x < v) as u64
    }

    #[test]
    fn list_entries_fall_in_the_chunk_of_their_index() {
        let list = [0u32, 1, 3, 4, 7, 8, 9, 15, 16, 19];
        let chunks = chunk_ranges(20, 4);
        let mut starts: Vec<u32> = chunks.iter().map(|r| r.start as u32).collect();
        starts.push(20);
        let bounds: Vec<u64> = starts.iter().map(|&v| lower_bound(&list, v)).collect();
        let cuts = list_cuts(&bounds);
        assert_eq!(cuts.len(), chunks.len());
        for (cut, chunk) in cuts.iter().zip(&chunks) {
            for &i in &list[cut.clone()] {
                assert!(chunk.contains(&(i as usize)), "{i} outside {chunk:?}");
            }
        }
        assert_eq!(cuts.iter().map(Range::len).sum::<usize>(), list.len());
        // Made relative to its chunk and back, an index is unchanged.
        let (i, start) = (9u32, 8u32);
        let rel = i.wrapping_add(start.wrapping_neg());
        assert_eq!(rel, 1);
        assert_eq!(rel.wrapping_add(start), i);
    }

    #[test]
    fn chunk_size_follows_the_budget_unless_configured() {
        assert_eq!(chunk_bytes(0, 80 << 30), DEFAULT_CHUNK_BYTES);
        assert_eq!(chunk_bytes(0, 4 << 30), 256 << 20);
        assert_eq!(chunk_bytes(0, 1 << 20), 256 << 10);
        assert_eq!(chunk_bytes(4096, 80 << 30), 4096);
    }
}
