//! What a policy sees of the simulator: each node and job as the snapshot shows it,
//! kept as an `Arc` until the item changes, and the snapshot built from those views.
//! Debug builds check every kept view against a fresh one. It changes nothing in the
//! simulation.

use std::sync::Arc;

use super::Simulator;
use super::state::{SimJob, SimNode};
use switchyard_core::{Job, Node, Replicas, Resources, Snapshot, Task, Trigger};

impl Simulator {
    /// The snapshot now, with `triggers` as the reasons for the call: the views out of
    /// date are built again, the others handed out as they are.
    pub(super) fn snapshot_now(&mut self, triggers: Vec<Trigger>) -> Snapshot {
        for n in 0..self.nodes.len() {
            if self.nodes[n].view.is_none() {
                self.nodes[n].view = Some(Arc::new(self.node_view(&self.nodes[n])));
            }
        }
        for a in 0..self.active.len() {
            let j = self.active[a];
            if self.jobs[j].eligible.is_none() {
                let rules = &self.jobs[j].spec.placement;
                let set = self.eligibility.id_for(rules, &self.nodes);
                self.jobs[j].eligible = Some(set);
            }
            if self.jobs[j].view.is_none() {
                self.jobs[j].view = Some(Arc::new(self.job_view(&self.jobs[j])));
            }
        }
        #[cfg(debug_assertions)]
        self.check_views();
        Snapshot {
            time: self.now,
            triggers,
            nodes: self.nodes.iter().map(|n| shown(&n.view)).collect(),
            jobs: self
                .active
                .iter()
                .map(|&j| shown(&self.jobs[j].view))
                .collect(),
            node_sets: Arc::clone(self.eligibility.sets()),
        }
    }

    fn node_view(&self, n: &SimNode) -> Node {
        Node {
            name: n.spec.name.clone(),
            allocatable: n.spec.allocatable,
            requested: n.requested,
            usage: Some(Resources {
                cpu_millis: (n.cores_in_use * 1000.0).round() as u64,
                memory_bytes: n.requested.memory_bytes,
                gpus: n.requested.gpus,
            }),
            labels: n.spec.labels.clone(),
            schedulable: true,
        }
    }

    /// Every kept view equals a fresh one: a change that forgot to clear its item's view
    /// fails here, in every debug-build test, instead of showing a policy stale state.
    #[cfg(debug_assertions)]
    fn check_views(&self) {
        fn fresh<T: PartialEq + std::fmt::Debug>(
            kept: &Option<Arc<T>>,
            now: T,
            kind: &str,
            name: &str,
        ) {
            assert_eq!(kept.as_deref(), Some(&now), "stale view of {kind} {name}");
        }
        for n in &self.nodes {
            fresh(&n.view, self.node_view(n), "node", &n.spec.name);
        }
        for job in self.active.iter().map(|&j| &self.jobs[j]) {
            fresh(&job.view, self.job_view(job), "job", &job.spec.id);
        }
    }

    fn job_view(&self, j: &SimJob) -> Job {
        // Sized exactly: a filtered iterator would give two tasks room for four.
        let mut tasks = Vec::with_capacity(j.tasks.len());
        tasks.extend(
            j.tasks
                .iter()
                .filter(|t| t.created_at <= self.now)
                .map(|t| Task {
                    name: t.name.clone(),
                    role: j.spec.roles[t.role].name.clone(),
                    node: t.node.map(|n| self.nodes[n].spec.name.clone()),
                    phase: t.phase,
                    requests: t.requests,
                    cpu_weight: t.cpu_weight,
                    usage: t.node.map(|_| Resources {
                        cpu_millis: (t.cores * 1000.0).round() as u64,
                        memory_bytes: t.requests.memory_bytes,
                        gpus: t.requests.gpus,
                    }),
                    eligible: j.eligible.flatten(),
                }),
        );
        Job {
            id: j.spec.id.clone(),
            phase: j.phase,
            submit_time: j.spec.submit_time,
            start_time: j.start_time,
            priority: j.spec.priority,
            utility: j.spec.utility,
            tasks: tasks.into(),
            replicas: Replicas {
                role: j.spec.scalable_role.clone(),
                current: j.replicas,
                min: j.spec.min_replicas,
                max: j.spec.max_replicas,
            },
            loss: Arc::clone(&j.loss),
            metric_rises: j.spec.metric_rises,
            moves: Arc::clone(&j.moves),
            checkpointable: j.spec.checkpointable,
            labels: Arc::clone(&j.labels),
        }
    }
}

/// A view the snapshot just built.
fn shown<T>(view: &Option<Arc<T>>) -> Arc<T> {
    Arc::clone(view.as_ref().expect("built by the snapshot"))
}
