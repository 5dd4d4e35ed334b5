use super::*;
use cuzk_engine::{Placement, Role};

fn config(variant: &str) -> Config {
    let mut c = Config::default();
    c.pipeline.variant = variant.into();
    c
}

#[test]
fn every_builtin_declares_a_valid_chain() {
    for name in builtin_names() {
        let g = graph(&config(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(g.name, name);
        assert!(!g.description.is_empty(), "{name} says what it does");
        let chain = g.validate().unwrap();
        let first = &g.nodes[chain.order[0]];
        let last = &g.nodes[*chain.order.last().unwrap()];
        assert_eq!((first.name.as_str(), first.role), ("synth", Role::Synth));
        assert_eq!(last.name, "assemble");
        assert!(g.max_in_flight(1).is_some(), "{name} takes an arena");
        assert!(
            g.nodes.iter().any(|n| n.role == Role::Device),
            "{name} has device work"
        );
    }
}

#[test]
fn variants_differ_in_their_declarations() {
    let serial = graph(&config("serial")).unwrap();
    let gpu = serial.node_named("gpu_ntt_msm").unwrap();
    assert_eq!((gpu.workers, gpu.placement), (1, Placement::PerDevice));
    assert_eq!(serial.node_named("b_g2_msm").unwrap().holds, ["device"]);
    let single = graph(&config("single_lock")).unwrap();
    let gpu = single.node_named("gpu_ntt_msm").unwrap();
    assert_eq!(
        (gpu.workers, gpu.holds.as_slice()),
        (2, &["gpu_lock".to_string()][..])
    );
    let two = graph(&config("two_lock")).unwrap();
    assert_eq!(two.node_named("gpu_stage").unwrap().holds, ["gpu_mem_lock"]);
    assert_eq!(two.node_named("gpu_stage").unwrap().role, Role::Transfer);
    assert_eq!(
        two.node_named("gpu_compute").unwrap().holds,
        ["gpu_compute_lock"]
    );
    let throttled = graph(&config("throttled")).unwrap();
    assert_eq!(
        throttled.node_named("synth").unwrap().waits_for,
        ["synth_throttle"]
    );
    assert_eq!(
        throttled.node_named("b_g2_msm").unwrap().holds,
        ["gpu_lock", "synth_throttle"]
    );
    let cpu_b2 = graph(&config("single_lock_cpu_b2")).unwrap();
    let b2 = cpu_b2.node_named("b_g2_msm").unwrap();
    assert_eq!(
        (b2.stage.as_str(), b2.placement),
        ("b_g2_msm_host", Placement::Shared)
    );
    assert_eq!(
        cpu_b2.node_named("gpu_ntt_msm").unwrap().releases,
        ["device_mem"]
    );
}

#[test]
fn the_config_overrides_workers_and_capacities_and_typos_are_named() {
    let mut c = config("two_lock");
    c.channels.default = 3;
    c.channels.into.insert("gpu_compute".into(), 1);
    c.stages.insert(
        "gpu_compute".into(),
        cuzk_config::StageConfig { workers: 5 },
    );
    let g = graph(&c).unwrap();
    let cap = |to: &str| g.edges.iter().find(|e| e.to == to).unwrap().capacity;
    assert_eq!((cap("synth"), cap("gpu_compute")), (3, 1));
    assert_eq!(g.node_named("gpu_compute").unwrap().workers, 5);
    c.channels.into.insert("gpu_compte".into(), 1);
    let err = graph(&c).unwrap_err().to_string();
    assert!(
        err.starts_with(
            "config error at `channels.into.gpu_compte`: graph `two_lock` has no such node"
        ),
        "{err}"
    );
    let mut c = config("serial");
    c.stages
        .insert("synthh".into(), cuzk_config::StageConfig { workers: 2 });
    let err = graph(&c).unwrap_err().to_string();
    assert!(err.starts_with("config error at `stages.synthh`"), "{err}");
}

#[test]
fn an_unknown_variant_lists_the_builtins() {
    let err = graph(&config("quad_lock")).unwrap_err().to_string();
    assert!(
        err.contains("quad_lock") && err.contains("serial, single_lock"),
        "{err}"
    );
    assert!(err.contains("pipeline.graph"), "{err}");
}

#[test]
fn a_declaration_prints_and_reads_back_the_same() {
    for name in builtin_names() {
        let g = graph(&config(name)).unwrap();
        let text = Declaration::of(&g).to_toml();
        assert!(is_declaration(&text));
        let back = parse(&text, "printed", &Config::default()).unwrap();
        assert_eq!(back, g, "{name}:\n{text}");
    }
    assert!(!is_declaration("[pipeline]\nvariant = \"serial\""));
}

/// The serial declaration with one edit, parsed from a named file.
fn broken(from: &str, to: &str) -> String {
    let text = builtin("serial").unwrap();
    assert!(text.contains(from), "{from}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mine.toml");
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
    let err = load_file(&path, &Config::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("mine.toml"), "names the file: {err}");
    err
}

#[test]
fn each_bad_declaration_names_what_is_wrong() {
    let cases = [
        (
            "stage = \"prep_msm\"",
            "stage = \"prep_msn\"",
            "uses stage `prep_msn`, which is not registered",
        ),
        (
            "holds = [\"device\"]",
            "holds = [\"devic\"]",
            "refers to resource `devic`, which the graph does not declare",
        ),
        (
            "to = \"assemble\"",
            "to = \"asemble\"",
            "leads to nowhere: there is no node `asemble`",
        ),
        (
            "workers = 2\npool = \"groth16\"",
            "workers = 0\npool = \"groth16\"",
            "node `prep_msm` has workers = 0",
        ),
        (
            "from = \"b_g2_msm\"\nto = \"assemble\"",
            "from = \"b_g2_msm\"\nto = \"assemble\"\ncapacity = 0",
            "edge b_g2_msm -> assemble has capacity 0",
        ),
        (
            "pool = \"groth16\"",
            "pool = \"gpu\"",
            "runs on pool `gpu`, which does not exist",
        ),
        (
            "workers = 1\npool = \"groth16\"",
            "pool = \"groth16\"",
            "node `assemble` needs `workers`",
        ),
        (
            "name = \"serial\"",
            "nme = \"serial\"",
            "not a graph declaration",
        ),
        (
            "releases = [\"device_mem\"]",
            "",
            "device lease `device_mem` taken at `gpu_ntt_msm` is still carried at `assemble`",
        ),
    ];
    for (from, to, want) in cases {
        let err = broken(from, to);
        assert!(err.contains(want), "{want}:\n{err}");
    }
    // A cycle: the last node feeds the first.
    let err = broken(
        "from = \"b_g2_msm\"\nto = \"assemble\"",
        "from = \"b_g2_msm\"\nto = \"assemble\"\n\n[[edge]]\nfrom = \"assemble\"\nto = \"synth\"",
    );
    assert!(err.contains("form a cycle"), "{err}");
}
