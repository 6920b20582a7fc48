//! Placing a job's tasks: the policy decides, kube-scheduler binds. Each pod is created
//! held by the placement gate, so the scheduler leaves it alone, and the API server's
//! admission (LimitRange defaults, injected sidecars, node selectors from namespace
//! policies, other schedulers' gates) has made it what it will be. Then each is pinned
//! to the node the policy chose, its node affinity tightened with `metadata.name In
//! [node]` (what the API server allows on a gated pod), and its gate lifted, in one
//! write guarded by the resourceVersion the controller read; the scheduler binds it
//! there with every check it has, or refuses it with a reason, which comes back to the
//! policy ([`super::restart`]). A gang is released whole or not at all: a failure on
//! the way deletes what this call made or released (UID preconditions), and leaves what
//! was there before.

use k8s_openapi::api::core::v1::{Pod, PodSchedulingGate};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::EventType;
use serde_json::json;

use super::actor::{
    Actor, PODS_CREATED_CONDITION, delete_pod, describe, rfc3339, seconds, status_of,
};
use super::status::set_condition;
use crate::crd::{MoveKindRecord, Phase, Placement, TrainingJob};
use crate::pods::{held_by_placement_gate, owned_by, placed_node};
use crate::retry::{self, Guard};
use crate::{Error, FIELD_MANAGER, PLACEMENT_GATE, RELEASED_ANNOTATION, Result, template};

impl Actor {
    /// Creates the pods of `assignments` (task, node) and releases them to the
    /// scheduler pinned to their nodes, all or none, then records the placements in the
    /// status. `now` is when they are released.
    pub async fn place(
        &self,
        job: &TrainingJob,
        assignments: &[(String, String)],
        reason: &str,
        now: Timestamp,
    ) -> Result<()> {
        let generation = status_of(job).generation;
        let placed = match self
            .create_and_release(job, assignments, generation, now)
            .await
        {
            Ok(placed) => placed,
            Err(error) => return Err(self.placement_failed(job, "Place", error).await),
        };
        let created = released_message(&placed);
        let recorded = self
            .update_status(job, |status| {
                if status.placements.is_empty() {
                    let to = placed.iter().map(|p| p.node.clone()).collect();
                    status.record_move(MoveKindRecord::Placed, "", Vec::new(), to, seconds(now));
                }
                for p in &placed {
                    status.placements.retain(|q| q.task != p.task);
                    status.placements.push(p.clone());
                }
                status.phase = Some(Phase::Running);
                set_condition(status, PODS_CREATED_CONDITION, "True", "Released", &created);
            })
            .await;
        if let Err(error) = recorded {
            // The pods are released, but the job's status does not say so: the leader's
            // next pass finds them and writes it ([`Actor::record_placements`]).
            return Err(self.action_failed(job, "Place", error).await);
        }
        let note = format!("{}: {reason}", describe(&placed));
        self.event(job, EventType::Normal, "Placed", "Place", &note)
            .await;
        Ok(())
    }

    /// Reports a failed placement as the `PodsCreated=False` condition and a Warning
    /// Event; returns the error.
    pub(super) async fn placement_failed(
        &self,
        job: &TrainingJob,
        action: &str,
        error: Error,
    ) -> Error {
        let reason = match error {
            Error::InvalidSpec { .. } => "TemplateRejected",
            _ => "PlacementFailed",
        };
        let message = error.to_string();
        if let Err(e) = self
            .update_status(job, |s| {
                set_condition(s, PODS_CREATED_CONDITION, "False", reason, &message)
            })
            .await
        {
            tracing::warn!(error = %e, "recording the failed placement in the status");
        }
        let note = format!("{}: {message}", error.failure_reason());
        self.event(job, EventType::Warning, reason, action, &note)
            .await;
        error
    }

