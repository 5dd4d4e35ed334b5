//! Edges: bounded, async, many-producer many-consumer queues that hand out
//! the highest-priority item first.
//!
//! An edge holds at most `capacity` items; a sender finding it full waits,
//! which is the graph's backpressure. Receivers take the item of the highest
//! priority level; within a level, the oldest. So that low priorities are not
//! starved, priorities *age*: an item's effective priority grows by one level
//! for every `aging` it has waited, and a level whose oldest item has waited
//! long enough is served before a higher one (ties go to the higher level).
//! Aging stops just below [`CRITICAL`]: waiting never puts anything ahead of
//! a WinningPoSt. With one priority for every item an edge is a plain FIFO.
//!
//! CRITICAL items travel an express lane: an edge takes them even when it is
//! full (so a WinningPoSt is never held behind the PoRep partitions that
//! fill it), and each node keeps an express worker that only takes them
//! ([`Edge::recv`] with `express_only`), so one is free even while every other worker
//! waits, with a finished PoRep partition, for room downstream.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// Priority levels an edge distinguishes (0 lowest); higher values are clamped.
pub const LEVELS: usize = 8;

/// How fast waiting items gain priority unless the runtime is told otherwise.
pub const DEFAULT_AGING: Duration = Duration::from_secs(60);

/// The level of work that must never wait behind aged work: curio's
/// CRITICAL, a WinningPoSt that loses a block reward if it misses its epoch.
pub const CRITICAL: usize = 4;

/// How far aging lifts an item below [`CRITICAL`]: above every HIGH item
/// that arrived later, never level with a CRITICAL one.
const AGED_CEILING: f64 = CRITICAL as f64 - 0.5;

/// A waiting item's effective priority: its level plus one for every
/// `aging` it has waited, capped just below [`CRITICAL`] (items at or above
/// it do not age). The engine's edges and source and the daemon's admission
/// queue all order by it, so low priorities are never starved and never
/// overtake a WinningPoSt.
pub fn aged_priority(level: usize, waited: Duration, aging: Duration) -> f64 {
    if level >= CRITICAL {
        return level as f64;
    }
    (level as f64 + waited.as_secs_f64() / aging.as_secs_f64().max(1e-9)).min(AGED_CEILING)
}

/// Something an edge can order.
pub(crate) trait Prioritised {
    fn priority(&self) -> u8;

    /// Whether it travels the express lane.
    fn is_critical(&self) -> bool {
        usize::from(self.priority()) >= CRITICAL
    }
}

struct State<E> {
    levels: [VecDeque<(Instant, E)>; LEVELS],
    len: usize,
    senders: usize,
    receivers: usize,
}

impl<E> State<E> {
    /// The level to serve next: the highest effective priority at `now`.
    fn best(&self, now: Instant, aging: Duration) -> Option<usize> {
        let mut best: Option<(usize, f64)> = None;
        for level in (0..LEVELS).rev() {
            let Some((since, _)) = self.levels[level].front() else {
                continue;
            };
            let effective = aged_priority(level, now.saturating_duration_since(*since), aging);
            if best.is_none_or(|(_, e)| effective > e) {
                best = Some((level, effective));
            }
        }
        best.map(|(level, _)| level)
    }
}

struct Inner<E> {
    state: Mutex<State<E>>,
    /// None: unbounded (retry queues, which never hold more than the items in flight).
    capacity: Option<usize>,
    aging: Duration,
    items: Notify,
    /// Wakes express receivers: a CRITICAL item came.
    express: Notify,
    room: Notify,
}

/// The receiving side; cloning adds a receiver.
pub(crate) struct Edge<E> {
    inner: Arc<Inner<E>>,
}

/// The sending side; cloning adds a sender. The edge closes when every sender
/// is gone: receivers then drain it and see `None`.
pub(crate) struct EdgeSender<E> {
    inner: Arc<Inner<E>>,
}

fn channel<E>(capacity: Option<usize>, aging: Duration) -> (EdgeSender<E>, Edge<E>) {
    let inner = Arc::new(Inner {
        state: Mutex::new(State {
            levels: Default::default(),
            len: 0,
            senders: 1,
            receivers: 1,
        }),
        capacity,
        aging,
        items: Notify::new(),
        express: Notify::new(),
        room: Notify::new(),
    });
    (
        EdgeSender {
            inner: inner.clone(),
        },
        Edge { inner },
    )
}

