//! The source: jobs waiting to enter the graph, fed into the entry edge one
//! partition at a time as it has room, the highest (aged) priority first.
//!
//! One task feeds the entry edge. It waits for room before it picks, so a
//! critical job submitted behind a thousand queued ones goes in next; a
//! CRITICAL job does not wait for room at all (the edges' express lane).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::edge::{CRITICAL, LEVELS, aged_priority};
use crate::job::JobState;

use super::envelope::{EdgeTx, Envelope};

/// A job with partitions still to enter.
struct Pending<T> {
    job: Arc<JobState<T>>,
    items: VecDeque<(usize, T)>,
    since: Instant,
}

pub(crate) struct Source<T> {
    levels: Mutex<[VecDeque<Pending<T>>; LEVELS]>,
    more: Notify,
    closed: AtomicBool,
    aging: Duration,
    /// Jobs with partitions still waiting here.
    queued: AtomicUsize,
}

impl<T> Source<T> {
    pub fn new(aging: Duration) -> Self {
        Self {
            levels: Mutex::new(Default::default()),
            more: Notify::new(),
            closed: AtomicBool::new(false),
            aging,
            queued: AtomicUsize::new(0),
        }
    }

    /// Queues a job; false if the source is closed (shutting down).
    pub fn push(&self, job: Arc<JobState<T>>, items: Vec<T>) -> bool {
        if self.closed.load(Ordering::SeqCst) {
            return false;
        }
        let level = usize::from(job.priority).min(LEVELS - 1);
        self.levels.lock().unwrap()[level].push_back(Pending {
            job,
            items: items.into_iter().enumerate().collect(),
            since: Instant::now(),
        });
        self.queued.fetch_add(1, Ordering::SeqCst);
        self.more.notify_one();
        true
    }

    /// Stops accepting jobs; those queued still enter.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.more.notify_one();
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::SeqCst)
    }

    /// Jobs queued here, by priority level.
    pub fn queued_by_level(&self) -> [usize; LEVELS] {
        let levels = self.levels.lock().unwrap();
        std::array::from_fn(|l| levels[l].len())
    }

    /// The next partition by aged priority, dropping cancelled jobs; with
    /// `critical_only`, only a CRITICAL one.
    fn pop(&self, critical_only: bool) -> Option<(Arc<JobState<T>>, usize, T)> {
        let mut levels = self.levels.lock().unwrap();
        loop {
            let now = Instant::now();
            let mut best: Option<(usize, f64)> = None;
            for level in (0..LEVELS).rev() {
                let Some(p) = levels[level].front() else {
                    continue;
                };
                let effective =
                    aged_priority(level, now.saturating_duration_since(p.since), self.aging);
                if best.is_none_or(|(_, e)| effective > e) {
                    best = Some((level, effective));
                }
            }
            let (level, _) = best?;
            if critical_only && level < CRITICAL {
                return None;
            }
            let front = levels[level].front_mut().expect("non-empty level");
            if front.job.is_cancelled() || front.items.is_empty() {
                levels[level].pop_front();
                self.queued.fetch_sub(1, Ordering::SeqCst);
                continue;
            }
            let job = front.job.clone();
            let (partition, item) = front.items.pop_front().expect("checked non-empty");
            if front.items.is_empty() {
                levels[level].pop_front();
                self.queued.fetch_sub(1, Ordering::SeqCst);
            }
            return Some((job, partition, item));
        }
    }

    /// Feeds the entry edge until the source is closed and empty. Returns
    /// the partition it could not send if the graph went away.
    pub async fn feed(
        self: Arc<Self>,
        entry: EdgeTx<T>,
        live: Arc<AtomicUsize>,
        on_enter: impl Fn(&Envelope<T>),
    ) -> Option<Envelope<T>> {
        loop {
            let more = self.more.notified();
            tokio::pin!(more);
            more.as_mut().enable();
            let room = !entry.is_full();
            match self.pop(!room) {
                Some((job, partition, item)) => {
                    let env = Envelope::new(job, partition, item, live.clone());
                    on_enter(&env);
                    if let Err(env) = entry.try_send(env) {
                        // No receiver is left: the graph is gone.
                        return Some(env);
                    }
                }
                None if room && self.is_closed() => return None,
                None if room => more.await,
                // Full: wait for room, or for a CRITICAL job that needs none.
                None => {
                    tokio::select! {
                        _ = more => {}
                        _ = entry.wait_room() => {}
                    }
                }
            }
        }
    }
}
