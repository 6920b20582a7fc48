//! Constrained placement end to end (contract 0.2): a workload whose nodes carry
//! labels and taints and whose templates carry node selectors, tolerations and required
//! affinity (`examples/constrained-gpus.yaml`), run through the same library code as
//! `switchyard simulate`. Every policy built on the SDK's helpers keeps each task inside
//! the nodes its rules allow, without a line about rules of its own, and the host
//! refuses nothing.

#[path = "support/offline_runtime.rs"]
mod offline_runtime;

use std::collections::BTreeMap;
use std::path::PathBuf;

use switchyard_core::model::Operation;
use switchyard_sim::offline;
use switchyard_sim::workload::Workload;

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

#[test]
fn every_placement_of_every_sdk_policy_stays_inside_the_nodes_its_rules_allow() {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/constrained-gpus.yaml");
    let workload = Workload::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let runtime = offline_runtime::generous();
    let fallback = offline::slot(&runtime, "default", &BTreeMap::new()).expect("default");
    for policy in ["default", "gang", "tiresias", "dragon"] {
        let scenario = workload.scenario(workload.seed()).unwrap();
        let mut placed = 0;
        let mut rejected = Vec::new();
        let run = offline::run(
            &runtime,
            policy,
            &BTreeMap::new(),
            &fallback,
            scenario,
            workload.seed(),
            offline::Records::Stream,
            |_, record| {
                rejected.extend(record.arm_a.rejected.iter().map(|r| format!("{r:?}")));
                for action in &record.arm_a.accepted {
                    let (job, nodes): (&str, Vec<&str>) = match &action.op {
                        Operation::Place { job, assignments } => {
                            (job, assignments.iter().map(|a| a.node.as_str()).collect())
                        }
                        Operation::Migrate { job, node, .. } => (job, vec![node.as_str()]),
                        Operation::Scale { job, nodes, .. } => {
                            (job, nodes.iter().map(String::as_str).collect())
                        }
                        _ => continue,
                    };
                    for node in nodes {
                        assert!(
                            allowed_prefixes(job).iter().any(|p| node.starts_with(p)),
                            "{policy}: {job} went to {node}"
                        );
                        placed += 1;
                    }
                }
            },
        )
        .unwrap_or_else(|e| panic!("{policy}: {e}"));
        let s = &run.result.summary;
        assert!(
            rejected.is_empty(),
            "{policy}: the host refused {rejected:?}"
        );
        assert_eq!(s.policy_failures, 0, "{policy}");
        assert_eq!(s.finished, s.jobs, "{policy}: every job finishes: {s:?}");
        assert!(placed >= s.jobs, "{policy}: {placed} tasks placed");
    }
}
