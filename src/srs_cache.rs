//! SRSs by parameter file: read once (mmapped and decoded in parallel), kept
//! while in use and, within a host-memory budget, after; the least recently
//! used idle one is evicted first. Shared by every job that names the file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use cuzk_stages::Srs;

/// A loaded SRS and how long loading took (zero when it was already loaded).
pub struct Loaded {
    pub srs: Arc<Srs>,
    pub load_time: Duration,
}

/// One parameter file the cache knows.
#[derive(Default)]
struct Slot {
    srs: Option<Arc<Srs>>,
    last_used: Option<Instant>,
}

/// A loaded SRS as [`SrsCache::entries`] reports it.
#[derive(Clone, Debug)]
pub struct SrsEntry {
    pub path: PathBuf,
    /// Host bytes its points take.
    pub bytes: usize,
    /// Jobs (and other holders) using it beside the cache.
    pub users: usize,
    pub idle_for: Duration,
}

/// Parameter files loaded so far.
#[derive(Default)]
pub struct SrsCache {
    /// Each file's slot has its own lock, so concurrent first uses of one file
    /// wait for one read while other files load in parallel.
    slots: Mutex<HashMap<PathBuf, Arc<Mutex<Slot>>>>,
    /// Host bytes kept loaded before idle SRSs are evicted (0 = no limit).
    budget: usize,
    /// SRSs evicted while jobs still held them: loading the file again
    /// takes that copy back rather than reading a second one beside it.
    evicted: Mutex<HashMap<PathBuf, Weak<Srs>>>,
    /// Told of each least-recently-used eviction, so what hangs off the SRS
    /// elsewhere (device copies, recordings) goes with it.
    on_evict: Mutex<Option<EvictHook>>,
}

/// What [`SrsCache::on_evict`] calls.
pub type EvictHook = Box<dyn Fn(&Arc<Srs>) + Send + Sync>;

impl SrsCache {
    /// A cache without a memory limit.
    pub fn new() -> Self {
        Self::default()
    }

    /// A cache that evicts the least recently used idle SRS when the loaded
    /// ones together pass `budget` bytes (0 = no limit). SRSs in use are
    /// never evicted, so the total can pass the budget while they are.
    pub fn with_budget(budget: usize) -> Self {
        Self {
            slots: Mutex::default(),
            budget,
            evicted: Mutex::default(),
            on_evict: Mutex::default(),
        }
    }

    fn slot(&self, path: &Path) -> Arc<Mutex<Slot>> {
        self.slots
            .lock()
            .unwrap()
            .entry(path.to_path_buf())
            .or_default()
            .clone()
    }

    /// The SRS of `path`, read on first use.
    pub fn get(&self, path: &Path) -> anyhow::Result<Loaded> {
        let slot = self.slot(path);
        let mut held = slot.lock().unwrap();
        held.last_used = Some(Instant::now());
        if let Some(srs) = held.srs.as_ref() {
            return Ok(Loaded {
                srs: srs.clone(),
                load_time: Duration::ZERO,
            });
        }
        let still_used = self.evicted.lock().unwrap().remove(path);
        if let Some(srs) = still_used.and_then(|w| w.upgrade()) {
            held.srs = Some(srs.clone());
            return Ok(Loaded {
                srs,
                load_time: Duration::ZERO,
            });
        }
        let started = Instant::now();
        let srs = Arc::new(Srs::read(path, false)?);
        let load_time = started.elapsed();
        tracing::info!(path = %path.display(), bytes = srs.memory_bytes(), seconds = load_time.as_secs_f64(), "SRS loaded");
        held.srs = Some(srs.clone());
        drop(held);
        self.make_room(path);
        Ok(Loaded { srs, load_time })
    }

    /// Calls `hook` with each SRS the budget evicts (least recently used).
    pub fn on_evict(&self, hook: EvictHook) {
        *self.on_evict.lock().unwrap() = Some(hook);
    }

    /// The SRS of `path` if it is loaded, without waiting for a read.
    pub fn try_get(&self, path: &Path) -> Option<Arc<Srs>> {
        let slot = self.slots.lock().unwrap().get(path)?.clone();
        let mut held = slot.try_lock().ok()?;
        let srs = held.srs.clone()?;
        held.last_used = Some(Instant::now());
        Some(srs)
    }

    /// Evicts idle SRSs, least recently used first, until the loaded ones fit
    /// the budget; `keep` (just loaded) is not a candidate.
    fn make_room(&self, keep: &Path) {
        if self.budget == 0 {
            return;
        }
        loop {
            let entries = self.entries();
            let total: usize = entries.iter().map(|e| e.bytes).sum();
            if total <= self.budget {
                return;
            }
            let Some(victim) = entries
                .iter()
                .filter(|e| e.users == 0 && e.path != keep)
                .max_by_key(|e| e.idle_for)
            else {
                return;
            };
            tracing::info!(path = %victim.path.display(), bytes = victim.bytes, budget = self.budget, "SRS evicted (least recently used)");
            if let Some(srs) = self.evict(&victim.path)
                && let Some(hook) = self.on_evict.lock().unwrap().as_ref()
            {
                hook(&srs);
            }
        }
    }

    /// Forgets `path`'s SRS; the SRS itself (freed once no job uses it), if it
    /// was loaded.
    pub fn evict(&self, path: &Path) -> Option<Arc<Srs>> {
        let slot = self.slots.lock().unwrap().remove(path)?;
        let srs = slot.lock().unwrap().srs.take()?;
        let mut evicted = self.evicted.lock().unwrap();
        evicted.retain(|_, w| w.strong_count() > 0);
        evicted.insert(path.to_path_buf(), Arc::downgrade(&srs));
        Some(srs)
    }

    /// Host bytes of every SRS loaded, those evicted but still in use
    /// included (they are freed only when their last job ends).
    pub fn resident_bytes(&self) -> usize {
        let loaded: usize = self.entries().iter().map(|e| e.bytes).sum();
        let evicted: usize = self
            .evicted
            .lock()
            .unwrap()
            .values()
            .filter_map(Weak::upgrade)
            .map(|s| s.memory_bytes())
            .sum();
        loaded + evicted
    }

    /// Every loaded SRS, most recently used first.
    pub fn entries(&self) -> Vec<SrsEntry> {
        let slots: Vec<_> = self
            .slots
            .lock()
            .unwrap()
            .iter()
            .map(|(p, s)| (p.clone(), s.clone()))
            .collect();
        let mut out: Vec<SrsEntry> = slots
            .into_iter()
            .filter_map(|(path, slot)| {
                // A slot being loaded is not an entry yet.
                let held = slot.try_lock().ok()?;
                let srs = held.srs.as_ref()?;
                Some(SrsEntry {
                    path,
                    bytes: srs.memory_bytes(),
                    users: Arc::strong_count(srs) - 1,
                    idle_for: held.last_used.map_or(Duration::ZERO, |t| t.elapsed()),
                })
            })
            .collect();
        out.sort_by_key(|e| e.idle_for);
        out
    }
}
