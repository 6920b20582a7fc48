//! The leader's work on jobs between rounds: gangs that lost a member or whose
//! placement the scheduler refused are restarted whole ([`crate::gang`]), finished
//! jobs' pods stopped, statuses brought in step with the pods, resizes reported,
//! staged restarts carried on, and the `VolumesReady` condition kept. A job with such
//! work is looked at again next pass, until the caches show it done.
//!
//! A restart waits for its old pods to be gone, and a pod on a node that is not Ready
//! is never taken for gone while its node may still run it (the StatefulSet rule): only
//! once the node is deleted, tainted `node.kubernetes.io/out-of-service`, or the kubelet
//! confirmed the pod's containers stopped. Until then the job stays `Restarting` and
//! one Warning Event says what it waits for.

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;

use super::controller::{KubeCluster, Visit};
use crate::act::{CPU_WEIGHT_CONDITION, GangLoss, RestartProgress, set_condition};
use crate::crd::{Phase, RestartAction, TrainingJob};
use crate::gang::{LostMember, RefusedMember, lost_members, refused_members, status_behind};
use crate::pods::{
    confirmed_stopped, delete_key, node_of, out_of_service, pod_key, ready, terminated,
};
use crate::{Error, volumes};

/// What [`KubeCluster::drive_gangs`] has to do for a job, judged from the cache without
/// copying its pods.
enum GangWork {
    /// The job has finished and some of its pods still run.
    StopFinished,
    /// The scheduler, or a node's kubelet, refused members: the gang is taken back, and
    /// the policy told.
    Refused(Vec<RefusedMember>),
    /// Members were lost (and pods the status names are gone): the gang restarts.
    Lost(Vec<LostMember>, Vec<String>),
    /// The status is behind the pods (a lost write, a refusal outgrown).
    Record,
    /// A resize was asked for and its outcome is not reported yet.
    ReportResize,
    /// Nothing yet: a refusal within its grace is looked at again next pass.
    Watch,
}