/// An edge of `capacity` items.
pub(crate) fn bounded<E>(capacity: usize, aging: Duration) -> (EdgeSender<E>, Edge<E>) {
    assert!(capacity > 0, "validated: edges hold at least one item");
    channel(Some(capacity), aging)
}

/// An edge without a bound.
pub(crate) fn unbounded<E>(aging: Duration) -> (EdgeSender<E>, Edge<E>) {
    channel(None, aging)
}

impl<E: Prioritised> EdgeSender<E> {
    fn push(&self, state: &mut State<E>, item: E) {
        let level = usize::from(item.priority()).min(LEVELS - 1);
        let critical = item.is_critical();
        state.levels[level].push_back((Instant::now(), item));
        state.len += 1;
        self.inner.items.notify_one();
        if critical {
            self.inner.express.notify_one();
        }
    }

    /// Room for a normal item.
    fn has_room(&self, state: &State<E>) -> bool {
        self.inner.capacity.is_none_or(|c| state.len < c)
    }

    /// Whether `item` may go in now: a CRITICAL one always, others while
    /// there is room.
    fn admits(&self, state: &State<E>, item: &E) -> bool {
        item.is_critical() || self.has_room(state)
    }

    /// Whether the edge is full for normal items now.
    pub(crate) fn is_full(&self) -> bool {
        !self.has_room(&self.inner.state.lock().unwrap())
    }

    /// Sends, waiting while the edge is full. Gives the item back if no
    /// receiver is left.
    pub(crate) async fn send(&self, item: E) -> Result<(), E> {
        let mut item = Some(item);
        loop {
            let room = self.inner.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            {
                let mut state = self.inner.state.lock().unwrap();
                if state.receivers == 0 {
                    return Err(item.take().expect("kept until sent"));
                }
                if self.admits(&state, item.as_ref().expect("kept until sent")) {
                    self.push(&mut state, item.take().expect("kept until sent"));
                    return Ok(());
                }
            }
            room.await;
        }
    }

    /// Sends now if there is room (a CRITICAL item always has); else gives
    /// the item back.
    pub(crate) fn try_send(&self, item: E) -> Result<(), E> {
        let mut state = self.inner.state.lock().unwrap();
        if state.receivers == 0 || !self.admits(&state, &item) {
            return Err(item);
        }
        self.push(&mut state, item);
        Ok(())
    }

    /// Waits until the edge has room for one more item (or has no receiver).
    /// With one sender, a `try_send` right after cannot fail for lack of room.
    pub(crate) async fn wait_room(&self) {
        loop {
            let room = self.inner.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            {
                let state = self.inner.state.lock().unwrap();
                if state.receivers == 0 || self.has_room(&state) {
                    return;
                }
            }
            room.await;
        }
    }
}

impl<E> Edge<E> {
    /// The next item by (aged) priority; `None` once the edge is empty and
    /// every sender is gone. With `express_only` (an express worker's), the
    /// next CRITICAL item, and `None` once no sender is left (no CRITICAL
    /// item can come any more).
    pub(crate) async fn recv(&self, express_only: bool) -> Option<E> {
        if express_only {
            return self
                .recv_from(&self.inner.express, |state| {
                    (CRITICAL..LEVELS)
                        .rev()
                        .find(|&l| !state.levels[l].is_empty())
                })
                .await;
        }
        let aging = self.inner.aging;
        self.recv_from(&self.inner.items, |state| state.best(Instant::now(), aging))
            .await
    }

    /// Takes the front of the level `pick` names, waking on `wake` until
    /// it names one; `None` once it names none and no sender is left.
    async fn recv_from(
        &self,
        wake: &Notify,
        pick: impl Fn(&State<E>) -> Option<usize>,
    ) -> Option<E> {
        loop {
            let woken = wake.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            {
                let mut state = self.inner.state.lock().unwrap();
                if let Some(level) = pick(&state) {
                    let (_, item) = state.levels[level].pop_front().expect("non-empty level");
                    state.len -= 1;
                    drop(state);
                    self.inner.room.notify_one();
                    return Some(item);
                }
                if state.senders == 0 {
                    return None;
                }
            }
            woken.await;
        }
    }

