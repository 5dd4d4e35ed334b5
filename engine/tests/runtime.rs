//! The runtime's guarantees, on a toy item type: backpressure bounds, error
//! isolation, cancellation, arena bounds, device affinity and locks.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use cuzk_engine::{
    ArenaPool, CRITICAL, CpuPools, GraphSpec, JobError, LayoutBuilder, NodeSpec, ResourceSpec,
    RuntimeBuilder, SOURCE, StageContext, StageRegistry,
};

#[derive(Debug)]
struct Item {
    value: u64,
    devices: Vec<Option<usize>>,
}

fn items(n: u64) -> Vec<Item> {
    (0..n)
        .map(|value| Item {
            value,
            devices: vec![],
        })
        .collect()
}

fn pools() -> CpuPools {
    CpuPools::new().with("a", 2).unwrap().with("b", 4).unwrap()
}

/// A latch the test opens to let blocked stages go on.
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

async fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..2000 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("timed out waiting for: {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_node_holds_exactly_capacity_plus_workers_upstream() {
    const CAPACITY: usize = 3;
    const SLOW_WORKERS: usize = 2;
    let produced = Arc::new(AtomicUsize::new(0));
    let latch = Arc::new(Latch::default());
    let stages = StageRegistry::new()
        .with("fast", {
            let produced = produced.clone();
            move |_: &mut Item, _: &mut StageContext<'_>| {
                produced.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
        })
        .with("slow", {
            let latch = latch.clone();
            move |_: &mut Item, _: &mut StageContext<'_>| {
                latch.wait();
                Ok(())
            }
        });
    let spec = GraphSpec::new("bp")
        .node(NodeSpec::new("fast", "fast", "FAST").pool("a"))
        .node(
            NodeSpec::new("slow", "slow", "SLOW")
                .pool("b")
                .workers(SLOW_WORKERS),
        )
        .edge(SOURCE, "fast", 1)
        .edge("fast", "slow", CAPACITY);
    let rt = RuntimeBuilder::new(spec, stages, pools()).start().unwrap();
    let job = rt.submit("bp", items(20));

    // The slow node's workers each hold one item, its edge holds CAPACITY, and
    // the fast node's single worker holds one more, blocked on the full edge.
    let bound = CAPACITY + SLOW_WORKERS + 1;
    eventually("the fast node to fill the edge", || {
        produced.load(Ordering::SeqCst) >= bound
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        produced.load(Ordering::SeqCst),
        bound,
        "nothing passes a full edge"
    );
    let status = rt.status();
    let slow = status.nodes.iter().find(|n| n.name == "slow").unwrap();
    assert_eq!((slow.queued, slow.busy), (CAPACITY, SLOW_WORKERS));
    assert_eq!(
        status.jobs_queued, 1,
        "the job's remaining partitions wait at the source"
    );

    latch.open();
    let out = job.await.unwrap();
    assert_eq!(out.partitions.len(), 20);
    let values: Vec<u64> = out.partitions.iter().map(|p| p.item.value).collect();
    assert_eq!(
        values,
        (0..20).collect::<Vec<_>>(),
        "fan-in restores partition order"
    );
    assert_eq!(produced.load(Ordering::SeqCst), 20);
}

