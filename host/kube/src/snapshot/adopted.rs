//! The adopted jobs in the snapshot ([`crate::adopt`]): each one's view, with the
//! eligibility sets of its pods' own scheduling rules, and the charges of its pods that
//! were released and are not bound yet (bound ones are among the other pods' charges).
//! What it reads it must not change.

use std::sync::Arc;

use switchyard_core as model;
use switchyard_core::Resources;

use crate::observe::Caches;
use crate::pods::{node_of, placed_node, pod_requests, terminated};
use crate::rules;
use crate::usage::Usage;
use crate::views::Views;

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

    /// The adopted jobs as the policy sees them, their eligibility sets looked up in
    /// `views`.
    pub(super) fn adopted_jobs(
        &self,
        views: &mut Views,
        usage: Option<&Usage>,
    ) -> Vec<Arc<model::Job>> {
        let grouped = self.adoption.group();
        if grouped.jobs.is_empty() {
            return Vec::new();
        }
        let loss = self.loss.lock().expect("loss lock");
        grouped
            .jobs
            .iter()
            .map(|job| {
                let eligible = |pod: &k8s_openapi::api::core::v1::Pod| {
                    views.eligible(&rules::of_pod_spec(pod.spec.as_ref()))
                };
                let series = loss.samples(&job.id).unwrap_or_default();
                Arc::new(job.view(eligible, usage, series))
            })
            .collect()
    }
}
