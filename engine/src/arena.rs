//! Arenas: reusable host buffers that travel with a partition through the graph.
//!
//! An [`ArenaPool`] holds at most `count` arenas, each an anonymous memory map,
//! and one more kept for CRITICAL work (a WinningPoSt never waits for a
//! PoRep partition to give an arena back).
//! A partition takes one at its first stage (the node declares `takes_arena`),
//! carries it through every stage and gives it back when the job collects the
//! partition's result. Because arenas are reused, the pool size bounds host
//! memory and the engine does not allocate and free large buffers per proof
//! (the seeds traced TLB-shootdown storms to exactly that).
//!
//! Stages lay out typed regions in an arena with a [`LayoutBuilder`] and reach
//! them later through an [`ArenaView`], which hands out each region at most once
//! per view so several can be written at the same time without `unsafe` at the
//! call site.

use std::cell::RefCell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::edge::CRITICAL;
use crate::ranked::{RankedPermit, RankedSemaphore};
use memmap2::{MmapMut, MmapOptions};

/// Page-locks arena memory so device uploads from it are DMA transfers.
///
/// The engine calls `lock` after mapping an arena and `unlock` before
/// unmapping it. The GPU layer implements it with CUDA host registration.
pub trait PageLocker: Send + Sync {
    fn lock(&self, ptr: *mut u8, len: usize) -> anyhow::Result<()>;
    fn unlock(&self, ptr: *mut u8, len: usize);
}

/// Plain data that may live in an arena: any bit pattern is a valid value,
/// and it has no destructor.
///
/// # Safety
/// Implementors must be `Copy`, contain no pointers or padding whose
/// uninitialised bytes would be read, and accept every bit pattern.
pub unsafe trait ArenaPod: Copy + Send + Sync + 'static {}
unsafe impl ArenaPod for u8 {}
unsafe impl ArenaPod for u32 {}
unsafe impl ArenaPod for u64 {}
unsafe impl ArenaPod for [u64; 4] {}
unsafe impl ArenaPod for [u8; 32] {}

/// Regions are aligned to a cache line so no two regions share one.
const REGION_ALIGN: usize = 64;

/// A typed slice of an arena, recorded as an offset so it stays valid while
/// the item moves between stages (and threads).
#[derive(Debug)]
pub struct Region<T> {
    offset: usize,
    len: usize,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for Region<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Region<T> {}

impl<T> Region<T> {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    fn byte_range(&self) -> (usize, usize) {
        (
            self.offset,
            self.offset + self.len * std::mem::size_of::<T>(),
        )
    }
}

/// Assigns regions one after another; `total_bytes` is what the arena must hold.
#[derive(Debug, Default, Clone)]
pub struct LayoutBuilder {
    next: usize,
}

impl LayoutBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push<T: ArenaPod>(&mut self, len: usize) -> Region<T> {
        let align = REGION_ALIGN.max(std::mem::align_of::<T>());
        let offset = self.next.div_ceil(align) * align;
        self.next = offset + len * std::mem::size_of::<T>();
        Region {
            offset,
            len,
            _t: PhantomData,
        }
    }

    pub fn total_bytes(&self) -> usize {
        self.next
    }
}

/// One arena: an anonymous memory map, grown on demand up to the pool's limit.
pub struct Arena {
    id: usize,
    map: Option<MmapMut>,
    locker: Option<Arc<dyn PageLocker>>,
}

impl std::fmt::Debug for Arena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arena")
            .field("id", &self.id)
            .field("capacity", &self.capacity())
            .finish()
    }
}

impl Arena {
    fn new(id: usize, locker: Option<Arc<dyn PageLocker>>) -> Self {
        Self {
            id,
            map: None,
            locker,
        }
    }

    /// Which arena of its pool this is.
    pub fn id(&self) -> usize {
        self.id
    }

    /// Bytes mapped.
    pub fn capacity(&self) -> usize {
        self.map.as_ref().map_or(0, |m| m.len())
    }

