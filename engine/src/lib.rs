//! cuzk-engine: a generic staged dataflow runtime.
//!
//! A graph is declared as data ([`GraphSpec`]): nodes naming a [`Stage`]
//! implementation, their role, worker counts and CPU pool, the resources
//! they hold, the pooled resources (host arenas, device leases) they take
//! and release, and bounded priority edges between them. [`RuntimeBuilder`]
//! turns the declaration into running tokio tasks; a full edge blocks its
//! producer, so nothing grows without bound. Jobs fan out into partitions
//! and fan back in; an error in one partition fails its job and leaves the
//! engine serving others.
//!
//! The runtime knows nothing about what the stages compute.

pub mod arena;
mod edge;
pub mod graph;
pub mod job;
pub mod lease;
pub mod observer;
pub mod pool;
pub mod ranked;
mod resource;
pub mod runtime;
pub mod spans;
pub mod stage;
pub mod timeline;
pub mod vocab;

pub use arena::{ArenaLease, ArenaPool, ArenaStats, ArenaView, LayoutBuilder, PageLocker, Region};
pub use edge::{CRITICAL, DEFAULT_AGING, LEVELS as PRIORITY_LEVELS, aged_priority};
pub use graph::{
    EdgeSpec, GraphError, GraphSpec, NodeSpec, Placement, ResourceKind, ResourceSpec, Role, SOURCE,
    Scope,
};
pub use job::{JobCanceller, JobError, JobHandle, JobId, JobOutput, PartitionOutput, StageTiming};
pub use lease::{DeviceLease, DeviceSlot, LeaseProvider, LeaseStats, NoDeviceState};
pub use observer::{
    DeviceSpan, DropReason, Event, EventKind, NodeRef, Observer, Wait, device_time,
};
pub use pool::CpuPools;
pub use ranked::{RankedPermit, RankedSemaphore};
pub use runtime::{NodeStatus, Quarantine, Runtime, RuntimeBuilder, Status};
pub use spans::SpanObserver;
pub use stage::{
    CancelFlag, Cancelled, DeviceBusy, DeviceFault, FailOnDevices, Stage, StageContext,
    StageRegistry,
};
pub use timeline::TimelineWriter;
