//! One round of the loop ([`ControlLoop::decide_round`]): the snapshot, arm A's call
//! and, when it fails, the last good decision maker's or the fallback's
//! ([`decide_with_fallback`]), its state blob kept, its decision validated against the
//! snapshot it saw and the loop's disruption budget and applied, then arm B of an
//! experiment the same way, the record written and the observer told. It changes no
//! policy and starts no experiment: the loop's driver does that between rounds.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cluster::Cluster;
use crate::control_loop::ControlLoop;
use crate::decision_record::{ArmRecord, DecisionRecord, QueueWindowRecord, ShadowRecord};
use crate::experiment::Arm;
use crate::outcome::ActionOutcome;
use crate::round_observer::RoundStart;
use crate::slot::PolicySlot;
use crate::state::PolicyStates;
use crate::window;
use switchyard_core::{Checked, Decision, Operation, Snapshot, Trigger, check_decision_within};
use switchyard_runtime::{PolicyError, PolicyModule};

/// Which part a policy played in a round.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CallRole {
    /// The active policy (arm A of an experiment).
    Active,
    /// The fallback, deciding because another policy failed.
    Fallback,
    /// Arm B of a shadow experiment (never applied).
    Shadow,
    /// Arm B of a split experiment.
    SplitB,
}

/// One policy call made in a round, for metrics.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyCall {
    /// The policy called.
    pub policy: String,
    /// Why it was called.
    pub role: CallRole,
    /// Wall time the call took.
    pub latency: Duration,
    /// [`PolicyError::metric_label`] when it failed.
    pub failure: Option<&'static str>,
}

/// Everything one round did: the record, plus what metrics need.
#[derive(Clone, Debug)]
pub struct RoundOutcome {
    /// Whether any accepted action changed the cluster (anything but `wait`), or failed
    /// and is due to be retried: either way the run is not over.
    pub changed: bool,
    /// The round's record.
    pub record: DecisionRecord,
    /// Every policy call, in order.
    pub calls: Vec<PolicyCall>,
    /// Per rejected action: the deciding policy and [`switchyard_core::Rejection::metric_label`].
    pub rejections: Vec<(String, &'static str)>,
    /// The components behind the policy names in the record (arm A's decider, then arm
    /// B's or the shadow's), so whoever lists the records can say which bytes each name
    /// meant ([`crate::DeciderLog`]).
    pub deciders: Vec<Arc<PolicyModule>>,
}

/// After a round in which an accepted action failed, the loop calls the policy again
/// this many cluster seconds later (so it can try again even when nothing else
/// happens), doubling with each such round in a row up to `RETRY_MAX`.
pub const RETRY_FIRST: f64 = 1.0;
/// The longest wait before a retry round, cluster seconds.
const RETRY_MAX: f64 = 60.0;

/// A policy's answer, or the fallback's when it failed.
struct Decided {
    policy: String,
    /// The component of `policy`.
    module: Arc<PolicyModule>,
    failure: Option<String>,
    /// The arm's own policy overran its deadline.
    overran: bool,
    decision: Option<Decision>,
    /// How much of the queue the deciding policy saw, when not all of it.
    window: Option<QueueWindowRecord>,
}

impl ControlLoop {
    /// One round: snapshot, decide (falling back on failure), validate, apply, record.
    /// Returns [`RoundOutcome::changed`].
    pub fn round<C: Cluster>(&mut self, cluster: &mut C, triggers: Vec<Trigger>) -> bool {
        self.decide_round(cluster, triggers).changed
    }

