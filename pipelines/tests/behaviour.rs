//! What each built-in graph *does*, pinned with exact counts on toy stages
//! registered under the real stage names: the declarations from
//! `pipelines/graphs/` run on the real runtime, and an observer checks the
//! order of stage starts and ends (reported while a node still holds its
//! resources, so an interval is never outside its lock).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use cuzk_config::Config;
use cuzk_engine::{
    ArenaPool, CpuPools, Event, EventKind, GraphSpec, Observer, Role, RuntimeBuilder, StageContext,
    StageRegistry,
};
use cuzk_pipelines::pools;
use cuzk_stages::names::{SYNTH, SYNTH_PCE, SYNTH_WITNESS};

/// One stage start or end, in the order the runtime reported them.
#[derive(Clone, Debug)]
struct Mark {
    start: bool,
    node: String,
    role: Role,
    device: Option<usize>,
}

#[derive(Default)]
struct Recorder(Mutex<Vec<Mark>>);

impl Observer for Recorder {
    fn on_event(&self, e: &Event<'_>) {
        let (start, node) = match &e.kind {
            EventKind::StageStart { node } => (true, node),
            EventKind::StageEnd { node, .. } => (false, node),
            _ => return,
        };
        self.0.lock().unwrap().push(Mark {
            start,
            node: node.name.to_string(),
            role: node.role,
            device: node.device,
        });
    }
}

impl Recorder {
    /// The most intervals of nodes matching `which` open at once on one device.
    fn max_concurrent(&self, which: impl Fn(&Mark) -> bool) -> usize {
        let mut open: HashMap<Option<usize>, usize> = HashMap::new();
        let mut most = 0;
        for m in self.0.lock().unwrap().iter().filter(|m| which(m)) {
            let n = open.entry(m.device).or_default();
            if m.start {
                *n += 1;
                most = most.max(*n);
            } else {
                *n -= 1;
            }
        }
        most
    }

    /// Starts of `node` while an interval matching `during` was open on the same device
    /// (`None` device: any device).
    fn starts_during(
        &self,
        node: &str,
        during: impl Fn(&Mark) -> bool,
        same_device: bool,
    ) -> usize {
        let mut open: HashMap<Option<usize>, usize> = HashMap::new();
        let mut count = 0;
        for m in self.0.lock().unwrap().iter() {
            if during(m) {
                let n = open.entry(m.device).or_default();
                if m.start { *n += 1 } else { *n -= 1 }
            }
            if m.start && m.node == node {
                let busy = if same_device {
                    open.get(&m.device).copied().unwrap_or(0)
                } else {
                    open.values().sum()
                };
                if busy > 0 {
                    count += 1;
                }
            }
        }
        count
    }
}

#[derive(Debug, Default)]
struct Item;

/// A latch the test opens to let a blocked stage go on.
#[derive(Default)]
struct Latch {
    open: Mutex<bool>,
    cv: Condvar,
}

impl Latch {
    fn wait(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.cv.wait(open).unwrap();
        }
    }
    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.cv.notify_all();
    }
}

/// Every stage name, each sleeping `delay(name)`; synth counts completions
/// and assemble waits for `latch` (if given).
fn toy_stages(
    delay: impl Fn(&str) -> u64,
    synthesized: Arc<AtomicUsize>,
    latch: Option<Arc<Latch>>,
) -> StageRegistry<Item> {
    let mut r = StageRegistry::new();
    for name in cuzk_stages::names::ALL {
        let ms = delay(name);
        let (synthesized, latch) = (synthesized.clone(), latch.clone());
        r.register(
            name,
            Arc::new(move |_: &mut Item, _: &mut StageContext<'_>| {
                std::thread::sleep(Duration::from_millis(ms));
                if [SYNTH, SYNTH_PCE, SYNTH_WITNESS].contains(&name) {
                    synthesized.fetch_add(1, Ordering::SeqCst);
                }
                if name == cuzk_stages::names::ASSEMBLE
                    && let Some(l) = &latch
                {
                    l.wait();
                }
                Ok(())
            }),
        );
    }
    r
}

fn cpu_pools() -> CpuPools {
    let mut p = CpuPools::new()
        .with(pools::SYNTH, 4)
        .unwrap()
        .with(pools::GROTH16, 4)
        .unwrap();
    p.add(pools::DEVICE, 8).unwrap();
    p
}

fn graph(variant: &str) -> GraphSpec {
    let mut c = Config::default();
    c.pipeline.variant = variant.into();
    cuzk_pipelines::graph(&c).unwrap()
}

/// Runs `jobs` jobs of `partitions` through a built-in graph on `devices`
/// logical devices with toy stages; returns the recorded marks.
async fn run(spec: GraphSpec, devices: usize, jobs: usize, partitions: usize) -> Arc<Recorder> {
    let recorder = Arc::new(Recorder::default());
    let delay = |name: &str| match name {
        "synth" => 2,
        "gpu_stage_in" => 3,
        "gpu_compute" | "gpu_ntt_msm" => 6,
        "b_g2_msm" | "b_g2_msm_host" => 4,
        _ => 0,
    };
    let arenas = ArenaPool::new(spec.max_in_flight(devices).unwrap(), 1 << 20, None);
    let rt = RuntimeBuilder::new(spec, toy_stages(delay, Arc::default(), None), cpu_pools())
        .arenas(arenas)
        .devices(devices)
        .observer(recorder.clone())
        .start()
        .unwrap();
    let handles: Vec<_> = (0..jobs)
        .map(|j| rt.submit(&format!("j{j}"), (0..partitions).map(|_| Item).collect()))
        .collect();
    for h in handles {
        h.await.unwrap();
    }
    rt.idle().await;
    for l in rt.status().leases {
        assert_eq!(l.in_use, 0, "every device lease came back: {l:?}");
    }
    recorder
}

