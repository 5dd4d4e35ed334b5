//! cuzk-pipelines: the interlock variants, each a graph declaration built
//! from the configuration.
//!
//! | variant | GPU section |
//! |---|---|
//! | `serial` | one worker per device |
//! | `single_lock` | `gpu.workers_per_device` workers alternate on one per-device lock (phase 9) |
//! | `two_lock` | a staging node under a memory lock, then a compute node under a compute lock (phase 10) |
//! | `throttled` | `single_lock`, and synthesis waits while b_g2_msm runs (phase 11) |
//!
//! Adding a variant means adding a function here that declares its graph;
//! the runtime in `cuzk-engine` does not know which variant it runs.

use cuzk_config::{Config, Variant};
use cuzk_engine::{GraphSpec, NodeSpec, ResourceKind, SOURCE, Scope};
use cuzk_stages::names;

/// CPU pool names the declarations use.
pub mod pools {
    /// Circuit synthesis.
    pub const SYNTH: &str = "synth";
    /// NTTs, MSMs and preparation on the CPU.
    pub const GROTH16: &str = "groth16";
    /// Threads that drive GPUs (they mostly wait on the device).
    pub const GPU: &str = "gpu";
}

/// Resource names the declarations use.
pub mod resources {
    pub const GPU_LOCK: &str = "gpu_lock";
    pub const GPU_MEM_LOCK: &str = "gpu_mem_lock";
    pub const GPU_COMPUTE_LOCK: &str = "gpu_compute_lock";
    pub const SYNTH_THROTTLE: &str = "synth_throttle";
}

/// Where the device stages' host work runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DevicePool {
    /// CPU backend: the device stages compute on the groth16 pool.
    Cpu,
    /// GPU backend: dedicated threads that drive the devices.
    Gpu,
}

impl DevicePool {
    fn pool(self) -> &'static str {
        match self {
            Self::Cpu => pools::GROTH16,
            Self::Gpu => pools::GPU,
        }
    }
}

/// A configuration that names something the variant does not have.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "config error at `channels.into.{node}`: variant `{variant}` has no node `{node}` (its nodes: {nodes})"
)]
pub struct UnknownEdge {
    pub variant: Variant,
    pub node: String,
    pub nodes: String,
}

struct Builder<'a> {
    config: &'a Config,
    spec: GraphSpec,
    last: String,
}

impl<'a> Builder<'a> {
    fn new(config: &'a Config) -> Self {
        Self {
            config,
            spec: GraphSpec::new(config.pipeline.variant.as_str()),
            last: SOURCE.into(),
        }
    }

    /// Appends a node, linked from the previous one by an edge whose
    /// capacity is `channels.into.<node>` or `channels.default`.
    fn then(mut self, node: NodeSpec) -> Self {
        let capacity = self
            .config
            .channels
            .into
            .get(&node.name)
            .copied()
            .unwrap_or(self.config.channels.default);
        let name = node.name.clone();
        self.spec = self.spec.edge(&self.last, &name, capacity).node(node);
        self.last = name;
        self
    }

    fn resource(mut self, name: &str, kind: ResourceKind, scope: Scope) -> Self {
        self.spec = self.spec.resource(name, kind, scope);
        self
    }