fn failing_registry(attempts: Arc<AtomicUsize>) -> StageRegistry<Item> {
    StageRegistry::new()
        .with("check", move |item: &mut Item, _: &mut StageContext<'_>| {
            attempts.fetch_add(1, Ordering::SeqCst);
            anyhow::ensure!(item.value != 13, "value {} is unlucky", item.value);
            Ok(())
        })
        .with("double", |item: &mut Item, _: &mut StageContext<'_>| {
            item.value *= 2;
            Ok(())
        })
        .with("panicky", |item: &mut Item, _: &mut StageContext<'_>| {
            assert!(item.value != 99, "item {} exploded", item.value);
            Ok(())
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_failing_partition_fails_its_job_and_the_engine_keeps_serving() {
    let spec = GraphSpec::new("f")
        .node(
            NodeSpec::new("check", "check", "CHECK")
                .pool("a")
                .workers(2),
        )
        .node(NodeSpec::new("double", "double", "DOUBLE").pool("b"))
        .node(NodeSpec::new("panicky", "panicky", "P").pool("b"))
        .edge(SOURCE, "check", 2)
        .edge("check", "double", 2)
        .edge("double", "panicky", 2);
    let attempts = Arc::new(AtomicUsize::new(0));
    let rt = RuntimeBuilder::new(spec, failing_registry(attempts), pools())
        .start()
        .unwrap();

    let bad = rt.submit("bad", items(16));
    match bad.await {
        Err(JobError::Failed {
            node,
            partition,
            message,
            ..
        }) => {
            assert_eq!((node.as_str(), partition), ("check", 13));
            assert_eq!(message, "value 13 is unlucky");
        }
        other => panic!("expected a failure, got {other:?}"),
    }

    let good = rt.submit("good", items(8)).await.unwrap();
    assert_eq!(good.partitions[7].item.value, 14);

    rt.idle().await;
    let status = rt.status();
    assert_eq!(status.items_in_flight, 0);
    assert_eq!(status.jobs_running, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_stage_fails_only_its_job() {
    let spec = GraphSpec::new("p")
        .node(NodeSpec::new("panicky", "panicky", "P").pool("a"))
        .edge(SOURCE, "panicky", 1);
    let rt = RuntimeBuilder::new(spec, failing_registry(Arc::default()), pools())
        .start()
        .unwrap();
    let mut boom = items(3);
    boom[2].value = 99;
    let err = rt.submit("boom", boom).await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("partition 2 failed in stage `panicky`"),
        "{text}"
    );
    assert!(text.contains("item 99 exploded"), "{text}");
    rt.submit("fine", items(3)).await.unwrap();
}

fn arena_graph(workers: usize) -> (GraphSpec, StageRegistry<Item>, Arc<Latch>) {
    let latch = Arc::new(Latch::default());
    let stages = StageRegistry::new()
        .with("fill", |item: &mut Item, cx: &mut StageContext<'_>| {
            let arena = cx.arena()?;
            let mut layout = LayoutBuilder::new();
            let region = layout.push::<u64>(1024 + item.value as usize);
            arena.ensure_capacity(layout.total_bytes())?;
            arena.view().take(region).fill(item.value);
            Ok(())
        })
        .with("hold", {
            let latch = latch.clone();
            move |_: &mut Item, cx: &mut StageContext<'_>| {
                latch.wait();
                cx.check_cancelled()?;
                Ok(())
            }
        });
    let spec = GraphSpec::new("arenas")
        .node(
            NodeSpec::new("fill", "fill", "FILL")
                .pool("a")
                .workers(workers)
                .takes("arena"),
        )
        .node(
            NodeSpec::new("hold", "hold", "HOLD")
                .pool("b")
                .workers(workers),
        )
        .edge(SOURCE, "fill", 1)
        .edge("fill", "hold", 4)
        .resource(ResourceSpec::arena("arena"));
    (spec, stages, latch)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_job_releases_its_arenas() {
    let (spec, stages, latch) = arena_graph(2);
    let pool = ArenaPool::new(3, 1 << 26, None);
    let rt = RuntimeBuilder::new(spec, stages, pools())
        .arenas(pool.clone())
        .start()
        .unwrap();
    let job = rt.submit("held", items(10));
    eventually("every arena to be leased", || pool.stats().in_use == 3).await;
    let canceller = job.canceller();
    canceller.cancel();
    assert!(matches!(job.await, Err(JobError::Cancelled)));
    latch.open();
    tokio::time::timeout(Duration::from_secs(10), rt.idle())
        .await
        .expect("items drain");
    assert_eq!(pool.stats().in_use, 0, "every arena came back");
    // And the engine still proves the next job with them.
    let out = rt.submit("next", items(5)).await.unwrap();
    assert_eq!(out.partitions.len(), 5);
    assert_eq!(pool.stats().in_use, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_arena_pool_never_allocates_past_its_size() {
    let (spec, stages, latch) = arena_graph(3);
    latch.open();
    let pool = ArenaPool::new(2, 1 << 26, None);
    let rt = RuntimeBuilder::new(spec, stages, pools())
        .arenas(pool.clone())
        .start()
        .unwrap();
    let jobs: Vec<_> = (0..30)
        .map(|i| rt.submit(&format!("j{i}"), items(4)))
        .collect();
    for job in jobs {
        job.await.unwrap();
    }
    let stats = pool.stats();
    assert_eq!(
        stats.created, 2,
        "30 jobs x 4 partitions reuse the same two arenas"
    );
    assert_eq!(stats.peak_in_use, 2);
    assert_eq!(stats.in_use, 0);
    assert!(stats.mapped_bytes <= 2 * (2 << 20), "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_device_edges_keep_items_on_their_device_and_locks_serialise() {
    let running = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let overlap = Arc::new(AtomicUsize::new(0));
    let record = |item: &mut Item, cx: &mut StageContext<'_>| {
        item.devices.push(cx.device);
        Ok(())
    };
    let stages = StageRegistry::new()
        .with("stage_in", record)
        .with("compute", {
            let (running, overlap) = (running.clone(), overlap.clone());
            move |item: &mut Item, cx: &mut StageContext<'_>| {
                let d = cx.device.unwrap();
                if running[d].fetch_add(1, Ordering::SeqCst) > 0 {
                    overlap.fetch_add(1, Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(2));
                running[d].fetch_sub(1, Ordering::SeqCst);
                item.devices.push(cx.device);
                Ok(())
            }
        });
    let spec = GraphSpec::new("dev")
        .node(
            NodeSpec::new("stage_in", "stage_in", "STAGE")
                .pool("a")
                .workers(2)
                .per_device(),
        )
        .node(
            NodeSpec::new("compute", "compute", "GPU")
                .pool("b")
                .workers(2)
                .per_device()
                .holds("compute_lock"),
        )
        .edge(SOURCE, "stage_in", 2)
        .edge("stage_in", "compute", 1)
        .resource(ResourceSpec::lock("compute_lock").per_device());
    let rt = RuntimeBuilder::new(spec, stages, pools())
        .devices(2)
        .start()
        .unwrap();
    let out = rt.submit("d", items(40)).await.unwrap();
    let mut used = [0; 2];
    for p in &out.partitions {
        let [a, b] = p.item.devices[..] else { panic!() };
        assert_eq!(a, b, "an item stays on the device that staged it");
        used[a.unwrap()] += 1;
    }
    assert!(
        used[0] > 0 && used[1] > 0,
        "both devices took work: {used:?}"
    );
    assert_eq!(
        overlap.load(Ordering::SeqCst),
        0,
        "the per-device lock serialises compute"
    );
    assert_eq!(rt.status().nodes[1].workers, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_the_chain_and_later_jobs_are_refused() {
    let spec = GraphSpec::new("s")
        .node(
            NodeSpec::new("check", "check", "CHECK")
                .pool("a")
                .workers(2),
        )
        .node(NodeSpec::new("double", "double", "DOUBLE").pool("b"))
        .edge(SOURCE, "check", 2)
        .edge("check", "double", 2);
    let rt = RuntimeBuilder::new(spec, failing_registry(Arc::default()), pools())
        .start()
        .unwrap();
    let job = rt.submit("before", items(5));
    tokio::time::timeout(Duration::from_secs(10), rt.shutdown())
        .await
        .expect("every worker exits once its input closes");
    assert_eq!(
        job.await.unwrap().partitions.len(),
        5,
        "items in flight finish"
    );
    assert!(matches!(
        rt.submit("after", items(1)).await,
        Err(JobError::Shutdown)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn higher_priority_jobs_overtake_queued_ones() {
    let latch = Arc::new(Latch::default());
    let order = Arc::new(Mutex::new(vec![]));
    let stages = StageRegistry::new().with("work", {
        let (latch, order) = (latch.clone(), order.clone());
        move |item: &mut Item, _: &mut StageContext<'_>| {
            latch.wait();
            order.lock().unwrap().push(item.value);
            Ok(())
        }
    });
    let spec = GraphSpec::new("prio")
        .node(NodeSpec::new("work", "work", "WORK").pool("a"))
        .edge(SOURCE, "work", 1);
    let rt = RuntimeBuilder::new(spec, stages, pools()).start().unwrap();
    let item = |value| {
        vec![Item {
            value,
            devices: vec![],
        }]
    };
    let mut jobs = vec![];
    for v in 0..5 {
        jobs.push(rt.submit_with_priority("low", item(v), 1));
        // The first job's partition is running and the second's fills the
        // entry edge before the next is submitted.
        let expected = (v + 1).min(2) as usize;
        eventually("the graph to fill", || {
            rt.status().items_in_flight == expected
        })
        .await;
    }
    jobs.push(rt.submit_with_priority("high", item(100), 3));
    assert_eq!(
        rt.status().jobs_queued,
        4,
        "three low jobs and the high one wait"
    );
    assert_eq!(rt.status().jobs_queued_by_priority[3], 1);
    latch.open();
    for job in jobs {
        job.await.unwrap();
    }
    assert_eq!(
        *order.lock().unwrap(),
        [0, 1, 100, 2, 3, 4],
        "the high job enters as soon as the entry edge has room"
    );
}

/// A device slot that counts how often it was handed out.
struct Slot {
    uses: usize,
}
impl cuzk_engine::DeviceSlot for Slot {}
struct SlotMaker;
impl cuzk_engine::LeaseProvider for SlotMaker {
    fn create(&self, _: &str, _: usize) -> anyhow::Result<Box<dyn cuzk_engine::DeviceSlot>> {
        Ok(Box::new(Slot { uses: 0 }))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_leases_bound_each_device_and_go_back_at_the_releasing_node() {
    const LEASES: usize = 2;
    let peak = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let holding = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let stages = StageRegistry::new()
        .with("stage_in", {
            let (peak, holding) = (peak.clone(), holding.clone());
            move |_: &mut Item, cx: &mut StageContext<'_>| {
                let d = cx.device.unwrap();
                let now = holding[d].fetch_add(1, Ordering::SeqCst) + 1;
                peak[d].fetch_max(now, Ordering::SeqCst);
                cx.device_slot::<Slot>()?.uses += 1;
                Ok(())
            }
        })
        .with("compute", {
            let holding = holding.clone();
            move |item: &mut Item, cx: &mut StageContext<'_>| {
                std::thread::sleep(Duration::from_millis(3));
                anyhow::ensure!(cx.device_slot::<Slot>()?.uses > 0, "the slot travelled");
                holding[cx.device.unwrap()].fetch_sub(1, Ordering::SeqCst);
                item.devices.push(cx.device);
                Ok(())
            }
        })
        .with("tail", |_: &mut Item, cx: &mut StageContext<'_>| {
            anyhow::ensure!(!cx.has_device_lease(), "released before the tail");
            Ok(())
        });
    let spec = GraphSpec::new("leases")
        .resource(ResourceSpec::device_lease("vram").size(LEASES))
        .node(
            NodeSpec::new("stage_in", "stage_in", "STAGE")
                .pool("a")
                .workers(3)
                .per_device()
                .takes("vram"),
        )
        .node(
            NodeSpec::new("compute", "compute", "GPU")
                .pool("b")
                .workers(2)
                .per_device()
                .releases("vram"),
        )
        .node(NodeSpec::new("tail", "tail", "TAIL").pool("b"))
        .edge(SOURCE, "stage_in", 4)
        .edge("stage_in", "compute", 4)
        .edge("compute", "tail", 4);
    let rt = RuntimeBuilder::new(spec, stages, pools())
        .devices(2)
        .leases(Arc::new(SlotMaker))
        .start()
        .unwrap();
    let out = rt.submit("l", items(60)).await.unwrap();
    assert_eq!(out.partitions.len(), 60);
    for d in 0..2 {
        assert!(
            peak[d].load(Ordering::SeqCst) <= LEASES,
            "at most {LEASES} partitions hold a lease on device {d}"
        );
    }
    let leases = rt.status().leases;
    assert_eq!(leases.len(), 2);
    for l in leases {
        assert_eq!(l.in_use, 0, "{l:?}");
        assert!(l.created <= LEASES && l.peak_in_use <= LEASES, "{l:?}");
    }
}

/// A worker takes its arena before it picks an item: with every arena in
/// use, a later high-priority job is the next to get one, not a low one a
/// worker already picked and held while it waited (a WinningPoSt behind a
/// PoRep backlog: 120 s instead of 3 s in a soak before this).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_free_arena_goes_to_the_highest_priority_item() {
    let latch = Arc::new(Latch::default());
    let order = Arc::new(Mutex::new(vec![]));
    let stages = StageRegistry::new()
        .with("fill", {
            let order = order.clone();
            move |item: &mut Item, _: &mut StageContext<'_>| {
                order.lock().unwrap().push(item.value);
                Ok(())
            }
        })
        .with("hold", {
            let latch = latch.clone();
            move |_: &mut Item, _: &mut StageContext<'_>| {
                latch.wait();
                Ok(())
            }
        });
    let spec = GraphSpec::new("arena-priority")
        .node(
            NodeSpec::new("fill", "fill", "FILL")
                .pool("a")
                .workers(2)
                .takes("arena"),
        )
        .node(NodeSpec::new("hold", "hold", "HOLD").pool("b"))
        .edge(SOURCE, "fill", 1)
        .edge("fill", "hold", 4)
        .resource(ResourceSpec::arena("arena"));
    let rt = RuntimeBuilder::new(spec, stages, pools())
        .arenas(ArenaPool::new(1, 1 << 26, None))
        .start()
        .unwrap();
    let item = |value| {
        vec![Item {
            value,
            devices: vec![],
        }]
    };
    let mut jobs = vec![rt.submit_with_priority("low0", item(0), 1)];
    eventually("the first job to hold the only arena", || {
        order.lock().unwrap().len() == 1
    })
    .await;
    jobs.push(rt.submit_with_priority("low1", item(1), 1));
    jobs.push(rt.submit_with_priority("low2", item(2), 1));
    eventually("the entry edge to fill", || {
        rt.status().items_in_flight >= 2
    })
    .await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    jobs.push(rt.submit_with_priority("high", item(100), 3));
    tokio::time::sleep(Duration::from_millis(50)).await;
    latch.open();
    for job in jobs {
        job.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), [0, 1, 100, 2]);
}

/// The express lane: with a backlog filling every edge and every worker
/// blocked on a full edge, a CRITICAL job enters at once, is taken by each
/// node's express worker and gets the device lock next: only the stage a
/// device is running when it comes runs before it. Without the lane it came
/// third, behind the item in the full edge too (one more item for every
/// edge and every blocked worker of a longer graph). And it keeps the lock
/// from its first device stage to its second: released in between, the
/// lock went to a PoRep stage already waiting for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_critical_job_overtakes_a_backlog_held_in_full_edges() {
    let log = Arc::new(Mutex::new(Vec::<(&str, u64)>::new()));
    let device_stage = |name: &'static str, ms: u64| {
        let log = log.clone();
        move |item: &mut Item, _: &mut StageContext<'_>| {
            log.lock().unwrap().push((name, item.value));
            std::thread::sleep(Duration::from_millis(ms));
            Ok(())
        }
    };
    let stages = StageRegistry::new()
        .with("prep", |_: &mut Item, _: &mut StageContext<'_>| {
            std::thread::sleep(Duration::from_millis(20));
            Ok(())
        })
        .with("ntt", device_stage("ntt", 300))
        .with("g2", device_stage("g2", 100));
    let spec = GraphSpec::new("express")
        .node(NodeSpec::new("prep", "prep", "PREP").pool("a"))
        .node(NodeSpec::new("ntt", "ntt", "GPU").pool("b").holds("device"))
        .node(NodeSpec::new("g2", "g2", "B_G2").pool("b").holds("device"))
        .edge(SOURCE, "prep", 1)
        .edge("prep", "ntt", 1)
        .edge("ntt", "g2", 1)
        .resource(ResourceSpec::lock("device"));
    let rt = RuntimeBuilder::new(spec, stages, pools()).start().unwrap();
    let item = |value| {
        vec![Item {
            value,
            devices: vec![],
        }]
    };
    let mut jobs: Vec<_> = (0..10)
        .map(|i| rt.submit_with_priority(&format!("porep{i}"), item(i), 2))
        .collect();
    eventually("the backlog to fill the graph", || {
        rt.status().items_in_flight >= 6
    })
    .await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let ntt_before = log.lock().unwrap().iter().filter(|e| e.0 == "ntt").count();
    jobs.push(rt.submit_with_priority("winning", item(100), CRITICAL as u8));
    for job in jobs {
        job.await.unwrap();
    }
    let log = log.lock().unwrap();
    let ntt: Vec<u64> = log.iter().filter(|e| e.0 == "ntt").map(|e| e.1).collect();
    assert_eq!(
        ntt.iter().position(|&v| v == 100),
        Some(ntt_before),
        "the critical job is next on the device after the stage running ({log:?})"
    );
    let first = log.iter().position(|&e| e == ("ntt", 100)).unwrap();
    assert_eq!(
        log[first + 1],
        ("g2", 100),
        "no stage runs between its two device stages ({log:?})"
    );
}

