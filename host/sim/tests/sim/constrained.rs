//! Constrained placement end to end (contract 0.2): a workload whose nodes carry
//! labels and taints and whose templates carry node selectors, tolerations and required
//! affinity (`examples/constrained-gpus.yaml`), run through the same library code as
//! `switchyard simulate`. Every policy built on the SDK's helpers keeps each task inside
//! the nodes its rules allow, without a line about rules of its own, and the host
//! refuses nothing.

use crate::support;

use std::collections::BTreeMap;
use std::path::PathBuf;

use switchyard_core::Operation;
use switchyard_sim::{Records, Summary, Workload, load_slot, run_offline};

/// The node-name prefixes each template's rules allow in the example.
fn allowed_prefixes(job: &str) -> &'static [&'static str] {
    match job.rsplit_once('-').map_or(job, |(template, _)| template) {
        // gpu=a100, and the research pool's taint is not tolerated.
        "a100-job" => &["a100-"],
        "v100-job" => &["v100-"],
        // pool=research, whose taint it tolerates.
        "research-job" => &["research-"],
        // no gpu label at all.
        "cpu-job" => &["cpu-"],
        other => panic!("a job of an unknown template: {other}"),
    }
}

/// Runs `policy` over `workload` offline (`default` as the fallback), hands every
/// accepted action to `accepted`, checks that the host refused nothing and that every
/// job finished, and returns the run's summary.
fn run_refusing_nothing(
    workload: &Workload,
    policy: &str,
    mut accepted: impl FnMut(&Operation),
) -> Summary {
    let runtime = support::generous_runtime();
    let fallback = load_slot(&runtime, "default", &BTreeMap::new()).expect("default");
    let mut rejected = Vec::new();
    let run = run_offline(
        &runtime,
        policy,
        &BTreeMap::new(),
        &fallback,
        workload.scenario(workload.seed()).unwrap(),
        workload.seed(),
        Records::Stream,
        |_, record| {
            rejected.extend(record.arm_a.rejected.iter().map(|r| format!("{r:?}")));
            record.arm_a.accepted.iter().for_each(|a| accepted(&a.op));
        },
    )
    .unwrap_or_else(|e| panic!("{policy}: {e}"));
    let s = run.result.summary;
    assert!(
        rejected.is_empty(),
        "{policy}: the host refused {rejected:?}"
    );
    assert_eq!(s.finished, s.jobs, "{policy}: every job finishes: {s:?}");
    s
}

#[test]
fn every_placement_of_every_sdk_policy_stays_inside_the_nodes_its_rules_allow() {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/constrained-gpus.yaml");
    let workload = Workload::load(&path).unwrap_or_else(|e| panic!("{e}"));
    for policy in ["default", "gang", "tiresias", "dragon"] {
        let mut placed = 0;
        let s = run_refusing_nothing(&workload, policy, |op| {
            let (job, nodes): (&str, Vec<&str>) = match op {
                Operation::Place { job, assignments } => {
                    (job, assignments.iter().map(|a| a.node.as_str()).collect())
                }
                Operation::Migrate { job, node, .. } => (job, vec![node.as_str()]),
                Operation::Scale { job, nodes, .. } => {
                    (job, nodes.iter().map(String::as_str).collect())
                }
                _ => return,
            };
            for node in nodes {
                assert!(
                    allowed_prefixes(job).iter().any(|p| node.starts_with(p)),
                    "{policy}: {job} went to {node}"
                );
                placed += 1;
            }
        });
        assert_eq!(s.policy_failures, 0, "{policy}");
        assert!(placed >= s.jobs, "{policy}: {placed} tasks placed");
    }
}

/// Jobs whose tasks may not share a node (the label the Kubernetes backend sets for a
/// host port or required anti-affinity against the job's own pods), on a cluster where
/// each job would otherwise fit on one node.
const APART: &str = "
seed: 3
cluster:
  nodes:
    - {name: node, count: 4, cpus: 16, memory_gib: 64}
templates:
  apart:
    work: 600
    speed: 1.0
    curve: none
    labels: {switchyard.dev/one-task-per-node: 'true'}
    roles:
      - {name: ps, cpus: 1, memory_gib: 1}
      - {name: worker, count: 3, cpus: 1, memory_gib: 1}
jobs:
  - {template: apart, count: 6, every: 20}
";

#[test]
fn every_sdk_policy_places_a_job_whose_tasks_may_not_share_a_node_one_to_a_node() {
    let workload = Workload::parse(APART, std::path::Path::new("apart.yaml")).unwrap();
    for policy in ["default", "gang", "tiresias", "dragon", "even"] {
        let mut spread = Vec::new();
        run_refusing_nothing(&workload, policy, |op| {
            if let Operation::Place { assignments, .. } = op {
                let mut nodes: Vec<&str> = assignments.iter().map(|a| a.node.as_str()).collect();
                nodes.sort_unstable();
                nodes.dedup();
                spread.push((assignments.len(), nodes.len()));
            }
        });
        assert!(
            spread.iter().all(|(tasks, nodes)| tasks == nodes),
            "{policy}: a placement put two tasks on one node: {spread:?}"
        );
    }
}
