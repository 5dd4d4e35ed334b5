use super::*;

fn three() -> GraphSpec {
    GraphSpec::new("t")
        .node(NodeSpec::new("a", "a", "A"))
        .node(NodeSpec::new("b", "b", "B").workers(2))
        .node(NodeSpec::new("c", "c", "C"))
        .edge(SOURCE, "a", 1)
        .edge("a", "b", 2)
        .edge("b", "c", 3)
}

#[test]
fn chain_order_follows_edges_not_declaration_order() {
    let mut g = three();
    g.nodes.reverse();
    let chain = g.validate().unwrap();
    let names: Vec<_> = chain
        .order
        .iter()
        .map(|&i| g.nodes[i].name.as_str())
        .collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert_eq!(chain.capacity_in, [1, 2, 3]);
}

#[test]
fn rejects_zero_capacity_naming_the_edge() {
    let mut g = three();
    g.edges[1].capacity = 0;
    let err = g.validate().unwrap_err();
    assert_eq!(
        err.to_string(),
        "graph `t`: edge a -> b has capacity 0; it must be at least 1"
    );
}

#[test]
fn rejects_unreachable_fan_out_and_edges_to_nowhere() {
    let g = three().node(NodeSpec::new("d", "d", "D"));
    assert!(matches!(g.validate(), Err(GraphError::Unreachable { node, .. }) if node == "d"));
    let g = three().node(NodeSpec::new("d", "d", "D")).edge("a", "d", 1);
    assert!(matches!(g.validate(), Err(GraphError::NotAChain { node, .. }) if node == "a"));
    let err = three().edge("c", "nowhere", 1).validate().unwrap_err();
    assert_eq!(
        err.to_string(),
        "graph `t`: edge c -> nowhere leads to nowhere: there is no node `nowhere`"
    );
}

#[test]
fn rejects_cycle_and_missing_entry() {
    let g = three().edge("c", "a", 1);
    assert!(
        matches!(g.validate(), Err(GraphError::Cycle { .. })),
        "{:?}",
        g.validate()
    );
    let mut g = three();
    g.edges.remove(0);
    assert!(matches!(g.validate(), Err(GraphError::NoEntry { .. })));
}

#[test]
fn resources_are_checked() {
    let g = three()
        .resource(ResourceSpec::lock("lock").per_device())
        .resource(ResourceSpec::lock("glock"));
    let mut bad = g.clone();
    bad.nodes[1].holds.push("lock".into());
    bad.nodes[0].holds.push("glock".into());
    assert!(matches!(
        bad.validate(),
        Err(GraphError::DeviceScope { .. })
    ));
    bad.nodes[1].placement = Placement::PerDevice;
    bad.validate().unwrap();
    let mut bad = g.clone();
    bad.nodes[0].waits_for.push("glock".into());
    bad.nodes[1].placement = Placement::PerDevice;
    bad.nodes[1].holds.push("lock".into());
    assert!(matches!(bad.validate(), Err(GraphError::WrongUse { .. })));
    let mut bad = g.clone();
    bad.nodes[0].holds.push("nope".into());
    let err = bad.validate().unwrap_err().to_string();
    assert!(
        err.contains("resource `nope`, which the graph does not declare (declared: glock, lock)"),
        "{err}"
    );
    // Declared and never used is a typo somewhere.
    assert!(matches!(
        g.validate(),
        Err(GraphError::UnusedResource { .. })
    ));
    let zero = three()
        .resource(ResourceSpec::semaphore("s", 0))
        .validate()
        .unwrap_err();
    assert!(zero.to_string().contains("at least 1"), "{zero}");
}

fn pooled() -> GraphSpec {
    GraphSpec::new("p")
        .resource(ResourceSpec::arena("arena"))
        .resource(ResourceSpec::device_lease("vram"))
        .node(NodeSpec::new("a", "a", "A").workers(2).takes("arena"))
        .node(NodeSpec::new("b", "b", "B").per_device().takes("vram"))
        .node(
            NodeSpec::new("c", "c", "C")
                .per_device()
                .workers(3)
                .releases("vram"),
        )
        .node(NodeSpec::new("d", "d", "D"))
        .edge(SOURCE, "a", 1)
        .edge("a", "b", 2)
        .edge("b", "c", 4)
        .edge("c", "d", 5)
}

#[test]
fn pooled_resources_are_taken_before_released_and_leases_stay_on_a_device() {
    pooled().validate().unwrap();
    let mut g = pooled();
    g.nodes[2].releases.clear();
    let err = g.validate().unwrap_err().to_string();
    assert!(
        err.contains("device lease `vram` taken at `b` is still carried at `d`"),
        "{err}"
    );
    let mut g = pooled();
    g.nodes[0].releases.push("vram".into());
    assert!(matches!(g.validate(), Err(GraphError::DeviceScope { .. })));
    let mut g = pooled();
    g.nodes[1].takes.clear();
    g.nodes[1].holds.push("vram".into());
    assert!(matches!(g.validate(), Err(GraphError::WrongUse { .. })));
}

#[test]
fn in_flight_bounds_count_workers_and_edges_from_the_first_taker() {
    let g = pooled();
    // a: 2 workers; b: 1 per device; c: 3 per device; d: 1.
    // Edges after a: a->b (2, shared side), b->c (4 per device), c->d (5).
    assert_eq!(g.max_in_flight(1), Some(2 + 1 + 3 + 1 + 2 + 4 + 5));
    assert_eq!(g.max_in_flight(2), Some(2 + 2 + 6 + 1 + 2 + 8 + 5));
    // One device's lease span: b and c's workers and the edge between them.
    assert_eq!(g.lease_in_flight("vram"), Some(1 + 3 + 4));
    assert_eq!(three().max_in_flight(1), None, "no arena taken");
}
