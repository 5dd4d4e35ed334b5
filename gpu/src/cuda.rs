//! Device memory, streams and events as owned values (freed on drop), and
//! page-locking of host memory, over cuzk-kernels' entry points.

use std::ffi::c_void;
use std::time::{Duration, Instant};

use cuzk_kernels as k;
pub use cuzk_kernels::KernelError;

/// A device allocation.
#[derive(Debug)]
pub struct DeviceBuffer {
    device: i32,
    ptr: *mut c_void,
    bytes: usize,
}

// SAFETY: a device address, used through CUDA calls that name its device.
unsafe impl Send for DeviceBuffer {}
unsafe impl Sync for DeviceBuffer {}

impl DeviceBuffer {
    pub fn alloc(device: i32, bytes: usize) -> Result<Self, KernelError> {
        let mut ptr = std::ptr::null_mut();
        // SAFETY: writes one pointer.
        unsafe { k::cuzk_alloc(device, bytes, &mut ptr) }?;
        Ok(Self { device, ptr, bytes })
    }

    /// Allocates and starts copying `data` in on `stream`. The host data
    /// must stay alive and unchanged until the stream is synchronised.
    pub fn upload<T: Copy>(stream: &Stream, data: &[T]) -> Result<Self, KernelError> {
        let bytes = std::mem::size_of_val(data);
        let buf = Self::alloc(stream.device, bytes)?;
        if bytes > 0 {
            // SAFETY: `buf` holds `bytes`; the caller keeps `data` alive until sync.
            unsafe {
                k::cuzk_htod(
                    stream.device,
                    stream.raw,
                    buf.ptr,
                    data.as_ptr().cast(),
                    bytes,
                )
            }?;
        }
        Ok(buf)
    }

    /// Starts copying `data` into the buffer's start on `stream`. The host
    /// data must stay alive and unchanged until the stream is synchronised.
    pub fn copy_in<T: Copy>(&self, stream: &Stream, data: &[T]) -> Result<(), KernelError> {
        let bytes = std::mem::size_of_val(data);
        assert!(
            bytes <= self.bytes,
            "upload of {bytes} bytes into a {}-byte buffer",
            self.bytes
        );
        if bytes == 0 {
            return Ok(());
        }
        // SAFETY: bounds checked; the caller keeps `data` alive until sync.
        unsafe {
            k::cuzk_htod(
                stream.device,
                stream.raw,
                self.ptr,
                data.as_ptr().cast(),
                bytes,
            )
        }
    }

    /// Copies the buffer's start into `out` and waits for it.
    pub fn download<T: Copy>(&self, stream: &Stream, out: &mut [T]) -> Result<(), KernelError> {
        let bytes = std::mem::size_of_val(out);
        assert!(
            bytes <= self.bytes,
            "download of {bytes} bytes from a {}-byte buffer",
            self.bytes
        );
        // SAFETY: bounds checked; `out` is ours until the sync below.
        unsafe {
            k::cuzk_dtoh(
                stream.device,
                stream.raw,
                out.as_mut_ptr().cast(),
                self.ptr,
                bytes,
            )
        }?;
        stream.sync()
    }

    pub fn ptr(&self) -> *mut c_void {
        self.ptr
    }

    /// The address of element `offset` of a buffer of `T`s.
    pub fn at<T>(&self, offset: usize) -> *mut T {
        assert!((offset * std::mem::size_of::<T>()) <= self.bytes);
        // SAFETY: in bounds (checked).
        unsafe { self.ptr.cast::<T>().add(offset) }
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn device(&self) -> i32 {
        self.device
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: ours, allocated on `device`.
        if let Err(e) = unsafe { k::cuzk_free(self.device, self.ptr) } {
            tracing::warn!(device = self.device, "freeing device memory failed: {e}");
        }
    }
}

/// A CUDA stream of one device.
#[derive(Debug)]
pub struct Stream {
    device: i32,
    raw: *mut c_void,
}

// SAFETY: CUDA streams may be used from any thread.
unsafe impl Send for Stream {}
unsafe impl Sync for Stream {}

impl Stream {
    pub fn new(device: i32) -> Result<Self, KernelError> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: writes one pointer.
        unsafe { k::cuzk_stream_create(device, &mut raw) }?;
        Ok(Self { device, raw })
    }

    pub fn sync(&self) -> Result<(), KernelError> {
        // SAFETY: a live stream.
        unsafe { k::cuzk_stream_sync(self.device, self.raw) }
    }

    pub fn raw(&self) -> *mut c_void {
        self.raw
    }

    pub fn device(&self) -> i32 {
        self.device
    }

