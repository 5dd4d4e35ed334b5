//! Graph declarations: which stages run, with how many workers, on which pool,
//! in which role, holding which resources, taking and releasing which pooled
//! resources (host arenas, device leases), and the bounded edges between them.
//!
//! A declaration is plain data. [`GraphSpec::validate`] checks it and returns
//! the nodes in flow order; the runtime (`crate::runtime`) turns it into
//! tasks. The runtime never looks at a node's name to decide what to do:
//! everything it needs is in the declaration.

mod error;
mod validate;

use serde::{Deserialize, Serialize};

pub use crate::vocab::Role;
pub use error::GraphError;
pub use validate::Chain;

/// The name of the implicit node that job submissions enter through.
pub const SOURCE: &str = "source";

/// A whole graph: nodes, the edges between them, and the resources nodes
/// hold (locks, semaphores, gates) or take and release (arenas, device leases).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphSpec {
    /// A name for the variant this graph implements (shown in status and reports).
    pub name: String,
    /// One line saying what the graph does differently.
    #[serde(default)]
    pub description: String,
    pub nodes: Vec<NodeSpec>,
    pub edges: Vec<EdgeSpec>,
    #[serde(default)]
    pub resources: Vec<ResourceSpec>,
}

/// Where a node's workers live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// `workers` workers in total, any of which takes any item.
    Shared,
    /// `workers` workers for each device. An item picked up by such a worker is
    /// bound to that worker's device; an edge between two per-device nodes keeps
    /// it there.
    PerDevice,
}

/// One stage node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSpec {
    /// Unique within the graph.
    pub name: String,
    /// The stage implementation, looked up in the stage registry.
    pub stage: String,
    /// Prefix of the timeline events this node emits (`SYNTH` gives `SYNTH_START`).
    pub event: String,
    /// What kind of work it is; readers of timelines group by it.
    #[serde(default)]
    pub role: Role,
    /// Number of workers (per device for [`Placement::PerDevice`]).
    pub workers: usize,
    /// Name of the CPU pool the stage's work runs on.
    pub pool: String,
    pub placement: Placement,
    /// Locks, semaphores and gates held while the stage runs, acquired in this order.
    #[serde(default)]
    pub holds: Vec<String>,
    /// Gates that must be open before the stage starts an item.
    #[serde(default)]
    pub waits_for: Vec<String>,
    /// Pooled resources (an arena, a device lease) the item takes before this
    /// node runs it, unless it already carries one.
    #[serde(default)]
    pub takes: Vec<String>,
    /// Pooled resources the item gives back once this node ran it. What is
    /// never released goes back when the partition leaves the graph.
    #[serde(default)]
    pub releases: Vec<String>,
}

impl NodeSpec {
    /// A shared node with one worker on the pool named like the stage.
    pub fn new(name: &str, stage: &str, event: &str) -> Self {
        Self {
            name: name.into(),
            stage: stage.into(),
            event: event.into(),
            role: Role::Cpu,
            workers: 1,
            pool: stage.into(),
            placement: Placement::Shared,
            holds: vec![],
            waits_for: vec![],
            takes: vec![],
            releases: vec![],
        }
    }
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers;
        self
    }
    pub fn pool(mut self, pool: &str) -> Self {
        self.pool = pool.into();
        self
    }
    pub fn role(mut self, role: Role) -> Self {
        self.role = role;
        self
    }
    pub fn per_device(mut self) -> Self {
        self.placement = Placement::PerDevice;
        self
    }
    pub fn holds(mut self, resource: &str) -> Self {
        self.holds.push(resource.into());
        self
    }
    pub fn waits_for(mut self, gate: &str) -> Self {
        self.waits_for.push(gate.into());
        self
    }
    pub fn takes(mut self, resource: &str) -> Self {
        self.takes.push(resource.into());
        self
    }
    pub fn releases(mut self, resource: &str) -> Self {
        self.releases.push(resource.into());
        self
    }

    /// Workers across `devices` devices.
    pub fn total_workers(&self, devices: usize) -> usize {
        match self.placement {
            Placement::Shared => self.workers,
            Placement::PerDevice => self.workers * devices.max(1),
        }
    }
}

/// A bounded edge. A full edge blocks its producer: that is the backpressure.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EdgeSpec {
    pub from: String,
    pub to: String,
    pub capacity: usize,
}

/// What kind of resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceKind {
    /// A mutex: one holder at a time.
    Lock,
    /// At most `size` holders at a time.
    Semaphore,
    /// Closed while any node holding it runs; nodes that wait for it start
    /// only while it is open.
    Gate,
    /// The pool of host arenas: taken by a node, carried by the partition,
    /// released by a later node or when the partition leaves. `size` arenas
    /// (none or 0: [`GraphSpec::max_in_flight`]).
    Arena,
    /// A per-device pool of device memory and a stream: taken by a per-device
    /// node, carried (on that device) to the node that releases it. `size`
    /// leases per device (none: as many as can be in flight between them).
    DeviceLease,
}