impl KubeCluster {
    fn gang_work(&self, job: &TrainingJob, own: &[Arc<Pod>], now: Timestamp) -> Option<GangWork> {
        let status = job.status.as_ref();
        let phase = status.and_then(|s| s.phase);
        if matches!(phase, Some(Phase::Succeeded | Phase::Failed)) {
            let running = own
                .iter()
                .any(|p| !terminated(p) && p.metadata.deletion_timestamp.is_none());
            return running.then_some(GangWork::StopFinished);
        }
        if status.is_some_and(|s| s.restart.is_some()) {
            return None;
        }
        let (refused, refusals_pending) = refused_members(job, own, now);
        if !refused.is_empty() {
            return Some(GangWork::Refused(refused));
        }
        if refusals_pending {
            // Nothing else moves the job when the grace runs out.
            return Some(GangWork::Watch);
        }
        let namespace = job.namespace().unwrap_or_default();
        let (lost, gone) = {
            let assumed = self.caches.assumed.lock().expect("assumed lock");
            lost_members(
                job,
                own,
                |p| self.actor.deleted_here(p),
                |pod| assumed.holds(&namespace, pod),
            )
        };
        if !lost.is_empty() {
            return Some(GangWork::Lost(lost, gone));
        }
        if status_behind(job, own).is_some() {
            return Some(GangWork::Record);
        }
        let resize_pending = status.is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == CPU_WEIGHT_CONDITION && c.status == "Unknown")
        });
        resize_pending.then_some(GangWork::ReportResize)
    }

    /// Restarts every visited gang that lost a member or whose placement was refused
    /// (or fails it past its `backoffLimit`), deletes the pods of finished jobs that
    /// still hold resources, writes statuses that are behind, and reports how requested
    /// resizes went.
    pub(super) fn drive_gangs(&mut self, visits: &[Visit]) {
        let now = self.now_timestamp();
        for visit in visits {
            if !self.may_act() {
                return;
            }
            let Some(job) = &visit.job else {
                continue;
            };
            let Some(work) = self.gang_work(job, &visit.own, now) else {
                continue;
            };
            self.revisit.insert(visit.id.clone());
            // Only a job with something to do has its pods copied for the actor.
            let own: Vec<Pod> = visit.own.iter().map(|p| (**p).clone()).collect();
            let id = &visit.id;
            let actor = &self.actor;
            let outcome = match work {
                GangWork::Watch => Ok(()),
                GangWork::StopFinished => self.handle.block_on(actor.stop_pods(job, &own)),
                GangWork::ReportResize => self.handle.block_on(actor.report_resize(job, &own)),
                GangWork::Refused(refused) => self.handle.block_on(actor.restart_gang(
                    job,
                    &own,
                    &[],
                    GangLoss::Refused(refused),
                    now,
                )),
                GangWork::Lost(lost, gone) => self.handle.block_on(actor.restart_gang(
                    job,
                    &own,
                    &gone,
                    GangLoss::Members(lost),
                    now,
                )),
                GangWork::Record => match status_behind(job, &own) {
                    Some((members, every_task_bound)) => self
                        .handle
                        .block_on(actor.record_placements(job, &members, every_task_bound, now)),
                    None => Ok(()),
                },
            };
            match outcome {
                Ok(()) => {}
                // The cache is behind a status this replica just wrote.
                Err(Error::Stale { .. }) => {}
                Err(error) => {
                    tracing::warn!(%error, label = error.metric_label(), job = id, "handling a gang's pods")
                }
            }
        }
        // A key per pod in the cache is made only when there is something to forget.
        if self.actor.remembers_pods() {
            let present: HashSet<String> = self
                .caches
                .pods
                .state()
                .iter()
                .chain(self.caches.adoption.pods.state().iter())
                .map(|p| delete_key(p))
                .collect();
            self.actor.forget_deletes(&present);
        }
    }

    /// Whether `pod`, being deleted, is gone with its node: the node is deleted, or an
    /// operator tainted it `node.kubernetes.io/out-of-service` (the pod garbage
    /// collector then removes its pods). A pod being deleted on a node that merely
    /// stopped answering is not: its process may still run, and replacing it could run
    /// its task twice.
    fn gone_with_its_node(&self, pod: &Pod) -> bool {
        if pod.metadata.deletion_timestamp.is_none() {
            return false;
        }
        match node_of(pod) {
            None => false,
            Some(name) => self
                .caches
                .nodes
                .get(&ObjectRef::new(name))
                .is_none_or(|node| out_of_service(&node)),
        }
    }

    /// Pods of `job` that hold up its restart on a node that is not Ready, each reported
    /// once per restart with a Warning Event naming what would release it.
    fn warn_of_unconfirmed(&mut self, job: &TrainingJob, pods: &[Pod]) {
        for pod in pods {
            let Some(name) = node_of(pod) else { continue };
            let node_ready = self
                .caches
                .nodes
                .get(&ObjectRef::new(name))
                .is_some_and(|n| ready(&n));
            if node_ready || !self.unconfirmed_warned.insert(delete_key(pod)) {
                continue;
            }
            let note = format!(
                "pod {} on node {name}, which is not Ready, may still run; its replacement waits until the node is deleted, tainted node.kubernetes.io/out-of-service, or the pod is confirmed stopped",
                pod_key(pod)
            );
            tracing::warn!(job = job.name_any(), "{note}");
            self.handle.block_on(self.actor.event(
                job,
                EventType::Warning,
                "WaitingForNode",
                "Recover",
                &note,
            ));
        }
    }

    /// Carries every visited job's restart on as far as the caches allow; never waits.
    /// A job with a restart under way is looked at every pass (its steps wait for
    /// grace periods and deadlines, not only for the caches).
    pub(super) fn drive_restarts(&mut self, visits: &[Visit]) {
        let now = self.now_timestamp();
        let caches = &self.caches;
        self.restarts_done.retain(|id, requested| {
            caches.training_job(id).is_some_and(|j| {
                j.status
                    .as_ref()
                    .and_then(|s| s.restart.as_ref())
                    .is_some_and(|r| r.requested_at == *requested)
            })
        });
        for visit in visits {
            let Some(job) = &visit.job else {
                continue;
            };
            let Some(restart) = job.status.as_ref().and_then(|s| s.restart.clone()) else {
                continue;
            };
            self.revisit.insert(visit.id.clone());
            let id = visit.id.clone();
            if self.restarts_done.get(&id) == Some(&restart.requested_at) {
                continue;
            }
            // Terminating pods are included: the replacement waits until they are gone,
            // or confirmed stopped; a pod whose node is gone or declared out of service
            // is gone with it (see `gone_with_its_node`).
            let job_pods: Vec<Pod> = visit
                .own
                .iter()
                .filter(|p| !self.gone_with_its_node(p))
                .map(|p| (**p).clone())
                .collect();
            let old: Vec<Pod> = job_pods
                .iter()
                .filter(|p| restart.stopping.contains(&p.name_any()))
                .filter(|p| p.metadata.deletion_timestamp.is_some() && !confirmed_stopped(p))
                .cloned()
                .collect();
            self.warn_of_unconfirmed(job, &old);
            match self
                .handle
                .block_on(self.actor.advance_restart(job, &job_pods, now))
            {
                Ok(RestartProgress::Done)
                    if matches!(
                        restart.action,
                        RestartAction::Preempt | RestartAction::Recover
                    ) =>
                {
                    tracing::info!(job = id, "the job waits in the queue again");
                    self.restarts_done.insert(id.clone(), restart.requested_at);
                    self.requeued.push(id);
                }
                Ok(RestartProgress::Done) => {
                    tracing::info!(job = id, "restart finished");
                    let targets: Vec<(String, String)> = restart
                        .targets
                        .iter()
                        .map(|t| (t.task.clone(), t.node.clone()))
                        .collect();
                    self.assume(job, &targets);
                    self.restarts_done.insert(id, restart.requested_at);
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(%error, label = error.metric_label(), job = id, "restart step failed; retrying when the caches change")
                }
            }
        }
    }

    /// Gives each visited job whose claims hold it the `VolumesReady=False` condition,
    /// with the reason and the claim named, and `True` once they no longer do (only a
    /// job that had it `False`). Written when what it says changes, once per change even
    /// while the job cache lags behind the write. A job mounting claims is looked at
    /// every pass: its claims change apart from it.
    pub(super) fn drive_volume_conditions(&mut self, visits: &[Visit], whole: bool) {
        for visit in visits {
            if !self.may_act() {
                return;
            }
            let Some(job) = &visit.job else {
                self.volume_conditions.remove(&visit.id);
                continue;
            };
            let phase = job.status.as_ref().and_then(|s| s.phase);
            if !volumes::mounts_claims(job)
                || matches!(phase, Some(Phase::Succeeded | Phase::Failed))
            {
                continue;
            }
            self.revisit.insert(visit.id.clone());
            let current = job.status.as_ref().and_then(|s| {
                s.conditions
                    .iter()
                    .find(|c| c.type_ == volumes::VOLUMES_CONDITION)
            });
            let wanted = match self.caches.volumes.of_job(job).held {
                Some(held) => ("False", held.reason.to_string(), held.message),
                None if current.is_some_and(|c| c.status == "False") => (
                    "True",
                    "Ready".to_string(),
                    "every claim is bound, or waits for the node its first pod is placed on"
                        .to_string(),
                ),
                None => continue,
            };
            let shown = current.is_some_and(|c| {
                (c.status.as_str(), &c.reason, &c.message) == (wanted.0, &wanted.1, &wanted.2)
            });
            let id = &visit.id;
            if shown || self.volume_conditions.get(id) == Some(&wanted) {
                continue;
            }
            let written = self.handle.block_on(self.actor.update_status(job, |s| {
                set_condition(
                    s,
                    volumes::VOLUMES_CONDITION,
                    wanted.0,
                    &wanted.1,
                    &wanted.2,
                )
            }));
            match written {
                Ok(_) => {
                    self.volume_conditions.insert(id.clone(), wanted);
                }
                Err(error) => {
                    tracing::warn!(%error, job = id, "writing the VolumesReady condition")
                }
            }
        }
        if whole && !self.volume_conditions.is_empty() {
            let present: HashSet<&str> = visits.iter().map(|v| v.id.as_str()).collect();
            self.volume_conditions
                .retain(|id, _| present.contains(id.as_str()));
        }
    }
}
