//! One lowering of the host's [`crate::Snapshot`] to the WIT types, for every
//! set of bindings generated from `wit/policy.wit`.
//!
//! The host's runtime (wasmtime's bindings) and the guest SDK (wit-bindgen's) are
//! generated from the same WIT, so their types have the same names and fields: one
//! macro body serves both, and a policy compiled natively in a bench or a native test
//! harness receives the very snapshot a component would. The macro only reads the model;
//! it owns no types.

/// Defines `snapshot_to_wit` and `snapshot_for`, the model-to-WIT lowering of a
/// snapshot (as a policy that reads loss series receives it, and as a given policy
/// does), and `delta_for`, the lowering of a [`crate::Change`] for a kept
/// instance, over the WIT types found at the given path.
///
/// Invoke it inside a module with the path of the generated `types` interface, e.g.
/// `switchyard_core::snapshot_lowering!(switchyard_policy_sdk);` for the guest SDK's.
#[macro_export]
macro_rules! snapshot_lowering {
    ($($types:tt)*) => {
        use $($types)* as wit;

        fn resources(r: &$crate::Resources) -> wit::Resources {
            wit::Resources {
                cpu_millis: r.cpu_millis,
                memory_bytes: r.memory_bytes,
                gpus: r.gpus,
            }
        }

        fn labels(map: &std::collections::BTreeMap<String, String>) -> Vec<wit::Label> {
            map.iter()
                .map(|(k, v)| wit::Label {
                    key: k.clone(),
                    value: v.clone(),
                })
                .collect()
        }

        #[allow(dead_code)]
        pub fn node(n: &$crate::Node) -> wit::Node {
            wit::Node {
                name: n.name.clone(),
                allocatable: resources(&n.allocatable),
                requested: resources(&n.requested),
                usage: n.usage.as_ref().map(resources),
                labels: labels(&n.labels),
                schedulable: n.schedulable,
            }
        }

        fn task(t: &$crate::Task) -> wit::Task {
            wit::Task {
                name: t.name.clone(),
                role: t.role.clone(),
                node: t.node.clone(),
                phase: match t.phase {
                    $crate::TaskPhase::Pending => wit::TaskPhase::Pending,
                    $crate::TaskPhase::Running => wit::TaskPhase::Running,
                    $crate::TaskPhase::Restarting => wit::TaskPhase::Restarting,
                },
                requests: resources(&t.requests),
                cpu_weight: t.cpu_weight,
                usage: t.usage.as_ref().map(resources),
                eligible: t.eligible,
            }
        }

        fn job_move(m: &$crate::JobMove) -> wit::JobMove {
            wit::JobMove {
                time: m.time,
                kind: match m.kind {
                    $crate::MoveKind::Placed => wit::MoveKind::Placed,
                    $crate::MoveKind::Migrated => wit::MoveKind::Migrated,
                    $crate::MoveKind::Rescaled => wit::MoveKind::Rescaled,
                    $crate::MoveKind::Preempted => wit::MoveKind::Preempted,
                },
                purpose: m.purpose.clone(),
                from_nodes: m.from_nodes.clone(),
                to_nodes: m.to_nodes.clone(),
            }
        }

        #[allow(dead_code)]
        pub fn node_sets(sets: &[$crate::NodeSet]) -> Vec<wit::NodeSet> {
            sets.iter()
                .map(|s| wit::NodeSet {
                    id: s.id,
                    nodes: s.nodes.clone(),
                })
                .collect()
        }

        /// A run of samples as the contract's columns.
        #[allow(dead_code)]
        pub fn loss_series<'a>(
            samples: impl IntoIterator<Item = &'a $crate::LossSample>,
        ) -> wit::LossSeries {
            let samples = samples.into_iter();
            let (count, _) = samples.size_hint();
            let mut series = wit::LossSeries {
                times: Vec::with_capacity(count),
                steps: Vec::with_capacity(count),
                values: Vec::with_capacity(count),
            };
            for s in samples {
                series.times.push(s.time);
                series.steps.push(s.step);
                series.values.push(s.value);
            }
            series
        }

        /// A job as a policy receives it: its loss series empty unless it `reads_loss`.
        #[allow(dead_code)]
        pub fn job(j: &$crate::Job, reads_loss: bool) -> wit::Job {
            wit::Job {
                id: j.id.clone(),
                phase: match j.phase {
                    $crate::JobPhase::Waiting => wit::JobPhase::Waiting,
                    $crate::JobPhase::Running => wit::JobPhase::Running,
                    $crate::JobPhase::Restarting => wit::JobPhase::Restarting,
                },
                submit_time: j.submit_time,
                start_time: j.start_time,
                priority: j.priority,
                utility: j.utility,
                tasks: j.tasks.iter().map(task).collect(),
                replicas: wit::Replicas {
                    role: j.replicas.role.clone(),
                    current: j.replicas.current,
                    min: j.replicas.min,
                    max: j.replicas.max,
                },
                loss: match reads_loss {
                    true => loss_series(j.loss.iter()),
                    false => loss_series(&[]),
                },
                metric_rises: j.metric_rises,
                moves: j.moves.iter().map(job_move).collect(),
                checkpointable: j.checkpointable,
                labels: labels(&j.labels),
            }
        }

        #[allow(dead_code)]
        pub fn trigger(t: &$crate::Trigger) -> wit::Trigger {
            match t {
                $crate::Trigger::Tick => wit::Trigger::Tick,
                $crate::Trigger::JobArrived(id) => wit::Trigger::JobArrived(id.clone()),
                $crate::Trigger::JobFinished(id) => wit::Trigger::JobFinished(id.clone()),
                $crate::Trigger::NodeChanged(name) => wit::Trigger::NodeChanged(name.clone()),
                $crate::Trigger::JobPreempted(id) => wit::Trigger::JobPreempted(id.clone()),
            }
        }

        /// The snapshot as a policy that reads loss series receives it.
        #[allow(dead_code)]
        pub fn snapshot_to_wit(s: &$crate::Snapshot) -> wit::Snapshot {
            snapshot_for(s, true)
        }

        /// The snapshot as a policy receives it: every job's loss series empty unless it
        /// `reads_loss` (its description's `reads-loss`).
        pub fn snapshot_for(s: &$crate::Snapshot, reads_loss: bool) -> wit::Snapshot {
            wit::Snapshot {
                time: s.time,
                triggers: s.triggers.iter().map(trigger).collect(),
                nodes: s.nodes.iter().map(|n| node(n)).collect(),
                jobs: s.jobs.iter().map(|j| job(j, reads_loss)).collect(),
                node_sets: node_sets(&s.node_sets),
            }
        }

        /// The change that brings an incremental policy's instance from what it holds
        /// to `now`, as the policy receives it: with no loss series unless it
        /// `reads_loss` (its description's `reads-loss`; `change` is then one its
        /// `HeldSnapshot::for_policy` made, which names no job whose only change is its
        /// loss).
        #[allow(dead_code)]
        pub fn delta_for(
            now: &$crate::Snapshot,
            change: &$crate::Change,
            reads_loss: bool,
        ) -> wit::SnapshotDelta {
            let triggers = now.triggers.iter().map(trigger).collect();
            match change {
                $crate::Change::Reset => wit::SnapshotDelta {
                    reset: true,
                    time: now.time,
                    triggers,
                    nodes: now.nodes.iter().map(|n| node(n)).collect(),
                    removed_nodes: vec![],
                    jobs: now.jobs.iter().map(|j| job(j, reads_loss)).collect(),
                    removed_jobs: vec![],
                    loss_updates: loss_updates(now, &[]),
                    node_sets: Some(node_sets(&now.node_sets)),
                },
                $crate::Change::Delta(delta) => wit::SnapshotDelta {
                    reset: false,
                    time: now.time,
                    triggers,
                    nodes: delta
                        .nodes
                        .upserted(now.nodes.as_slice())
                        .map(|n| node(n))
                        .collect(),
                    removed_nodes: delta.nodes.removed.clone(),
                    jobs: delta
                        .jobs
                        .upserted(now.jobs.as_slice())
                        .map(|j| job(j, reads_loss))
                        .collect(),
                    removed_jobs: delta.jobs.removed.clone(),
                    loss_updates: match reads_loss {
                        true => loss_updates(now, &delta.loss_updates),
                        false => loss_updates(now, &[]),
                    },
                    node_sets: delta
                        .node_sets_changed
                        .then(|| node_sets(&now.node_sets)),
                },
            }
        }

        /// The loss updates as the contract's columns.
        #[allow(dead_code)]
        fn loss_updates(
            now: &$crate::Snapshot,
            updates: &[$crate::LossUpdate],
        ) -> wit::LossUpdates {
            let mut columns = wit::LossUpdates {
                jobs: Vec::with_capacity(updates.len()),
                dropped: Vec::with_capacity(updates.len()),
                appended: Vec::with_capacity(updates.len()),
                samples: loss_series(
                    updates
                        .iter()
                        .flat_map(|update| &now.jobs[update.job].loss[update.kept..]),
                ),
            };
            for update in updates {
                columns.jobs.push(update.held_at as u32);
                columns.dropped.push(update.dropped);
                columns
                    .appended
                    .push((now.jobs[update.job].loss.len() - update.kept) as u32);
            }
            columns
        }
    };
}