    /// The whole mapping, page-aligned; empty until `ensure_capacity` grows it.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        self.map.as_deref_mut().unwrap_or(&mut [])
    }

    /// Makes the arena at least `bytes` long. Growing replaces the mapping, so
    /// previous contents are lost; callers grow before writing.
    fn ensure_capacity(&mut self, bytes: usize) -> anyhow::Result<()> {
        if self.capacity() >= bytes {
            return Ok(());
        }
        self.unmap();
        let page = 2 << 20; // round to 2 MiB so transparent huge pages can back it
        let len = bytes.div_ceil(page) * page;
        let map = MmapOptions::new()
            .len(len)
            .map_anon()
            .map_err(|e| anyhow::anyhow!("mapping a {len}-byte arena failed: {e}"))?;
        #[cfg(target_os = "linux")]
        let _ = map.advise(memmap2::Advice::HugePage);
        let mut map = map;
        if let Some(locker) = &self.locker {
            locker.lock(map.as_mut_ptr(), len)?;
        }
        self.map = Some(map);
        Ok(())
    }

    fn unmap(&mut self) {
        if let Some(mut map) = self.map.take()
            && let Some(locker) = &self.locker
        {
            locker.unlock(map.as_mut_ptr(), map.len());
        }
    }

    /// A view that hands out the arena's regions.
    pub fn view(&mut self) -> ArenaView<'_> {
        let bytes = self.bytes_mut();
        ArenaView {
            base: bytes.as_mut_ptr(),
            len: bytes.len(),
            taken: RefCell::new(Vec::new()),
            _arena: PhantomData,
        }
    }

    /// One region, read-only.
    pub fn get<T: ArenaPod>(&mut self, region: Region<T>) -> &[T] {
        self.view().take(region)
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        self.unmap();
    }
}

/// Hands out disjoint regions of one arena; each region at most once.
pub struct ArenaView<'a> {
    base: *mut u8,
    len: usize,
    taken: RefCell<Vec<(usize, usize)>>,
    _arena: PhantomData<&'a mut Arena>,
}

// SAFETY: the view is the unique borrow of its arena; regions it hands out are disjoint.
unsafe impl Send for ArenaView<'_> {}

impl<'a> ArenaView<'a> {
    /// A region as a mutable slice. Panics if the region overlaps one already
    /// taken from this view or lies outside the arena: both are layout bugs.
    pub fn take<T: ArenaPod>(&self, region: Region<T>) -> &'a mut [T] {
        let (start, end) = region.byte_range();
        assert!(
            end <= self.len,
            "arena region {start}..{end} lies outside the {}-byte arena",
            self.len
        );
        let mut taken = self.taken.borrow_mut();
        assert!(
            taken
                .iter()
                .all(|&(s, e)| end <= s || start >= e || start == end),
            "arena region {start}..{end} was already taken from this view"
        );
        taken.push((start, end));
        // SAFETY: in bounds (checked), aligned (LayoutBuilder aligns to at least
        // align_of::<T>() and the map is page-aligned), disjoint from every other
        // slice handed out by this view (checked), and ArenaPod accepts any bytes.
        unsafe { std::slice::from_raw_parts_mut(self.base.add(start) as *mut T, region.len) }
    }
}

/// Counters describing a pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ArenaStats {
    /// The pool's bound (the express arena not counted).
    pub count: usize,
    /// Arenas created so far (never above `count`).
    pub created: usize,
    /// Arenas currently leased.
    pub in_use: usize,
    /// Bytes mapped across all arenas.
    pub mapped_bytes: usize,
    /// Most arenas ever leased at once.
    pub peak_in_use: usize,
}

struct PoolInner {
    count: usize,
    max_bytes: usize,
    free: Mutex<Vec<Arena>>,
    permits: RankedSemaphore,
    /// The arena only CRITICAL reservations take, kept apart so that it only
    /// ever grows to a PoSt partition's size.
    express: RankedSemaphore,
    express_free: Mutex<Option<Arena>>,
    locker: Option<Arc<dyn PageLocker>>,
    created: AtomicUsize,
    in_use: AtomicUsize,
    peak_in_use: AtomicUsize,
    mapped: AtomicUsize,
    watcher: std::sync::OnceLock<Box<dyn Fn(ArenaStats) + Send + Sync>>,
}

impl PoolInner {
    fn stats(&self) -> ArenaStats {
        ArenaStats {
            count: self.count,
            created: self.created.load(Ordering::SeqCst),
            in_use: self.in_use.load(Ordering::SeqCst),
            mapped_bytes: self.mapped.load(Ordering::SeqCst),
            peak_in_use: self.peak_in_use.load(Ordering::SeqCst),
        }
    }

