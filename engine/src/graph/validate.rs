//! Checking a declaration: names, counts, resources and how nodes use them,
//! the shape of the edges (a chain from the source), and that pooled
//! resources are taken before they are released and leases stay on a device.

use std::collections::{HashMap, HashSet};

use super::{
    GraphError, GraphSpec, NodeSpec, Placement, ResourceKind, ResourceSpec, SOURCE, Scope,
};

/// A validated chain: node indices in flow order and the capacity of the edge
/// into each.
#[derive(Clone, Debug)]
pub struct Chain {
    pub order: Vec<usize>,
    pub capacity_in: Vec<usize>,
}

impl Chain {
    /// Items that fit between chain positions `first` and `last` (inclusive):
    /// every worker holding one and every edge between them full.
    pub fn in_flight(&self, spec: &GraphSpec, first: usize, last: usize, devices: usize) -> usize {
        let node = |p: usize| &spec.nodes[self.order[p]];
        let per_device = |p: usize| node(p).placement == Placement::PerDevice;
        let workers: usize = (first..=last).map(|p| node(p).total_workers(devices)).sum();
        let edges: usize = (first + 1..=last)
            .map(|p| {
                let copies = if per_device(p - 1) && per_device(p) {
                    devices.max(1)
                } else {
                    1
                };
                self.capacity_in[p] * copies
            })
            .sum();
        workers + edges
    }
}

impl GraphSpec {
    /// Checks the declaration and returns the nodes in flow order.
    pub fn validate(&self) -> Result<Chain, GraphError> {
        self.validate_nodes()?;
        self.validate_resources()?;
        self.validate_uses()?;
        let chain = self.validate_edges()?;
        self.validate_pooled(&chain)?;
        Ok(chain)
    }

    fn graph(&self) -> String {
        self.name.clone()
    }

