//! What a running graph reports about itself at one instant.

use std::sync::atomic::Ordering;

use crate::arena::{ArenaPool, ArenaStats};
use crate::lease::LeaseStats;
use crate::vocab::Role;

use super::Shared;

/// A node's queue and workers at one instant.
#[derive(Clone, Debug, serde::Serialize)]
pub struct NodeStatus {
    pub name: String,
    pub stage: String,
    pub role: Role,
    pub workers: usize,
    /// Items waiting in the node's input edge.
    pub queued: usize,
    /// Workers running the stage now.
    pub busy: usize,
    pub done: u64,
    pub failed: u64,
    /// Partitions a device failed here and that went to another device.
    pub retried: u64,
}

/// The engine at one instant.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Status {
    pub graph: String,
    /// Jobs whose partitions are still waiting to enter the graph.
    pub jobs_queued: usize,
    /// The same, by priority level (index = level).
    pub jobs_queued_by_priority: Vec<usize>,
    /// Jobs submitted and not yet finished.
    pub jobs_running: usize,
    /// Partitions inside the graph.
    pub items_in_flight: usize,
    pub nodes: Vec<NodeStatus>,
    #[serde(skip)]
    pub arenas: Option<ArenaStats>,
    /// Device lease pools, by resource and device.
    pub leases: Vec<LeaseStats>,
    /// Devices taking no partitions now: their stages kept faulting.
    pub quarantined_devices: Vec<usize>,
}

pub(super) fn of<T: 'static>(s: &Shared<T>) -> Status {
    let mut leases: Vec<LeaseStats> = s
        .leases
        .values()
        .flat_map(|pools| pools.iter().map(|p| p.stats()))
        .collect();
    leases.sort_by(|a, b| (&a.resource, a.device).cmp(&(&b.resource, b.device)));
    Status {
        graph: s.spec.name.clone(),
        jobs_queued: s.source.queued(),
        jobs_queued_by_priority: s.source.queued_by_level().to_vec(),
        jobs_running: s.jobs_running.load(Ordering::SeqCst),
        items_in_flight: s.live_items.load(Ordering::SeqCst),
        nodes: s
            .chain
            .order
            .iter()
            .map(|&i| {
                let n = &s.nodes[i];
                NodeStatus {
                    name: n.spec.name.clone(),
                    stage: n.spec.stage.clone(),
                    role: n.spec.role,
                    workers: n.spec.total_workers(s.devices),
                    queued: n.inputs.iter().map(|r| r.len()).sum(),
                    busy: n.stats.busy.load(Ordering::SeqCst),
                    done: n.stats.done.load(Ordering::SeqCst),
                    failed: n.stats.failed.load(Ordering::SeqCst),
                    retried: n.stats.retried.load(Ordering::SeqCst),
                }
            })
            .collect(),
        arenas: s.arenas.as_ref().map(ArenaPool::stats),
        leases,
        quarantined_devices: s.health.quarantined(),
    }
}
