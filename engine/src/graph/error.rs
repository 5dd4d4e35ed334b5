//! What can be wrong with a declaration, naming the node, edge or resource.

use super::SOURCE;

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
    #[error("graph `{graph}`: edge {from} -> {to} leads to nowhere: there is no node `{node}`")]
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
    #[error("graph `{graph}`: the edges through `{node}` form a cycle")]
    Cycle { graph: String, node: String },
    #[error("graph `{graph}`: no edge from `{SOURCE}`; one node must receive submitted jobs")]
    NoEntry { graph: String },
    #[error("graph `{graph}`: node `{node}` is not reachable from `{SOURCE}`")]
    Unreachable { graph: String, node: String },
    #[error(
        "graph `{graph}`: node `{node}` refers to resource `{resource}`, which the graph does not declare (declared: {declared})"
    )]
    UnknownResource {
        graph: String,
        node: String,
        resource: String,
        declared: String,
    },
    #[error("graph `{graph}`: resource `{resource}` is declared but no node uses it")]
    UnusedResource { graph: String, resource: String },
    #[error("graph `{graph}`: node `{node}` {how} `{resource}`, a {kind}; {expected}")]
    WrongUse {
        graph: String,
        node: String,
        how: &'static str,
        resource: String,
        kind: &'static str,
        expected: &'static str,
    },
    #[error(
        "graph `{graph}`: node `{node}` uses per-device resource `{resource}` but is not a per-device node"
    )]
    DeviceScope {
        graph: String,
        node: String,
        resource: String,
    },
    #[error("graph `{graph}`: resource `{resource}`: {problem}")]
    BadResource {
        graph: String,
        resource: String,
        problem: String,
    },
    #[error("graph `{graph}`: resource name `{resource}` is used twice")]
    DuplicateResource { graph: String, resource: String },
    #[error("graph `{graph}`: node `{node}` releases `{resource}`, which no node before it takes")]
    ReleaseWithoutTake {
        graph: String,
        node: String,
        resource: String,
    },
    #[error(
        "graph `{graph}`: device lease `{resource}` taken at `{taken_at}` is still carried at `{node}`, which is not a per-device node; release it at the last per-device node"
    )]
    LeaseOffDevice {
        graph: String,
        resource: String,
        taken_at: String,
        node: String,
    },
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
    #[error(
        "graph `{graph}`: resource `{resource}` is {kind} but the runtime was given no {kind} pool"
    )]
    NoPool {
        graph: String,
        resource: String,
        kind: &'static str,
    },
}
