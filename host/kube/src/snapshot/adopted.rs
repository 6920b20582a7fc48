//! The adopted jobs in the snapshot ([`crate::adopt`]): each one's view, kept between
//! rounds while what it is made of has not changed ([`crate::views::adopted`]), with the
//! eligibility sets of its pods' own scheduling rules, the node labels their spreads and
//! pod affinities need ([`crate::spread::required_node_keys`]) and the topology of their
//! claims ([`crate::volumes`]); the charges of its pods that were released and are not
//! bound yet (bound ones are among the other pods' charges); and, before a gang is
//! released, what kube-scheduler would refuse of it that the hints cannot say
//! ([`Caches::adopted_placement_refusal`]). What it reads it must not change.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use switchyard_core as model;
use switchyard_core::{Resources, SelectorTerm};

use crate::Error;
use crate::adopt::AdoptedJob;
use crate::observe::Caches;
use crate::pods::{node_of, placed_node, pod_requests, terminated};
use crate::rules::{self, RuledKubeNode};
use crate::spread::{self, Sited};
use crate::usage::Usage;
use crate::views::Views;
use crate::views::adopted::{AdoptedKey, PodVolumes};
use crate::volumes;

impl Caches {
    /// The adopted pods released to the scheduler and not bound yet: what each takes
    /// from the node it is pinned to.
    pub(super) fn adopted_in_flight(&self) -> Vec<(String, Resources)> {
        self.adoption
            .pods
            .state()
            .iter()
            .filter(|p| node_of(p).is_none() && !terminated(p))
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| Some((placed_node(p)?.to_string(), pod_requests(p))))
            .collect()
    }

    /// What the claims of `job`'s pods say, when one of them mounts a claim.
    fn adopted_volumes(&self, job: &AdoptedJob) -> Option<PodVolumes> {
        let pods = || job.members.iter().chain(&job.stopping_members);
        if !pods().any(|m| volumes::spec_mounts_claims(m.pod.spec.as_ref())) {
            return None;
        }
        let mut first_held = None;
        let restrictions = pods()
            .map(|m| {
                let namespace = m.pod.namespace().unwrap_or_default();
                let (terms, held) = self.volumes.of_pod_spec(&namespace, m.pod.spec.as_ref());
                if first_held.is_none() {
                    first_held = held;
                }
                terms
            })
            .collect();
        Some((restrictions, first_held))
    }

    /// The adopted jobs as the policy sees them, their eligibility sets looked up in
    /// `views`, each view kept from the last round when nothing it is made of changed.
    pub(super) fn adopted_jobs(
        &self,
        views: &mut Views,
        usage: Option<&Usage>,
        usage_id: Option<usize>,
    ) -> Vec<Arc<model::Job>> {
        views.adopted.begin();
        let grouped = self.adoption.group();
        let epoch = views.sets_epoch();
        let loss = self.loss.lock().expect("loss lock");
        let mut out = Vec::with_capacity(grouped.jobs.len());
        for job in &grouped.jobs {
            let volumes = self.adopted_volumes(job);
            let key = AdoptedKey::of(job, epoch, usage_id, loss.version(&job.id), volumes);
            let held = key.volumes.as_ref().and_then(|(_, held)| held.clone());
            let restrictions: Vec<Vec<Vec<SelectorTerm>>> = key
                .volumes
                .as_ref()
                .map(|(r, _)| r.clone())
                .unwrap_or_default();
            let series = || loss.samples(&job.id).unwrap_or_default();
            let (adopted, mut eligibility_for) = views.adopted_and_sets();
            let (view, _) = adopted.job(&job.id, key, series, || {
                let pods: Vec<&Pod> = job
                    .members
                    .iter()
                    .chain(&job.stopping_members)
                    .map(|m| m.pod.as_ref())
                    .collect();
                let eligible = |pod: &Pod| {
                    let at = pods.iter().position(|p| std::ptr::eq(*p, pod));
                    let mut extra = spread::required_node_keys(pod.spec.as_ref());
                    if let Some(terms) = at.and_then(|i| restrictions.get(i)) {
                        extra.extend(terms.iter().cloned());
                    }
                    let own = rules::of_pod_spec(pod.spec.as_ref());
                    eligibility_for(&rules::restricted(&own, &extra))
                };
                job.view(eligible, held.as_ref(), usage, series())
            });
            out.push(view);
        }
        views.adopted.end();
        out
    }

    /// Why kube-scheduler would not bind adopted job `job`'s pods where `pairs` (pod,
    /// node) pins them ([`Error::NotBindable`]), or `None`: a claim that cannot be bound
    /// for a node yet, or a rule between pods the hints cannot say
    /// ([`spread::gang_refusal`]) against the pods the caches hold with their labels (the
    /// controller's and the queue's), bound or placed.
    pub(crate) fn adopted_placement_refusal(
        &self,
        job: &AdoptedJob,
        pairs: &[(&Pod, &str)],
    ) -> Option<Error> {
        let refused = |message: String, volumes: bool| Error::NotBindable {
            job: job.id.clone(),
            message,
            volumes,
        };
        for (pod, _) in pairs {
            let namespace = pod.namespace().unwrap_or_default();
            if volumes::spec_mounts_claims(pod.spec.as_ref())
                && let (_, Some(held)) = self.volumes.of_pod_spec(&namespace, pod.spec.as_ref())
            {
                return Some(refused(
                    format!(
                        "its volumes are not ready ({}): {}",
                        held.reason, held.message
                    ),
                    true,
                ));
            }
        }
        let gang: Vec<Sited<'_>> = pairs
            .iter()
            .map(|(pod, node)| Sited { pod, node })
            .collect();
        let own_uids: Vec<&str> = pairs
            .iter()
            .filter_map(|(p, _)| p.metadata.uid.as_deref())
            .collect();
        let (queued, controllers) = (self.adoption.pods.state(), self.pods.state());
        let others: Vec<Sited<'_>> = queued
            .iter()
            .chain(controllers.iter())
            .filter(|p| !terminated(p))
            .filter(|p| !own_uids.contains(&p.metadata.uid.as_deref().unwrap_or_default()))
            .filter_map(|p| {
                Some(Sited {
                    node: placed_node(p)?,
                    pod: p.as_ref(),
                })
            })
            .collect();
        if !spread::has_pod_rules(&gang, &others) {
            return None;
        }
        if gang.len() > spread::MAX_CHECKED_GANG {
            tracing::info!(
                job = job.id,
                pods = gang.len(),
                "gang too large to check against the rules between pods before release; kube-scheduler judges it alone"
            );
            return None;
        }
        let nodes: HashMap<String, RuledKubeNode> = self
            .nodes
            .state()
            .iter()
            .map(|n| (n.name_any(), RuledKubeNode::of(n)))
            .collect();
        spread::gang_refusal(&gang, &others, &nodes).map(|why| {
            refused(
                format!("kube-scheduler would not bind it there: {why}"),
                false,
            )
        })
    }
}
