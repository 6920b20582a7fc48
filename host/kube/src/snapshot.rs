//! The snapshot handed to the policy, built from the caches and the views kept since the
//! last round ([`crate::views`]). A round visits what changed since the last one, as the
//! watch events marked it ([`crate::changes`]), plus what changes apart from the objects'
//! own events: nodes whose other pods' charges changed ([`crate::charges`]), nodes that
//! carry an assumed pod or a reservation this round or did last round, jobs whose loss
//! series moved, and the jobs [`Views::watched`] names. A relist, a new usage reading
//! or a change of the eligibility sets makes it a whole pass. What it reads it must not
//! change.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use switchyard_control::CHECKPOINT_KEPT_LABEL;
use switchyard_core as model;
use switchyard_core::SelectorTerm;
use switchyard_core::{JobPhase, Resources, Snapshot, TaskPhase, Trigger};

use crate::changes::Reader;
use crate::crd::{CheckpointResult, Phase, RestartAction, TrainingJob};
use crate::loss::LossBook;
use crate::observe::{Caches, has_foreign_pods, own_pods};
use crate::pod_index::PodIndex;
use crate::pods::{
    generation_of, holds_resources, job_id, own_of, phase_of, placed_node, pod_requests,
    schedulable, task_of,
};
use crate::usage::Usage;
use crate::views::{JobKey, JobTraits, Views};
use crate::{PLACEMENT_REFUSED_LABEL, quantity, rules, spread, template, volumes};

mod adopted;

