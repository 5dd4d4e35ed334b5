//! Per-device health. A device whose stages fault [`Quarantine::after`]
//! times in a row (no stage succeeding on it in between) takes no new
//! partitions for [`Quarantine::cooldown`], as long as another device is
//! healthy: a wedged GPU in a box of several otherwise costs every
//! partition a failed attempt before its retry elsewhere. After the
//! cooldown it takes work on probation: one more fault quarantines it
//! again, one success clears it. The last healthy device is never
//! quarantined (its faults fail jobs, which the daemon reports).

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// When a device is quarantined and for how long.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quarantine {
    /// Device faults in a row that quarantine a device (0: never).
    pub after: u32,
    pub cooldown: Duration,
}

impl Default for Quarantine {
    fn default() -> Self {
        Self {
            after: 3,
            cooldown: Duration::from_secs(300),
        }
    }
}

#[derive(Default)]
struct State {
    faults_in_a_row: u32,
    until: Option<Instant>,
}

pub(crate) struct DeviceHealth {
    policy: Quarantine,
    devices: Mutex<Vec<State>>,
}

impl DeviceHealth {
    pub fn new(devices: usize, policy: Quarantine) -> Self {
        Self {
            policy,
            devices: Mutex::new((0..devices).map(|_| State::default()).collect()),
        }
    }

    /// A stage succeeded on `device`.
    pub fn ok(&self, device: usize) {
        let mut devices = self.devices.lock().unwrap();
        if let Some(d) = devices.get_mut(device) {
            if d.until.take().is_some() || d.faults_in_a_row >= self.policy.after.max(1) {
                tracing::info!(device, "device healthy again: a stage succeeded on it");
            }
            d.faults_in_a_row = 0;
        }
    }

    /// A stage failed on a fault of `device`; true if that quarantined it.
    pub fn fault(&self, device: usize, message: &str) -> bool {
        let now = Instant::now();
        let mut devices = self.devices.lock().unwrap();
        let healthy_others = devices
            .iter()
            .enumerate()
            .filter(|(i, d)| *i != device && d.until.is_none_or(|u| u <= now))
            .count();
        let Some(d) = devices.get_mut(device) else {
            return false;
        };
        d.faults_in_a_row += 1;
        if self.policy.after == 0 || d.faults_in_a_row < self.policy.after || healthy_others == 0 {
            return false;
        }
        d.until = Some(now + self.policy.cooldown);
        tracing::error!(
            device,
            faults = d.faults_in_a_row,
            "device quarantined for {:?}: its last {} stages failed on device faults (last: {message}); its partitions go to the other devices. A GPU may be wedged: check `nvidia-smi` and the kernel log for Xid errors",
            self.policy.cooldown,
            d.faults_in_a_row
        );
        true
    }

    /// How long `device` is still quarantined, if it is.
    pub fn quarantined_for(&self, device: usize) -> Option<Duration> {
        let devices = self.devices.lock().unwrap();
        let until = devices.get(device)?.until?;
        until.checked_duration_since(Instant::now())
    }

    /// The devices quarantined now.
    pub fn quarantined(&self) -> Vec<usize> {
        let now = Instant::now();
        let devices = self.devices.lock().unwrap();
        (0..devices.len())
            .filter(|&d| devices[d].until.is_some_and(|u| u > now))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_in_a_row_quarantine_a_device_while_another_is_healthy() {
        let h = DeviceHealth::new(2, Quarantine::default());
        assert!(!h.fault(1, "x") && !h.fault(1, "x"));
        h.ok(1);
        assert!(!h.fault(1, "x") && !h.fault(1, "x"), "a success resets");
        assert!(h.fault(1, "illegal address"));
        assert_eq!(h.quarantined(), [1]);
        // Device 0 is the last healthy one: never quarantined.
        for _ in 0..5 {
            assert!(!h.fault(0, "x"));
        }
        assert_eq!(h.quarantined(), [1]);
        h.ok(1);
        assert!(h.quarantined().is_empty());
    }

    #[test]
    fn after_its_cooldown_one_more_fault_quarantines_it_again() {
        let policy = Quarantine {
            after: 2,
            cooldown: Duration::from_millis(20),
        };
        let h = DeviceHealth::new(2, policy);
        h.fault(0, "x");
        assert!(h.fault(0, "x"));
        std::thread::sleep(Duration::from_millis(30));
        assert!(h.quarantined().is_empty(), "cooled down: on probation");
        assert!(h.fault(0, "x"), "one fault on probation");
    }
}