    fn changed(&self) {
        if let Some(w) = self.watcher.get() {
            w(self.stats());
        }
    }
}

/// A bounded pool of arenas. Cloning shares the pool.
#[derive(Clone)]
pub struct ArenaPool {
    inner: Arc<PoolInner>,
}

/// An arena could not be provided.
#[derive(Debug, thiserror::Error)]
pub enum ArenaError {
    #[error(
        "a partition needs a {need}-byte arena but arenas are limited to {max} bytes (raise `arenas.max_bytes` or the memory budget)"
    )]
    TooLarge { need: usize, max: usize },
    #[error("mapping an arena failed: {0}")]
    Map(#[from] anyhow::Error),
}

/// A free arena kept for one caller ([`ArenaPool::reserve`]); dropped, it is
/// free for anyone again.
#[derive(Debug)]
pub struct ArenaReservation {
    permit: RankedPermit,
    express: bool,
}

impl ArenaPool {
    /// A pool of at most `count` arenas of at most `max_bytes` each. Arenas are
    /// created lazily and grown to what partitions ask for.
    pub fn new(count: usize, max_bytes: usize, locker: Option<Arc<dyn PageLocker>>) -> Self {
        assert!(count > 0, "an arena pool needs at least one arena");
        Self {
            inner: Arc::new(PoolInner {
                count,
                max_bytes,
                free: Mutex::new(Vec::new()),
                permits: RankedSemaphore::new(count),
                express: RankedSemaphore::new(1),
                express_free: Mutex::new(None),
                locker,
                created: AtomicUsize::new(0),
                in_use: AtomicUsize::new(0),
                peak_in_use: AtomicUsize::new(0),
                mapped: AtomicUsize::new(0),
                watcher: std::sync::OnceLock::new(),
            }),
        }
    }

    /// Waits for a free arena.
    pub async fn acquire(&self) -> ArenaLease {
        let permit = self.inner.permits.acquire(0).await;
        self.lease(permit, false)
    }

    /// Waits until an arena is free and keeps it for the caller, without
    /// leasing it (it counts as free in the stats until [`Self::lease_reserved`]).
    /// The highest `priority` waiting is served first.
    pub async fn reserve(&self, priority: u8) -> ArenaReservation {
        ArenaReservation {
            permit: self.inner.permits.acquire(priority).await,
            express: false,
        }
    }

    /// Waits for the express arena (an express worker's: it never holds one
    /// of the others idle while it waits for CRITICAL work).
    pub async fn reserve_express(&self) -> ArenaReservation {
        ArenaReservation {
            permit: self.inner.express.acquire(CRITICAL as u8).await,
            express: true,
        }
    }

    /// Leases the arena `r` kept.
    pub fn lease_reserved(&self, r: ArenaReservation) -> ArenaLease {
        self.lease(r.permit, r.express)
    }

    /// A free arena if there is one now.
    pub fn try_acquire(&self) -> Option<ArenaLease> {
        let permit = self.inner.permits.try_acquire()?;
        Some(self.lease(permit, false))
    }

    fn lease(&self, permit: RankedPermit, express: bool) -> ArenaLease {
        let inner = &self.inner;
        let reused = if express {
            inner.express_free.lock().unwrap().take()
        } else {
            inner.free.lock().unwrap().pop()
        };
        let arena = reused.unwrap_or_else(|| {
            let id = if express {
                inner.count
            } else {
                inner.created.fetch_add(1, Ordering::SeqCst)
            };
            debug_assert!(id <= inner.count, "the semaphores bound creation");
            Arena::new(id, inner.locker.clone())
        });
        let now = inner.in_use.fetch_add(1, Ordering::SeqCst) + 1;
        inner.peak_in_use.fetch_max(now, Ordering::SeqCst);
        inner.changed();
        ArenaLease {
            arena: Some(arena),
            pool: self.inner.clone(),
            express,
            _permit: permit,
        }
    }

    pub fn stats(&self) -> ArenaStats {
        self.inner.stats()
    }

