//! The ledger's unit tests: lookups by name and position, eligibility, gang packing and
//! what it remembers, charging, scoring.

use super::*;
use crate::TaskPhase;

fn res(cpu: u64, gpus: u32) -> Resources {
    Resources {
        cpu_millis: cpu,
        memory_bytes: 1 << 30,
        gpus,
    }
}

fn node(name: &str, cpu: u64, gpus: u32) -> Node {
    Node {
        name: name.into(),
        allocatable: Resources {
            cpu_millis: cpu,
            memory_bytes: 64 << 30,
            gpus,
        },
        requested: Resources::zero(),
        usage: None,
        labels: vec![],
        schedulable: true,
    }
}

fn task(name: &str, gpus: u32) -> Task {
    Task {
        name: name.into(),
        role: "worker".into(),
        node: None,
        phase: TaskPhase::Pending,
        requests: res(1000, gpus),
        cpu_weight: 1.0,
        usage: None,
        eligible: None,
    }
}

/// A snapshot of `nodes` where tasks naming set 0 may only run on `allowed`.
fn restricted(nodes: Vec<Node>, allowed: &[&str]) -> Snapshot {
    let positions = nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| allowed.contains(&n.name.as_str()))
        .map(|(i, _)| i as u32)
        .collect();
    Snapshot {
        time: 0.0,
        triggers: vec![],
        nodes,
        jobs: vec![],
        node_sets: vec![crate::NodeSet {
            id: 0,
            nodes: positions,
        }],
    }
}

fn only_in_set_0(mut t: Task) -> Task {
    t.eligible = Some(0);
    t
}

#[test]
fn a_ledger_finds_nodes_by_the_names_of_its_own_snapshot_when_they_change() {
    let first = Ledger::from_nodes(&[node("a", 1000, 0), node("b", 2000, 0)]);
    let same = Ledger::from_nodes(&[node("a", 3000, 0), node("b", 4000, 0)]);
    assert!(
        Arc::ptr_eq(&first.names, &same.names),
        "the same names are shared"
    );
    assert_eq!(same.free("b").map(|r| r.cpu_millis), Some(4000));
    let swapped = Ledger::from_nodes(&[node("b", 5000, 0), node("a", 6000, 0)]);
    assert_eq!(swapped.position("a"), Some(1));
    assert_eq!(swapped.free("a").map(|r| r.cpu_millis), Some(6000));
    let fewer = Ledger::from_nodes(&[node("b", 7000, 0)]);
    assert_eq!(fewer.position("a"), None);
    assert_eq!(fewer.node_names().collect::<Vec<_>>(), ["b"]);
    assert_eq!(
        first.position("b"),
        Some(1),
        "an older ledger keeps its own names"
    );
    // Orders: the same names in the same order are one order, shared or not.
    assert_eq!(first.node_order(), same.node_order());
    assert_ne!(first.node_order(), swapped.node_order());
    assert_ne!(swapped.node_order(), fewer.node_order());
    let rebuilt = Ledger::from_nodes(&[node("a", 1, 0), node("b", 1, 0)]);
    assert_eq!(rebuilt.node_order(), first.node_order());
}

#[test]
fn a_task_fits_and_is_charged_by_position_as_by_name() {
    let mut ledger = Ledger::from_nodes(&[node("a", 1000, 1), node("b", 4000, 1)]);
    let t = task("w0", 1);
    assert_eq!(ledger.fits_task_at(0, &t), ledger.fits_task("a", &t));
    assert!(ledger.charge_task_at(1, &t));
    assert!(!ledger.fits_task_at(1, &t), "b's one GPU is taken");
    assert!(!ledger.charge_task_at(1, &t));
    assert!(!ledger.fits_task_at(7, &t), "no node at 7");
}

#[test]
fn no_helper_offers_a_node_outside_the_task_s_eligible_set() {
    // `big` would take the whole gang; the tasks may only run on the two small ones.
    let s = restricted(
        vec![
            node("big", 64000, 8),
            node("s1", 8000, 1),
            node("s2", 8000, 1),
        ],
        &["s1", "s2"],
    );
    let tasks = [only_in_set_0(task("w0", 1)), only_in_set_0(task("w1", 1))];
    let mut ledger = Ledger::new(&s);
    assert_eq!(ledger.nodes_for(&tasks[0]), ["s1", "s2"]);
    assert!(!ledger.fits_task("big", &tasks[0]));
    assert!(
        ledger.fits("big", &tasks[0].requests),
        "resources alone would fit"
    );
    assert!(!ledger.clone().charge_task("big", &tasks[0]));
    let refs: Vec<&Task> = tasks.iter().collect();
    let placed = ledger.pack_gang(&refs).unwrap();
    let mut nodes: Vec<&str> = placed.iter().map(|a| a.node.as_str()).collect();
    nodes.sort();
    assert_eq!(nodes, ["s1", "s2"]);
    // A third task has nowhere left to go, though `big` is empty.
    let third = only_in_set_0(task("w2", 1));
    assert!(ledger.pack_gang(&[&third]).is_none());
    assert_eq!(ledger.free("big").unwrap().gpus, 8);
}