    /// Items waiting now.
    pub(crate) fn len(&self) -> usize {
        self.inner.state.lock().unwrap().len
    }
}

impl<E> Clone for Edge<E> {
    fn clone(&self) -> Self {
        self.inner.state.lock().unwrap().receivers += 1;
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<E> Drop for Edge<E> {
    fn drop(&mut self) {
        let mut state = self.inner.state.lock().unwrap();
        state.receivers -= 1;
        if state.receivers == 0 {
            drop(state);
            // Senders waiting for room learn there is no one left.
            self.inner.room.notify_waiters();
        }
    }
}

impl<E> Clone for EdgeSender<E> {
    fn clone(&self) -> Self {
        self.inner.state.lock().unwrap().senders += 1;
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<E> Drop for EdgeSender<E> {
    fn drop(&mut self) {
        let mut state = self.inner.state.lock().unwrap();
        state.senders -= 1;
        if state.senders == 0 {
            drop(state);
            self.inner.items.notify_waiters();
            self.inner.express.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct P(u8, u32);
    impl Prioritised for P {
        fn priority(&self) -> u8 {
            self.0
        }
    }

    #[tokio::test]
    async fn higher_priority_first_fifo_within_a_level() {
        let (tx, rx) = bounded(8, DEFAULT_AGING);
        for (p, i) in [(1, 0), (3, 1), (1, 2), (3, 3), (0, 4)] {
            tx.send(P(p, i)).await.unwrap();
        }
        let mut got = vec![];
        for _ in 0..5 {
            got.push(rx.recv(false).await.unwrap().1);
        }
        assert_eq!(got, [1, 3, 0, 2, 4]);
    }

    #[tokio::test]
    async fn a_full_edge_blocks_its_sender_and_closing_drains() {
        let (tx, rx) = bounded(2, DEFAULT_AGING);
        tx.send(P(0, 0)).await.unwrap();
        tx.send(P(0, 1)).await.unwrap();
        assert!(tx.try_send(P(0, 2)).is_err(), "full");
        let tx2 = tx.clone();
        let blocked = tokio::spawn(async move { tx2.send(P(0, 2)).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!blocked.is_finished(), "a full edge holds its sender");
        assert_eq!(rx.recv(false).await.unwrap().1, 0);
        blocked.await.unwrap().unwrap();
        drop(tx);
        assert_eq!(rx.len(), 2);
        assert_eq!(rx.recv(false).await.unwrap().1, 1);
        assert_eq!(rx.recv(false).await.unwrap().1, 2);
        assert!(rx.recv(false).await.is_none(), "closed once drained");
    }

    #[tokio::test]
    async fn low_priority_ages_past_high() {
        let (tx, rx) = bounded(8, Duration::from_millis(10));
        tx.send(P(0, 0)).await.unwrap();
        // Waiting 50 ms is five levels of aging: more than the gap to 3.
        tokio::time::sleep(Duration::from_millis(50)).await;
        tx.send(P(3, 1)).await.unwrap();
        assert_eq!(
            rx.recv(false).await.unwrap().1,
            0,
            "the old low item goes first"
        );
        assert_eq!(rx.recv(false).await.unwrap().1, 1);
    }

    #[tokio::test]
    async fn aged_items_never_overtake_critical() {
        let (tx, rx) = bounded(8, Duration::from_millis(10));
        tx.send(P(0, 0)).await.unwrap();
        tx.send(P(2, 1)).await.unwrap();
        // Thirty levels of aging: still below a fresh CRITICAL item.
        tokio::time::sleep(Duration::from_millis(300)).await;
        tx.send(P(CRITICAL as u8, 2)).await.unwrap();
        tx.send(P(3, 3)).await.unwrap();
        assert_eq!(rx.recv(false).await.unwrap().1, 2, "CRITICAL first");
        // The aged items, level with each other at the ceiling, go in
        // level order, and both before the fresh HIGH one.
        assert_eq!(rx.recv(false).await.unwrap().1, 1);
        assert_eq!(rx.recv(false).await.unwrap().1, 0);
        assert_eq!(rx.recv(false).await.unwrap().1, 3);
        let capped = aged_priority(1, Duration::from_secs(3600), Duration::from_secs(1));
        assert!(capped < CRITICAL as f64 && capped > 3.0, "{capped}");
    }
}
