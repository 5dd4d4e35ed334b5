//! Jobs: a set of partitions submitted together, fanned out into the graph and
//! collected back in partition order.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

pub type JobId = u64;

/// How long one partition spent at one node.
#[derive(Clone, Debug)]
pub struct StageTiming {
    pub node: Arc<str>,
    /// The node's declared role (device work, CPU work, ...).
    pub role: crate::vocab::Role,
    /// When the stage started running (after its queue and waits).
    pub started: Instant,
    /// In the node's input edge.
    pub queued: Duration,
    /// Waiting for an arena, a gate or a resource after pickup.
    pub waited: Duration,
    /// Running the stage.
    pub ran: Duration,
    pub worker: usize,
    pub device: Option<usize>,
    pub notes: Vec<(&'static str, String)>,
}

impl StageTiming {
    /// The value of a note the stage attached, like `backend`.
    pub fn note(&self, key: &str) -> Option<&str> {
        self.notes
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A finished partition and its path through the graph.
#[derive(Debug)]
pub struct PartitionOutput<T> {
    pub item: T,
    pub timings: Vec<StageTiming>,
}

/// A finished job: partitions in the order they were submitted.
#[derive(Debug)]
pub struct JobOutput<T> {
    pub id: JobId,
    pub partitions: Vec<PartitionOutput<T>>,
    /// From submission to the last partition's completion.
    pub elapsed: Duration,
}

/// Why a job did not finish.
#[derive(Debug, Clone, thiserror::Error)]
pub enum JobError {
    #[error("partition {partition} failed in stage `{node}`: {message}")]
    Failed {
        node: String,
        partition: usize,
        /// The error and its causes, outermost first.
        message: String,
        error: Arc<anyhow::Error>,
    },
    #[error("job was cancelled")]
    Cancelled,
    #[error("the engine shut down before the job finished")]
    Shutdown,
}

impl JobError {
    pub(crate) fn failed(node: &str, partition: usize, error: anyhow::Error) -> Self {
        JobError::Failed {
            node: node.into(),
            partition,
            message: format!("{error:#}"),
            error: Arc::new(error),
        }
    }
}

type Reply<T> = oneshot::Sender<Result<JobOutput<T>, JobError>>;

struct Slot<T> {
    results: Vec<Option<PartitionOutput<T>>>,
    remaining: usize,
    reply: Option<Reply<T>>,
}

pub(crate) struct JobState<T> {
    pub id: JobId,
    /// Higher first, in every edge (see `crate::edge`).
    pub priority: u8,
    pub submitted: Instant,
    cancelled: AtomicBool,
    slot: Mutex<Slot<T>>,
}

/// What happened when a partition or an error reached the job.
pub(crate) enum Settled {
    Pending,
    /// The job just finished (successfully, or with this call's error).
    Finished {
        ok: bool,
        error: Option<String>,
    },
    /// The job had already finished; nothing changed.
    AlreadyDone,
}

impl<T> JobState<T> {
    pub(crate) fn new(
        id: JobId,
        partitions: usize,
        priority: u8,
    ) -> (Arc<Self>, oneshot::Receiver<Result<JobOutput<T>, JobError>>) {
        let (tx, rx) = oneshot::channel();
        let state = Arc::new(Self {
            id,
            priority,
            submitted: Instant::now(),
            cancelled: AtomicBool::new(false),
            slot: Mutex::new(Slot {
                results: (0..partitions).map(|_| None).collect(),
                remaining: partitions,
                reply: Some(tx),
            }),
        });
        (state, rx)
    }

    pub(crate) fn cancelled_flag(&self) -> &AtomicBool {
        &self.cancelled
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
    }

    /// Stores one partition's result; replies when it was the last.
    pub(crate) fn complete(&self, partition: usize, output: PartitionOutput<T>) -> Settled {
        let mut slot = self.slot.lock().unwrap();
        if slot.reply.is_none() {
            return Settled::AlreadyDone;
        }
        debug_assert!(
            slot.results[partition].is_none(),
            "a partition completes once"
        );
        slot.results[partition] = Some(output);
        slot.remaining -= 1;
        if slot.remaining > 0 {
            return Settled::Pending;
        }
        let partitions = slot
            .results
            .iter_mut()
            .map(|r| r.take().expect("all complete"))
            .collect();
        let reply = slot.reply.take().expect("checked above");
        let _ = reply.send(Ok(JobOutput {
            id: self.id,
            partitions,
            elapsed: self.submitted.elapsed(),
        }));
        Settled::Finished {
            ok: true,
            error: None,
        }
    }

    /// Fails the job with `error` unless it already finished; stops its other
    /// partitions at their next node boundary.
    pub(crate) fn fail(&self, error: JobError) -> Settled {
        self.cancelled.store(true, Ordering::SeqCst);
        let mut slot = self.slot.lock().unwrap();
        let Some(reply) = slot.reply.take() else {
            return Settled::AlreadyDone;
        };
        // Drop results already collected: the job will not use them.
        slot.results.iter_mut().for_each(|r| *r = None);
        let message = error.to_string();
        let _ = reply.send(Err(error));
        Settled::Finished {
            ok: false,
            error: Some(message),
        }
    }
}

/// Cancels a job from anywhere; cheap to clone.
#[derive(Clone)]
pub struct JobCanceller {
    cancel: Arc<dyn Fn() + Send + Sync>,
}

impl JobCanceller {
    pub(crate) fn new(cancel: Arc<dyn Fn() + Send + Sync>) -> Self {
        Self { cancel }
    }

    /// Cancels the job: its future resolves to [`JobError::Cancelled`] and its
    /// partitions stop at their next node boundary, returning their arenas.
    pub fn cancel(&self) {
        (self.cancel)()
    }
}

/// A submitted job: await it for the result, or cancel it.
pub struct JobHandle<T> {
    id: JobId,
    canceller: JobCanceller,
    reply: oneshot::Receiver<Result<JobOutput<T>, JobError>>,
}

impl<T> JobHandle<T> {
    pub(crate) fn new(
        id: JobId,
        canceller: JobCanceller,
        reply: oneshot::Receiver<Result<JobOutput<T>, JobError>>,
    ) -> Self {
        Self {
            id,
            canceller,
            reply,
        }
    }

    pub fn id(&self) -> JobId {
        self.id
    }

    pub fn cancel(&self) {
        self.canceller.cancel()
    }

    /// A handle that cancels this job and can outlive it.
    pub fn canceller(&self) -> JobCanceller {
        self.canceller.clone()
    }
}

impl<T> Future for JobHandle<T> {
    type Output = Result<JobOutput<T>, JobError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.reply)
            .poll(cx)
            .map(|r| r.unwrap_or(Err(JobError::Shutdown)))
    }
}
