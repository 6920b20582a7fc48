//! The `switchyard policy` commands as a user runs them.

use crate::support;

use assert_cmd::Command;

/// The command, kept off the user's compile cache so a test leaves nothing behind.
pub(crate) fn switchyard() -> Command {
    let mut cmd = Command::cargo_bin("switchyard").unwrap();
    cmd.env("SWITCHYARD_NO_CACHE", "1");
    cmd
}

/// Runs the command, asserts it succeeded and returns its standard output.
pub(crate) fn stdout_of(args: &[&str]) -> String {
    let output = switchyard().args(args).output().unwrap();
    assert!(
        output.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// The call deadline the `inspect` tests give the command. Its own default is the
/// controller's, a wall-clock bound that a machine busy with other builds can overrun
/// while instantiating a policy and asking it to describe itself; what these tests check
/// is what `inspect` prints, so their deadline is theirs to set, and far from any
/// machine's speed.
const INSPECT_DEADLINE_MS: &str = "60000";

/// `switchyard policy inspect ARGS` under [`INSPECT_DEADLINE_MS`]: its standard output,
/// once it succeeded.
fn inspect(args: &[&str]) -> String {
    let mut full = vec![
        "policy",
        "inspect",
        "--policy-deadline-ms",
        INSPECT_DEADLINE_MS,
    ];
    full.extend_from_slice(args);
    stdout_of(&full)
}

#[test]
fn inspect_prints_the_world_and_the_default_policys_parameters() {
    let out = inspect(&["default"]);
    assert!(
        out.contains("world:    switchyard:policy/incremental-scheduler@0.3.0"),
        "{out}"
    );
    assert!(
        out.contains("scoring") && out.contains("least-allocated"),
        "{out}"
    );
}

#[test]
fn inspect_prints_every_shipped_paper_policys_parameters_and_defaults() {
    for (policy, parameter, default) in [
        ("specon", "alpha", "0.01"),
        ("specon", "interval", "30"),
        ("flowcon", "beta", "2"),
        ("dragon", "tau", "120"),
        ("gang", "mode", "strict"),
        ("tiresias", "queue_thresholds", "57600"),
        ("tiresias", "promote_knob", "0"),
        ("tiresias", "interval", "60"),
    ] {
        let out = inspect(&[policy]);
        let line = out
            .lines()
            .find(|l| l.split_whitespace().next() == Some(parameter))
            .unwrap_or_else(|| panic!("{policy} has no parameter {parameter}:\n{out}"));
        assert!(line.contains(default), "{policy}: {line}");
    }
}

#[test]
fn inspect_says_whether_a_policy_reads_loss_series() {
    for (policy, line) in [
        ("specon", "loss:     read ("),
        ("default", "loss:     not read ("),
    ] {
        let out = inspect(&[policy]);
        assert!(out.lines().any(|l| l.starts_with(line)), "{policy}:\n{out}");
    }
    let json: serde_json::Value = serde_json::from_str(&inspect(&["--json", "flowcon"])).unwrap();
    assert_eq!(json["description"]["reads_loss"], true, "{json}");
}

#[test]
fn list_names_every_built_in_policy() {
    let out = stdout_of(&["policy", "list"]);
    for name in [
        "default", "even", "specon", "flowcon", "dragon", "gang", "tiresias",
    ] {
        assert!(
            out.lines().any(|l| l == name),
            "{name} missing from:\n{out}"
        );
    }
}

#[test]
fn validate_accepts_a_policy_and_refuses_another_world_with_exit_status_one() {
    switchyard()
        .args(["policy", "validate", "specon"])
        .assert()
        .success();

    let output = switchyard()
        .args(["policy", "validate", &support::guest("other-world")])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("does not implement the switchyard policy world"),
        "{stderr}"
    );
}

/// Runs `policy validate` on `path`, checks it exits with status 1, returns stderr.
fn refused_by_validate(path: &std::path::Path) -> String {
    let output = switchyard()
        .args(["policy", "validate"])
        .arg(path)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn validate_refuses_a_file_that_is_not_wasm() {
    let dir = std::env::temp_dir().join(format!("switchyard-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("broken.wasm");
    std::fs::write(&path, "this is text").unwrap();
    let stderr = refused_by_validate(&path);
    assert!(
        stderr.contains("is not a WebAssembly component"),
        "{stderr}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn an_unknown_policy_name_lists_the_built_in_ones() {
    let output = switchyard()
        .args(["policy", "inspect", "specn"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no built-in policy is called `specn`"),
        "{stderr}"
    );
    assert!(stderr.contains("specon"), "{stderr}");
}

#[test]
fn validate_refuses_a_core_module_and_says_how_to_build_a_component() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("core.wasm");
    std::fs::write(&path, wasm_encoder::Module::new().finish()).unwrap();
    let stderr = refused_by_validate(&path);
    assert!(
        stderr.contains("core WebAssembly module") && stderr.contains("wasm32-wasip2"),
        "{stderr}"
    );
}

#[test]
fn a_run_in_which_no_job_finishes_shows_no_completion_time_rather_than_zero() {
    let out = stdout_of(&[
        "simulate",
        "../../examples/gang-three-ps-jobs.yaml",
        "--policy",
        "default",
    ]);
    let row = out
        .lines()
        .find(|l| l.starts_with("default"))
        .unwrap_or_else(|| panic!("no row for default:\n{out}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    // policy, jobs, done, avg, p50, p95: the default scheduler strands every gang here.
    assert_eq!(cells[2], "0", "{row}");
    assert_eq!(&cells[3..6], ["n/a", "n/a", "n/a"], "{row}");
}

#[test]
fn the_same_workload_and_seed_give_byte_identical_results() {
    let dir = std::env::temp_dir().join(format!("switchyard-determinism-{}", std::process::id()));
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/quickstart.yaml"
    );
    let mut outputs = Vec::new();
    for run in 0..2 {
        let out = dir.join(run.to_string());
        switchyard()
            .args([
                "simulate", example, "--policy", "default", "--seed", "7", "--out",
            ])
            .arg(&out)
            .assert()
            .success();
        outputs.push(std::fs::read(out.join("results.json")).unwrap());
    }
    assert_eq!(outputs[0], outputs[1]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_same_split_experiment_and_seed_give_byte_identical_reports() {
    let dir = tempfile::tempdir().unwrap();
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/quickstart.yaml"
    );
    let mut outputs = Vec::new();
    for run in 0..3 {
        let out = dir.path().join(run.to_string());
        switchyard()
            .args(["simulate", example, "--split", "default:even:0.5", "--out"])
            .arg(&out)
            .assert()
            .success();
        outputs.push(std::fs::read(out.join("experiment.json")).unwrap());
    }
    assert_eq!(outputs[0], outputs[1]);
    assert_eq!(outputs[0], outputs[2]);
}

/// Runs `simulate` of the quickstart under the hostile guest named `eager` with `sets`,
/// and returns its run's summary.
fn hostile_run(sets: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("eager.wasm");
    std::fs::write(&wasm, support::hostile_guest_named("eager")).unwrap();
    let out = dir.path().join("out");
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/quickstart.yaml"
    );
    let mut args = vec![
        "simulate".to_string(),
        example.to_string(),
        "--policy".to_string(),
        wasm.display().to_string(),
        "--out".to_string(),
        out.display().to_string(),
    ];
    for set in sets {
        args.push("--set".into());
        args.push(set.to_string());
    }
    switchyard().args(&args).assert().success();
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
    results["runs"][0]["summary"].clone()
}

#[test]
fn simulate_bounds_a_policy_that_asks_to_be_called_at_once() {
    let summary = hostile_run(&["eager.attack=tick-zero"]);
    let makespan = summary["makespan"].as_f64().unwrap();
    let rounds = summary["rounds"].as_f64().unwrap();
    // At most one tick per second of cluster time, plus one round per event.
    assert!(
        rounds <= makespan + 100.0,
        "{rounds} rounds in {makespan} s: {summary}"
    );
}

#[test]
fn simulate_refuses_a_flood_and_the_fallback_runs_the_workload() {
    let summary = hostile_run(&["eager.attack=actions", "eager.count=300000"]);
    assert_eq!(summary["policy_failures"], summary["rounds"], "{summary}");
    assert_eq!(summary["finished"], summary["jobs"], "{summary}");
}

#[test]
fn run_help_lists_both_clusters_flags_and_the_log_variable_and_run_without_a_cluster_says_what_it_needs()
 {
    let out = stdout_of(&["run", "--help"]);
    for needed in [
        "--cluster sim:WORKLOAD.yaml",
        "--cluster kube",
        "--integrations <KINDS>",
        "--queue <QUEUE>",
        "--webhook-cert-dir <DIR>",
        "--webhook-port <PORT>",
        "--speed",
        "SWITCHYARD_LOG",
    ] {
        assert!(out.contains(needed), "`{needed}` missing from:\n{out}");
    }
    let output = switchyard().arg("run").output().unwrap();
    assert!(!output.status.success());
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(
        error.contains("needs --cluster") && error.contains("sim:WORKLOAD.yaml"),
        "{error}"
    );
}

#[test]
fn two_settings_of_one_policy_compare_under_their_own_names_and_a_repeated_name_is_refused() {
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/dragon-table1.yaml"
    );
    let out = stdout_of(&[
        "simulate",
        example,
        "--policy",
        "dragon",
        "--policy",
        "local=dragon",
        "--set",
        "local.scaling=false",
    ]);
    let cells = |name: &str| -> Vec<String> {
        out.lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no row {name}:\n{out}"))
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    // policy, jobs, done, 5 times, CPU, GPU, migr, rescale: DRAGON scales, local does not.
    assert_ne!(cells("dragon")[11], "0", "{out}");
    assert_eq!(cells("local")[11], "0", "{out}");
    assert!(out.contains("local vs dragon"), "{out}");

    let output = switchyard()
        .args([
            "simulate", example, "--policy", "dragon", "--policy", "dragon",
        ])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(error.contains("two runs are named `dragon`"), "{error}");
}

#[test]
fn simulate_out_writes_every_plot_as_png_and_svg_and_names_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/gang-three-ps-jobs.yaml"
    );
    let out = stdout_of(&[
        "simulate",
        example,
        "--policy",
        "default",
        "--policy",
        "gang",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    for plot in switchyard::PLOTS {
        let png = std::fs::read(dir.path().join(format!("{plot}.png"))).unwrap();
        assert!(
            png.starts_with(b"\x89PNG\r\n\x1a\n"),
            "{plot}.png is not a PNG"
        );
        let svg = std::fs::read_to_string(dir.path().join(format!("{plot}.svg"))).unwrap();
        assert!(
            svg.contains("gang-three-ps-jobs.yaml, seed 1"),
            "{plot}.svg has no title"
        );
        assert!(
            svg.contains("deadlocked: 0 of 3 jobs done"),
            "{plot}.svg does not mark the deadlock"
        );
        assert!(out.contains(&format!("{plot}.png")), "{out}");
    }
    assert!(dir.path().join("decisions-gang.jsonl").is_file());
}

#[test]
fn the_default_disruption_budget_leaves_dragon_on_table_1_as_no_budget_does_and_a_cluster_cap_would_not()
 {
    let table1 = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/dragon-table1.yaml"
    );
    let run = |extra: &[&str]| {
        let mut args = vec!["simulate", table1, "--policy", "dragon"];
        args.extend(extra);
        stdout_of(&args)
    };
    let off = run(&["--no-disruption-budget"]);
    assert_eq!(
        off,
        run(&["--max-disruptions-per-job", "0"]),
        "the flag is no budget at all"
    );
    assert_eq!(off, run(&[]), "the default budget leaves DRAGON alone");
    // DRAGON scales jobs down for an urgent one: a cap of half the jobs per minute
    // across the cluster refuses some of it.
    assert_ne!(
        off,
        run(&[
            "--max-disrupted-share",
            "0.5",
            "--disruption-interval",
            "60"
        ]),
        "a cluster-wide cap changes DRAGON on Table 1"
    );
    let clash = switchyard()
        .args([
            "simulate",
            table1,
            "--no-disruption-budget",
            "--max-disruptions-per-job",
            "5",
        ])
        .output()
        .unwrap();
    assert!(!clash.status.success(), "the flag and a budget flag clash");
}

#[test]
fn simulate_holds_each_decision_trace_to_its_limit_and_summarises_the_rounds_past_it() {
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/quickstart.yaml"
    );
    const LIMIT_KIB: usize = 4;
    let trace_of = |limit: Option<usize>| {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().to_str().unwrap();
        let mut args = vec!["simulate", example, "--policy", "default", "--out", out];
        let limit = limit.map(|kib| kib.to_string());
        if let Some(kib) = &limit {
            args.extend(["--trace-limit-kib", kib]);
        }
        stdout_of(&args);
        std::fs::read_to_string(dir.path().join("decisions-default.jsonl")).unwrap()
    };
    let whole = trace_of(None);
    let cut = trace_of(Some(LIMIT_KIB));
    assert!(
        whole.len() > LIMIT_KIB << 10,
        "the run writes more than the limit"
    );

    let (records, summary) = cut
        .trim_end()
        .rsplit_once('\n')
        .expect("records, then the summary");
    assert!(records.len() < LIMIT_KIB << 10, "{} bytes", records.len());
    let first: serde_json::Value = serde_json::from_str(records.lines().next().unwrap()).unwrap();
    assert_eq!(first["policies"][0]["name"], "default", "{first}");
    assert!(
        whole.starts_with(records),
        "the trace is the run's first rounds, written whole"
    );
    let summary: serde_json::Value = serde_json::from_str(summary).unwrap();
    let omitted = &summary["omitted"];
    let left_out = &whole[records.len() + 1..];
    assert_eq!(omitted["rounds"], left_out.lines().count(), "{summary}");
    assert_eq!(omitted["bytes"], left_out.len(), "{summary}");
    assert_eq!(omitted["limit_bytes"], LIMIT_KIB << 10, "{summary}");
}

/// Files (at any depth) under `dir` that `keep` accepts by name.
fn files_under(dir: &std::path::Path, keep: &dyn Fn(&str) -> bool) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .map(|e| e.unwrap().path())
            .map(|p| match p.is_dir() {
                true => files_under(&p, keep),
                false => usize::from(keep(&p.file_name().unwrap().to_string_lossy())),
            })
            .sum()
    })
}

/// Whether a file of wasmtime's cache holds a compiled component: its background worker
/// also writes usage statistics (`*.stats`) and clean-up markers (`.cleanup.wip-*`)
/// whenever it gets to them, so those come and go between runs.
fn is_compiled_entry(name: &str) -> bool {
    !name.starts_with('.') && !name.ends_with(".stats")
}

#[test]
fn compiled_policies_are_cached_on_disk_unless_the_cache_is_turned_off() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let inspect = |extra: &[&str]| {
        Command::cargo_bin("switchyard")
            .unwrap()
            .env_remove("SWITCHYARD_NO_CACHE")
            .env("SWITCHYARD_CACHE_DIR", &cache)
            .args(["policy", "inspect", "even"])
            .args(["--policy-deadline-ms", INSPECT_DEADLINE_MS])
            .args(extra)
            .assert()
            .success();
    };
    inspect(&["--no-cache"]);
    assert_eq!(
        files_under(&cache, &|_| true),
        0,
        "--no-cache writes nothing"
    );
    inspect(&[]);
    let cached = files_under(&cache, &is_compiled_entry);
    assert!(
        cached > 0,
        "the compiled component is kept in {}",
        cache.display()
    );
    inspect(&[]);
    assert_eq!(
        files_under(&cache, &is_compiled_entry),
        cached,
        "the second run found it there"
    );
}

#[test]
fn replay_of_an_empty_segment_fails_naming_it_instead_of_reporting_full_agreement() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::File::create(dir.path().join("segment-000000.jsonl.zst")).unwrap();
    let output = switchyard()
        .arg("replay")
        .arg(dir.path())
        .args(["--policy", "default"])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert!(!output.status.success(), "{stdout}");
    assert!(
        stderr.contains("segment-000000.jsonl.zst") && stderr.contains("it is empty"),
        "{stderr}"
    );
    assert!(!stdout.contains('%'), "no agreement is claimed: {stdout}");
}
