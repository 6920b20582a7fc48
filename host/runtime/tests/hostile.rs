//! The sandbox against a policy that stays inside its deadline and memory cap and still
//! attacks the host through what it returns (`tests/guests/hostile`): every attack is
//! refused as an invalid result naming the budget it overran, the next call works, and
//! the host's own memory stays bounded, counted by this binary's allocator on the thread
//! that calls the policy (the guest runs and its answer is read on the caller's thread).

use switchyard_test_support as support;

use std::time::Duration;

use support::{CountingAllocator, captured_logs, cluster, job, node, peak_growth};
use switchyard_core::{Settings, Snapshot};
use switchyard_runtime::{
    PolicyError, PolicyModule, ResultBudget, Runtime, RuntimeOptions, SandboxLimits,
};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn runtime() -> Runtime {
    // Generous: these attacks stay inside any deadline; a loaded machine must not turn
    // a budget refusal into a deadline.
    support::runtime_with_deadline(Duration::from_secs(30))
}

fn hostile(runtime: &Runtime) -> std::sync::Arc<PolicyModule> {
    runtime
        .load(&support::hostile_guest_named("hostile"), "hostile")
        .unwrap()
}

fn attack(kind: &str, count: usize) -> Settings {
    [("attack", kind.to_string()), ("count", count.to_string())]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

fn snapshot() -> Snapshot {
    cluster().node(node("n1")).job(job("j1")).build()
}

fn invalid_naming(error: PolicyError, budget: &str) {
    match &error {
        PolicyError::InvalidResult { message, .. } => {
            assert!(message.contains(budget), "{error} should name `{budget}`")
        }
        other => panic!("expected an invalid result naming `{budget}`, got {other}"),
    }
}

#[test]
fn strings_that_all_point_at_one_guest_buffer_cost_the_host_no_more_than_the_string_budget() {
    let runtime = runtime();
    let policy = hostile(&runtime);
    // 10,000 reasons of 1 MiB each: 10 GiB if the host copied every one.
    let (outcome, growth) =
        peak_growth(|| policy.decide(&attack("alias", 10_000), &snapshot(), &[], 1));
    invalid_naming(outcome.unwrap_err(), "string-bytes");
    let budget = ResultBudget::default().string_bytes;
    assert!(
        growth < 2 * budget + (16 << 20),
        "the host grew by {growth} bytes for a {budget}-byte string budget"
    );
    // The next call of the same module is served.
    policy
        .decide(&Settings::new(), &snapshot(), &[], 2)
        .unwrap();
}

#[test]
fn a_flood_of_actions_is_refused_before_it_is_copied() {
    let runtime = runtime();
    let policy = hostile(&runtime);
    let over = ResultBudget::default().actions + 1;
    let (outcome, growth) =
        peak_growth(|| policy.decide(&attack("actions", over), &snapshot(), &[], 1));
    invalid_naming(outcome.unwrap_err(), "actions");
    assert!(growth < 64 << 20, "the host grew by {growth} bytes");
    let fine = policy
        .decide(&attack("actions", 1_000), &snapshot(), &[], 2)
        .unwrap();
    assert_eq!(fine.actions.len(), 1_000);
}

#[test]
fn too_many_labels_and_too_large_a_state_blob_are_refused_naming_their_budget() {
    let runtime = runtime();
    let policy = hostile(&runtime);
    let labels = ResultBudget::default().labels + 1;
    invalid_naming(
        policy
            .decide(&attack("labels", labels), &snapshot(), &[], 1)
            .unwrap_err(),
        "labels",
    );
    let state = SandboxLimits::default().state_bytes + 1;
    invalid_naming(
        policy
            .decide(&attack("big-state", state), &snapshot(), &[], 1)
            .unwrap_err(),
        "state blob",
    );
}

#[test]
fn budgets_are_the_operators_to_set() {
    let runtime = Runtime::new(RuntimeOptions {
        limits: SandboxLimits {
            deadline: Duration::from_secs(30),
            budget: ResultBudget {
                actions: 10,
                ..ResultBudget::default()
            },
            ..SandboxLimits::default()
        },
        ..Default::default()
    })
    .unwrap();
    let policy = hostile(&runtime);
    invalid_naming(
        policy
            .decide(&attack("actions", 11), &snapshot(), &[], 1)
            .unwrap_err(),
        "more than 10 actions",
    );
    assert_eq!(
        policy
            .decide(&attack("actions", 10), &snapshot(), &[], 1)
            .unwrap()
            .actions
            .len(),
        10
    );
}

#[test]
fn a_policy_that_logs_without_end_is_cut_at_its_log_budget_and_cannot_forge_a_line() {
    let runtime = runtime();
    let policy = hostile(&runtime);
    let (decision, text) =
        captured_logs(|| policy.decide(&attack("log", 100_000), &snapshot(), &[], 1));
    assert!(decision.unwrap().actions.is_empty());
    let lines: Vec<&str> = text.lines().collect();
    let budget = ResultBudget::default();
    assert!(
        lines.len() <= budget.log_lines + 1,
        "{} lines for a budget of {}",
        lines.len(),
        budget.log_lines
    );
    assert!(
        lines
            .iter()
            .all(|l| !l.starts_with("2026-01-01T00:00:00Z ERROR")),
        "a policy's newline started a line of the host's log"
    );
    assert!(
        lines.iter().any(|l| l.contains("line 0\\n2026")),
        "the newline is escaped"
    );
    let summary = lines.last().unwrap();
    assert!(
        summary.contains("past its budget") && summary.contains("dropped_lines="),
        "{summary}"
    );
    assert!(
        text.len() < budget.log_bytes * 2,
        "{} bytes of log",
        text.len()
    );
}
