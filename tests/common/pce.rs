//! Pre-compiled constraints against full synthesis: run circuits through
//! a graph of one synthesis stage and capture what it left in the arena.

use std::sync::{Arc, Mutex};

use blstrs::Scalar;
use cuzk::runtime::{
    ArenaPool, CpuPools, GraphSpec, NodeSpec, ResourceSpec, Role, RuntimeBuilder, SOURCE, Stage,
    StageContext,
};
use cuzk::stages::pce::PceCache;
use cuzk::stages::{PartitionWork, ProvableCircuit, Srs};

/// What synthesis left in a partition's arena.
#[derive(Clone, Debug, PartialEq)]
pub struct Captured {
    pub a: Vec<[u64; 4]>,
    pub b: Vec<[u64; 4]>,
    pub c: Vec<[u64; 4]>,
    pub z: Vec<[u64; 4]>,
    pub densities: [Vec<u64>; 3],
    pub public_inputs: Vec<Scalar>,
    pub constraints: usize,
}

/// Copies the arena's regions out, by partition.
pub struct Capture(Arc<Mutex<Vec<(usize, Captured)>>>);

impl Stage<PartitionWork> for Capture {
    fn run(&self, w: &mut PartitionWork, cx: &mut StageContext<'_>) -> anyhow::Result<()> {
        let layout = w.layout()?;
        let partition = cx.partition;
        let view = cx.arena()?.view();
        let captured = Captured {
            a: view.take(layout.a).to_vec(),
            b: view.take(layout.b).to_vec(),
            c: view.take(layout.c).to_vec(),
            z: view.take(layout.z).to_vec(),
            densities: [
                view.take(layout.a_aux_density).to_vec(),
                view.take(layout.b_input_density).to_vec(),
                view.take(layout.b_aux_density).to_vec(),
            ],
            public_inputs: w.public_inputs.clone(),
            constraints: w.constraints,
        };
        self.0.lock().unwrap().push((partition, captured));
        Ok(())
    }
}

/// Synthesizes `circuits` through a graph of `synth_stage` then a capture,
/// returning each partition's arena contents and its `pce` note, in order.
pub async fn synthesize(
    synth_stage: &str,
    cache: Arc<PceCache>,
    srs: &Arc<Srs>,
    circuits: Vec<Box<dyn ProvableCircuit>>,
) -> Vec<(Captured, Option<String>)> {
    synthesize_noted(
        synth_stage,
        "pce",
        cuzk::stages::cpu_stages(cache),
        srs,
        circuits,
    )
    .await
    .into_iter()
    .map(|(c, notes)| (c, notes[0].clone()))
    .collect()
}

/// [`synthesize`] with the stages given and every note named in `keys`
/// (comma-separated) of each partition's synthesis.
pub async fn synthesize_noted(
    synth_stage: &str,
    keys: &str,
    mut stages: cuzk::runtime::StageRegistry<PartitionWork>,
    srs: &Arc<Srs>,
    circuits: Vec<Box<dyn ProvableCircuit>>,
) -> Vec<(Captured, Vec<Option<String>>)> {
    let captured = Arc::new(Mutex::new(vec![]));
    stages.register("capture", Arc::new(Capture(captured.clone())));
    let spec = GraphSpec::new("synth")
        .resource(ResourceSpec::arena("arena"))
        .node(
            NodeSpec::new("synth", synth_stage, "SYNTH")
                .role(Role::Synth)
                .pool("groth16")
                .takes("arena"),
        )
        .node(NodeSpec::new("capture", "capture", "CAPTURE").pool("groth16"))
        .edge(SOURCE, "synth", 1)
        .edge("synth", "capture", 1);
    let pools = CpuPools::new().with("groth16", 2).unwrap();
    let rt = RuntimeBuilder::new(spec, stages, pools)
        .arenas(ArenaPool::new(3, 1 << 30, None))
        .start()
        .unwrap();
    let items = circuits
        .into_iter()
        .map(|c| PartitionWork::new(srs.clone(), c, false))
        .collect();
    let out = rt.submit("pce", items).await.unwrap();
    let notes: Vec<Vec<Option<String>>> = out
        .partitions
        .iter()
        .map(|p| {
            keys.split(',')
                .map(|k| p.timings[0].note(k).map(str::to_string))
                .collect()
        })
        .collect();
    let mut got = std::mem::take(&mut *captured.lock().unwrap());
    got.sort_by_key(|(p, _)| *p);
    got.into_iter()
        .zip(notes)
        .map(|((_, c), note)| (c, note))
        .collect()
}