    /// One round, with everything it did. Arm A (the active policy) decides and its
    /// valid actions are applied before arm B of an experiment is called, so a failing
    /// or slow B never changes what A does. Every arm (A, split B, the shadow) goes
    /// through the same steps: call, fallback, state, accounting, validation, apply.
    pub fn decide_round<C: Cluster>(
        &mut self,
        cluster: &mut C,
        triggers: Vec<Trigger>,
    ) -> RoundOutcome {
        let snapshot = cluster.snapshot(triggers);
        let round = self.rounds;
        let seed = self.seed ^ round.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.rounds += 1;
        let mut observer = self.observer.take();
        if let Some(observer) = observer.as_mut() {
            let fallback = self.fallback_for_active().clone();
            observer.round_started(RoundStart {
                round,
                seed,
                snapshot: &snapshot,
                active: &self.active,
                fallback: &fallback,
                active_state: self.states.get(self.active.name()),
            });
        }
        let mut calls = RoundCalls::default();
        let mut experiment = self.experiment.take();
        if let Some(e) = experiment.as_mut() {
            e.observe(&snapshot);
        }
        let split = experiment.as_ref().filter(|e| e.is_split());
        // Only a split experiment shows arm A less than the whole snapshot; otherwise A
        // sees the snapshot itself, without a copy.
        let filtered_a = split.map(|e| e.filter(&snapshot, Arm::A));
        let view_a = filtered_a.as_ref().unwrap_or(&snapshot);
        let waiting_a = window::waiting(view_a);

        let arm_a = ArmCall {
            slot: self.active.clone(),
            fallback: Some(self.fallback_for_active().clone()),
            role: CallRole::Active,
            window: self.window.limit(),
        };
        let a = self.decide_arm(cluster, arm_a, view_a, seed, &mut calls);
        if a.failure.is_some() {
            self.failures += 1;
        } else {
            self.last_good = Some(self.active.clone());
        }
        // The active policy's own call is the round's first.
        let took = calls.calls.first().map(|c| c.latency).unwrap_or_default();
        if a.overran {
            let shown = self.window.limit().unwrap_or(waiting_a).min(waiting_a);
            self.window.overran(shown, took);
        } else if a.failure.is_none() {
            self.window.succeeded(waiting_a, took);
        }
        let mut next_tick = a.next_tick;
        let mut changed = a.changed;
        let mut failed_actions = a.failed_actions();
        let a_actions = a.decision.actions.clone();
        let a_failed = a.failure.is_some();
        let next_call_after = a.decision.next_call_after;
        let a_window = a.window;
        let mut deciders = vec![a.module.clone()];
        if let Some(e) = experiment.as_mut() {
            e.record_failed_actions(Arm::A, a.outcomes.iter());
        }
        let mut record = DecisionRecord::new(round, &snapshot, a.record(), next_call_after);
        record.queue_window = a_window;

        if let Some(e) = experiment.as_mut() {
            if e.is_split() {
                // B sees the cluster after A's actions, so both arms' placements are
                // checked against what is really free.
                let after_a = cluster.snapshot(snapshot.triggers.clone());
                let view_b = e.filter(&after_a, Arm::B);
                let arm_b = ArmCall {
                    slot: e.b.clone(),
                    fallback: Some(self.fallback.clone()),
                    role: CallRole::SplitB,
                    window: None,
                };
                let b = self.decide_arm(cluster, arm_b, &view_b, seed, &mut calls);
                if b.failure.is_some() {
                    e.record_b_failure();
                }
                e.record_failed_actions(Arm::B, b.outcomes.iter());
                next_tick = earliest(next_tick, b.next_tick);
                changed |= b.changed;
                failed_actions |= b.failed_actions();
                deciders.push(b.module.clone());
                record.arm_b = Some(b.record());
            } else {
                let shadow = ArmCall {
                    slot: e.b.clone(),
                    fallback: None,
                    role: CallRole::Shadow,
                    window: None,
                };
                let b = self.decide_arm(cluster, shadow, &snapshot, seed, &mut calls);
                if b.failure.is_some() {
                    e.record_b_failure();
                }
                // A round decided by the fallback says nothing about A.
                let agrees = (!a_failed && b.failure.is_none())
                    .then(|| e.compare(round, snapshot.time, &a_actions, &b.decision.actions));
                deciders.push(b.module);
                record.shadow = Some(ShadowRecord {
                    policy: b.policy,
                    failure: b.failure,
                    agrees,
                    actions: b.decision.actions,
                });
            }
        }
        self.experiment = experiment;
        if failed_actions {
            // Something the policy asked for did not happen: it is asked again soon,
            // whether or not anything else happens meanwhile.
            let delay =
                (RETRY_FIRST * 2f64.powi(self.failing_rounds.min(16) as i32)).min(RETRY_MAX);
            self.failing_rounds = self.failing_rounds.saturating_add(1);
            next_tick = earliest(next_tick, Some(snapshot.time + delay));
        } else {
            self.failing_rounds = 0;
        }
        if a_window.is_some() && changed {
            // Jobs were left out of the policy's view: it sees the next of them at
            // once, rather than at the next event.
            next_tick = earliest(next_tick, Some(snapshot.time + 1e-3));
        }
        self.next_tick = next_tick;
        if let Some(observer) = observer.as_mut() {
            observer.round_decided(&record);
        }
        self.observer = observer;
        if self.keep_records {
            self.records.push(record.clone());
        }
        RoundOutcome {
            changed,
            record,
            calls: calls.calls,
            rejections: calls.rejections,
            deciders,
        }
    }

