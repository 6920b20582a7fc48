//! The controller's Prometheus metrics: one registry, the families in it, and how a
//! round's outcome, a policy swap or a load error is counted. Rendering is
//! [`Metrics::render`] (the text format `/metrics` serves). Nothing here decides or
//! changes anything.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use switchyard_control::{CallRole, ExperimentReport, RoundOutcome};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyLabel {
    policy: LabelText,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    policy: LabelText,
    role: LabelText,
    outcome: LabelText,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    policy: LabelText,
    reason: LabelText,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailedActionLabels {
    policy: LabelText,
    operation: LabelText,
    reason: LabelText,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: LabelText,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: LabelText,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyInfoLabels {
    policy: LabelText,
    version: LabelText,
    digest: LabelText,
    source: LabelText,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ArmLabels {
    arm: LabelText,
    policy: LabelText,
}

/// A label value as the text format needs it: `\\`, `"` and newlines escaped, so no
/// value (a policy's name, say) can end its line and forge another.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct LabelText(String);

impl EncodeLabelValue for LabelText {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        use std::fmt::Write as _;
        for c in self.0.chars() {
            match c {
                '\\' => encoder.write_str("\\\\")?,
                '"' => encoder.write_str("\\\"")?,
                '\n' => encoder.write_str("\\n")?,
                c => encoder.write_char(c)?,
            }
        }
        Ok(())
    }
}

impl From<&str> for LabelText {
    fn from(text: &str) -> Self {
        Self(text.to_string())
    }
}

impl From<String> for LabelText {
    fn from(text: String) -> Self {
        Self(text)
    }
}

type FloatGauge = Gauge<f64, AtomicU64>;

fn latency_histogram() -> Histogram {
    // 0.25 ms .. ~4 s: a policy call under the default 100 ms deadline lands mid-range.
    Histogram::new(exponential_buckets(0.000_25, 2.0, 15))
}

/// Every metric the controller exports.
pub struct Metrics {
    registry: Registry,
    rounds: Counter,
    decision_latency: Family<PolicyLabel, Histogram, fn() -> Histogram>,
    decisions: Family<DecisionLabels, Counter>,
    rejected: Family<ReasonLabels, Counter>,
    failed_actions: Family<FailedActionLabels, Counter>,
    policy_failures: Family<ReasonLabels, Counter>,
    fallbacks: Family<PolicyLabel, Counter>,
    swaps: Counter,
    state_save_failures: Counter,
    load_errors: Family<KindLabel, Counter>,
    uploads_not_kept: Family<ReasonLabel, Counter>,
    policy_info: Family<PolicyInfoLabels, Gauge>,
    loss_samples: Family<KindLabel, Counter>,
    shadow_compared: Counter,
    shadow_agreed: Counter,
    shadow_agreement: FloatGauge,
    experiment_b_failures: Counter,
    arm_jobs: Family<ArmLabels, Gauge>,
    arm_finished: Family<ArmLabels, Gauge>,
    arm_avg_completion: Family<ArmLabels, FloatGauge>,
    arm_avg_wait: Family<ArmLabels, FloatGauge>,
    leader: Gauge,
    http_connections: Gauge,
    http_connections_closed: Family<ReasonLabel, Counter>,
    http_requests_refused: Family<ReasonLabel, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every family registered and nothing counted yet.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let rounds = Counter::default();
        registry.register("switchyard_rounds", "Decision rounds run", rounds.clone());
        let decision_latency =
            Family::<PolicyLabel, Histogram, fn() -> Histogram>::new_with_constructor(
                latency_histogram,
            );
        registry.register(
            "switchyard_decision_latency_seconds",
            "Wall time of one policy decide call, per policy",
            decision_latency.clone(),
        );
        let decisions = Family::<DecisionLabels, Counter>::default();
        registry.register(
            "switchyard_decisions",
            "Policy decide calls, per policy, role (active, fallback, shadow, split-b) and outcome (ok or the failure kind)",
            decisions.clone(),
        );
        let rejected = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "switchyard_rejected_actions",
            "Actions the validator turned down, per policy and reason",
            rejected.clone(),
        );
        let failed_actions = Family::<FailedActionLabels, Counter>::default();
        registry.register(
            "switchyard_failed_actions",
            "Accepted actions the cluster failed to carry out, per deciding policy, operation and reason (conflict, forbidden, not-found, throttled, admission-refused, invalid, timeout, unavailable, not-leading, stale, gated, unsupported, injected, other)",
            failed_actions.clone(),
        );
        let policy_failures = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "switchyard_policy_failures",
            "Failed policy calls, per policy and kind (deadline = deadline overrun, oom, trap, refused, invalid)",
            policy_failures.clone(),
        );
        let fallbacks = Family::<PolicyLabel, Counter>::default();
        registry.register(
            "switchyard_fallback_rounds",
            "Rounds decided by the fallback because the named policy failed",
            fallbacks.clone(),
        );
        let swaps = Counter::default();
        registry.register(
            "switchyard_policy_swaps",
            "Changes of the active policy or its parameters",
            swaps.clone(),
        );
        let state_save_failures = Counter::default();
        registry.register(
            "switchyard_state_save_failures",
            "Writes of policy state or of the active policy that failed (a restart would lose them)",
            state_save_failures.clone(),
        );
        let load_errors = Family::<KindLabel, Counter>::default();
        registry.register(
            "switchyard_policy_load_errors",
            "Policies refused at load time (upload, policies directory, or a kept upload at start), per kind",
            load_errors.clone(),
        );
        let uploads_not_kept = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "switchyard_policy_uploads_not_kept",
            "Uploads accepted and used but not kept for a restart, per reason (nothing-kept, too-large, store-error)",
            uploads_not_kept.clone(),
        );
        let policy_info = Family::<PolicyInfoLabels, Gauge>::default();
        registry.register(
            "switchyard_policy_info",
            "1 per loaded policy: its name, version, content digest and source (a policy from a registry: its reference pinned to the manifest digest)",
            policy_info.clone(),
        );
        let loss_samples = Family::<KindLabel, Counter>::default();
        registry.register(
            "switchyard_loss_samples",
            "Loss samples pushed over the API, per outcome (accepted or ignored)",
            loss_samples.clone(),
        );
        let shadow_compared = Counter::default();
        registry.register(
            "switchyard_shadow_compared_rounds",
            "Shadow-experiment rounds in which both policies decided",
            shadow_compared.clone(),
        );
        let shadow_agreed = Counter::default();
        registry.register(
            "switchyard_shadow_agreed_rounds",
            "Shadow-experiment rounds in which both asked for the same operations",
            shadow_agreed.clone(),
        );
        let shadow_agreement = FloatGauge::default();
        registry.register(
            "switchyard_shadow_agreement_ratio",
            "Agreement rate of the running shadow experiment",
            shadow_agreement.clone(),
        );
        let experiment_b_failures = Counter::default();
        registry.register(
            "switchyard_experiment_b_failures",
            "Rounds in which an experiment's arm B failed (arm A unaffected)",
            experiment_b_failures.clone(),
        );
        let arm_jobs = Family::<ArmLabels, Gauge>::default();
        registry.register(
            "switchyard_split_jobs",
            "Jobs assigned to each arm of the running split experiment",
            arm_jobs.clone(),
        );
        let arm_finished = Family::<ArmLabels, Gauge>::default();
        registry.register(
            "switchyard_split_finished_jobs",
            "Finished jobs of each arm of the running split experiment",
            arm_finished.clone(),
        );
        let arm_avg_completion = Family::<ArmLabels, FloatGauge>::default();
        registry.register(
            "switchyard_split_avg_completion_seconds",
            "Mean completion time of each arm's finished jobs",
            arm_avg_completion.clone(),
        );
        let arm_avg_wait = Family::<ArmLabels, FloatGauge>::default();
        registry.register(
            "switchyard_split_avg_wait_seconds",
            "Mean wait of each arm's started jobs",
            arm_avg_wait.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "switchyard_leader",
            "1 while this replica leads (acts on the cluster), 0 while it follows",
            leader.clone(),
        );
        let http_connections = Gauge::default();
        registry.register(
            "switchyard_http_connections",
            "Connections the HTTP API holds open (at most --max-connections)",
            http_connections.clone(),
        );
        let http_connections_closed = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "switchyard_http_connections_closed",
            "Connections the HTTP API closed for a limit, per reason (header-timeout, idle-timeout, evicted: the oldest idle one, to make room; refused: over --max-connections with every one serving a request)",
            http_connections_closed.clone(),
        );
        let http_requests_refused = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "switchyard_http_requests_refused",
            "Requests the HTTP API refused for a limit, per reason (uploads-busy: over --max-concurrent-uploads; body-timeout: a body not received within --body-read-timeout)",
            http_requests_refused.clone(),
        );
        Self {
            registry,
            rounds,
            decision_latency,
            decisions,
            rejected,
            failed_actions,
            policy_failures,
            fallbacks,
            swaps,
            state_save_failures,
            load_errors,
            uploads_not_kept,
            policy_info,
            loss_samples,
            shadow_compared,
            shadow_agreed,
            shadow_agreement,
            experiment_b_failures,
            arm_jobs,
            arm_finished,
            arm_avg_completion,
            arm_avg_wait,
            leader,
            http_connections,
            http_connections_closed,
            http_requests_refused,
        }
    }

    /// Counts one round: its calls, latencies, failures, fallbacks, rejections and the
    /// accepted actions that failed.
    pub fn observe_round(&self, outcome: &RoundOutcome) {
        self.rounds.inc();
        let mut failed: Option<&str> = None;
        for call in &outcome.calls {
            let policy = PolicyLabel {
                policy: call.policy.clone().into(),
            };
            self.decision_latency
                .get_or_create(&policy)
                .observe(call.latency.as_secs_f64());
            let role = serde_json::to_value(call.role)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            self.decisions
                .get_or_create(&DecisionLabels {
                    policy: call.policy.clone().into(),
                    role: role.into(),
                    outcome: call.failure.unwrap_or("ok").to_string().into(),
                })
                .inc();
            if let Some(kind) = call.failure {
                self.policy_failures
                    .get_or_create(&ReasonLabels {
                        policy: call.policy.clone().into(),
                        reason: kind.to_string().into(),
                    })
                    .inc();
                if matches!(call.role, CallRole::Shadow | CallRole::SplitB) {
                    self.experiment_b_failures.inc();
                }
                failed = Some(&call.policy);
            }
            if call.role == CallRole::Fallback
                && let Some(policy) = failed
            {
                self.fallbacks
                    .get_or_create(&PolicyLabel {
                        policy: policy.to_string().into(),
                    })
                    .inc();
            }
        }
        for (policy, reason) in &outcome.rejections {
            self.rejected
                .get_or_create(&ReasonLabels {
                    policy: policy.clone().into(),
                    reason: reason.to_string().into(),
                })
                .inc();
        }
        let arms = std::iter::once(&outcome.record.arm_a).chain(outcome.record.arm_b.as_ref());
        for arm in arms {
            for failed in &arm.failed {
                self.failed_actions
                    .get_or_create(&FailedActionLabels {
                        policy: arm.policy.clone().into(),
                        operation: failed.action.op.name().into(),
                        reason: failed.failure.label().into(),
                    })
                    .inc();
            }
        }
        if let Some(agrees) = outcome.record.shadow.as_ref().and_then(|s| s.agrees) {
            self.shadow_compared.inc();
            if agrees {
                self.shadow_agreed.inc();
            }
        }
    }

    /// Publishes the running experiment's figures as gauges.
    pub fn observe_experiment(&self, report: &ExperimentReport) {
        if let Some(shadow) = &report.shadow {
            self.shadow_agreement
                .set(shadow.agreement_rate.unwrap_or(f64::NAN));
        }
        if let Some(split) = &report.split {
            for arm in &split.arms {
                let labels = ArmLabels {
                    arm: serde_json::to_value(arm.arm)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default()
                        .into(),
                    policy: arm.policy.clone().into(),
                };
                self.arm_jobs.get_or_create(&labels).set(arm.jobs as i64);
                self.arm_finished
                    .get_or_create(&labels)
                    .set(arm.finished as i64);
                self.arm_avg_completion
                    .get_or_create(&labels)
                    .set(arm.avg_completion.unwrap_or(f64::NAN));
                self.arm_avg_wait
                    .get_or_create(&labels)
                    .set(arm.avg_wait.unwrap_or(f64::NAN));
            }
        }
    }

    /// Counts `n` more state writes (blobs or the active policy) that failed.
    pub fn observe_state_save_failures(&self, n: u64) {
        self.state_save_failures.inc_by(n);
    }

    /// Counts a change of the active policy or its parameters.
    pub fn observe_swap(&self) {
        self.swaps.inc();
    }

    /// Counts a refused policy, by [`crate::live::CatalogError::metric_label`] or
    /// another short kind (`read`, `settings`).
    pub fn observe_load_error(&self, kind: &str) {
        self.load_errors
            .get_or_create(&KindLabel {
                kind: kind.to_string().into(),
            })
            .inc();
    }

    /// Counts an accepted upload that will not survive a restart, by
    /// [`switchyard_control::KeepError::metric_label`].
    pub fn observe_upload_not_kept(&self, reason: &str) {
        self.uploads_not_kept
            .get_or_create(&ReasonLabel {
                reason: reason.to_string().into(),
            })
            .inc();
    }

    /// Sets `switchyard_policy_info` to the loaded `policies`, each
    /// (name, version, digest, source); a policy no longer loaded leaves the series.
    pub fn observe_policies<'a>(
        &self,
        policies: impl IntoIterator<Item = (&'a str, &'a str, &'a str, &'a str)>,
    ) {
        self.policy_info.clear();
        for (policy, version, digest, source) in policies {
            self.policy_info
                .get_or_create(&PolicyInfoLabels {
                    policy: policy.into(),
                    version: version.into(),
                    digest: digest.into(),
                    source: source.into(),
                })
                .set(1);
        }
    }

    /// Counts a pushed loss sample by outcome (`accepted`, `ignored`).
    pub fn observe_loss_sample(&self, outcome: &str) {
        self.loss_samples
            .get_or_create(&KindLabel {
                kind: outcome.to_string().into(),
            })
            .inc();
    }

    /// Records whether this replica leads, read when the metrics are scraped.
    pub fn observe_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Records how many connections the HTTP API holds open.
    pub fn observe_http_connections(&self, open: usize) {
        self.http_connections
            .set(i64::try_from(open).unwrap_or(i64::MAX));
    }

    /// Counts a connection the HTTP API closed for a limit (`header-timeout`,
    /// `idle-timeout`, `evicted`, `refused`).
    pub fn observe_http_connection_closed(&self, reason: &'static str) {
        self.http_connections_closed
            .get_or_create(&ReasonLabel {
                reason: reason.into(),
            })
            .inc();
    }

    /// Counts a request the HTTP API refused for a limit (`uploads-busy`,
    /// `body-timeout`).
    pub fn observe_http_request_refused(&self, reason: &'static str) {
        self.http_requests_refused
            .get_or_create(&ReasonLabel {
                reason: reason.into(),
            })
            .inc();
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use switchyard_control::{ArmRecord, DecisionRecord, PolicyCall};
    use switchyard_core::Snapshot;

    use super::*;

    #[test]
    fn a_failed_action_is_counted_by_policy_operation_and_reason() {
        use switchyard_control::{ActionFailure, FailureReason};
        use switchyard_core::Checked;
        use switchyard_core::{Action, Operation};

        let place = Action {
            op: Operation::Place {
                job: "ml/a".into(),
                assignments: vec![],
            },
            reason: "fits".into(),
        };
        let mut arm = ArmRecord::new(
            "default".into(),
            None,
            Checked {
                accepted: vec![place.clone(), place],
                ..Checked::default()
            },
        );
        arm.settle(&[
            Ok(()),
            Err(ActionFailure::new(
                FailureReason::AdmissionRefused,
                "binding pod a-main-0-0 to node n1: admission webhook denied the request",
            )),
        ]);
        let metrics = Metrics::new();
        metrics.observe_round(&RoundOutcome {
            changed: true,
            record: DecisionRecord::new(0, &Snapshot::default(), arm, None),
            calls: vec![],
            rejections: vec![],
            deciders: vec![],
        });
        let text = metrics.render();
        assert!(
            text.contains(
                "switchyard_failed_actions_total{policy=\"default\",operation=\"place\",reason=\"admission-refused\"} 1\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_hostile_label_value_stays_one_label_of_one_line() {
        let hostile = "evil\"} 1\nswitchyard_fake_metric 42\n#\\";
        let metrics = Metrics::new();
        let record = DecisionRecord::new(
            0,
            &Snapshot::default(),
            ArmRecord::new(hostile.into(), None, Default::default()),
            None,
        );
        metrics.observe_round(&RoundOutcome {
            changed: false,
            record,
            calls: vec![PolicyCall {
                policy: hostile.into(),
                role: CallRole::Active,
                latency: Duration::from_millis(3),
                failure: None,
            }],
            rejections: vec![(hostile.into(), "unknown-job")],
            deciders: vec![],
        });
        let text = metrics.render();
        let exposition = openmetrics_parser::openmetrics::parse_openmetrics(&text)
            .unwrap_or_else(|e| panic!("the OpenMetrics text does not parse: {e}\n{text}"));
        assert!(
            !exposition.families.contains_key("switchyard_fake_metric"),
            "a label value forged a metric:\n{text}"
        );
        let decisions = &exposition.families["switchyard_decisions"];
        let sample = decisions
            .iter_samples()
            .next()
            .expect("the decision was counted");
        let policy = sample
            .get_labelset()
            .ok()
            .and_then(|labels| labels.get_label_value("policy").map(str::to_string));
        assert_eq!(policy.as_deref(), Some(hostile));
    }

    /// The series a registered family can show: its name, a counter's `_total`, a
    /// histogram's `_bucket`, `_sum` and `_count`. Read from the `register` calls in this
    /// file, because an empty family writes nothing in the exposition.
    fn exported_series() -> std::collections::BTreeSet<String> {
        let source = include_str!("metrics.rs");
        let mut names = std::collections::BTreeSet::new();
        for call in source.split("registry.register(").skip(1) {
            let Some(name) = call
                .split('"')
                .nth(1)
                .filter(|n| n.starts_with("switchyard_"))
            else {
                continue;
            };
            for suffix in ["", "_total", "_bucket", "_sum", "_count"] {
                names.insert(format!("{name}{suffix}"));
            }
        }
        names
    }

    #[test]
    fn every_metric_the_alerts_and_the_dashboard_use_is_exported() {
        let exported = exported_series();
        assert!(exported.contains("switchyard_rounds_total"), "{exported:?}");
        let files = [
            (
                "deploy/monitoring/prometheusrule.yaml",
                include_str!("../../../deploy/monitoring/prometheusrule.yaml"),
            ),
            (
                "deploy/monitoring/grafana-dashboard.json",
                include_str!("../../../deploy/monitoring/grafana-dashboard.json"),
            ),
            (
                "tests/deploy/alerts.test.yaml",
                include_str!("../../../tests/deploy/alerts.test.yaml"),
            ),
        ];
        let mut used = 0;
        for (path, text) in files {
            for (start, _) in text.match_indices("switchyard_") {
                let name: String = text[start..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                assert!(
                    exported.contains(&name),
                    "{path} uses {name}, which /metrics does not export (it has {exported:?})"
                );
                used += 1;
            }
        }
        assert!(used > 20, "only {used} metric references found");
    }
}
