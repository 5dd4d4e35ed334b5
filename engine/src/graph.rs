//! Graph declarations: which stages run, with how many workers, on which pool,
//! holding which resources, and the bounded edges between them.
//!
//! A declaration is plain data. [`GraphSpec::validate`] checks it and returns the
//! nodes in flow order; the runtime (`crate::runtime`) turns it into tasks. The
//! runtime never looks at a node's name to decide what to do: everything it
//! needs is in the declaration.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

/// The name of the implicit node that job submissions enter through.
pub const SOURCE: &str = "source";

/// A whole graph: nodes, the edges between them, and the shared resources
/// (locks, semaphores, gates) that nodes hold while they run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphSpec {
    /// A name for the variant this graph implements (shown in status and reports).
    pub name: String,
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
    /// Number of workers (per device for [`Placement::PerDevice`]).
    pub workers: usize,
    /// Name of the CPU pool the stage's work runs on.
    pub pool: String,
    pub placement: Placement,
    /// Resources held while the stage runs, acquired in this order.
    #[serde(default)]
    pub holds: Vec<String>,
    /// Gates that must be open before the stage starts an item.
    #[serde(default)]
    pub waits_for: Vec<String>,
    /// Whether an item takes an arena from the pool before this node runs it.
    #[serde(default)]
    pub takes_arena: bool,
}

impl NodeSpec {
    /// A shared node with one worker on the pool named like the stage.
    pub fn new(name: &str, stage: &str, event: &str) -> Self {
        Self {
            name: name.into(),
            stage: stage.into(),
            event: event.into(),
            workers: 1,
            pool: stage.into(),
            placement: Placement::Shared,
            holds: vec![],
            waits_for: vec![],
            takes_arena: false,
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
    pub fn takes_arena(mut self) -> Self {
        self.takes_arena = true;
        self
    }
}

/// A bounded edge. A full edge blocks its producer: that is the backpressure.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EdgeSpec {
    pub from: String,
    pub to: String,
    pub capacity: usize,
}

/// What kind of shared resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type")]
pub enum ResourceKind {
    /// A mutex: one holder at a time.
    Lock,
    /// At most `permits` holders at a time.
    Semaphore { permits: usize },
    /// Closed while any node holding it runs; nodes that wait for it start
    /// only while it is open.
    Gate,
}

/// Whether there is one instance of a resource or one per device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    Global,
    PerDevice,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceSpec {
    pub name: String,
    pub kind: ResourceKind,
    pub scope: Scope,
}

/// A declaration that cannot run, with what is wrong in it.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GraphError {
    #[error("graph `{graph}` has no nodes")]
    Empty { graph: String },
    #[error("graph `{graph}`: node name `{node}` is used twice")]
    DuplicateNode { graph: String, node: String },
    #[error(
        "graph `{graph}`: `{SOURCE}` is reserved for the submission edge and cannot name a node"
    )]
    ReservedName { graph: String },
    #[error("graph `{graph}`: node `{node}` has {what} = 0; it must be at least 1")]
    Zero {
        graph: String,
        node: String,
        what: &'static str,
    },
    #[error("graph `{graph}`: edge {from} -> {to} has capacity 0; it must be at least 1")]
    ZeroCapacity {
        graph: String,
        from: String,
        to: String,
    },
    #[error("graph `{graph}`: edge {from} -> {to} names unknown node `{node}`")]
    UnknownNode {
        graph: String,
        from: String,
        to: String,
        node: String,
    },
    #[error(
        "graph `{graph}`: node `{node}` has {count} {direction} edges; the runtime runs chains (one in, one out)"
    )]
    NotAChain {
        graph: String,
        node: String,
        count: usize,
        direction: &'static str,
    },
    #[error("graph `{graph}`: no edge from `{SOURCE}`; one node must receive submitted jobs")]
    NoEntry { graph: String },
    #[error("graph `{graph}`: node `{node}` is not reachable from `{SOURCE}`")]
    Unreachable { graph: String, node: String },
    #[error("graph `{graph}`: node `{node}` refers to unknown resource `{resource}`")]
    UnknownResource {
        graph: String,
        node: String,
        resource: String,
    },
    #[error("graph `{graph}`: node `{node}` waits for `{resource}`, which is not a gate")]
    NotAGate {
        graph: String,
        node: String,
        resource: String,
    },
    #[error(
        "graph `{graph}`: node `{node}` holds per-device resource `{resource}` but is not a per-device node"
    )]
    DeviceScope {
        graph: String,
        node: String,
        resource: String,
    },
    #[error("graph `{graph}`: resource `{resource}` is a semaphore with 0 permits")]
    ZeroPermits { graph: String, resource: String },
    #[error("graph `{graph}`: resource name `{resource}` is used twice")]
    DuplicateResource { graph: String, resource: String },
    #[error(
        "graph `{graph}`: node `{node}` uses stage `{stage}`, which is not registered (known: {known})"
    )]
    UnknownStage {
        graph: String,
        node: String,
        stage: String,
        known: String,
    },
    #[error(
        "graph `{graph}`: node `{node}` runs on pool `{pool}`, which does not exist (known: {known})"
    )]
    UnknownPool {
        graph: String,
        node: String,
        pool: String,
        known: String,
    },
    #[error("graph `{graph}`: node `{node}` takes an arena but the runtime has no arena pool")]
    NoArenaPool { graph: String, node: String },
}

