//! A semaphore whose waiters are served by priority: the highest level
//! first, the oldest first within a level. Locks, device leases and arenas
//! use it, so the next one freed goes to a WinningPoSt rather than to the
//! PoRep partition that happened to ask first (tokio's semaphore is FIFO).

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// Waiters in service order: highest priority, then oldest.
type Key = (Reverse<u8>, u64);

#[derive(Default)]
struct State {
    available: usize,
    next: u64,
    waiters: BTreeMap<Key, Arc<Notify>>,
    /// Waiters handed a permit that have not taken it yet.
    granted: HashSet<u64>,
}

impl State {
    /// A permit comes back: to the first waiter, else to the free count.
    fn release(&mut self) {
        match self.waiters.pop_first() {
            Some(((_, seq), wake)) => {
                self.granted.insert(seq);
                wake.notify_one();
            }
            None => self.available += 1,
        }
    }
}

/// A counting semaphore with priority-ordered waiters. Cloning shares it.
#[derive(Clone)]
pub struct RankedSemaphore {
    state: Arc<Mutex<State>>,
}

/// One permit; it goes back (to the best waiter) when dropped.
#[derive(Debug)]
pub struct RankedPermit {
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for RankedSemaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RankedSemaphore")
            .field("available", &self.available())
            .finish()
    }
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} free, {} waiting", self.available, self.waiters.len())
    }
}

impl RankedSemaphore {
    pub fn new(permits: usize) -> Self {
        Self {
            state: Arc::new(Mutex::new(State {
                available: permits,
                ..State::default()
            })),
        }
    }

    /// Permits free now.
    pub fn available(&self) -> usize {
        self.state.lock().unwrap().available
    }

    fn permit(&self) -> RankedPermit {
        RankedPermit {
            state: self.state.clone(),
        }
    }

    /// A permit if one is free now.
    pub fn try_acquire(&self) -> Option<RankedPermit> {
        let mut state = self.state.lock().unwrap();
        // Permits are only free while nobody waits.
        if state.available == 0 {
            return None;
        }
        state.available -= 1;
        Some(self.permit())
    }

    /// Waits for a permit; a later waiter of a higher `priority` is served
    /// first. Cancel-safe: a dropped wait gives back a permit it was handed.
    pub async fn acquire(&self, priority: u8) -> RankedPermit {
        let (seq, wake) = {
            let mut state = self.state.lock().unwrap();
            if state.available > 0 {
                state.available -= 1;
                return self.permit();
            }
            let seq = state.next;
            state.next += 1;
            let wake = Arc::new(Notify::new());
            state.waiters.insert((Reverse(priority), seq), wake.clone());
            (seq, wake)
        };
        let waiting = Waiting {
            state: &self.state,
            key: (Reverse(priority), seq),
        };
        loop {
            wake.notified().await;
            if waiting.take() {
                return self.permit();
            }
        }
    }
}

/// A waiter's place in line; leaving the line (a dropped future) passes on
/// a permit it was handed and not yet taken.
struct Waiting<'a> {
    state: &'a Mutex<State>,
    key: Key,
}

impl Waiting<'_> {
    /// Whether the permit was handed over (and is now the caller's).
    fn take(&self) -> bool {
        let mut state = self.state.lock().unwrap();
        if state.granted.remove(&self.key.1) {
            // Taken: nothing left for drop to undo.
            state.waiters.remove(&self.key);
            return true;
        }
        false
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut state = self.state.lock().unwrap();
        if state.waiters.remove(&self.key).is_none() && state.granted.remove(&self.key.1) {
            state.release();
        }
    }
}

impl Drop for RankedPermit {
    fn drop(&mut self) {
        self.state.lock().unwrap().release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn the_freed_permit_goes_to_the_highest_priority_waiter() {
        let s = RankedSemaphore::new(1);
        let held = s.acquire(0).await;
        let order = Arc::new(Mutex::new(vec![]));
        let mut tasks = vec![];
        for (i, p) in [(0, 1u8), (1, 1), (2, 4), (3, 2)] {
            let (s, order) = (s.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let _p = s.acquire(p).await;
                order.lock().unwrap().push(i);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }));
            // Queue them in this order.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        drop(held);
        for t in tasks {
            t.await.unwrap();
        }
        // 4 first, then 2, then the two 1s oldest first.
        assert_eq!(*order.lock().unwrap(), [2, 3, 0, 1]);
        assert_eq!(s.available(), 1);
    }

    #[tokio::test]
    async fn a_cancelled_wait_loses_no_permit() {
        let s = RankedSemaphore::new(1);
        let held = s.acquire(0).await;
        // Cancelled while waiting.
        let waiting = tokio::time::timeout(Duration::from_millis(10), s.acquire(3)).await;
        assert!(waiting.is_err());
        // Cancelled after being handed the permit but before taking it.
        let s2 = s.clone();
        let wait = tokio::spawn(async move { s2.acquire(2).await });
        tokio::time::sleep(Duration::from_millis(10)).await;
        wait.abort();
        drop(held);
        let _ = wait.await;
        let p = tokio::time::timeout(Duration::from_secs(5), s.acquire(0))
            .await
            .expect("the permit came back");
        drop(p);
        assert_eq!(s.available(), 1);
        assert!(s.try_acquire().is_some());
    }
}
