//! The leader's log following and loss writing between rounds: a follower per running
//! pod of a job that reads progress from its log (its `switchyard: checkpoint-complete`
//! lines are also checkpoint acknowledgements), at most
//! [`MAX_FOLLOWERS`] at once, with a back-off for a pod whose follower failed; and each
//! job's new samples written to its status at most every [`LOSS_WRITE_EVERY`] seconds,
//! off the decision thread.
//!
//! A followed log is read with timestamps, each sample keeps its line's time, and each
//! pod's follower remembers the timestamp of the last line it read: when the stream ends
//! and the pod is followed again, the log is asked for from that second on
//! (`sinceTime`) and the lines up to the remembered timestamp are skipped, so no sample
//! is taken twice. A process that has not followed the pod before (a new leader) starts
//! from the job's latest recorded sample in the same way.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use futures::{AsyncBufReadExt, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, LogParams};
use serde_json::json;

use super::controller::{Backoff, KubeCluster, Visit};
use crate::act::PodAck;
use crate::loss::status_loss;
use crate::observe::Caches;
use crate::pods::{node_of, phase_of};
use crate::progress::{CheckpointComplete, LogPattern};
use crate::{Error, Result, template};

/// A job's status gets its new loss samples at most this often, seconds. The policy
/// reads the series from memory; the status copy is for the next leader.
pub const LOSS_WRITE_EVERY: f64 = 30.0;
/// Logs followed at once.
pub(crate) const MAX_FOLLOWERS: usize = 512;
/// The first wait before following again a pod whose follower failed.
pub(crate) const FOLLOW_BACKOFF: Duration = Duration::from_secs(5);
/// The longest such wait.
pub(crate) const FOLLOW_BACKOFF_MAX: Duration = Duration::from_secs(300);
/// Loss writes under way at once.
pub(crate) const LOSS_WRITES_IN_FLIGHT: usize = 16;

impl KubeCluster {
    /// Writes each job's new loss samples to its status, at most every
    /// [`LOSS_WRITE_EVERY`] seconds per job, off the decision thread: one merge patch per
    /// job, [`LOSS_WRITES_IN_FLIGHT`] at a time, and no new batch while one is under way.
    pub(super) fn write_loss(&mut self) {
        if self.loss_writes.as_ref().is_some_and(|w| !w.is_finished()) {
            return;
        }
        let now = (self.clock)();
        let due = self
            .caches
            .loss
            .lock()
            .expect("loss lock")
            .due(now, LOSS_WRITE_EVERY);
        let writes: Vec<_> = due
            .into_iter()
            .filter_map(|(id, version, samples)| {
                let job = self.caches.training_job(&id)?;
                Some((job, id, version, status_loss(&samples)))
            })
            .collect();
        if writes.is_empty() {
            return;
        }
        let (actor, caches) = (self.actor.clone(), self.caches.clone());
        self.loss_writes = Some(self.handle.spawn(async move {
            futures::stream::iter(writes)
                .for_each_concurrent(LOSS_WRITES_IN_FLIGHT, |(job, id, version, loss)| {
                    let (actor, caches) = (&actor, &caches);
                    async move {
                        match actor.patch_status(&job, json!({ "loss": loss })).await {
                            Ok(()) => caches
                                .loss
                                .lock()
                                .expect("loss lock")
                                .written(&id, version, now),
                            Err(error) => tracing::warn!(%error, job = id, "writing loss samples"),
                        }
                    }
                })
                .await;
        }));
    }
    /// Takes in the followers whose streams ended: a failed one's pod waits a back-off
    /// before it is followed again. Returns their jobs, to be looked at this pass.
    pub(super) fn reap_followers(&mut self) -> Vec<String> {
        let now = Instant::now();
        let finished: Vec<String> = self
            .followed
            .iter()
            .filter(|(_, (_, f))| f.is_finished())
            .map(|(k, _)| k.clone())
            .collect();
        let mut jobs = Vec::new();
        for key in finished {
            let Some((job, task)) = self.followed.remove(&key) else {
                continue;
            };
            let failed = !matches!(futures::FutureExt::now_or_never(task), Some(Ok(Ok(_))));
            if failed {
                let wait = self
                    .follow_backoff
                    .get(&key)
                    .map_or(FOLLOW_BACKOFF, |b| (b.wait * 2).min(FOLLOW_BACKOFF_MAX));
                self.follow_backoff.insert(
                    key,
                    Backoff {
                        until: now + wait,
                        wait,
                        job: job.clone(),
                    },
                );
            } else {
                self.follow_backoff.remove(&key);
            }
            jobs.push(job);
        }
        jobs
    }
    /// Starts a log follower for every running pod of a visited job that reads progress
    /// from logs, naming the container (a pod with a sidecar refuses an unnamed log
    /// request), at most [`MAX_FOLLOWERS`] at a time. A pod whose follower failed is
    /// followed again only after a back-off ([`FOLLOW_BACKOFF`], doubling to
    /// [`FOLLOW_BACKOFF_MAX`]); one whose stream simply ended is followed again at the
    /// next look. A job with a running pod left unfollowed (back-off, limit) is looked
    /// at again next pass.
    pub(super) fn follow_logs(&mut self, visits: &[Visit], whole: bool) {
        let now = Instant::now();
        let mut present = HashSet::new();
        for visit in visits {
            let Some(job) = &visit.job else {
                self.follow_backoff.retain(|_, b| b.job != visit.id);
                continue;
            };
            // A job whose progress is pushed acknowledges its checkpoints over the API
            // too: only a job that reads its log says so there.
            let Some(log) = job.spec.progress.log.as_ref() else {
                continue;
            };
            let id = &visit.id;
            // Compiled only for a pod that gets a follower, not for every job each pass.
            let mut pattern: Option<LogPattern> = None;
            let mut own_keys = HashSet::new();
            for pod in &visit.own {
                let key = format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any());
                own_keys.insert(key.clone());
                present.insert(key.clone());
                let running = phase_of(pod) == Some("Running");
                if !running || node_of(pod).is_none() || self.followed.contains_key(&key) {
                    continue;
                }
                let waiting = self.follow_backoff.get(&key).is_some_and(|b| now < b.until);
                if waiting || self.followed.len() >= MAX_FOLLOWERS {
                    if !waiting {
                        tracing::warn!(
                            limit = MAX_FOLLOWERS,
                            "following as many logs as allowed; the others wait"
                        );
                    }
                    self.revisit.insert(id.clone());
                    continue;
                }
                let Some(container) = template::log_container(job, pod) else {
                    continue;
                };
                let pattern = match &pattern {
                    Some(p) => p.clone(),
                    None => match LogPattern::compile(&job.name_any(), log.pattern()) {
                        Ok(p) => pattern.insert(p).clone(),
                        Err(error) => {
                            tracing::warn!(%error, "not following the job's logs");
                            break;
                        }
                    },
                };
                let api: Api<Pod> =
                    Api::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default());
                let (caches, name, job_id, clock, actor) = (
                    self.caches.clone(),
                    pod.name_any(),
                    id.clone(),
                    self.clock.clone(),
                    self.actor.clone(),
                );
                let pod_key = key.clone();
                let task = self.handle.spawn(async move {
                    let heard = |ack: PodAck| {
                        actor.record_ack(pod_key.clone(), ack);
                        // The restart's pass deletes the pods once every one has said so.
                        caches.changes.job(&job_id);
                        caches.changed.notify_one();
                    };
                    let followed = follow_log(
                        api,
                        &name,
                        Some(container),
                        pattern,
                        &caches,
                        &job_id,
                        || clock(),
                        heard,
                    )
                    .await;
                    if let Err(error) = &followed {
                        tracing::warn!(%error, "log follower stopped");
                    }
                    followed
                });
                // One follower per pod at a time; when its stream ends, the next pass
                // looks at the job again and starts another from where this one stopped.
                self.followed.insert(key, (id.clone(), task));
            }
            // This job's pods gone: their followers end with their streams; their
            // back-offs go now.
            self.follow_backoff
                .retain(|key, b| b.job != *id || own_keys.contains(key));
        }
        if whole {
            self.follow_backoff.retain(|key, _| present.contains(key));
        }
    }
}