/// A validated chain: node indices in flow order and the capacity of the edge
/// into each.
#[derive(Clone, Debug)]
pub struct Chain {
    pub order: Vec<usize>,
    pub capacity_in: Vec<usize>,
}

impl GraphSpec {
    pub fn new(name: &str) -> Self {
        Self {
            name: name.into(),
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

    pub fn resource(mut self, name: &str, kind: ResourceKind, scope: Scope) -> Self {
        self.resources.push(ResourceSpec {
            name: name.into(),
            kind,
            scope,
        });
        self
    }

    pub fn node_named(&self, name: &str) -> Option<&NodeSpec> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// Checks the declaration and returns the nodes in flow order.
    pub fn validate(&self) -> Result<Chain, GraphError> {
        let graph = || self.name.clone();
        if self.nodes.is_empty() {
            return Err(GraphError::Empty { graph: graph() });
        }
        let mut index = HashMap::new();
        for (i, n) in self.nodes.iter().enumerate() {
            if n.name == SOURCE {
                return Err(GraphError::ReservedName { graph: graph() });
            }
            if index.insert(n.name.as_str(), i).is_some() {
                return Err(GraphError::DuplicateNode {
                    graph: graph(),
                    node: n.name.clone(),
                });
            }
            if n.workers == 0 {
                return Err(GraphError::Zero {
                    graph: graph(),
                    node: n.name.clone(),
                    what: "workers",
                });
            }
        }
        self.validate_resources()?;

        let mut next: Vec<Option<(usize, usize)>> = vec![None; self.nodes.len()];
        let mut has_input = vec![0usize; self.nodes.len()];
        let mut outputs = vec![0usize; self.nodes.len()];
        let mut entry = None;
        for e in &self.edges {
            if e.capacity == 0 {
                return Err(GraphError::ZeroCapacity {
                    graph: graph(),
                    from: e.from.clone(),
                    to: e.to.clone(),
                });
            }
            let lookup = |name: &str| {
                index
                    .get(name)
                    .copied()
                    .ok_or_else(|| GraphError::UnknownNode {
                        graph: graph(),
                        from: e.from.clone(),
                        to: e.to.clone(),
                        node: name.into(),
                    })
            };
            let to = lookup(&e.to)?;
            has_input[to] += 1;
            if e.from == SOURCE {
                if entry.is_some() {
                    return Err(GraphError::NotAChain {
                        graph: graph(),
                        node: SOURCE.into(),
                        count: 2,
                        direction: "outgoing",
                    });
                }
                entry = Some((to, e.capacity));
            } else {
                let from = lookup(&e.from)?;
                outputs[from] += 1;
                next[from] = Some((to, e.capacity));
            }
        }
        for (i, n) in self.nodes.iter().enumerate() {
            for (count, direction) in [(has_input[i], "incoming"), (outputs[i], "outgoing")] {
                if count > 1 {
                    return Err(GraphError::NotAChain {
                        graph: graph(),
                        node: n.name.clone(),
                        count,
                        direction,
                    });
                }
            }
        }
        let (mut at, mut capacity) = entry.ok_or_else(|| GraphError::NoEntry { graph: graph() })?;
        let mut chain = Chain {
            order: vec![],
            capacity_in: vec![],
        };
        let mut seen = HashSet::new();
        loop {
            if !seen.insert(at) {
                // A cycle: the node we came back to has two incoming edges, reported above,
                // unless the cycle closes on the entry node.
                return Err(GraphError::NotAChain {
                    graph: graph(),
                    node: self.nodes[at].name.clone(),
                    count: 2,
                    direction: "incoming",
                });
            }
            chain.order.push(at);
            chain.capacity_in.push(capacity);
            match next[at] {
                Some((to, cap)) => {
                    at = to;
                    capacity = cap;
                }
                None => break,
            }
        }
        if let Some(n) = self
            .nodes
            .iter()
            .enumerate()
            .find(|(i, _)| !seen.contains(i))
        {
            return Err(GraphError::Unreachable {
                graph: graph(),
                node: n.1.name.clone(),
            });
        }
        Ok(chain)
    }

    fn validate_resources(&self) -> Result<(), GraphError> {
        let graph = || self.name.clone();
        let mut resources = HashMap::new();
        for r in &self.resources {
            if let ResourceKind::Semaphore { permits: 0 } = r.kind {
                return Err(GraphError::ZeroPermits {
                    graph: graph(),
                    resource: r.name.clone(),
                });
            }
            if resources.insert(r.name.as_str(), r).is_some() {
                return Err(GraphError::DuplicateResource {
                    graph: graph(),
                    resource: r.name.clone(),
                });
            }
        }
        for n in &self.nodes {
            for name in n.holds.iter().chain(&n.waits_for) {
                let r =
                    resources
                        .get(name.as_str())
                        .ok_or_else(|| GraphError::UnknownResource {
                            graph: graph(),
                            node: n.name.clone(),
                            resource: name.clone(),
                        })?;
                if r.scope == Scope::PerDevice && n.placement != Placement::PerDevice {
                    return Err(GraphError::DeviceScope {
                        graph: graph(),
                        node: n.name.clone(),
                        resource: name.clone(),
                    });
                }
            }
            for name in &n.waits_for {
                if resources[name.as_str()].kind != ResourceKind::Gate {
                    return Err(GraphError::NotAGate {
                        graph: graph(),
                        node: n.name.clone(),
                        resource: name.clone(),
                    });
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three() -> GraphSpec {
        GraphSpec::new("t")
            .node(NodeSpec::new("a", "a", "A"))
            .node(NodeSpec::new("b", "b", "B").workers(2))
            .node(NodeSpec::new("c", "c", "C"))
            .edge(SOURCE, "a", 1)
            .edge("a", "b", 2)
            .edge("b", "c", 3)
    }

    #[test]
    fn chain_order_follows_edges_not_declaration_order() {
        let mut g = three();
        g.nodes.reverse();
        let chain = g.validate().unwrap();
        let names: Vec<_> = chain
            .order
            .iter()
            .map(|&i| g.nodes[i].name.as_str())
            .collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(chain.capacity_in, [1, 2, 3]);
    }

    #[test]
    fn rejects_zero_capacity_naming_the_edge() {
        let mut g = three();
        g.edges[1].capacity = 0;
        let err = g.validate().unwrap_err();
        assert_eq!(
            err.to_string(),
            "graph `t`: edge a -> b has capacity 0; it must be at least 1"
        );
    }

    #[test]
    fn rejects_unreachable_and_fan_out() {
        let g = three().node(NodeSpec::new("d", "d", "D"));
        assert!(matches!(g.validate(), Err(GraphError::Unreachable { node, .. }) if node == "d"));
        let g = three().node(NodeSpec::new("d", "d", "D")).edge("a", "d", 1);
        assert!(matches!(g.validate(), Err(GraphError::NotAChain { node, .. }) if node == "a"));
    }

    #[test]
    fn rejects_cycle_and_missing_entry() {
        let g = three().edge("c", "a", 1);
        assert!(matches!(g.validate(), Err(GraphError::NotAChain { .. })));
        let mut g = three();
        g.edges.remove(0);
        assert!(matches!(g.validate(), Err(GraphError::NoEntry { .. })));
    }

    #[test]
    fn resources_are_checked() {
        let g = three()
            .resource("lock", ResourceKind::Lock, Scope::PerDevice)
            .resource("glock", ResourceKind::Lock, Scope::Global);
        let mut bad = g.clone();
        bad.nodes[1].holds.push("lock".into());
        assert!(matches!(
            bad.validate(),
            Err(GraphError::DeviceScope { .. })
        ));
        bad.nodes[1].placement = Placement::PerDevice;
        bad.validate().unwrap();
        let mut bad = g.clone();
        bad.nodes[0].waits_for.push("glock".into());
        assert!(matches!(bad.validate(), Err(GraphError::NotAGate { .. })));
        let mut bad = g;
        bad.nodes[0].holds.push("nope".into());
        assert!(matches!(
            bad.validate(),
            Err(GraphError::UnknownResource { .. })
        ));
    }
}