/// Where device work runs on CPU pools (the CPU backend), express workers
/// skip the device lock and the leases' bound: a CRITICAL job runs both its
/// device stages while a bulk item's device stage holds the lock and the
/// only lease, instead of waiting it out. The
/// bulk stage here blocks until the critical job has finished, so the job
/// finishing at all shows it never waited for the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_interlocks_a_critical_job_runs_beside_a_stage_holding_the_lock() {
    let latch = Arc::new(Latch::default());
    let ran = Arc::new(Mutex::new(Vec::<(&str, u64)>::new()));
    let device_stage = |name: &'static str| {
        let (latch, ran) = (latch.clone(), ran.clone());
        move |item: &mut Item, _: &mut StageContext<'_>| {
            ran.lock().unwrap().push((name, item.value));
            if item.value != 100 {
                latch.wait();
            }
            Ok(())
        }
    };
    let stages = StageRegistry::new()
        .with("ntt", device_stage("ntt"))
        .with("g2", device_stage("g2"));
    let spec = GraphSpec::new("past")
        .node(
            // A second worker sits idle: it may pick the critical job
            // before the express worker does, and must let it past too.
            NodeSpec::new("ntt", "ntt", "GPU")
                .pool("b")
                .workers(2)
                .per_device()
                .takes("mem")
                .holds("device"),
        )
        .node(
            NodeSpec::new("g2", "g2", "B_G2")
                .pool("b")
                .per_device()
                .holds("device")
                .releases("mem"),
        )
        .edge(SOURCE, "ntt", 1)
        .edge("ntt", "g2", 1)
        .resource(ResourceSpec::device_lease("mem").size(1))
        .resource(ResourceSpec::lock("device").per_device());
    let pools = pools().with(cuzk_engine::pool::EXPRESS, 2).unwrap();
    let rt = RuntimeBuilder::new(spec, stages, pools)
        .express_past_interlocks(true)
        .start()
        .unwrap();
    let item = |value| {
        vec![Item {
            value,
            devices: vec![],
        }]
    };
    let bulk = rt.submit_with_priority("porep", item(1), 2);
    eventually("the bulk item to hold the lock in its device stage", || {
        ran.lock().unwrap().contains(&("ntt", 1))
    })
    .await;
    let critical = rt.submit_with_priority("winning", item(100), CRITICAL as u8);
    tokio::time::timeout(Duration::from_secs(10), critical)
        .await
        .expect("the critical job finishes while the bulk stage holds the lock")
        .unwrap();
    assert_eq!(
        *ran.lock().unwrap(),
        [("ntt", 1), ("ntt", 100), ("g2", 100)],
        "the critical job's device stages ran beside the bulk one"
    );
    latch.open();
    bulk.await.unwrap();
}

