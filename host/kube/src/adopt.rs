//! Adopting the training jobs teams already run: batch Jobs, JobSets (and Kubeflow
//! Trainer v2 TrainJobs through their JobSets) and Kubeflow PyTorchJobs. A team keeps
//! its manifest and its operator and adds two lines to the pod template: the scheduling
//! gate [`crate::PLACEMENT_GATE`] and the label [`crate::QUEUE_LABEL`] naming this
//! instance's queue. The owner's operator creates the pods, held by the gate; the
//! controller groups them by owner into one policy job (id `<kind>:<namespace>/<name>`),
//! reads its gang and roles from the owner's spec and labels, and places it through the
//! same gate-and-pin release as a TrainingJob's pods. A preemption or a move asks the
//! pods to checkpoint, waits until every one acknowledged it or their grace ends, and
//! evicts them (the Eviction API, which honours PodDisruptionBudgets and marks the pod
//! `DisruptionTarget`); the owner makes new gated pods, and the policy places them
//! again. Only pods the controller holds or released are adopted.
//!
//! - `names`: the kinds ([`Integration`]), the queue's rules, the job ids.
//! - `shape`, `job`, `jobset`, `pytorchjob`: what each kind's spec, status and pod
//!   labels say (gang, roles, tasks, whether an eviction is survived, finished).
//! - `trimmed`: what the caches keep of the queue's pods.
//! - `caches`: the owners' and the queue's pods' reflectors ([`Adoption`]).
//! - `group`: the queue's pods grouped into adopted jobs, and the gated pods no enabled
//!   kind owns.
//! - `kept`: the grouping kept between looks while the caches have not changed.
//! - `view`: an adopted job as the policy sees it, with the hints its pods' own specs
//!   give (one task per node, spread and affinity keys a node must carry).
//! - `weight`, `elastic`: what the owner's templates and spec allow of a CPU weight and
//!   of a scale, and the weight and replicas the policy sees.
//!
//! It reads owners and pods; it must never create, patch or delete an owner, nor delete
//! a pod (the acting is in `crate::act`: eviction, an in-place resize, and an elastic
//! PyTorchJob's scale through the owner's own `scale` subresource).

mod caches;
mod elastic;
mod group;
mod job;
mod jobset;
mod kept;
mod names;
mod pytorchjob;
mod shape;
mod trimmed;
mod view;
mod weight;

pub use self::caches::Adoption;
pub(crate) use self::elastic::ELASTIC_ROLE;
pub(crate) use self::group::{AdoptedJob, Member, NotHeld, Unadoptable};
pub(crate) use self::names::parse_adopted_id;
pub use self::names::{Integration, InvalidQueue, UnknownIntegration, valid_queue};
pub(crate) use self::shape::Shape;
pub use self::trimmed::trim_pod;
pub(crate) use self::weight::asked_millis;