impl Caches {
    /// The snapshot at `now` (Unix seconds) with `triggers`, from the caches only. Views
    /// of nodes and jobs that did not change since the last snapshot are the same `Arc`s
    /// again (the views kept between rounds).
    pub fn snapshot(&self, now: f64, triggers: Vec<Trigger>) -> Snapshot {
        let dirty = self.changes.take(Reader::Snapshot);
        let others_changed = self.others.take_changed();
        let loss_changed = self.loss.lock().expect("loss lock").take_changed();
        let usage = self.usage.lock().expect("usage lock").clone();
        let usage_id = usage.as_ref().map(|u| Arc::as_ptr(u) as usize);
        let mut views = self.views.lock().expect("views lock");
        let usage_changed = views.begin(usage_id);

        // The node list and the eligibility sets, before the jobs look sets up.
        let step = views.nodes_in_step(&self.nodes, dirty.all, &dirty.nodes);

        // The jobs.
        let whole = dirty.all || usage_changed || step.sets_reset;
        let visit: Vec<Arc<TrainingJob>> = if whole {
            self.managed_jobs()
        } else {
            let mut ids: HashSet<String> = views.watched().clone();
            ids.extend(dirty.jobs);
            ids.extend(loss_changed);
            let mut found = Vec::with_capacity(ids.len());
            for id in ids {
                match self.training_job(&id) {
                    Some(job) => found.push(job),
                    None => views.drop_job(&id),
                }
            }
            found
        };
        let loss = self.loss.lock().expect("loss lock");
        for job in &visit {
            let id = job_id(job);
            let labelled = self.pod_index.labelled_id(&id);
            let version = job
                .metadata
                .resource_version
                .as_deref()
                .filter(|v| !v.is_empty());
            // Once per role, not per task: a role's pods share its template.
            let rules = views.job_rules(&id, version, || {
                job.spec
                    .roles
                    .iter()
                    .map(|r| (r.name.clone(), rules::of_pod_spec(r.template.spec.as_ref())))
                    .collect()
            });
            // A claim bound to a zonal or local volume narrows its role's nodes; a
            // claim not ready holds the job (see `crate::volumes`). Hints: the
            // scheduler checks the volumes again when it binds.
            let mounts_claims = volumes::mounts_claims(job);
            let claims = mounts_claims.then(|| self.volumes.of_job(job));
            let eligible: Vec<Option<u32>> = rules
                .iter()
                .map(|(role, r)| {
                    let extra: &[Vec<SelectorTerm>] = claims
                        .as_ref()
                        .and_then(|c| c.restrictions.get(role))
                        .map(Vec::as_slice)
                        .unwrap_or_default();
                    match extra.is_empty() {
                        true => views.eligible(r),
                        false => views.eligible(&rules::restricted(r, extra)),
                    }
                })
                .collect();
            let held = claims.and_then(|c| c.held);
            let key = JobKey {
                version: version.unwrap_or_default().to_string(),
                pods: labelled
                    .iter()
                    .map(|p| {
                        (
                            p.metadata.uid.clone().unwrap_or_default(),
                            p.metadata.resource_version.clone().unwrap_or_default(),
                        )
                    })
                    .collect(),
                usage: usage_id,
                loss: loss.version(&id),
                eligible: eligible.clone(),
                held: held.clone(),
            };
            // A pod without a version (made by hand) can change unseen.
            let key = match key.pods.iter().any(|(_, v)| v.is_empty()) {
                true => JobKey {
                    version: String::new(),
                    ..key
                },
                false => key,
            };
            let traits = JobTraits {
                mounts_claims,
                restarting: job.status.as_ref().is_some_and(|s| s.restart.is_some()),
            };
            views.job(&id, key, rules.clone(), traits, |loss_moved_on| {
                // Only the loss series moved on: the kept view with the new series.
                if let Some(kept) = loss_moved_on
                    && let Some(samples) = loss.samples(&id)
                {
                    let job = model::Job {
                        loss: samples.into(),
                        ..kept.clone()
                    };
                    return Some((job.submit_time, job));
                }
                let eligible_of = |role: &str| {
                    rules
                        .iter()
                        .zip(&eligible)
                        .find(|((name, _), _)| name == role)
                        .and_then(|(_, set)| *set)
                };
                self.job(
                    job,
                    &labelled,
                    usage.as_deref(),
                    &loss,
                    eligible_of,
                    held.is_some(),
                )
            });
        }
        drop(loss);
        if whole {
            views.drop_jobs_not_seen();
        }

        // Charges whose node names the caches do not keep per node (assumed pods,
        // reservations), summed apart and added per node below.
        let mut apart: HashMap<String, Resources> = HashMap::new();
        let mut charge = |node: &str, requests: &Resources| match apart.get_mut(node) {
            Some(sum) => *sum = sum.plus(requests),
            None => {
                apart.insert(node.to_string(), *requests);
            }
        };
        {
            let mut assumed = self.assumed.lock().expect("assumed lock");
            if !assumed.is_empty() {
                for (node, requests) in assumed.pending(&[&self.pods, &self.adoption.pods]) {
                    charge(&node, &requests);
                }
            }
        }
        for (node, requests) in self.adopted_in_flight() {
            charge(&node, &requests);
        }
        let restarting: Vec<String> = views.restarting().iter().cloned().collect();
        for id in restarting {
            if let Some(job) = self.training_job(&id) {
                for (node, requests) in reserved(&job, &self.pod_index) {
                    charge(&node, &requests);
                }
            }
        }
        let charged_apart = views.charged_apart(apart.keys().cloned().collect());

        // The nodes: every one after a relist, a new usage reading or a change of the
        // node list; else those whose object, pods or charges changed.
        let node_view = |views: &mut Views, node: &k8s_openapi::api::core::v1::Node| {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            let mut sum = self
                .pod_index
                .requested_on(name)
                .plus(&self.others.on_node(name));
            if let Some(more) = apart.get(name) {
                sum = sum.plus(more);
            }
            let node_usage = usage.as_ref().and_then(|u| u.nodes.get(name).copied());
            views.node(node, name, sum, node_usage, || model::Node {
                usage: node_usage,
                requested: sum,
                labels: node.labels().clone(),
                schedulable: schedulable(node),
                allocatable: node
                    .status
                    .as_ref()
                    .and_then(|s| s.allocatable.as_ref())
                    .map(quantity::resources)
                    .unwrap_or_default(),
                name: name.to_string(),
            });
        };
        match (step.listed, others_changed) {
            (Some(listed), _) => {
                for node in &listed {
                    node_view(&mut views, node);
                }
            }
            (None, Some(others)) if !usage_changed => {
                let names: HashSet<&str> = dirty
                    .nodes
                    .iter()
                    .map(String::as_str)
                    .chain(others.iter().map(|n| &**n))
                    .chain(charged_apart.iter().map(String::as_str))
                    .collect();
                for name in names {
                    if let Some(node) = self.nodes.get(&ObjectRef::new(name)) {
                        node_view(&mut views, &node);
                    }
                }
            }
            (None, _) => {
                let names = views.node_names().to_vec();
                for name in names {
                    if let Some(node) = self.nodes.get(&ObjectRef::new(&name)) {
                        node_view(&mut views, &node);
                    }
                }
            }
        }
        let adopted = self.adopted_jobs(&mut views, usage.as_deref(), usage_id);
        views.end();
        let mut jobs = views.job_list();
        if !adopted.is_empty() {
            // Adopted jobs take their place among the TrainingJobs: by submission,
            // then id.
            jobs.extend(adopted);
            jobs.sort_by(|a, b| {
                a.submit_time
                    .total_cmp(&b.submit_time)
                    .then_with(|| a.id.cmp(&b.id))
            });
        }
        Snapshot {
            time: now,
            triggers,
            nodes: views.node_list(),
            jobs,
            node_sets: views.node_sets(),
        }
    }

