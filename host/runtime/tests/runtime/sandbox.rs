//! The sandboxed runtime, exercised with real components built from the guest crates in
//! this repository (`tests/guests/*`, `policies/*`).

use crate::support;

use std::time::{Duration, Instant};

use support::{cluster, job, node, res, runtime_with_deadline};
use switchyard_core::{Operation, Rejection, Settings, check_decision};
use switchyard_runtime::{
    Compiler, LoadError, PolicyError, PolicyModule, PolicyRef, Runtime, RuntimeOptions,
    SandboxLimits, builtin,
};

static LOOPING: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| support::guest("looping"));
static HUNGRY: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| support::guest("hungry"));
static ROGUE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| support::guest("rogue"));
static OTHER_WORLD: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| support::guest("other-world"));

fn load_file(runtime: &Runtime, path: &str) -> std::sync::Arc<switchyard_runtime::PolicyModule> {
    runtime.load(&std::fs::read(path).unwrap(), path).unwrap()
}

fn two_nodes_one_waiting_job() -> switchyard_core::Snapshot {
    cluster()
        .node(node("n1"))
        .node(node("n2"))
        .job(job("j1"))
        .build()
}

#[test]
fn a_policy_that_loops_forever_is_stopped_by_its_deadline_and_the_host_keeps_serving() {
    let deadline = Duration::from_millis(100);
    let runtime = runtime_with_deadline(deadline);
    let looping = load_file(&runtime, &LOOPING);
    let default = PolicyRef::parse("default").unwrap().load(&runtime).unwrap();
    let snapshot = two_nodes_one_waiting_job();

    for _ in 0..3 {
        let started = Instant::now();
        let error = looping
            .decide(&Settings::new(), &snapshot, &[], 1)
            .unwrap_err();
        let took = started.elapsed();
        assert!(
            matches!(error, PolicyError::DeadlineExceeded { .. }),
            "{error}"
        );
        assert!(
            error.to_string().contains("looping"),
            "error names the policy: {error}"
        );
        // Stopped, not run to completion: the bound is loose on purpose (a loaded
        // machine delays the epoch ticker); how close to the deadline a call stops is
        // measured in `benches/`, not asserted here.
        assert!(
            took < deadline * 50,
            "stopped after {took:?}, deadline {deadline:?}"
        );

        let decision = default.decide(&Settings::new(), &snapshot, &[], 1).unwrap();
        assert_eq!(
            decision.actions.len(),
            1,
            "the next call on the same host is served"
        );
    }
}

#[test]
fn a_policy_that_allocates_past_its_memory_cap_is_stopped_as_out_of_memory() {
    let runtime = runtime_with_deadline(Duration::from_secs(5));
    let hungry = load_file(&runtime, &HUNGRY);
    let error = hungry
        .decide(&Settings::new(), &two_nodes_one_waiting_job(), &[], 1)
        .unwrap_err();
    match &error {
        PolicyError::OutOfMemory {
            policy,
            limit_bytes,
            ..
        } => {
            assert_eq!(policy, "hungry");
            assert_eq!(*limit_bytes, 64 << 20);
        }
        other => panic!("expected out-of-memory, got {other}"),
    }
    assert_eq!(error.metric_label(), "oom");
}

#[test]
fn actions_for_unknown_nodes_and_jobs_are_rejected_and_the_valid_one_still_applies() {
    let runtime = runtime_with_deadline(Duration::from_secs(1));
    let rogue = load_file(&runtime, &ROGUE);
    let snapshot = two_nodes_one_waiting_job();
    let decision = rogue.decide(&Settings::new(), &snapshot, &[], 1).unwrap();
    let checked = check_decision(&snapshot, &decision);

    let reasons: Vec<&Rejection> = checked.rejected.iter().map(|r| &r.reason).collect();
    assert!(
        reasons.contains(&&Rejection::UnknownNode {
            node: "no-such-node".into()
        }),
        "{reasons:?}"
    );
    assert!(
        reasons.contains(&&Rejection::UnknownJob {
            job: "no-such-job".into()
        }),
        "{reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .any(|r| matches!(r, Rejection::WeightOutOfRange { .. })),
        "{reasons:?}"
    );
    assert_eq!(checked.accepted.len(), 1);
    assert!(matches!(
        &checked.accepted[0].op,
        Operation::Place { job, assignments } if job == "j1" && assignments[0].node == "n1"
    ));
}

