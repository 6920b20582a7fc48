//! What the leader's pass over the adopted jobs keeps between passes ([`AdoptedPass`]):
//! the jobs the policy heard of, the Events told, the acknowledgements heard, the
//! eviction back-offs and how the last checkpoints ended. It keeps; it must not read
//! the caches or act (the pass does, in its sibling modules).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use switchyard_control::LastCheckpoint;

use crate::act::{CLOCK_SLACK, PodAck};
use crate::pods::delete_key;

/// What the leader's pass over the adopted jobs keeps between passes.
#[derive(Default)]
pub(in crate::cluster) struct AdoptedPass {
    /// Adopted jobs the policy has heard of (they arrived), by id.
    pub(super) known: HashSet<String>,
    /// Adopted jobs placeable at the last pass: one that becomes placeable again (its
    /// owner made its evicted pods anew) is news for the policy.
    pub(super) placeable: HashSet<String>,
    /// The Events this leader has told once ([`crate::act::Told`]), by occasion, so
    /// that it does not ask the API server again every pass.
    pub(super) told: HashSet<String>,
    /// Checkpoint acknowledgements heard from adopted pods (log lines and the API), by
    /// pod UID: a pod its owner makes again under the same name has not acknowledged.
    pub(super) acks: Arc<Mutex<HashMap<String, PodAck>>>,
    /// Per pod (UID) whose eviction a PodDisruptionBudget refused: when to ask again.
    pub(super) backoff: HashMap<String, EvictionBackoff>,
    /// Per adopted job, the checkpoint request whose end is told.
    pub(super) ended: HashMap<String, Timestamp>,
    /// How the last checkpoint of each adopted job ended.
    pub(super) last: BTreeMap<String, LastCheckpoint>,
}

impl AdoptedPass {
    /// Forgets what a leader learns again from the cluster: what the policy heard of,
    /// the Events told (the cluster remembers them), the back-offs. The
    /// acknowledgements heard stay, as a TrainingJob's do.
    pub(in crate::cluster) fn new_term(&mut self) {
        self.known.clear();
        self.placeable.clear();
        self.told.clear();
        self.backoff.clear();
    }

    /// Job `id`, whose held pods this leader just released between rounds: known, and
    /// no news while the caches still show them held.
    pub(in crate::cluster) fn released_between_rounds(&mut self, id: &str) {
        self.known.insert(id.to_string());
        self.placeable.insert(id.to_string());
    }

    /// `pod`'s acknowledgement heard since `since`.
    pub(super) fn ack_since(&self, pod: &Pod, since: Timestamp) -> Option<PodAck> {
        self.acks
            .lock()
            .expect("acks lock")
            .get(&delete_key(pod))
            .filter(|a| a.time >= since - CLOCK_SLACK)
            .cloned()
    }
}

/// When a pod whose eviction was refused is asked again.
#[derive(Clone, Copy, Debug)]
pub(super) struct EvictionBackoff {
    pub(super) until: Timestamp,
    /// The wait that was, doubled at the next refusal.
    pub(super) wait: SignedDuration,
}