    /// Calls `f` with fresh stats whenever an arena is leased or returned
    /// (for gauges). One watcher per pool; later calls are ignored.
    pub fn watch(&self, f: impl Fn(ArenaStats) + Send + Sync + 'static) {
        let _ = self.inner.watcher.set(Box::new(f));
    }

    pub fn max_bytes(&self) -> usize {
        self.inner.max_bytes
    }
}

/// A leased arena; returns to its pool when dropped.
pub struct ArenaLease {
    arena: Option<Arena>,
    pool: Arc<PoolInner>,
    /// Taken from the express arena (goes back there).
    express: bool,
    _permit: RankedPermit,
}

impl std::fmt::Debug for ArenaLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.arena.fmt(f)
    }
}

impl ArenaLease {
    /// Grows the arena to at least `bytes`, within the pool's per-arena limit.
    pub fn ensure_capacity(&mut self, bytes: usize) -> Result<(), ArenaError> {
        if bytes > self.pool.max_bytes {
            return Err(ArenaError::TooLarge {
                need: bytes,
                max: self.pool.max_bytes,
            });
        }
        let arena = self.arena.as_mut().expect("present until drop");
        let before = arena.capacity();
        arena.ensure_capacity(bytes)?;
        let after = arena.capacity();
        self.pool.mapped.fetch_add(after, Ordering::SeqCst);
        self.pool.mapped.fetch_sub(before, Ordering::SeqCst);
        Ok(())
    }
}

impl Deref for ArenaLease {
    type Target = Arena;
    fn deref(&self) -> &Arena {
        self.arena.as_ref().expect("present until drop")
    }
}

impl DerefMut for ArenaLease {
    fn deref_mut(&mut self) -> &mut Arena {
        self.arena.as_mut().expect("present until drop")
    }
}

impl Drop for ArenaLease {
    fn drop(&mut self) {
        if let Some(arena) = self.arena.take() {
            if self.express {
                *self.pool.express_free.lock().unwrap() = Some(arena);
            } else {
                self.pool.free.lock().unwrap().push(arena);
            }
            self.pool.in_use.fetch_sub(1, Ordering::SeqCst);
            self.pool.changed();
        }
        // The permit is released after the arena is back on the free list.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn regions_are_disjoint_and_typed() {
        let pool = ArenaPool::new(1, 1 << 30, None);
        let mut lease = pool.acquire().await;
        let mut layout = LayoutBuilder::new();
        let a = layout.push::<u64>(100);
        let b = layout.push::<u8>(3);
        let c = layout.push::<[u64; 4]>(10);
        lease.ensure_capacity(layout.total_bytes()).unwrap();
        let view = lease.view();
        let (sa, sb, sc) = (view.take(a), view.take(b), view.take(c));
        sa.fill(7);
        sb.fill(1);
        sc.fill([9; 4]);
        assert_eq!(sa.len(), 100);
        assert_eq!(sc[9], [9; 4]);
        assert_eq!(lease.get(a)[99], 7);
    }

    #[tokio::test]
    #[should_panic(expected = "already taken")]
    async fn a_region_cannot_be_taken_twice() {
        let pool = ArenaPool::new(1, 1 << 20, None);
        let mut lease = pool.acquire().await;
        let mut layout = LayoutBuilder::new();
        let a = layout.push::<u64>(8);
        lease.ensure_capacity(layout.total_bytes()).unwrap();
        let view = lease.view();
        let _x = view.take(a);
        let _y = view.take(a);
    }

    #[tokio::test]
    async fn too_large_is_a_clear_error() {
        let pool = ArenaPool::new(1, 4096, None);
        let mut lease = pool.acquire().await;
        let err = lease.ensure_capacity(1 << 20).unwrap_err();
        assert!(err.to_string().contains("1048576-byte arena"), "{err}");
    }

    #[tokio::test]
    async fn pool_is_bounded_and_reuses() {
        let pool = ArenaPool::new(2, 1 << 24, None);
        let a = pool.acquire().await;
        let b = pool.acquire().await;
        assert!(pool.try_acquire().is_none());
        drop(a);
        let c = pool.try_acquire().expect("one was returned");
        drop((b, c));
        let s = pool.stats();
        assert_eq!((s.created, s.in_use, s.peak_in_use), (2, 0, 2));
    }
}
