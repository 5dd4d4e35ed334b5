//! The shared vocabulary of TIMELINE events: event names, suffixes, detail
//! keys and node roles. The writer ([`crate::TimelineWriter`]) and every
//! reader (`cuzk waterfall`, the daemon's status page) use these constants,
//! so a new variant cannot silently lose its device lane in a chart.

use serde::{Deserialize, Serialize};

/// What kind of work a node does. Declared per node; written into every
/// TIMELINE detail as `role=...`, so readers find device time by role, not
/// by a node's name or event prefix.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Circuit synthesis (the CPU work that feeds everything else).
    Synth,
    /// Other host work (preparation, CPU MSMs, assembly).
    #[default]
    Cpu,
    /// Work on a device: kernels (and, on the CPU backend, the CPU doing a
    /// device stage's work).
    Device,
    /// Moving data to or from a device (allocation and uploads).
    Transfer,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Synth, Role::Cpu, Role::Device, Role::Transfer];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Synth => "synth",
            Self::Cpu => "cpu",
            Self::Device => "device",
            Self::Transfer => "transfer",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// Whether the node runs on a device (and so belongs in a device lane).
    pub fn on_device(self) -> bool {
        matches!(self, Self::Device | Self::Transfer)
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whole-line event names (not tied to a node).
pub mod event {
    pub const JOB_SUBMIT: &str = "JOB_SUBMIT";
    pub const JOB_END: &str = "JOB_END";
    pub const PARTITION_END: &str = "PARTITION_END";
    pub const DEVICE_FAULT: &str = "DEVICE_FAULT";
    /// Waiting for a host arena.
    pub const ARENA_WAIT: &str = "ARENA_WAIT";
    /// Waiting for a device lease.
    pub const LEASE_WAIT: &str = "LEASE_WAIT";
    /// Waiting for a lock or semaphore.
    pub const LOCK_WAIT: &str = "LOCK_WAIT";
    /// Waiting for a gate to open.
    pub const GATE_WAIT: &str = "GATE_WAIT";
}

/// Suffixes appended to a node's event prefix (`SYNTH` + `_START`).
pub mod suffix {
    pub const START: &str = "_START";
    pub const END: &str = "_END";
    /// Entered the node's input edge.
    pub const QUEUE: &str = "_QUEUE";
    /// A worker took it off the edge.
    pub const PICKUP: &str = "_PICKUP";
    /// Left the graph at this node (cancelled, or its job failed).
    pub const DROP: &str = "_DROP";
    /// For a stage that times its own device work: `<PREFIX>_HOST_START/END`
    /// bound the whole stage, `<PREFIX>_START/END` each device span.
    pub const HOST: &str = "_HOST";
    /// Ends the name of every wait (`ARENA_WAIT`, `LOCK_WAIT`, ...).
    pub const WAIT: &str = "_WAIT";
}

/// Keys of the `key=value` detail.
pub mod key {
    pub const PARTITION: &str = "partition";
    pub const WORKER: &str = "worker";
    pub const DEVICE: &str = "device";
    pub const STAGE: &str = "stage";
    pub const ROLE: &str = "role";
    /// A device span's label (`ntt`, `msm_h`, ...).
    pub const SPAN: &str = "span";
    pub const DURATION_MS: &str = "duration_ms";
    pub const QUEUED_MS: &str = "queued_ms";
    pub const WAITED_MS: &str = "waited_ms";
    pub const LOCK: &str = "lock";
    pub const GATE: &str = "gate";
    pub const POOL: &str = "pool";
    pub const ERROR: &str = "error";
    pub const PRIORITY: &str = "priority";
    pub const PARTITIONS: &str = "partitions";
    pub const LABEL: &str = "label";
    pub const OK: &str = "ok";
    pub const REASON: &str = "reason";
    pub const FAILED_ON: &str = "failed_on";
}