    /// Runs `f` (which enqueues work on this stream) between two events and
    /// returns its result with the device time it took, as a host interval
    /// ending now.
    pub fn timed<R>(
        &self,
        f: impl FnOnce(&Self) -> Result<R, KernelError>,
    ) -> Result<(R, Instant, Instant), KernelError> {
        let (start, end) = (Event::new(self.device)?, Event::new(self.device)?);
        start.record(self)?;
        let r = f(self)?;
        end.record(self)?;
        let device_time = start.elapsed(&end)?;
        let now = Instant::now();
        Ok((r, now.checked_sub(device_time).unwrap_or(now), now))
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: ours.
        let _ = unsafe { k::cuzk_stream_destroy(self.device, self.raw) };
    }
}

/// A timing event.
pub struct Event {
    device: i32,
    raw: *mut c_void,
}

impl Event {
    pub fn new(device: i32) -> Result<Self, KernelError> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: writes one pointer.
        unsafe { k::cuzk_event_create(device, &mut raw) }?;
        Ok(Self { device, raw })
    }

    pub fn record(&self, stream: &Stream) -> Result<(), KernelError> {
        // SAFETY: live event and stream of the same device.
        unsafe { k::cuzk_event_record(self.device, self.raw, stream.raw) }
    }

    /// Device time from `self` to `end` (waits for `end`).
    pub fn elapsed(&self, end: &Event) -> Result<Duration, KernelError> {
        let mut ms = 0f32;
        // SAFETY: both recorded on this device.
        unsafe { k::cuzk_event_elapsed_ms(self.device, self.raw, end.raw, &mut ms) }?;
        Ok(Duration::from_secs_f64(f64::from(ms) / 1e3))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: ours.
        let _ = unsafe { k::cuzk_event_destroy(self.device, self.raw) };
    }
}

/// Free and total memory of a device.
pub fn mem_info(device: i32) -> Result<(usize, usize), KernelError> {
    let (mut free, mut total) = (0, 0);
    // SAFETY: writes two integers.
    unsafe { k::cuzk_mem_info(device, &mut free, &mut total) }?;
    Ok((free, total))
}

/// Page-locks arenas with CUDA host registration, so uploads are DMA.
pub struct CudaPageLocker;

impl cuzk_engine::PageLocker for CudaPageLocker {
    fn lock(&self, ptr: *mut u8, len: usize) -> anyhow::Result<()> {
        // SAFETY: the arena's mapping, registered once and unregistered before unmap.
        unsafe { k::cuzk_host_register(ptr.cast(), len) }
            .map_err(|e| anyhow::anyhow!("page-locking a {len}-byte arena: {e}"))
    }

    fn unlock(&self, ptr: *mut u8, _len: usize) {
        // SAFETY: registered by `lock`.
        if let Err(e) = unsafe { k::cuzk_host_unregister(ptr.cast()) } {
            tracing::warn!("unregistering an arena: {e}");
        }
    }
}

/// An owned, immutable slice that can be page-locked for DMA once, for the
/// rest of its life (SRS points streamed from host memory).
///
/// The registration is a field dropped before the points, and the points
/// are a boxed slice never handed out mutably, so the pinned memory can
/// neither move nor be freed while registered: the type keeps the promise a
/// bare registration guard could only document.
pub struct HostSlice<T> {
    // Declared first: dropped (unregistered) before `data` is freed.
    pinned: std::sync::Mutex<Option<Registration>>,
    data: Box<[T]>,
}

/// A live host registration of `HostSlice::data`.
struct Registration(*mut c_void);

// SAFETY: only unregistered on drop; the address is never dereferenced.
unsafe impl Send for Registration {}
unsafe impl Sync for Registration {}

impl Drop for Registration {
    fn drop(&mut self) {
        // SAFETY: registered in `HostSlice::pin`, whose data outlives this.
        let _ = unsafe { k::cuzk_host_unregister(self.0) };
    }
}

impl<T> HostSlice<T> {
    pub fn new(data: Vec<T>) -> Self {
        Self {
            pinned: std::sync::Mutex::new(None),
            data: data.into_boxed_slice(),
        }
    }

    /// Page-locks the data (once; later calls do nothing).
    pub fn pin(&self) -> Result<(), KernelError> {
        let mut pinned = self.pinned.lock().unwrap();
        if pinned.is_some() || self.data.is_empty() {
            return Ok(());
        }
        let ptr = self.data.as_ptr() as *mut c_void;
        // SAFETY: `data` lives and stays put as long as the registration
        // stored beside it (see the type's docs); registering does not change it.
        unsafe { k::cuzk_host_register(ptr, std::mem::size_of_val(&*self.data)) }?;
        *pinned = Some(Registration(ptr));
        Ok(())
    }

    pub fn is_pinned(&self) -> bool {
        self.pinned.lock().unwrap().is_some()
    }
}

impl<T> std::ops::Deref for HostSlice<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.data
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for HostSlice<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostSlice")
            .field("len", &self.data.len())
            .field("pinned", &self.is_pinned())
            .finish()
    }
}