    /// The last good decision maker stands in for a failing active policy: the policy
    /// active before a hot swap to a broken one, else the configured fallback.
    fn fallback_for_active(&self) -> &PolicySlot {
        match &self.last_good {
            Some(good) if good.name() != self.active.name() => good,
            _ => &self.fallback,
        }
    }

    /// One arm's part of a round, the same steps for arm A, split arm B and the shadow:
    /// the call under the sandbox's deadline (and the arm's fallback when it fails),
    /// the state blob kept, the calls accounted, the decision validated against `view`,
    /// and, for an arm that acts (all but the shadow), its valid actions applied.
    fn decide_arm<C: Cluster>(
        &mut self,
        cluster: &mut C,
        arm: ArmCall,
        view: &Snapshot,
        seed: u64,
        calls: &mut RoundCalls,
    ) -> ArmDecided {
        let decided = decide_with_fallback(&mut self.states, &arm, view, seed, &mut calls.calls);
        let decision = decided.decision.clone().unwrap_or_default();
        if arm.role == CallRole::Shadow {
            return ArmDecided {
                policy: decided.policy,
                module: decided.module,
                failure: decided.failure,
                overran: decided.overran,
                decision,
                checked: None,
                outcomes: Vec::new(),
                window: None,
                next_tick: None,
                changed: false,
            };
        }
        let next_tick = self.next_after(view, &decided, &decision);
        let checked = check_decision_within(view, &decision, self.disruption);
        calls.rejections.extend(
            checked
                .rejected
                .iter()
                .map(|r| r.reason.metric_label())
                .chain(
                    checked
                        .rejected_labels
                        .iter()
                        .map(|r| r.reason.metric_label()),
                )
                .map(|label| (decided.policy.clone(), label)),
        );
        let outcomes = cluster.apply(&checked.accepted, &checked.labels);
        let changed = checked
            .accepted
            .iter()
            .zip(outcomes.iter().map(Some).chain(std::iter::repeat(None)))
            .any(|(action, outcome)| {
                // A failed action changes nothing, but is retried: the run goes on.
                !matches!(action.op, Operation::Wait { .. }) || !matches!(outcome, Some(Ok(())))
            });
        ArmDecided {
            policy: decided.policy,
            module: decided.module,
            failure: decided.failure,
            overran: decided.overran,
            changed,
            checked: Some(checked),
            outcomes,
            window: decided.window,
            decision,
            next_tick,
        }
    }

    /// When the next tick is due after a decision. The tick is the deciding policy's to
    /// ask for; a fallback round keeps the previous request so a failing policy is
    /// retried when it wanted to be.
    fn next_after(
        &self,
        snapshot: &Snapshot,
        decided: &Decided,
        decision: &Decision,
    ) -> Option<f64> {
        if decided.failure.is_none() {
            decision
                .next_call_after
                .map(|after| snapshot.time + after.max(1e-3))
        } else if self.next_tick.is_some_and(|t| t <= snapshot.time) {
            None
        } else {
            self.next_tick
        }
    }
}

/// Which policy an arm calls, and who stands in when it fails (none for the shadow,
/// whose failure changes nothing).
struct ArmCall {
    slot: PolicySlot,
    fallback: Option<PolicySlot>,
    role: CallRole,
    /// The most waiting jobs the arm's policy is shown (none: all).
    window: Option<usize>,
}

/// What one arm decided in a round.
struct ArmDecided {
    /// The policy that decided (the fallback's name when the arm's own failed).
    policy: String,
    /// Its component.
    module: Arc<PolicyModule>,
    /// The arm's own policy's failure.
    failure: Option<String>,
    /// The arm's own policy overran its deadline.
    overran: bool,
    /// The decision (empty when nobody could decide).
    decision: Decision,
    /// The validator's verdict; none for the shadow, which is never applied.
    checked: Option<Checked>,
    /// What became of each accepted action, in order.
    outcomes: Vec<ActionOutcome>,
    /// How much of the queue the deciding policy saw, when not all of it.
    window: Option<QueueWindowRecord>,
    /// When the arm asked to be called again, cluster seconds.
    next_tick: Option<f64>,
    /// Whether an applied action changes the cluster.
    changed: bool,
}

impl ArmDecided {
    /// The arm's part of the round's record.
    fn record(self) -> ArmRecord {
        let mut record =
            ArmRecord::new(self.policy, self.failure, self.checked.unwrap_or_default());
        record.settle(&self.outcomes);
        record
    }