/// Follows the log of `pod`'s `container` and records every sample `pattern` finds
/// for job `id`, each at its line's time (`clock` for a line
/// without one), and hands `heard` each `switchyard: checkpoint-complete` line. A pod
/// followed before is read from where its last follower stopped; one this process has
/// not followed, from the job's latest recorded sample (see the module docs). Returns
/// the number of samples taken when the log ends (the container stopped, or the API
/// server closed the stream).
#[allow(clippy::too_many_arguments)] // One follower's whole context, given once.
pub async fn follow_log(
    pods: Api<Pod>,
    pod: &str,
    container: Option<String>,
    mut pattern: LogPattern,
    caches: &Caches,
    id: &str,
    clock: impl Fn() -> f64,
    heard: impl Fn(PodAck),
) -> Result<usize> {
    let cursor = format!("{id}:{pod}");
    let followed_before = caches
        .loss
        .lock()
        .expect("loss lock")
        .pod_to_read_until
        .get(&cursor)
        .copied();
    let read_until = followed_before.or_else(|| caches.loss_cursor(id));
    let params = LogParams {
        container,
        follow: true,
        timestamps: true,
        // `sinceTime` has whole seconds; the lines of that second already read are
        // skipped below by their full timestamps.
        since_time: read_until.map(|t| Timestamp::from_second(t.as_second()).unwrap_or(t)),
        ..LogParams::default()
    };
    let stream = pods
        .log_stream(pod, &params)
        .await
        .map_err(Error::api(format!("following the log of pod {pod}")))?;
    let mut lines = stream.lines();
    let mut count = 0;
    while let Some(line) = lines.try_next().await.map_err(|source| Error::Log {
        pod: pod.to_string(),
        source,
    })? {
        let (stamp, text) = match line.split_once(' ') {
            Some((head, rest)) => match head.parse::<Timestamp>() {
                Ok(stamp) => (Some(stamp), rest),
                Err(_) => (None, line.as_str()),
            },
            None => (None, line.as_str()),
        };
        // Samples keep their time in milliseconds: lines are compared at that grain.
        if let (Some(stamp), Some(until)) = (stamp, read_until)
            && stamp.as_millisecond() <= until.as_millisecond()
        {
            continue;
        }
        let time = || {
            stamp
                .map(|s| s.as_millisecond() as f64 / 1000.0)
                .unwrap_or_else(&clock)
        };
        if let Some(done) = CheckpointComplete::parse(text) {
            let at = Timestamp::from_millisecond((time() * 1000.0) as i64).unwrap_or_default();
            heard(PodAck {
                time: at,
                path: done.path,
                step: done.step,
            });
        } else if let Some(sample) = pattern.parse_line(text) {
            let step = pattern.has_step_group().then_some(sample.step);
            if caches.record_sample(id, time(), step, sample.value) {
                count += 1;
            }
        }
        if let Some(stamp) = stamp {
            caches
                .loss
                .lock()
                .expect("loss lock")
                .pod_to_read_until
                .insert(cursor.clone(), stamp);
        }
    }
    Ok(count)
}