impl ResourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Lock => "lock",
            Self::Semaphore => "semaphore",
            Self::Gate => "gate",
            Self::Arena => "arena",
            Self::DeviceLease => "device_lease",
        }
    }

    /// Taken and released (carried by the item) rather than held around a stage.
    pub fn is_pooled(self) -> bool {
        matches!(self, Self::Arena | Self::DeviceLease)
    }
}

/// Whether there is one instance of a resource or one per device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    #[default]
    Global,
    PerDevice,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceSpec {
    pub name: String,
    pub kind: ResourceKind,
    #[serde(default)]
    pub scope: Scope,
    /// Permits of a semaphore; arenas in the pool; leases per device.
    #[serde(default)]
    pub size: Option<usize>,
}

impl ResourceSpec {
    fn new(name: &str, kind: ResourceKind) -> Self {
        Self {
            name: name.into(),
            kind,
            scope: Scope::Global,
            size: None,
        }
    }
    pub fn lock(name: &str) -> Self {
        Self::new(name, ResourceKind::Lock)
    }
    pub fn semaphore(name: &str, permits: usize) -> Self {
        Self::new(name, ResourceKind::Semaphore).size(permits)
    }
    pub fn gate(name: &str) -> Self {
        Self::new(name, ResourceKind::Gate)
    }
    pub fn arena(name: &str) -> Self {
        Self::new(name, ResourceKind::Arena)
    }
    /// A device lease pool (always per device).
    pub fn device_lease(name: &str) -> Self {
        Self::new(name, ResourceKind::DeviceLease).per_device()
    }
    pub fn per_device(mut self) -> Self {
        self.scope = Scope::PerDevice;
        self
    }
    pub fn size(mut self, size: usize) -> Self {
        self.size = Some(size);
        self
    }
}

impl GraphSpec {
    pub fn new(name: &str) -> Self {
        Self {
            name: name.into(),
            description: String::new(),
            nodes: vec![],
            edges: vec![],
            resources: vec![],
        }
    }

    pub fn node(mut self, node: NodeSpec) -> Self {
        self.nodes.push(node);
        self
    }

    pub fn edge(mut self, from: &str, to: &str, capacity: usize) -> Self {
        self.edges.push(EdgeSpec {
            from: from.into(),
            to: to.into(),
            capacity,
        });
        self
    }

    pub fn resource(mut self, resource: ResourceSpec) -> Self {
        self.resources.push(resource);
        self
    }

    pub fn node_named(&self, name: &str) -> Option<&NodeSpec> {
        self.nodes.iter().find(|n| n.name == name)
    }

    pub fn resource_named(&self, name: &str) -> Option<&ResourceSpec> {
        self.resources.iter().find(|r| r.name == name)
    }

    /// The arena resource, if the graph declares one.
    pub fn arena(&self) -> Option<&ResourceSpec> {
        self.resources
            .iter()
            .find(|r| r.kind == ResourceKind::Arena)
    }

    /// How many partitions can be past the first arena-taking node at once
    /// on `devices` devices: every worker from that node on holding one, and
    /// every edge after it full. The default arena count, so that arenas
    /// never hold the graph back (a smaller pool bounds it instead).
    ///
    /// `None` when the graph does not validate or takes no arena.
    pub fn max_in_flight(&self, devices: usize) -> Option<usize> {
        let chain = self.validate().ok()?;
        let arena = self.arena()?;
        let first = chain
            .order
            .iter()
            .position(|&i| self.nodes[i].takes.contains(&arena.name))?;
        Some(chain.in_flight(self, first, chain.order.len() - 1, devices))
    }

    /// Leases per device a device-lease pool needs so that it never holds
    /// the graph back: workers and edge capacities between the node that
    /// takes a lease and the one that releases it, on one device.
    pub fn lease_in_flight(&self, resource: &str) -> Option<usize> {
        let chain = self.validate().ok()?;
        let pos =
            |f: &dyn Fn(&NodeSpec) -> bool| chain.order.iter().position(|&i| f(&self.nodes[i]));
        let first = pos(&|n| n.takes.iter().any(|t| t == resource))?;
        let last = chain
            .order
            .iter()
            .enumerate()
            .skip(first)
            .find(|(_, i)| self.nodes[**i].releases.iter().any(|r| r == resource))
            .map_or(chain.order.len() - 1, |(p, _)| p);
        Some(chain.in_flight(self, first, last, 1))
    }
}

#[cfg(test)]
mod tests;