    fn validate_nodes(&self) -> Result<(), GraphError> {
        let graph = || self.graph();
        if self.nodes.is_empty() {
            return Err(GraphError::Empty { graph: graph() });
        }
        let mut seen = HashSet::new();
        for n in &self.nodes {
            if n.name == SOURCE {
                return Err(GraphError::ReservedName { graph: graph() });
            }
            if !seen.insert(n.name.as_str()) {
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
        Ok(())
    }

    fn validate_resources(&self) -> Result<(), GraphError> {
        let mut seen = HashSet::new();
        let mut arenas = 0;
        for r in &self.resources {
            let bad = |problem: &str| GraphError::BadResource {
                graph: self.graph(),
                resource: r.name.clone(),
                problem: problem.into(),
            };
            if !seen.insert(r.name.as_str()) {
                return Err(GraphError::DuplicateResource {
                    graph: self.graph(),
                    resource: r.name.clone(),
                });
            }
            match r.kind {
                ResourceKind::Semaphore if r.size.unwrap_or(0) == 0 => {
                    return Err(bad("a semaphore needs `size` (its permits) of at least 1"));
                }
                ResourceKind::Lock | ResourceKind::Gate if r.size.is_some() => {
                    return Err(bad("only semaphores, arenas and device leases have a size"));
                }
                ResourceKind::Arena => {
                    arenas += 1;
                    if arenas > 1 {
                        return Err(bad("a graph has one arena pool"));
                    }
                    if r.scope != Scope::Global {
                        return Err(bad(
                            "the arena pool is shared by all devices (scope global)",
                        ));
                    }
                }
                ResourceKind::DeviceLease => {
                    if r.scope != Scope::PerDevice {
                        return Err(bad("device leases are per device (scope per_device)"));
                    }
                    if r.size == Some(0) {
                        return Err(bad("a device lease pool needs at least 1 lease"));
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Every resource a node names exists, is of a kind that use allows, and
    /// is in scope; every declared resource is used.
    fn validate_uses(&self) -> Result<(), GraphError> {
        let by_name: HashMap<&str, &ResourceSpec> = self
            .resources
            .iter()
            .map(|r| (r.name.as_str(), r))
            .collect();
        let mut used = HashSet::new();
        for n in &self.nodes {
            let uses = [
                ("holds", &n.holds),
                ("waits for", &n.waits_for),
                ("takes", &n.takes),
                ("releases", &n.releases),
            ];
            for (how, names) in uses {
                for name in names {
                    let r = by_name.get(name.as_str()).ok_or_else(|| {
                        let mut declared: Vec<&str> =
                            self.resources.iter().map(|r| r.name.as_str()).collect();
                        declared.sort_unstable();
                        GraphError::UnknownResource {
                            graph: self.graph(),
                            node: n.name.clone(),
                            resource: name.clone(),
                            declared: if declared.is_empty() {
                                "none".into()
                            } else {
                                declared.join(", ")
                            },
                        }
                    })?;
                    used.insert(r.name.as_str());
                    self.check_use(n, how, r)?;
                }
            }
        }
        if let Some(r) = self
            .resources
            .iter()
            .find(|r| !used.contains(r.name.as_str()))
        {
            return Err(GraphError::UnusedResource {
                graph: self.graph(),
                resource: r.name.clone(),
            });
        }
        Ok(())
    }

    fn check_use(
        &self,
        n: &NodeSpec,
        how: &'static str,
        r: &ResourceSpec,
    ) -> Result<(), GraphError> {
        let wrong = |expected: &'static str| GraphError::WrongUse {
            graph: self.graph(),
            node: n.name.clone(),
            how,
            resource: r.name.clone(),
            kind: r.kind.as_str(),
            expected,
        };
        let ok = match how {
            "holds" => matches!(
                r.kind,
                ResourceKind::Lock | ResourceKind::Semaphore | ResourceKind::Gate
            ),
            "waits for" => r.kind == ResourceKind::Gate,
            _ => r.kind.is_pooled(),
        };
        if !ok {
            return Err(wrong(match how {
                "holds" => {
                    "nodes hold locks, semaphores and gates; arenas and device leases are taken and released"
                }
                "waits for" => "nodes wait only for gates",
                _ => "only arenas and device leases are taken and released",
            }));
        }
        if r.scope == Scope::PerDevice && n.placement != Placement::PerDevice {
            return Err(GraphError::DeviceScope {
                graph: self.graph(),
                node: n.name.clone(),
                resource: r.name.clone(),
            });
        }
        Ok(())
    }

    /// Each node's outgoing edges (to, capacity), its number of incoming
    /// edges, and the edges from the source; checks capacities and names.
    #[allow(clippy::type_complexity)]
    fn edge_lists(
        &self,
    ) -> Result<(Vec<Vec<(usize, usize)>>, Vec<usize>, Vec<(usize, usize)>), GraphError> {
        let graph = || self.graph();
        let index: HashMap<&str, usize> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.as_str(), i))
            .collect();
        let mut outgoing: Vec<Vec<(usize, usize)>> = vec![vec![]; self.nodes.len()];
        let mut incoming = vec![0usize; self.nodes.len()];
        let mut entries = vec![];
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
            incoming[to] += 1;
            if e.from == SOURCE {
                entries.push((to, e.capacity));
            } else {
                outgoing[lookup(&e.from)?].push((to, e.capacity));
            }
        }
        Ok((outgoing, incoming, entries))
    }

    /// The edges form one chain from the source through every node.
    fn validate_edges(&self) -> Result<Chain, GraphError> {
        let graph = || self.graph();
        let (outgoing, incoming, entries) = self.edge_lists()?;
        if let Some(node) = find_cycle(&outgoing) {
            return Err(GraphError::Cycle {
                graph: graph(),
                node: self.nodes[node].name.clone(),
            });
        }
        if entries.len() > 1 {
            return Err(GraphError::NotAChain {
                graph: graph(),
                node: SOURCE.into(),
                count: entries.len(),
                direction: "outgoing",
            });
        }
        for (i, n) in self.nodes.iter().enumerate() {
            for (count, direction) in [(incoming[i], "incoming"), (outgoing[i].len(), "outgoing")] {
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
        let &(mut at, mut capacity) = entries
            .first()
            .ok_or_else(|| GraphError::NoEntry { graph: graph() })?;
        let mut chain = Chain {
            order: vec![],
            capacity_in: vec![],
        };
        loop {
            chain.order.push(at);
            chain.capacity_in.push(capacity);
            match outgoing[at].first() {
                Some(&(to, cap)) => (at, capacity) = (to, cap),
                None => break,
            }
        }
        if let Some(n) = (0..self.nodes.len()).find(|i| !chain.order.contains(i)) {
            return Err(GraphError::Unreachable {
                graph: graph(),
                node: self.nodes[n].name.clone(),
            });
        }
        Ok(chain)
    }

    /// Along the chain, a pooled resource is released only after it was
    /// taken, and a device lease is carried only through per-device nodes.
    fn validate_pooled(&self, chain: &Chain) -> Result<(), GraphError> {
        let mut carried: HashMap<&str, &str> = HashMap::new();
        for &i in &chain.order {
            let n = &self.nodes[i];
            for t in &n.takes {
                carried.entry(t.as_str()).or_insert(n.name.as_str());
            }
            for (&resource, &taken_at) in &carried {
                let lease = self
                    .resource_named(resource)
                    .is_some_and(|r| r.kind == ResourceKind::DeviceLease);
                if lease && n.placement != Placement::PerDevice {
                    return Err(GraphError::LeaseOffDevice {
                        graph: self.graph(),
                        resource: resource.into(),
                        taken_at: taken_at.into(),
                        node: n.name.clone(),
                    });
                }
            }
            for r in &n.releases {
                if carried.remove(r.as_str()).is_none() {
                    return Err(GraphError::ReleaseWithoutTake {
                        graph: self.graph(),
                        node: n.name.clone(),
                        resource: r.clone(),
                    });
                }
            }
        }
        Ok(())
    }
}

/// A node on a cycle of `next` edges, if there is one.
fn find_cycle(next: &[Vec<(usize, usize)>]) -> Option<usize> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    fn visit(n: usize, next: &[Vec<(usize, usize)>], mark: &mut [Mark]) -> Option<usize> {
        mark[n] = Mark::Open;
        for &(to, _) in &next[n] {
            match mark[to] {
                Mark::Open => return Some(to),
                Mark::New => {
                    if let Some(c) = visit(to, next, mark) {
                        return Some(c);
                    }
                }
                Mark::Done => {}
            }
        }
        mark[n] = Mark::Done;
        None
    }
    let mut mark = vec![Mark::New; next.len()];
    (0..next.len()).find_map(|n| {
        if mark[n] == Mark::New {
            visit(n, next, &mut mark)
        } else {
            None
        }
    })
}