    /// Creates every pod held by the placement gate, then pins and releases every pod.
    /// On any failure it undoes what this call did and only that: the pods it created,
    /// and those it released, are deleted (with their UID as a precondition and their
    /// own grace period); a pod released before the call (left by a controller that
    /// stopped half-way, or placed while the cache was behind) is left alone.
    pub(super) async fn create_and_release(
        &self,
        job: &TrainingJob,
        assignments: &[(String, String)],
        generation: u32,
        now: Timestamp,
    ) -> Result<Vec<Placement>> {
        let api = self.pods(job);
        self.ensure_owned_objects(job).await;
        let mut made: Vec<Made> = Vec::new();
        let mut outcome = Ok(());
        for (task, node) in assignments {
            let pod = match template::build(job, task, generation) {
                Ok(pod) => pod,
                Err(error) => {
                    outcome = Err(error);
                    break;
                }
            };
            match create_pod(&api, &self.guard, job, &pod).await {
                Ok(created) => match placed_node(&created.pod) {
                    Some(on) if on != node => {
                        outcome = Err(Error::NotFound(format!(
                            "pod {} exists and is placed on {on}, not {node}",
                            created.pod.name_any()
                        )));
                        break;
                    }
                    _ => made.push(Made {
                        released_before: !held_by_placement_gate(&created.pod),
                        node: node.clone(),
                        created: created.new,
                        released_here: false,
                        pod: created.pod,
                    }),
                },
                Err(error) => {
                    outcome = Err(error);
                    break;
                }
            }
        }
        if outcome.is_ok() {
            let held: Vec<usize> = (0..made.len())
                .filter(|&i| !made[i].released_before)
                .collect();
            let pairs: Vec<(&Pod, &str)> = held
                .iter()
                .map(|&i| (&made[i].pod, made[i].node.as_str()))
                .collect();
            let (released, result) =
                release_each(&api, &self.guard, &job.name_any(), &pairs, now).await;
            drop(pairs);
            for &i in &held[..released] {
                made[i].released_here = true;
            }
            outcome = result;
        }
        match outcome {
            Ok(()) => Ok(assignments
                .iter()
                .zip(made)
                .map(|((task, node), made)| Placement {
                    task: task.clone(),
                    pod: made.pod.name_any(),
                    node: node.clone(),
                })
                .collect()),
            Err(error) => {
                for made in made.iter().filter(|m| m.created || m.released_here) {
                    // Best effort: a pod left behind is owned by the job, and the next
                    // placement reuses its name.
                    let name = made.pod.name_any();
                    let uid = made.pod.metadata.uid.as_deref();
                    if let Err(e) = delete_pod(&api, &self.guard, &name, uid, None).await {
                        tracing::warn!(error = %e, pod = name, "rolling back a failed placement");
                    }
                }
                Err(error)
            }
        }
    }
}

/// One pod of a placement, and what this call did to it.
struct Made {
    /// The pod as the API server holds it (after admission).
    pod: Pod,
    node: String,
    /// This call created it.
    created: bool,
    /// Its placement gate was lifted before this call.
    released_before: bool,
    /// This call released it.
    released_here: bool,
}

/// What creating a task's pod found.
struct Created {
    /// The pod as the API server made it (what admission added included), or as it
    /// was found.
    pod: Pod,
    /// This call created it (else it existed, left by a controller that stopped
    /// half-way).
    new: bool,
}

/// Creates `pod` of `job`; one that already exists and belongs to this job counts as
/// created. A pod of the same name owned by another object (a deleted job of the same
/// name whose pods the garbage collector has not removed yet) is an error. A pod the API
/// server refuses as invalid is the template's fault.
async fn create_pod(
    api: &Api<Pod>,
    guard: &Guard,
    job: &TrainingJob,
    pod: &Pod,
) -> Result<Created> {
    let name = pod.name_any();
    let pp = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    };
    match retry::with_backoff("create pod", || guard.call(api.create(&pp, pod))).await {
        Ok(created) => Ok(Created {
            pod: created,
            new: true,
        }),
        Err(kube::Error::Api(s)) if s.is_already_exists() => {
            let existing = guard
                .call(api.get(&name))
                .await
                .map_err(Error::api(format!("reading pod {name}")))?;
            if !owned_by(&existing, job) {
                return Err(Error::NotFound(format!(
                    "pod {name} exists and belongs to another object (a deleted TrainingJob of the same name?); waiting for it to go"
                )));
            }
            Ok(Created {
                pod: existing,
                new: false,
            })
        }
        // A webhook's denial is the webhook's, not the template's: it is reported as
        // the admission refusal it is.
        Err(kube::Error::Api(s))
            if matches!(s.code, 400 | 422) && !s.message.contains("admission webhook") =>
        {
            Err(Error::InvalidSpec {
                job: job.name_any(),
                message: format!(
                    "the API server refused pod {name}, made from the role's template ({}): {}",
                    s.code, s.message
                ),
            })
        }
        Err(error) => Err(Error::api(format!("creating pod {name}"))(error)),
    }
}