    /// The job as the policy sees it (`labelled`: the pods labelled with it, by name);
    /// `eligible` gives the eligibility set of a role's tasks; `held_by_volumes`: its
    /// claims keep its pending tasks from being placed.
    fn job(
        &self,
        job: &TrainingJob,
        labelled: &[Arc<Pod>],
        usage: Option<&Usage>,
        loss_book: &LossBook,
        mut eligible: impl FnMut(&str) -> Option<u32>,
        held_by_volumes: bool,
    ) -> Option<(f64, model::Job)> {
        let status = job.status.clone().unwrap_or_default();
        if matches!(status.phase, Some(Phase::Succeeded | Phase::Failed)) {
            return None;
        }
        let id = job_id(job);
        let own = own_of(job, labelled.to_vec());
        let tasks: Vec<model::Task> = template::tasks(job)
            .into_iter()
            .map(|spec| {
                // The task's newest pod: an old one a restart has not deleted yet is
                // not what runs the task.
                let pod = own
                    .iter()
                    .filter(|p| {
                        task_of(p) == Some(spec.name.as_str())
                            && p.metadata.deletion_timestamp.is_none()
                    })
                    .max_by_key(|p| generation_of(p));
                // Released to the scheduler, the task is where the policy put it: the
                // scheduler binds it there, or refuses it and the gang comes back.
                let node = pod.and_then(|p| placed_node(p));
                let phase = match pod {
                    // A failed pod is replaced with its gang; it no longer runs.
                    Some(p) if phase_of(p) == Some("Failed") => TaskPhase::Restarting,
                    Some(_) if node.is_some() => TaskPhase::Running,
                    Some(_) | None
                        if own.iter().any(|p| {
                            task_of(p) == Some(spec.name.as_str())
                                && p.metadata.deletion_timestamp.is_some()
                        }) =>
                    {
                        TaskPhase::Restarting
                    }
                    // Made and still held by the placement gate (a placement that
                    // stopped half-way): placeable, and the next placement takes it.
                    _ => TaskPhase::Pending,
                };
                model::Task {
                    node: node.map(str::to_string),
                    phase,
                    cpu_weight: pod.map(|p| template::cpu_weight(job, p)).unwrap_or(1.0),
                    usage: pod
                        .and_then(|p| usage?.pods.get(&(p.namespace()?, p.name_any())).copied()),
                    // The pod, once made, says what admission added (LimitRange
                    // defaults, the runtime class's overhead).
                    requests: pod.map(|p| pod_requests(p)).unwrap_or(spec.requests),
                    eligible: eligible(&spec.role),
                    name: spec.name,
                    role: spec.role,
                }
            })
            .collect();
        let mut tasks = tasks;
        // A restart under way holds its tasks until the replacements are recorded, even
        // when the old pods are gone and the new ones not yet in the cache: the policy
        // must not place them a second time.
        // Held back: pods of a deleted job of the same name still there (their names
        // would collide).
        if has_foreign_pods(job, labelled) {
            for task in &mut tasks {
                task.phase = TaskPhase::Restarting;
                task.node = None;
            }
        }
        // A job whose claims are not ready keeps what runs; what is not placed yet
        // waits for the claims.
        if held_by_volumes {
            for task in tasks.iter_mut().filter(|t| t.phase == TaskPhase::Pending) {
                task.phase = TaskPhase::Restarting;
            }
        }
        if let Some(restart) = &status.restart {
            let whole_job = matches!(
                restart.action,
                RestartAction::Recover | RestartAction::Preempt
            );
            for task in &mut tasks {
                if whole_job || restart.targets.iter().any(|t| t.task == task.name) {
                    task.phase = TaskPhase::Restarting;
                    task.node = None;
                }
            }
        }
        let phase = if tasks.iter().any(|t| t.phase == TaskPhase::Restarting) {
            JobPhase::Restarting
        } else if tasks.iter().all(|t| t.phase == TaskPhase::Pending) {
            JobPhase::Waiting
        } else {
            JobPhase::Running
        };
        let role = job.spec.scalable_role()?;
        let current = status.replicas.unwrap_or(role.replicas);
        let submit = job
            .creation_timestamp()
            .map(|t| t.0.as_millisecond() as f64 / 1000.0)
            .unwrap_or(0.0);
        let start = own
            .iter()
            .filter_map(|p| p.status.as_ref()?.start_time.as_ref())
            .map(|t| t.0.as_millisecond() as f64 / 1000.0)
            .reduce(f64::min);
        let loss: Vec<model::LossSample> = match loss_book.samples(&id) {
            Some(samples) => samples,
            None => status
                .loss
                .iter()
                .map(|s| model::LossSample {
                    time: s.time,
                    step: s.step,
                    value: s.value,
                })
                .collect(),
        };
        Some((
            submit,
            model::Job {
                phase,
                submit_time: submit,
                start_time: start,
                priority: job.spec.priority,
                utility: job.spec.utility,
                tasks: tasks.into(),
                replicas: model::Replicas {
                    role: role.name.clone(),
                    current,
                    min: role.min_replicas.unwrap_or(role.replicas).min(current),
                    max: role.max_replicas.unwrap_or(role.replicas).max(current),
                },
                loss: loss.into(),
                metric_rises: job.spec.metric_rises,
                moves: status.moves.iter().map(Into::into).collect(),
                checkpointable: job.spec.checkpoint.is_some(),
                labels: Arc::new(job_labels(job)),
                id,
            },
        ))
    }
}