#[test]
fn a_file_that_is_not_a_component_is_refused_with_a_message_that_says_so() {
    let runtime = runtime_with_deadline(Duration::from_secs(1));
    let error = runtime
        .load(b"definitely not wasm", "notes.txt")
        .unwrap_err();
    assert!(matches!(error, LoadError::NotAComponent { .. }));
    assert!(
        error
            .to_string()
            .contains("notes.txt is not a WebAssembly component"),
        "{error}"
    );

    // A core module (what wasm32-unknown-unknown builds) is not a component either.
    let core_module = b"\0asm\x01\0\0\0";
    let error = runtime.load(core_module, "core.wasm").unwrap_err();
    assert!(
        error.to_string().contains("core WebAssembly module"),
        "{error}"
    );
}

#[test]
fn a_component_of_another_world_is_refused_naming_what_it_exports() {
    let runtime = runtime_with_deadline(Duration::from_secs(1));
    let bytes = std::fs::read(&*OTHER_WORLD).unwrap();
    let error = runtime.load(&bytes, "greeter.wasm").unwrap_err();
    assert!(matches!(error, LoadError::WrongWorld { .. }), "{error}");
    let message = error.to_string();
    assert!(message.contains("exports greet"), "{message}");
    assert!(
        message.contains("switchyard:policy/scheduler@0.3.0"),
        "{message}"
    );
}

#[test]
fn a_policy_built_against_contract_0_2_is_refused_naming_both_versions_and_how_to_rebuild() {
    let runtime = runtime_with_deadline(Duration::from_secs(1));
    let bytes = std::fs::read(support::guest("contract-0-2")).unwrap();
    let error = runtime.load(&bytes, "old.wasm").unwrap_err();
    assert!(matches!(error, LoadError::WrongWorld { .. }), "{error}");
    let message = error.to_string();
    for needed in [
        "built against switchyard:policy@0.2.0",
        "this host speaks switchyard:policy@0.3.0",
        "rebuild it against the switchyard:policy@0.3.0 WIT",
        "cargo build --release --target wasm32-wasip2",
        "componentize-py -w switchyard:policy/incremental-policy@0.3.0",
        "the current JavaScript SDK's `bin/build.js`",
    ] {
        assert!(message.contains(needed), "missing `{needed}` in: {message}");
    }
}

#[test]
fn a_component_is_compiled_once_per_content_digest() {
    let runtime = runtime_with_deadline(Duration::from_secs(1));
    let first = PolicyRef::parse("default").unwrap().load(&runtime).unwrap();
    let second = PolicyRef::parse("default").unwrap().load(&runtime).unwrap();
    assert!(std::sync::Arc::ptr_eq(&first, &second));
    assert!(first.digest().to_hex().starts_with("sha256:"));
}

#[test]
fn the_same_snapshot_state_and_seed_give_the_same_decision() {
    let runtime = runtime_with_deadline(Duration::from_secs(1));
    let default = PolicyRef::parse("default").unwrap().load(&runtime).unwrap();
    let snapshot = cluster()
        .node(node("n1").cpus(4.0))
        .node(node("n2").cpus(16.0))
        .job(job("a").task("main", "main", res(2.0, 1, 0)))
        .job(job("b").task("main", "main", res(3.0, 1, 0)))
        .build();
    let first = default
        .decide(&Settings::new(), &snapshot, b"s", 7)
        .unwrap();
    let again = default
        .decide(&Settings::new(), &snapshot, b"s", 7)
        .unwrap();
    assert_eq!(first, again);
    assert_eq!(first.state, b"s");
}

#[test]
fn the_default_policy_places_pod_by_pod_on_the_least_allocated_node() {
    let runtime = runtime_with_deadline(Duration::from_secs(1));
    let default = PolicyRef::parse("default").unwrap().load(&runtime).unwrap();
    let snapshot = cluster()
        .node(node("small").cpus(4.0))
        .node(node("big").cpus(16.0))
        .job(job("ps-job").task("ps-0", "ps", res(1.0, 1, 0)).task(
            "worker-0",
            "worker",
            res(1.0, 1, 0),
        ))
        .build();
    let decision = default.decide(&Settings::new(), &snapshot, &[], 0).unwrap();
    assert_eq!(
        decision.actions.len(),
        2,
        "one placement per pod, not one gang"
    );
    for action in &decision.actions {
        let Operation::Place { assignments, .. } = &action.op else {
            panic!("{action:?}")
        };
        assert_eq!(assignments.len(), 1);
        assert_eq!(assignments[0].node, "big");
    }
}

#[test]
fn settings_are_checked_by_the_policy_with_a_message_naming_the_parameter() {
    let runtime = runtime_with_deadline(Duration::from_secs(1));
    let default = PolicyRef::parse("default").unwrap().load(&runtime).unwrap();
    let effective = default.configure(&Settings::new()).unwrap();
    assert_eq!(
        effective.get("scoring").map(String::as_str),
        Some("least-allocated")
    );

    let typo = Settings::from([("scorring".to_string(), "x".to_string())]);
    let error = default.configure(&typo).unwrap_err();
    assert!(matches!(error, PolicyError::Refused { .. }));
    assert!(
        error.to_string().contains("unknown parameter `scorring`"),
        "{error}"
    );

    let bad = Settings::from([("scoring".to_string(), "random".to_string())]);
    let error = default.configure(&bad).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("least-allocated, most-allocated"),
        "{error}"
    );
}