fn device(m: &Mark) -> bool {
    m.role == Role::Device
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn serial_never_has_two_device_jobs_on_one_device() {
    let r = run(graph("serial"), 2, 2, 12).await;
    assert_eq!(
        r.max_concurrent(device),
        1,
        "gpu_ntt_msm and b_g2_msm never overlap on a device"
    );
    assert_eq!(
        r.max_concurrent(|m| m.node == "synth"),
        2,
        "(the toy load is heavy enough that the CPU stages do run in parallel)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn single_lock_never_runs_device_work_outside_its_lock() {
    let spec = graph("single_lock");
    assert_eq!(spec.node_named("gpu_ntt_msm").unwrap().workers, 2);
    let r = run(spec, 2, 2, 12).await;
    // Two workers per device on each device node, and still one device job at a time, B2 included.
    assert_eq!(r.max_concurrent(device), 1);
    assert_eq!(r.max_concurrent(|m| m.node == "b_g2_msm"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn single_lock_cpu_b2_runs_b2_beside_the_device() {
    let r = run(graph("single_lock_cpu_b2"), 1, 2, 12).await;
    assert_eq!(r.max_concurrent(device), 1);
    assert!(
        r.starts_during("b_g2_msm", |m| m.node == "gpu_ntt_msm", false) > 0,
        "B2 on the CPU overlaps the next partition's device work"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_lock_overlaps_one_partitions_staging_with_anothers_compute() {
    let r = run(graph("two_lock"), 2, 2, 12).await;
    let transfer = |m: &Mark| m.role == Role::Transfer;
    assert_eq!(
        r.max_concurrent(transfer),
        1,
        "one staging at a time per device (memory lock)"
    );
    assert_eq!(
        r.max_concurrent(device),
        1,
        "compute and B2 share the compute lock"
    );
    assert!(
        r.starts_during("gpu_stage", device, true) > 0,
        "a partition stages while another computes on the same device"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn throttled_never_starts_synthesis_while_b2_runs() {
    // Room after synthesis, so synthesis is not paced by the device's completions.
    let roomy = |variant: &str| {
        let mut g = graph(variant);
        for e in g.edges.iter_mut().filter(|e| e.to == "prep_msm") {
            e.capacity = 32;
        }
        g
    };
    let r = run(roomy("throttled"), 1, 2, 16).await;
    assert_eq!(r.starts_during("synth", |m| m.node == "b_g2_msm", false), 0);
    assert_eq!(r.max_concurrent(device), 1);
    // single_lock, unthrottled, does start synthesis while B2 runs under the same load.
    let r = run(roomy("single_lock"), 1, 2, 16).await;
    assert!(r.starts_during("synth", |m| m.node == "b_g2_msm", false) > 0);
}

/// vector's backpressure test for the proving graphs: with assemble blocked,
/// exactly `max_in_flight()` partitions get past synthesis.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_in_flight_bound_is_max_in_flight() {
    for variant in cuzk_pipelines::builtin_names() {
        for devices in [1, 2] {
            let spec = graph(variant);
            let bound = spec.max_in_flight(devices).unwrap();
            let synthesized = Arc::new(AtomicUsize::new(0));
            let latch = Arc::new(Latch::default());
            let stages = toy_stages(|_| 0, synthesized.clone(), Some(latch.clone()));
            let arenas = ArenaPool::new(bound, 1 << 20, None);
            let rt = RuntimeBuilder::new(spec, stages, cpu_pools())
                .arenas(arenas.clone())
                .devices(devices)
                .start()
                .unwrap();
            let job = rt.submit("many", (0..bound + 20).map(|_| Item).collect());
            let mut last = usize::MAX;
            for _ in 0..400 {
                tokio::time::sleep(Duration::from_millis(10)).await;
                let now = synthesized.load(Ordering::SeqCst);
                if now == last && now >= bound {
                    break;
                }
                last = now;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert_eq!(
                synthesized.load(Ordering::SeqCst),
                bound,
                "{variant} on {devices} device(s): workers plus capacities from synth on"
            );
            assert_eq!(arenas.stats().in_use, bound, "{variant}: one arena each");
            latch.open();
            job.await.unwrap();
        }
    }
}

/// A graph written only as a file: a semaphore lets one synthesis run at a
/// time though three workers could.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_variant_declared_in_a_file_does_what_it_declares() {
    let text = cuzk_pipelines::builtin("serial")
        .unwrap()
        .replace("name = \"serial\"", "name = \"one_synth\"")
        .replace(
            "[[resource]]\nname = \"device\"",
            "[[resource]]\nname = \"synth_slots\"\nkind = \"semaphore\"\nsize = 1\n\n[[resource]]\nname = \"device\"",
        )
        .replace(
            "workers = 2\npool = \"synth\"\ntakes = [\"arena\"]",
            "workers = 3\npool = \"synth\"\ntakes = [\"arena\"]\nholds = [\"synth_slots\"]",
        );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("one_synth.toml");
    std::fs::write(&path, text).unwrap();
    let mut c = Config::default();
    c.pipeline.graph = Some(path);
    let spec = cuzk_pipelines::graph(&c).unwrap();
    assert_eq!(
        (
            spec.name.as_str(),
            spec.node_named("synth").unwrap().workers
        ),
        ("one_synth", 3)
    );
    let r = run(spec, 1, 2, 10).await;
    assert_eq!(r.max_concurrent(|m| m.node == "synth"), 1);
}