#[test]
fn a_set_the_host_did_not_send_allows_nothing() {
    let s = restricted(vec![node("a", 8000, 1)], &["a"]);
    let mut stray = task("w0", 1);
    stray.eligible = Some(7);
    assert!(Ledger::new(&s).nodes_for(&stray).is_empty());
}

#[test]
fn a_gang_goes_onto_the_fewest_nodes() {
    let mut ledger = Ledger::from_nodes(&[node("a", 8000, 2), node("b", 8000, 4)]);
    let tasks = [task("w0", 1), task("w1", 1), task("w2", 1)];
    let refs: Vec<&Task> = tasks.iter().collect();
    let placed = ledger.pack_gang(&refs).unwrap();
    assert!(placed.iter().all(|a| a.node == "b"), "{placed:?}");
    assert_eq!(ledger.free("b").unwrap().gpus, 1);
}

#[test]
fn a_gang_that_does_not_fit_changes_nothing() {
    let mut ledger = Ledger::from_nodes(&[node("a", 8000, 1), node("b", 8000, 1)]);
    let tasks = [task("w0", 1), task("w1", 1), task("w2", 1)];
    let refs: Vec<&Task> = tasks.iter().collect();
    assert!(ledger.pack_gang(&refs).is_none());
    assert_eq!(ledger.free("a").unwrap().gpus, 1);
    assert_eq!(ledger.free("b").unwrap().gpus, 1);
}

fn refs(tasks: &[Task]) -> Vec<&Task> {
    tasks.iter().collect()
}

#[test]
fn a_gang_known_to_fit_is_asked_again_once_the_ledger_is_charged() {
    let mut ledger = Ledger::from_nodes(&[node("a", 8000, 2), node("b", 8000, 2)]);
    let gang = |n: u32| {
        (0..n)
            .map(|i| task(&format!("w{i}"), 1))
            .collect::<Vec<_>>()
    };
    let (three, four, two) = (gang(3), gang(4), gang(2));
    assert!(ledger.could_pack(&refs(&four)));
    assert!(ledger.could_pack(&refs(&three)), "a smaller gang fits too");
    assert_eq!(ledger.free("a").unwrap().gpus, 2, "asking charges nothing");
    // Two GPUs taken: four no longer fit, three no longer do either.
    assert!(ledger.pack_gang(&refs(&two)).is_some());
    assert!(!ledger.could_pack(&refs(&three)));
    assert!(ledger.could_pack(&refs(&two)));
    assert!(ledger.charge("b", &res(1000, 1)));
    assert!(
        !ledger.could_pack(&refs(&two)),
        "charged after the last answer"
    );
}

/// Remembering what fitted and what did not never changes an answer: every
/// `could_pack` of many sequences of asks and packings agrees with a search on a
/// ledger that remembers nothing. (A fixed pseudo-random walk: the vendored SDK
/// builds without dev-dependencies.)
#[test]
fn remembered_answers_agree_with_a_fresh_search() {
    let mut seed: u64 = 0x5eed;
    let mut draw = |below: u32| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((seed >> 33) % u64::from(below)) as u32
    };
    for _ in 0..300 {
        let nodes: Vec<Node> = (0..1 + draw(3))
            .map(|i| node(&format!("n{i}"), 8000, draw(5)))
            .collect();
        let mut ledger = Ledger::from_nodes(&nodes);
        for _ in 0..1 + draw(20) {
            let tasks: Vec<Task> = (0..draw(6))
                .map(|i| task(&format!("w{i}"), draw(3)))
                .collect();
            let alike = (0..draw(6)).map(|i| task(&format!("w{i}"), 1)).collect();
            let tasks = if draw(2) == 0 { tasks } else { alike };
            let refs: Vec<&Task> = tasks.iter().collect();
            let mut fresh = ledger.clone();
            fresh.misses = Misses::default();
            assert_eq!(
                ledger.could_pack(&refs),
                fresh.could_pack(&refs),
                "{tasks:?}"
            );
            if draw(2) == 0 {
                ledger.pack_gang(&refs);
            }
        }
    }
}

#[test]
fn charging_past_the_free_capacity_is_refused() {
    let mut ledger = Ledger::from_nodes(&[node("a", 1500, 0)]);
    assert!(ledger.charge("a", &res(1000, 0)));
    assert!(!ledger.charge("a", &res(1000, 0)));
    assert_eq!(ledger.free("a").unwrap().cpu_millis, 500);
}

#[test]
fn least_allocated_prefers_the_emptier_node() {
    let mut busy = node("busy", 4000, 0);
    busy.requested = res(3000, 0);
    let ledger = Ledger::from_nodes(&[busy, node("idle", 4000, 0)]);
    let r = res(500, 0);
    assert!(ledger.least_allocated_score("idle", &r) > ledger.least_allocated_score("busy", &r));
}