#[test]
fn compiled_code_is_cached_on_disk_when_a_cache_directory_is_given() {
    let dir = std::env::temp_dir().join(format!("switchyard-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let options = RuntimeOptions {
        limits: SandboxLimits::default(),
        cache_dir: Some(dir.clone()),
        ..Default::default()
    };
    let runtime = Runtime::new(options).unwrap();
    PolicyRef::parse("default").unwrap().load(&runtime).unwrap();
    drop(runtime);
    let cached_files = walk(&dir);
    assert!(
        cached_files > 0,
        "nothing was written under {}",
        dir.display()
    );
    // wasmtime's cache worker may still be writing its statistics files from a thread
    // of its own: the directory is removed on a best-effort basis.
    let _ = std::fs::remove_dir_all(&dir);
}

fn walk(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| {
                    if e.path().is_dir() {
                        walk(&e.path())
                    } else {
                        1
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

/// A runtime as the controller has it: new components answer from Winch's code first.
fn quick_first_runtime(deadline: Duration) -> Runtime {
    Runtime::new(RuntimeOptions {
        limits: SandboxLimits {
            deadline,
            ..SandboxLimits::default()
        },
        quick_first: true,
        ..Default::default()
    })
    .unwrap()
}

/// Waits (a minute at most) for `module`'s background Cranelift compile.
fn wait_for_cranelift(module: &PolicyModule) {
    support::wait_until(
        &format!("{module:?} to run Cranelift's code"),
        Duration::from_secs(60),
        || module.compiler() == Compiler::Cranelift,
    );
}

#[test]
fn a_new_component_answers_from_winch_then_from_cranelift_with_the_same_decisions() {
    let quick = quick_first_runtime(Duration::from_secs(5));
    let reference = runtime_with_deadline(Duration::from_secs(5));
    let snapshot = cluster()
        .node(node("n1"))
        .node(node("n2").cpus(4.0))
        .job(job("j1").loss(&[5.0, 4.0, 3.5]).running_on("n1"))
        .job(job("j2").loss(&[6.0, 3.0]).running_on("n2"))
        .job(job("j3"))
        .build();
    for name in ["default", "specon", "dragon"] {
        let bytes = builtin(name).unwrap().bytes;
        let module = quick.load(bytes, name).unwrap();
        // Cranelift needs tens of milliseconds more than Winch, and starts only now.
        assert_eq!(module.compiler(), Compiler::Winch, "{name}");
        let expected = reference.load(bytes, name).unwrap();
        assert_eq!(expected.compiler(), Compiler::Cranelift);
        let want = expected
            .decide(&Settings::new(), &snapshot, &[], 7)
            .unwrap();
        assert_eq!(
            module.decide(&Settings::new(), &snapshot, &[], 7).unwrap(),
            want,
            "{name} on Winch's code"
        );
        wait_for_cranelift(&module);
        assert_eq!(
            module.decide(&Settings::new(), &snapshot, &[], 7).unwrap(),
            want,
            "{name} on Cranelift's code"
        );
    }
}

#[test]
fn winch_code_keeps_the_sandbox_deadline_and_memory_cap() {
    let deadline = Duration::from_millis(100);
    let runtime = quick_first_runtime(deadline);
    // Each guest is called right after its load: its Cranelift compile has only just
    // started (a call keeps the code it started on).
    let looping = load_file(&runtime, &LOOPING);
    assert_eq!(looping.compiler(), Compiler::Winch);
    let error = looping
        .decide(&Settings::new(), &two_nodes_one_waiting_job(), &[], 1)
        .unwrap_err();
    assert!(
        matches!(error, PolicyError::DeadlineExceeded { .. }),
        "{error}"
    );
    // Winch's code grows memory slowly; on a loaded machine it could meet a 100 ms
    // deadline before the cap. A deadline it cannot meet isolates the memory cap.
    let runtime = quick_first_runtime(Duration::from_secs(60));
    let hungry = load_file(&runtime, &HUNGRY);
    assert_eq!(hungry.compiler(), Compiler::Winch);
    let error = hungry
        .decide(&Settings::new(), &two_nodes_one_waiting_job(), &[], 1)
        .unwrap_err();
    assert!(matches!(error, PolicyError::OutOfMemory { .. }), "{error}");
}
