//! The adopted jobs' views kept between rounds, as the TrainingJobs' are: a view is
//! built again only when what it is made of changed: one of its pods (a new object in
//! the pod cache, told by identity: the kept view holds the `Arc` it was built from, so
//! the same address is the same object), its owner's shape, the eligibility sets (their
//! epoch, [`super::Views::sets_epoch`]), the usage reading, its loss series, or, for a
//! job that mounts claims, what the claims say (they change apart from the pods, so that
//! is read again each round). A view whose loss series alone moved on keeps its tasks.
//! Jobs the round did not see are dropped. It keeps views; it must not read the caches.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use switchyard_core as model;
use switchyard_core::SelectorTerm;

use crate::adopt::{AdoptedJob, Shape};
use crate::volumes::Held;

/// What the claims of each of an adopted job's pods (live, then stopping) say: their
/// restrictions, and the first hold.
pub(crate) type PodVolumes = (Vec<Vec<Vec<SelectorTerm>>>, Option<Held>);

/// What an adopted job's view is made of; the view is built again when any differs.
pub(crate) struct AdoptedKey {
    /// Its live pods, then its stopping ones, as the pod cache holds them.
    pub(crate) pods: Vec<Arc<Pod>>,
    /// The owner's UID and shape.
    pub(crate) owner: (String, Shape),
    /// The eligibility sets' epoch.
    pub(crate) epoch: u64,
    /// The usage reading, by identity.
    pub(crate) usage: Option<usize>,
    /// The version of its loss series.
    pub(crate) loss: Option<u64>,
    /// For a job that mounts claims: each pod's restrictions from them, and the hold.
    pub(crate) volumes: Option<PodVolumes>,
}

impl AdoptedKey {
    /// The key of `job` as the caches show it now (`volumes` read by the caller).
    pub(crate) fn of(
        job: &AdoptedJob,
        epoch: u64,
        usage: Option<usize>,
        loss: Option<u64>,
        volumes: Option<PodVolumes>,
    ) -> Self {
        Self {
            pods: job
                .members
                .iter()
                .chain(&job.stopping_members)
                .map(|m| Arc::clone(&m.pod))
                .collect(),
            owner: (job.uid.clone(), job.shape.clone()),
            epoch,
            usage,
            loss,
            volumes,
        }
    }

    /// Whether everything but the loss series is the same.
    fn same_but_loss(&self, other: &Self) -> bool {
        self.pods.len() == other.pods.len()
            && self
                .pods
                .iter()
                .zip(&other.pods)
                .all(|(a, b)| Arc::ptr_eq(a, b))
            && self.owner == other.owner
            && self.epoch == other.epoch
            && self.usage == other.usage
            && self.volumes == other.volumes
    }
}

struct Kept {
    key: AdoptedKey,
    view: Arc<model::Job>,
    /// The eligibility sets its tasks use.
    sets: Vec<Option<u32>>,
    round: u64,
}

/// The adopted jobs' views kept between rounds.
#[derive(Default)]
pub(crate) struct AdoptedViews {
    jobs: HashMap<String, Kept>,
    round: u64,
    /// Whether a view was built or dropped since the sets in use were last counted.
    pub(super) changed: bool,
}

/// How a view was had: kept whole, kept but for its loss series, or built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Had {
    /// The kept view, the same `Arc`.
    Kept,
    /// The kept view's tasks with the new loss series.
    LossMovedOn,
    /// Built afresh.
    Built,
}

impl AdoptedViews {
    /// Starts a round.
    pub(crate) fn begin(&mut self) {
        self.round += 1;
    }

    /// Job `id`'s view for `key`: the kept one when the key is the same, the kept one
    /// with `loss()` as its series when only that moved on, else `build`'s (which gives
    /// the view and the eligibility sets its tasks use).
    pub(crate) fn job(
        &mut self,
        id: &str,
        key: AdoptedKey,
        loss: impl FnOnce() -> Vec<model::LossSample>,
        build: impl FnOnce() -> model::Job,
    ) -> (Arc<model::Job>, Had) {
        let round = self.round;
        if let Some(kept) = self.jobs.get_mut(id)
            && kept.key.same_but_loss(&key)
        {
            kept.round = round;
            if kept.key.loss == key.loss {
                return (Arc::clone(&kept.view), Had::Kept);
            }
            let view = Arc::new(model::Job {
                loss: loss().into(),
                ..(*kept.view).clone()
            });
            kept.key = key;
            kept.view = Arc::clone(&view);
            return (view, Had::LossMovedOn);
        }
        let view = Arc::new(build());
        let sets = view.tasks.iter().map(|t| t.eligible).collect();
        self.changed = true;
        self.jobs.insert(
            id.to_string(),
            Kept {
                key,
                view: Arc::clone(&view),
                sets,
                round,
            },
        );
        (view, Had::Built)
    }

    /// Ends a round: forgets the jobs it did not see (gone).
    pub(crate) fn end(&mut self) {
        let round = self.round;
        let before = self.jobs.len();
        self.jobs.retain(|_, kept| kept.round == round);
        self.changed |= self.jobs.len() != before;
    }

    /// The eligibility sets the kept views use.
    pub(super) fn sets_used(&self) -> impl Iterator<Item = Option<u32>> + '_ {
        self.jobs.values().flat_map(|k| k.sets.iter().copied())
    }
}