    fn finish(self) -> Result<GraphSpec, UnknownEdge> {
        for node in self.config.channels.into.keys() {
            if self.spec.node_named(node).is_none() {
                return Err(UnknownEdge {
                    variant: self.config.pipeline.variant,
                    node: node.clone(),
                    nodes: self
                        .spec
                        .nodes
                        .iter()
                        .map(|n| n.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
        }
        Ok(self.spec)
    }
}

fn synth(c: &Config) -> NodeSpec {
    NodeSpec::new("synth", names::SYNTH, "SYNTH")
        .workers(c.stages.synth.workers)
        .pool(pools::SYNTH)
        .takes_arena()
}

fn prep(c: &Config) -> NodeSpec {
    NodeSpec::new("prep_msm", names::PREP_MSM, "PREP")
        .workers(c.stages.prep_msm.workers)
        .pool(pools::GROTH16)
}

fn gpu(workers: usize, device: DevicePool) -> NodeSpec {
    NodeSpec::new("gpu_ntt_msm", names::GPU_NTT_MSM, "GPU")
        .workers(workers)
        .pool(device.pool())
        .per_device()
}

fn b_g2(c: &Config) -> NodeSpec {
    NodeSpec::new("b_g2_msm", names::B_G2_MSM, "B_G2")
        .workers(c.stages.b_g2_msm.workers)
        .pool(pools::GROTH16)
}

fn assemble(c: &Config) -> NodeSpec {
    NodeSpec::new("assemble", names::ASSEMBLE, "ASSEMBLE")
        .workers(c.stages.assemble.workers)
        .pool(pools::GROTH16)
}

/// `serial`: one GPU worker per device, nothing to lock.
pub fn serial(c: &Config, device: DevicePool) -> Result<GraphSpec, UnknownEdge> {
    Builder::new(c)
        .then(synth(c))
        .then(prep(c))
        .then(gpu(1, device))
        .then(b_g2(c))
        .then(assemble(c))
        .finish()
}

/// `single_lock` (phase 9): several GPU workers per device alternate on one
/// per-device lock; b_g2_msm is its own node, so it runs after the lock is
/// released.
pub fn single_lock(c: &Config, device: DevicePool) -> Result<GraphSpec, UnknownEdge> {
    Builder::new(c)
        .resource(resources::GPU_LOCK, ResourceKind::Lock, Scope::PerDevice)
        .then(synth(c))
        .then(prep(c))
        .then(gpu(c.gpu.workers_per_device, device).holds(resources::GPU_LOCK))
        .then(b_g2(c))
        .then(assemble(c))
        .finish()
}

/// `two_lock` (phase 10): staging (allocation and upload) under a memory
/// lock and compute under a compute lock, so one partition stages while
/// another computes on the same device.
pub fn two_lock(c: &Config, device: DevicePool) -> Result<GraphSpec, UnknownEdge> {
    let workers = c.gpu.workers_per_device;
    Builder::new(c)
        .resource(
            resources::GPU_MEM_LOCK,
            ResourceKind::Lock,
            Scope::PerDevice,
        )
        .resource(
            resources::GPU_COMPUTE_LOCK,
            ResourceKind::Lock,
            Scope::PerDevice,
        )
        .then(synth(c))
        .then(prep(c))
        .then(
            NodeSpec::new("gpu_stage", names::GPU_STAGE_IN, "GPU_STAGE")
                .workers(workers)
                .pool(device.pool())
                .per_device()
                .holds(resources::GPU_MEM_LOCK),
        )
        .then(
            NodeSpec::new("gpu_compute", names::GPU_COMPUTE, "GPU")
                .workers(workers)
                .pool(device.pool())
                .per_device()
                .holds(resources::GPU_COMPUTE_LOCK),
        )
        .then(b_g2(c))
        .then(assemble(c))
        .finish()
}

/// `throttled` (phase 11): `single_lock`, plus a gate that b_g2_msm closes
/// while it runs and synthesis waits on, so the two do not fight over memory
/// bandwidth.
pub fn throttled(c: &Config, device: DevicePool) -> Result<GraphSpec, UnknownEdge> {
    Builder::new(c)
        .resource(resources::GPU_LOCK, ResourceKind::Lock, Scope::PerDevice)
        .resource(resources::SYNTH_THROTTLE, ResourceKind::Gate, Scope::Global)
        .then(synth(c).waits_for(resources::SYNTH_THROTTLE))
        .then(prep(c))
        .then(gpu(c.gpu.workers_per_device, device).holds(resources::GPU_LOCK))
        .then(b_g2(c).holds(resources::SYNTH_THROTTLE))
        .then(assemble(c))
        .finish()
}

/// The graph of the configured variant.
pub fn graph(c: &Config, device: DevicePool) -> Result<GraphSpec, UnknownEdge> {
    match c.pipeline.variant {
        Variant::Serial => serial(c, device),
        Variant::SingleLock => single_lock(c, device),
        Variant::TwoLock => two_lock(c, device),
        Variant::Throttled => throttled(c, device),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(variant: Variant) -> Config {
        let mut c = Config::default();
        c.pipeline.variant = variant;
        c
    }

    #[test]
    fn every_variant_declares_a_valid_chain() {
        for v in Variant::ALL {
            for d in [DevicePool::Cpu, DevicePool::Gpu] {
                let g = graph(&config(v), d).unwrap();
                g.validate().unwrap_or_else(|e| panic!("{v}: {e}"));
                assert_eq!(g.name, v.as_str());
                assert_eq!(g.nodes.first().unwrap().name, "synth");
                assert_eq!(g.nodes.last().unwrap().name, "assemble");
            }
        }
    }

    #[test]
    fn variants_differ_only_in_their_declarations() {
        let serial = graph(&config(Variant::Serial), DevicePool::Cpu).unwrap();
        assert_eq!(serial.node_named("gpu_ntt_msm").unwrap().workers, 1);
        let single = graph(&config(Variant::SingleLock), DevicePool::Cpu).unwrap();
        let gpu = single.node_named("gpu_ntt_msm").unwrap();
        assert_eq!(
            (gpu.workers, gpu.holds.as_slice()),
            (2, &["gpu_lock".to_string()][..])
        );
        let two = graph(&config(Variant::TwoLock), DevicePool::Cpu).unwrap();
        assert_eq!(two.node_named("gpu_stage").unwrap().holds, ["gpu_mem_lock"]);
        assert_eq!(
            two.node_named("gpu_compute").unwrap().holds,
            ["gpu_compute_lock"]
        );
        let throttled = graph(&config(Variant::Throttled), DevicePool::Cpu).unwrap();
        assert_eq!(
            throttled.node_named("synth").unwrap().waits_for,
            ["synth_throttle"]
        );
        assert_eq!(
            throttled.node_named("b_g2_msm").unwrap().holds,
            ["synth_throttle"]
        );
    }

    #[test]
    fn channel_capacities_come_from_config_and_typos_are_named() {
        let mut c = config(Variant::TwoLock);
        c.channels.default = 3;
        c.channels.into.insert("gpu_compute".into(), 1);
        let g = graph(&c, DevicePool::Cpu).unwrap();
        let cap = |to: &str| g.edges.iter().find(|e| e.to == to).unwrap().capacity;
        assert_eq!((cap("synth"), cap("gpu_compute")), (3, 1));
        c.channels.into.insert("gpu_compte".into(), 1);
        let err = graph(&c, DevicePool::Cpu).unwrap_err().to_string();
        assert!(
            err.starts_with(
                "config error at `channels.into.gpu_compte`: variant `two_lock` has no node"
            ),
            "{err}"
        );
    }
}