/// Device memory of a toy device: `units` buffers, taken at stage_in and
/// given back when the lease goes back (at compute here), with a watch that
/// changes on every release.
struct ToyMemory {
    free: Mutex<usize>,
    freed: tokio::sync::watch::Sender<u64>,
    busy_answers: AtomicUsize,
}

impl ToyMemory {
    fn take(&self, device: usize) -> anyhow::Result<()> {
        let mut free = self.free.lock().unwrap();
        if *free == 0 {
            self.busy_answers.fetch_add(1, Ordering::SeqCst);
            // Subscribed under the lock releases take: no release is missed.
            return Err(cuzk_engine::DeviceBusy {
                device,
                message: "no buffer free".into(),
                freed: Some(self.freed.subscribe()),
            }
            .into());
        }
        *free -= 1;
        Ok(())
    }
    fn give_back(&self) {
        *self.free.lock().unwrap() += 1;
        self.freed.send_modify(|n| *n += 1);
    }
}

/// Counts the partitions that waited for device memory.
#[derive(Default)]
struct MemoryWaits(AtomicUsize);
impl cuzk_engine::Observer for MemoryWaits {
    fn on_event(&self, e: &cuzk_engine::Event<'_>) {
        if let cuzk_engine::EventKind::WaitEnd {
            wait: cuzk_engine::Wait::Resource(r),
            ..
        } = e.kind
            && r == "device memory"
        {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// More leases than the device's memory holds buffers (a 32 GiB partition's
/// buffers beside a resident SRS): a partition that finds none free waits
/// for one and goes on, instead of failing as a device fault. Every
/// partition completes, none fails or is retried, the device is never
/// quarantined, and the waits are reported as waits on device memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_device_defers_partitions_until_its_memory_is_freed() {
    const BUFFERS: usize = 1;
    let memory = Arc::new(ToyMemory {
        free: Mutex::new(BUFFERS),
        freed: tokio::sync::watch::channel(0).0,
        busy_answers: AtomicUsize::new(0),
    });
    let holding = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let stages = StageRegistry::new()
        .with("stage_in", {
            let (memory, holding, peak) = (memory.clone(), holding.clone(), peak.clone());
            move |_: &mut Item, cx: &mut StageContext<'_>| {
                memory.take(cx.device.unwrap())?;
                let now = holding.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                Ok(())
            }
        })
        .with("compute", {
            let (memory, holding) = (memory.clone(), holding.clone());
            move |item: &mut Item, cx: &mut StageContext<'_>| {
                std::thread::sleep(Duration::from_millis(20));
                holding.fetch_sub(1, Ordering::SeqCst);
                memory.give_back();
                item.devices.push(cx.device);
                Ok(())
            }
        });
    let waits = Arc::new(MemoryWaits::default());
    let spec = GraphSpec::new("busy")
        .resource(ResourceSpec::device_lease("vram").size(3))
        .resource(ResourceSpec::lock("gpu").per_device())
        .node(
            NodeSpec::new("stage_in", "stage_in", "GPU")
                .pool("a")
                .workers(3)
                .per_device()
                .takes("vram")
                .holds("gpu"),
        )
        .node(
            NodeSpec::new("compute", "compute", "GPU")
                .pool("b")
                .workers(3)
                .per_device()
                .holds("gpu")
                .releases("vram"),
        )
        .edge(SOURCE, "stage_in", 4)
        .edge("stage_in", "compute", 4);
    let rt = RuntimeBuilder::new(spec, stages, pools())
        .devices(1)
        .leases(Arc::new(SlotMaker))
        .observer(waits.clone())
        .start()
        .unwrap();
    let out = rt.submit("busy", items(12)).await.unwrap();
    assert_eq!(out.partitions.len(), 12, "every partition completed");
    assert_eq!(
        peak.load(Ordering::SeqCst),
        BUFFERS,
        "never more buffers than the device has"
    );
    let busy = memory.busy_answers.load(Ordering::SeqCst);
    assert!(
        busy > 0,
        "the device said busy (the test exercises the wait)"
    );
    assert_eq!(
        waits.0.load(Ordering::SeqCst),
        busy,
        "each busy answer is one wait"
    );
    let status = rt.status();
    assert!(status.quarantined_devices.is_empty(), "busy is not a fault");
    for n in &status.nodes {
        assert_eq!((n.failed, n.retried), (0, 0), "{n:?}");
    }
}
