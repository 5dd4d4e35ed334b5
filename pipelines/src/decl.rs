//! The declaration file format (`pipelines/graphs/*.toml`, `pipeline.graph`,
//! `[pipeline.declare]`) and its resolution against the configuration into
//! the engine's [`GraphSpec`].
//!
//! A declaration gives every node its stage, role, workers (`workers`, or
//! `workers_per_device` for a per-device node), pool, and the resources it
//! holds, waits for, takes and releases; edges may leave their capacity to
//! `channels.default`. The configuration then overrides worker counts
//! (`[stages.<node>] workers`) and capacities (`channels.into.<node>`) by
//! node name.

use serde::{Deserialize, Serialize};

use cuzk_config::Config;
use cuzk_engine::{
    EdgeSpec, GraphSpec, NodeSpec, Placement, ResourceKind, ResourceSpec, Role, Scope,
};

use crate::PipelineError;

/// One graph, as written in a file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Declaration {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(default, rename = "resource", skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceDecl>,
    #[serde(rename = "node")]
    pub nodes: Vec<NodeDecl>,
    #[serde(rename = "edge")]
    pub edges: Vec<EdgeDecl>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceDecl {
    pub name: String,
    /// lock | semaphore | gate | arena | device_lease
    pub kind: ResourceKind,
    /// global (the default) | per_device
    #[serde(default, skip_serializing_if = "is_global")]
    pub scope: Scope,
    /// Permits of a semaphore; arenas; leases per device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<usize>,
}

fn is_global(s: &Scope) -> bool {
    *s == Scope::Global
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeDecl {
    pub name: String,
    pub stage: String,
    /// Timeline event prefix; the name in capitals if left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    /// synth | cpu (the default) | device | transfer
    #[serde(default, skip_serializing_if = "is_cpu")]
    pub role: Role,
    /// Workers of a shared node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<usize>,
    /// Workers on each device: makes the node per-device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers_per_device: Option<usize>,
    /// synth | groth16 | device (the backend's device driver threads).
    pub pool: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holds: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waits_for: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub takes: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub releases: Vec<String>,
}

fn is_cpu(r: &Role) -> bool {
    *r == Role::Cpu
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EdgeDecl {
    pub from: String,
    pub to: String,
    /// Items the edge holds; `channels.default` if left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<usize>,
}

impl Declaration {
    /// Parses the TOML text of a declaration; `origin` names where it came from.
    pub fn parse(text: &str, origin: &str) -> Result<Self, PipelineError> {
        toml::from_str(text).map_err(|e| PipelineError::Parse {
            origin: origin.into(),
            message: e.to_string(),
        })
    }

    /// The declaration of an engine graph, every value explicit.
    pub fn of(spec: &GraphSpec) -> Self {
        Self {
            name: spec.name.clone(),
            description: spec.description.clone(),
            resources: spec
                .resources
                .iter()
                .map(|r| ResourceDecl {
                    name: r.name.clone(),
                    kind: r.kind,
                    scope: r.scope,
                    size: r.size,
                })
                .collect(),
            nodes: spec
                .nodes
                .iter()
                .map(|n| {
                    let per_device = n.placement == Placement::PerDevice;
                    NodeDecl {
                        name: n.name.clone(),
                        stage: n.stage.clone(),
                        event: Some(n.event.clone()),
                        role: n.role,
                        workers: (!per_device).then_some(n.workers),
                        workers_per_device: per_device.then_some(n.workers),
                        pool: n.pool.clone(),
                        holds: n.holds.clone(),
                        waits_for: n.waits_for.clone(),
                        takes: n.takes.clone(),
                        releases: n.releases.clone(),
                    }
                })
                .collect(),
            edges: spec
                .edges
                .iter()
                .map(|e| EdgeDecl {
                    from: e.from.clone(),
                    to: e.to.clone(),
                    capacity: Some(e.capacity),
                })
                .collect(),
        }
    }

    /// As TOML, in the file format.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a declaration serialises to TOML")
    }

    /// The engine graph this declares under `config`'s overrides.
    pub fn resolve(&self, config: &Config, origin: &str) -> Result<GraphSpec, PipelineError> {
        let declaration = |message: String| PipelineError::Declaration {
            origin: origin.into(),
            message,
        };
        let mut spec = GraphSpec::new(&self.name);
        spec.description = self.description.clone();
        for r in &self.resources {
            spec = spec.resource(ResourceSpec {
                name: r.name.clone(),
                kind: r.kind,
                scope: r.scope,
                size: r.size,
            });
        }
        for n in &self.nodes {
            let (workers, placement) = match (n.workers, n.workers_per_device) {
                (Some(w), None) => (w, Placement::Shared),
                (None, Some(w)) => (w, Placement::PerDevice),
                (Some(_), Some(_)) => {
                    return Err(declaration(format!(
                        "node `{}` gives both `workers` and `workers_per_device`; a node is shared or per device",
                        n.name
                    )));
                }
                (None, None) => {
                    return Err(declaration(format!(
                        "node `{}` needs `workers` (shared) or `workers_per_device`",
                        n.name
                    )));
                }
            };
            let workers = config.stages.get(&n.name).map_or(workers, |s| s.workers);
            spec = spec.node(NodeSpec {
                name: n.name.clone(),
                stage: n.stage.clone(),
                event: n.event.clone().unwrap_or_else(|| n.name.to_uppercase()),
                role: n.role,
                workers,
                pool: n.pool.clone(),
                placement,
                holds: n.holds.clone(),
                waits_for: n.waits_for.clone(),
                takes: n.takes.clone(),
                releases: n.releases.clone(),
            });
        }
        for e in &self.edges {
            let capacity = config
                .channels
                .into
                .get(&e.to)
                .copied()
                .or(e.capacity)
                .unwrap_or(config.channels.default);
            spec.edges.push(EdgeSpec {
                from: e.from.clone(),
                to: e.to.clone(),
                capacity,
            });
        }
        check_overrides(&spec, config)?;
        Ok(spec)
    }
}

/// Every node name the config overrides exists in the graph.
fn check_overrides(spec: &GraphSpec, config: &Config) -> Result<(), PipelineError> {
    let unknown = |key: String| PipelineError::UnknownOverride {
        key,
        graph: spec.name.clone(),
        nodes: spec
            .nodes
            .iter()
            .map(|n| n.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    };
    for node in config.stages.keys() {
        if spec.node_named(node).is_none() {
            return Err(unknown(format!("stages.{node}")));
        }
    }
    for node in config.channels.into.keys() {
        if spec.node_named(node).is_none() {
            return Err(unknown(format!("channels.into.{node}")));
        }
    }
    Ok(())
}
