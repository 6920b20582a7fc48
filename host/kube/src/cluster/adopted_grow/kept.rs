//! The grows kept ([`Grows`]) and what each asks once its job is seen as it is now
//! ([`next`]). It keeps and judges; it must not read the caches or act (its parent
//! module does).

use std::collections::HashMap;

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::adopt::AdoptedJob;
use crate::pods::held_by_placement_gate;

/// How long a grow's nodes are kept for the operator to make its new workers: long
/// enough for an operator to react and pull nothing, short enough that the nodes the
/// policy chose still say something about the cluster.
pub(crate) const GROW_KEPT_FOR: SignedDuration = SignedDuration::from_secs(300);

/// How many grows are kept at once (one per job); past it the oldest goes.
pub(crate) const MAX_GROWS_KEPT: usize = 1024;

/// A grow of one elastic adopted job, waiting for the operator's new pods.
#[derive(Clone, Debug)]
pub(in crate::cluster) struct Grow {
    /// The UID of the owner scaled: a new owner of the same name is another job.
    pub(super) owner_uid: String,
    /// The replicas the scale asked for.
    pub(super) to: u32,
    /// Each new replica's task and the node decided for it.
    pub(super) tasks: Vec<(String, String)>,
    /// When the scale was asked.
    pub(super) at: Timestamp,
    /// The policy's reason for the scale, given again with the release.
    pub(super) reason: String,
}

/// The grows remembered, by adopted job id.
#[derive(Debug, Default)]
pub(in crate::cluster) struct Grows {
    pub(super) by_job: HashMap<String, Grow>,
}

impl Grows {
    /// Remembers that `job` was scaled from `from` to `to` replicas of `role`, the new
    /// ones to `nodes` in order (a grow only: any scale forgets the job's earlier grow).
    pub(crate) fn scaled(
        &mut self,
        job: &AdoptedJob,
        role: &str,
        (from, to): (u32, u32),
        nodes: &[String],
        reason: &str,
        at: Timestamp,
    ) {
        self.by_job.remove(&job.id);
        let added = to.saturating_sub(from);
        if added == 0 {
            return;
        }
        if nodes.len() != added as usize {
            tracing::info!(
                job = job.id,
                added,
                nodes = nodes.len(),
                "a grow names no node for each new replica; its pods wait for a placement"
            );
            return;
        }
        if self.by_job.len() >= MAX_GROWS_KEPT
            && let Some(oldest) = self
                .by_job
                .iter()
                .min_by_key(|(_, g)| g.at)
                .map(|(id, _)| id.clone())
        {
            tracing::info!(job = oldest, "too many grows kept; the oldest is dropped");
            self.by_job.remove(&oldest);
        }
        let tasks = (from..to)
            .zip(nodes)
            .map(|(index, node)| (format!("{role}-{index}"), node.clone()))
            .collect();
        self.by_job.insert(
            job.id.clone(),
            Grow {
                owner_uid: job.uid.clone(),
                to,
                tasks,
                at,
                reason: reason.to_string(),
            },
        );
    }
}

/// What to do with a remembered grow, seen against its job as the caches show it now.
#[derive(Debug, PartialEq)]
pub(super) enum Next {
    /// The operator has not made every new worker yet.
    Wait,
    /// Every new worker is there, held: release them.
    Release,
    /// Forget it, for this reason.
    Drop(String),
}

/// What `grow` asks now, of `job` (`None`: the job is gone) at `now`.
pub(super) fn next(grow: &Grow, job: Option<&AdoptedJob>, now: Timestamp) -> Next {
    let Some(job) = job else {
        return Next::Drop("the job is no longer in the cluster".into());
    };
    if job.uid != grow.owner_uid {
        return Next::Drop(format!(
            "its owner was replaced (UID {} instead of {})",
            job.uid, grow.owner_uid
        ));
    }
    match &job.shape.scaling {
        Ok(elastic) if elastic.replicas == grow.to => {}
        Ok(elastic) => {
            return Next::Drop(format!(
                "its owner asks for {} replicas now, not the {} of the grow",
                elastic.replicas, grow.to
            ));
        }
        Err(why) => return Next::Drop(format!("it is no longer elastic: {why}")),
    }
    if now > grow.at + GROW_KEPT_FOR {
        return Next::Drop(format!(
            "its new workers did not all arrive within {}s of the scale",
            GROW_KEPT_FOR.as_secs()
        ));
    }
    let mut held = 0;
    for (task, _) in &grow.tasks {
        match job.members.iter().find(|m| &m.task == task) {
            Some(m) if held_by_placement_gate(&m.pod) => held += 1,
            Some(m) => {
                return Next::Drop(format!(
                    "its pod {} was released already (a placement came first)",
                    m.pod.metadata.name.as_deref().unwrap_or(task)
                ));
            }
            None => {}
        }
    }
    match held == grow.tasks.len() && job.complete() {
        true => Next::Release,
        false => Next::Wait,
    }
}