/// The labels the policy sees on `job`: its own,
/// [`spread::ONE_TASK_PER_NODE_LABEL`] when its tasks may not share a node, and
/// [`PLACEMENT_REFUSED_LABEL`] with the nodes the scheduler or their kubelet refused its
/// last placement on, until it runs, and [`CHECKPOINT_KEPT_LABEL`] once a stop asked it
/// for a checkpoint.
fn job_labels(job: &TrainingJob) -> BTreeMap<String, String> {
    let mut labels = job.labels().clone();
    if spread::one_task_per_node(job) {
        labels.insert(spread::ONE_TASK_PER_NODE_LABEL.into(), "true".into());
    }
    if let Some(refusal) = job.status.as_ref().and_then(|s| s.refusal.as_ref()) {
        labels.insert(PLACEMENT_REFUSED_LABEL.into(), refusal.nodes.join(","));
    }
    if let Some(last) = job.status.as_ref().and_then(|s| s.last_checkpoint.as_ref()) {
        let kept = last.outcome == CheckpointResult::Acknowledged;
        labels.insert(CHECKPOINT_KEPT_LABEL.into(), kept.to_string());
    }
    labels
}

/// What a restart under way holds on its target nodes: each replacement's requests,
/// from when the restart is recorded until its pod is in the cache, so that nothing else
/// is placed in the room it will need (kube-scheduler's nominated node). A target on the
/// node its old pod still runs on is covered by that pod.
fn reserved(job: &TrainingJob, all: &PodIndex) -> Vec<(String, Resources)> {
    let Some(restart) = job.status.as_ref().and_then(|s| s.restart.as_ref()) else {
        return Vec::new();
    };
    let generation = job.status.as_ref().map(|s| s.generation).unwrap_or(0);
    let own = own_pods(job, all);
    let tasks = template::tasks(job);
    restart
        .targets
        .iter()
        .filter(|target| {
            !own.iter().any(|p| {
                task_of(p) == Some(target.task.as_str())
                    && holds_resources(p)
                    && (generation_of(p) == generation
                        || placed_node(p) == Some(target.node.as_str()))
            })
        })
        .filter_map(|target| {
            let spec = tasks.iter().find(|t| t.name == target.task)?;
            Some((target.node.clone(), spec.requests))
        })
        .collect()
}
