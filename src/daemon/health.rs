//! Whether the daemon's devices are proving: a wedged GPU (a sticky CUDA
//! error, an Xid) fails every job with a device fault while the process
//! looks alive. After [`UNHEALTHY_AFTER`] jobs in a row fail on device
//! faults the daemon reports itself unhealthy (status page, `/status`,
//! `cuzk_daemon_healthy` = 0, an error in the log naming the device), until
//! a job completes again.

use std::sync::Mutex;

/// Jobs failing on device faults in a row before the daemon is unhealthy.
pub const UNHEALTHY_AFTER: u32 = 3;

#[derive(Default)]
struct State {
    in_a_row: u32,
    unhealthy: Option<String>,
}

/// The devices' health as jobs end.
#[derive(Default)]
pub struct Health {
    state: Mutex<State>,
}

impl Health {
    /// A job completed: the devices prove.
    pub fn completed(&self) {
        let mut s = self.state.lock().unwrap();
        if s.unhealthy.take().is_some() {
            tracing::warn!("a job completed again: the daemon is healthy");
        }
        s.in_a_row = 0;
    }

    /// A job failed on a fault of `device`.
    pub fn device_fault(&self, device: usize, message: &str) {
        let mut s = self.state.lock().unwrap();
        s.in_a_row += 1;
        if s.in_a_row >= UNHEALTHY_AFTER && s.unhealthy.is_none() {
            let why = format!(
                "the last {} jobs failed on device faults (last on device {device}: {message}); a GPU may be wedged: check `nvidia-smi` and the kernel log for Xid errors, then restart the daemon or reset the GPU",
                s.in_a_row
            );
            tracing::error!("unhealthy: {why}");
            s.unhealthy = Some(why);
        }
    }

    /// Why the daemon is unhealthy, if it is.
    pub fn unhealthy(&self) -> Option<String> {
        self.state.lock().unwrap().unhealthy.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_faults_in_a_row_make_it_unhealthy_until_a_job_completes() {
        let h = Health::default();
        for _ in 0..UNHEALTHY_AFTER - 1 {
            h.device_fault(0, "illegal address");
        }
        assert!(h.unhealthy().is_none());
        h.completed();
        for _ in 0..UNHEALTHY_AFTER - 1 {
            h.device_fault(0, "illegal address");
        }
        assert!(h.unhealthy().is_none(), "a completion resets the count");
        h.device_fault(1, "illegal address");
        let why = h.unhealthy().unwrap();
        assert!(why.contains("device 1: illegal address"), "{why}");
        h.completed();
        assert!(h.unhealthy().is_none());
    }
}