/// Classic synthesis against pre-compiled constraints: recorded, from
/// memory, and from disk through a second cache.
pub async fn matches_full_synthesis(
    srs: &Arc<Srs>,
    dir: &std::path::Path,
    make: impl Fn() -> Vec<Box<dyn ProvableCircuit>>,
) {
    let classic = synthesize("synth", Arc::default(), srs, make()).await;
    let cache = Arc::new(PceCache::new(Some(dir.into())));
    let first = synthesize("synth_pce", cache.clone(), srs, make()).await;
    let second = synthesize("synth_pce", cache.clone(), srs, make()).await;
    let from_disk = synthesize(
        "synth_pce",
        Arc::new(PceCache::new(Some(dir.into()))),
        srs,
        make(),
    )
    .await;
    assert_eq!(first[0].1.as_deref(), Some("recorded"));
    assert_eq!(second[0].1.as_deref(), Some("memory"));
    assert_eq!(from_disk[0].1.as_deref(), Some("disk"));
    for run in [&first, &second, &from_disk] {
        assert_eq!(run.len(), classic.len());
        for ((got, _), (want, _)) in run.iter().zip(&classic) {
            assert!(
                got == want,
                "pre-compiled synthesis differs from full synthesis"
            );
        }
    }
    // synth_witness graphs on the GPU: a, b and c evaluated from the
    // recording and each partition's assignment equal full synthesis's, bit
    // for bit, on the host when the matrices do not fit the device (from the
    // assignment in Montgomery form, or canonical after prep_msm)...
    let recording = cache.get_or_record(srs, || None).0.expect("recorded above");
    let shape = srs.shape();
    for (want, _) in &classic {
        let mut canonical = want.z.clone();
        cuzk::stages::scalars::to_canonical(&mut canonical);
        for (z, is_canonical) in [(&want.z, false), (&canonical, true)] {
            let mut abc = [0; 3].map(|_| vec![[0u64; 4]; shape.domain]);
            let [a, b, c] = &mut abc;
            let out = [a.as_mut_slice(), b.as_mut_slice(), c.as_mut_slice()];
            cuzk::stages::gpu::evaluate_on_host(&recording, z, is_canonical, out, shape.inputs)
                .unwrap();
            assert!(
                abc == [want.a.clone(), want.b.clone(), want.c.clone()],
                "a, b, c evaluated on the host (canonical z: {is_canonical}) differ from full synthesis"
            );
        }
    }
    // ...and on the device.
    let Some(device) = gpu() else { return };
    for (want, _) in &classic {
        let d = on_device(device, &recording, &want.z, shape.domain);
        assert_eq!(d.unsatisfied, None, "the device finds every row satisfied");
        assert!(
            d.abc == [want.a.clone(), want.b.clone(), want.c.clone()],
            "a, b, c from the device differ from full synthesis"
        );
    }
}

/// The first usable GPU, or `None`, saying why.
pub fn gpu() -> Option<i32> {
    match cuzk_gpu::device::usable_device() {
        Ok(d) => Some(d.ordinal as i32),
        Err(why) => {
            eprintln!("skipping the device evaluation: {why}");
            None
        }
    }
}

/// Evaluates a, b and c on `device` from a Montgomery-form assignment `z`
/// (as synthesis leaves it; the device takes it canonical, as prep_msm
/// leaves it).
pub fn on_device(
    device: i32,
    recording: &Arc<cuzk::stages::pce::Recording>,
    z: &[[u64; 4]],
    domain: usize,
) -> cuzk::stages::gpu::DeviceEval {
    let mut z = z.to_vec();
    cuzk::stages::scalars::to_canonical(&mut z);
    cuzk::stages::gpu::evaluate_on_device(device, recording, &z, domain, 1).unwrap()
}

/// The assignment full synthesis computes for `circuit` (Montgomery form).
pub async fn assignment(srs: &Arc<Srs>, circuit: Box<dyn ProvableCircuit>) -> Vec<[u64; 4]> {
    let classic = synthesize("synth", Arc::default(), srs, vec![circuit]).await;
    classic[0].0.z.clone()
}