/// Releases each of `pods` to its node ([`release`]), in order, stopping at the first
/// failure: how many were released, and the failure if one stopped it. The one release
/// path of a gang, whether the controller made its pods or adopted them.
pub(super) async fn release_each(
    api: &Api<Pod>,
    guard: &Guard,
    job: &str,
    pods: &[(&Pod, &str)],
    now: Timestamp,
) -> (usize, Result<()>) {
    for (released, (pod, node)) in pods.iter().enumerate() {
        if let Err(error) = release(api, guard, job, pod, node, now).await {
            return (released, Err(error));
        }
    }
    (pods.len(), Ok(()))
}

/// Pins `pod` to `node` and lifts the placement gate, in one merge patch conditional on
/// the resourceVersion read (a pod changed since, by a webhook or another controller,
/// is read again and pinned from what it is now). The other gates stay: whoever put
/// them there lifts them. The patch also notes when it was released
/// ([`RELEASED_ANNOTATION`]), from when the scheduler's refusal is counted. A pod found
/// released already is done when it is pinned to `node`, and an error otherwise.
async fn release(
    api: &Api<Pod>,
    guard: &Guard,
    job: &str,
    pod: &Pod,
    node: &str,
    now: Timestamp,
) -> Result<()> {
    let name = pod.name_any();
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    let action = || format!("releasing pod {name} to the scheduler on node {node}");
    let mut current = pod.clone();
    for attempt in 1..=retry::ATTEMPTS {
        if !held_by_placement_gate(&current) {
            return match placed_node(&current) {
                Some(on) if on == node => Ok(()),
                other => Err(Error::NotFound(format!(
                    "pod {name} was released by someone else, to {}",
                    other.unwrap_or("no node")
                ))),
            };
        }
        let spec = current.spec.as_ref();
        let gates: Vec<PodSchedulingGate> = spec
            .and_then(|s| s.scheduling_gates.clone())
            .unwrap_or_default()
            .into_iter()
            .filter(|g| g.name != PLACEMENT_GATE)
            .collect();
        let affinity = template::with_required(spec, template::pinned_affinity(spec, node));
        let mut metadata = json!({"annotations": {RELEASED_ANNOTATION: rfc3339(now)}});
        if let Some(version) = current.resource_version() {
            metadata["resourceVersion"] = json!(version);
        }
        let body = Patch::Merge(json!({"metadata": metadata,
            "spec": {"schedulingGates": gates, "affinity": affinity}}));
        match retry::on_throttle("release pod", || {
            guard.call(api.patch(&name, &params, &body))
        })
        .await
        {
            Ok(_) => return Ok(()),
            // Changed since it was read: read it again and pin what it is now.
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < retry::ATTEMPTS => {
                current = guard
                    .call(api.get(&name))
                    .await
                    .map_err(Error::api(format!(
                        "reading pod {name} after a conflicting release"
                    )))?;
            }
            Err(error) => return Err(Error::api(action())(error)),
        }
    }
    Err(Error::Stale {
        job: job.to_string(),
        message: format!("pod {name} kept changing while it was released"),
    })
}

fn released_message(placed: &[Placement]) -> String {
    format!(
        "{} pod(s) created and released to the scheduler: {}",
        placed.len(),
        describe(placed)
    )
}
