//! Device memory accounting: each device has a budget, and partitions and
//! resident SRS points reserve from it before allocating, so running out is
//! an error naming the budget rather than a CUDA out-of-memory mid-proof.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

#[derive(Debug)]
pub struct VramBudget {
    device: usize,
    limit: usize,
    used: AtomicUsize,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "device {device} needs {need} more bytes for {what} but only {free} of its {limit}-byte budget are free (raise `gpu.vram_budget`, or give the device lease resource a smaller `size`)"
)]
pub struct VramError {
    pub device: usize,
    pub what: String,
    pub need: usize,
    pub free: usize,
    pub limit: usize,
}

impl VramBudget {
    pub fn new(device: usize, limit: usize) -> Arc<Self> {
        Arc::new(Self {
            device,
            limit,
            used: AtomicUsize::new(0),
        })
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    pub fn used(&self) -> usize {
        self.used.load(Ordering::SeqCst)
    }

    /// Of `free` device bytes (free now, by the driver), those this budget
    /// will never hand out: what scratch outside the budget (an MSM's) may
    /// take without making a reservation's allocation fail later.
    pub fn unpromised(&self, free: usize) -> usize {
        free.saturating_sub(self.limit.saturating_sub(self.used()))
    }

    /// Reserves `bytes` until the returned guard drops.
    pub fn reserve(self: &Arc<Self>, bytes: usize, what: &str) -> Result<Reservation, VramError> {
        let mut used = self.used.load(Ordering::SeqCst);
        loop {
            if used + bytes > self.limit {
                return Err(VramError {
                    device: self.device,
                    what: what.into(),
                    need: bytes,
                    free: self.limit.saturating_sub(used),
                    limit: self.limit,
                });
            }
            match self
                .used
                .compare_exchange(used, used + bytes, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => {
                    return Ok(Reservation {
                        budget: self.clone(),
                        bytes,
                    });
                }
                Err(now) => used = now,
            }
        }
    }
}

/// Reserved device memory; returned to the budget on drop.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<VramBudget>,
    bytes: usize,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_are_bounded_and_returned() {
        let b = VramBudget::new(0, 100);
        let r = b.reserve(60, "a").unwrap();
        let err = b.reserve(50, "partition buffers").unwrap_err();
        assert_eq!((err.need, err.free, err.limit), (50, 40, 100));
        assert!(err.to_string().contains("gpu.vram_budget"));
        drop(r);
        assert_eq!(b.used(), 0);
        b.reserve(100, "all").unwrap();
    }

    #[test]
    fn scratch_outside_the_budget_leaves_its_promises_alone() {
        let b = VramBudget::new(0, 100);
        // Nothing reserved: all 100 may still be handed out.
        assert_eq!(b.unpromised(130), 30);
        let _srs = b.reserve(70, "srs").unwrap();
        assert_eq!(b.unpromised(60), 30, "30 of the budget still promised");
        assert_eq!(b.unpromised(20), 0);
    }
}