    /// Whether an accepted action failed (or went unreported).
    fn failed_actions(&self) -> bool {
        let accepted = self.checked.as_ref().map_or(0, |c| c.accepted.len());
        self.outcomes.len() < accepted || self.outcomes.iter().any(Result::is_err)
    }
}

/// The policy calls and rejections of one round, for metrics.
#[derive(Default)]
struct RoundCalls {
    calls: Vec<PolicyCall>,
    rejections: Vec<(String, &'static str)>,
}

fn earliest(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

/// Asks the arm's policy to decide on `snapshot` (its window of the queue) with its own
/// state; when it fails, the arm's fallback (if any) decides with its own, on at most
/// [`window::FALLBACK_WINDOW`] waiting jobs when the policy overran its deadline. Both
/// calls are noted in `calls`.
fn decide_with_fallback(
    states: &mut PolicyStates,
    arm: &ArmCall,
    snapshot: &Snapshot,
    seed: u64,
    calls: &mut Vec<PolicyCall>,
) -> Decided {
    let (slot, role) = (&arm.slot, arm.role);
    let windowed = arm
        .window
        .and_then(|limit| window::windowed(snapshot, limit));
    let (view, window) = match &windowed {
        Some((view, record)) => (view, Some(*record)),
        None => (snapshot, None),
    };
    let (result, latency) = timed_decide(states, slot, view, seed);
    calls.push(PolicyCall {
        policy: slot.name().to_string(),
        role,
        latency,
        failure: result.as_ref().err().map(PolicyError::metric_label),
    });
    let error = match result {
        Ok(decision) => {
            states.put(slot.name(), decision.state.clone());
            return Decided {
                policy: slot.name().to_string(),
                module: slot.module.clone(),
                failure: None,
                overran: false,
                decision: Some(decision),
                window,
            };
        }
        Err(error) => error,
    };
    let overran = matches!(error, PolicyError::DeadlineExceeded { .. });
    let Some(fallback) = arm.fallback.as_ref() else {
        tracing::warn!(%error, policy = slot.name(), "the shadow policy failed; the applied decision is unaffected");
        return Decided {
            policy: slot.name().to_string(),
            module: slot.module.clone(),
            failure: Some(error.to_string()),
            overran,
            decision: None,
            window,
        };
    };
    tracing::warn!(%error, "policy failed; the fallback decides this round");
    // A policy that overran was shown too much to decide on in time; the fallback
    // stands in on the oldest few waiting jobs, so the round places something.
    let fallback_windowed = overran
        .then(|| window::windowed(snapshot, window::FALLBACK_WINDOW))
        .flatten();
    let (fallback_view, window) = match &fallback_windowed {
        Some((view, record)) => (view, Some(*record)),
        None => (view, window),
    };
    let (result, latency) = timed_decide(states, fallback, fallback_view, seed);
    calls.push(PolicyCall {
        policy: fallback.name().to_string(),
        role: CallRole::Fallback,
        latency,
        failure: result.as_ref().err().map(PolicyError::metric_label),
    });
    let decision = match result {
        Ok(decision) => {
            states.put(fallback.name(), decision.state.clone());
            Some(decision)
        }
        Err(error) => {
            tracing::error!(%error, "the fallback policy failed too; nothing changes");
            None
        }
    };
    Decided {
        policy: fallback.name().to_string(),
        module: fallback.module.clone(),
        failure: Some(error.to_string()),
        overran,
        decision,
        window,
    }
}

fn timed_decide(
    states: &mut PolicyStates,
    slot: &PolicySlot,
    snapshot: &Snapshot,
    seed: u64,
) -> (Result<Decision, PolicyError>, Duration) {
    let started = Instant::now();
    let result = slot.module.decide_in(
        &slot.session,
        &slot.settings,
        snapshot,
        states.get(slot.name()),
        seed,
    );
    (result, started.elapsed())
}
