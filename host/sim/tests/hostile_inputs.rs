//! Workload files and traces written to hurt the host: each is refused with a message
//! naming the field, the value and what is accepted, and the host's memory while it reads
//! and refuses it stays bounded. Memory is counted by this binary's allocator, per
//! thread, so the tests running beside one do not add to its figure.

use std::path::{Path, PathBuf};

use switchyard_sim::{InputLimits, Workload, WorkloadError};
use switchyard_test_support::{CountingAllocator, make_fifo, peak_growth};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// What refusing a hostile file may cost, besides the file's own text: the parser's and
/// the deserialiser's working memory for a few lines, never anything in proportion to
/// what the file declares.
const REFUSAL_BYTES: usize = 1 << 20;

/// The Pollux measurements shipped with the repository.
fn pollux_data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/pollux")
}

/// A workload file `workload.yaml` holding `yaml` in a directory of its own, beside
/// the files `beside` (name, contents) it imports.
struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new(yaml: &str, beside: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("workload.yaml"), yaml).unwrap();
        for (name, contents) in beside {
            std::fs::write(dir.path().join(name), contents).unwrap();
        }
        Self { dir }
    }

    fn workload(&self) -> PathBuf {
        self.dir.path().join("workload.yaml")
    }
}

/// Loads the workload at `path` within `limits` and builds its scenario, returning
/// the error's message and what the host held at most while it ran.
fn refused_within(path: &Path, limits: InputLimits) -> (String, usize) {
    let (outcome, growth) =
        peak_growth(|| Workload::load_with(path, limits).and_then(|w| w.scenario(1).map(|_| ())));
    match outcome {
        Err(error) => (error.to_string(), growth),
        Ok(()) => panic!("{} was accepted", path.display()),
    }
}

/// [`refused_within`] the default limits, asserting the memory bound: a few copies of
/// the file's text at most (the text itself, and the parser's and the deserialiser's
/// copy of its longest scalar), plus [`REFUSAL_BYTES`].
fn refused(path: &Path) -> String {
    let (message, growth) = refused_within(path, InputLimits::default());
    let text = std::fs::metadata(path).map_or(0, |m| m.len() as usize);
    assert!(
        growth < REFUSAL_BYTES + 6 * text,
        "refusing {} held {growth} bytes: {message}",
        path.display()
    );
    message
}

/// `yaml` written out and refused within the default limits.
fn refused_yaml(yaml: &str) -> String {
    refused(&Files::new(yaml, &[]).workload())
}

fn assert_names(message: &str, parts: &[&str]) {
    for part in parts {
        assert!(message.contains(part), "`{part}` missing from: {message}");
    }
}

const NODES: &str = "cluster:\n  nodes: [{name: n, count: 4, cpus: 8, memory_gib: 32, gpus: 8}]\n";

#[test]
fn a_four_line_workload_asking_for_a_billion_jobs_is_refused_before_any_is_built() {
    let message = refused_yaml(&format!(
        "{NODES}templates:\n  t: {{work: 10}}\njobs:\n  - {{template: t, count: 1000000000, every: 1}}\n"
    ));
    assert_names(
        &message,
        &["jobs[0].count", "1000000000 jobs", "at most 1000000 jobs"],
    );
}

#[test]
fn a_billion_tasks_in_few_jobs_are_refused_by_the_task_limits() {
    let per_job = refused_yaml(&format!(
        "{NODES}templates:\n  t:\n    work: 10\n    roles: [{{name: w, count: 1000000000, cpus: 1, memory_gib: 1}}]\n\
         jobs:\n  - {{template: t, at: 0}}\n"
    ));
    assert_names(
        &per_job,
        &[
            "templates.t.roles",
            "1000000000 tasks per job",
            "at most 10000",
        ],
    );
    let in_all = refused_yaml(&format!(
        "{NODES}templates:\n  t:\n    work: 10\n    roles: [{{name: w, count: 10000, cpus: 1, memory_gib: 1}}]\n\
         jobs:\n  - {{template: t, count: 1000, every: 1}}\n"
    ));
    assert_names(
        &in_all,
        &["jobs[0].count", "10000000 tasks", "at most 4000000 tasks"],
    );
    let replicas = refused_yaml(&format!(
        "{NODES}templates:\n  t:\n    work: 10\n    roles: [{{name: w, cpus: 1, memory_gib: 1}}]\n\
         \x20   scale: {{role: w, min: 1, max: 1000000000}}\njobs:\n  - {{template: t, at: 0}}\n"
    ));
    assert_names(
        &replicas,
        &[
            "templates.t.scale.max",
            "got 1000000000",
            "at most 10000 replicas",
        ],
    );
}

#[test]
fn a_node_group_of_a_billion_nodes_is_refused_before_any_is_built() {
    let message = refused_yaml(
        "cluster:\n  nodes: [{name: n, count: 1000000000, cpus: 8, memory_gib: 32}]\n",
    );
    assert_names(
        &message,
        &[
            "cluster.nodes[0].count",
            "1000000000 nodes",
            "at most 100000 nodes",
        ],
    );
}

#[test]
fn a_philly_row_of_a_billion_gpus_is_refused_naming_its_line_and_column() {
    let files = Files::new(
        &format!("{NODES}import:\n  philly: {{path: philly.csv}}\n"),
        &[(
            "philly.csv",
            "timestamp,duration,num_gpus,gpu_time,cluster\n\
             2017-10-03 12:00:00,600,8,4800,c\n\
             2017-10-03 12:00:05,600,1000000000,1,c\n",
        )],
    );
    let message = refused(&files.workload());
    assert_names(
        &message,
        &[
            "philly.csv",
            "line 3",
            "num_gpus",
            "1000000000 GPUs",
            "give at most 80000 GPUs",
        ],
    );
}

#[test]
fn a_philly_duration_that_is_not_a_finite_positive_number_of_seconds_is_refused() {
    for duration in ["NaN", "-5", "0", "inf", "1e308"] {
        let files = Files::new(
            &format!("{NODES}import:\n  philly: {{path: philly.csv}}\n"),
            &[(
                "philly.csv",
                &format!(
                    "timestamp,duration,num_gpus,gpu_time,cluster\n\
                     2017-10-03 12:00:00,{duration},1,1,c\n"
                ),
            )],
        );
        let message = refused(&files.workload());
        let value = match duration {
            "NaN" | "inf" => format!("`{duration}` is not a finite number"),
            _ => format!(
                "got {duration}; give a finite number of seconds above 0 and at most 1000000000"
            ),
        };
        assert_names(&message, &["philly.csv", "line 2", "`duration`", &value]);
    }
}

#[test]
fn a_pollux_row_of_a_billion_replicas_or_a_huge_batch_is_refused_saying_what_is_accepted() {
    let data = pollux_data();
    for (row, parts) in [
        (
            "cifar10-0,0,cifar10,1000000000,2048",
            ["num_replicas", "1000000000", "from 1 to 10000"],
        ),
        (
            "cifar10-0,0,cifar10,4,1e12",
            ["batch_size", "1000000000000", "from 1 to 4294967295"],
        ),
    ] {
        let files = Files::new(
            &format!(
                "{NODES}import:\n  pollux: {{path: jobs.csv, data: {}}}\n",
                data.display()
            ),
            &[(
                "jobs.csv",
                &format!("name,time,application,num_replicas,batch_size\n{row}\n"),
            )],
        );
        // The model's measurements are read before the row is: their size, not the
        // row's, bounds what the refusal costs.
        let (message, growth) = refused_within(&files.workload(), InputLimits::default());
        assert!(growth < 16 << 20, "refusing `{row}` held {growth} bytes");
        assert_names(&message, &["jobs.csv", "line 2"]);
        assert_names(&message, &parts);
        assert!(!message.contains("must be a whole number >="), "{message}");
    }
}

#[test]
fn a_trace_with_more_rows_than_the_limit_is_refused_at_the_first_row_past_it() {
    let rows: String = (0..11)
        .map(|k| format!("2017-10-03 12:00:{k:02},600,1,600,c\n"))
        .collect();
    let files = Files::new(
        &format!("{NODES}import:\n  philly: {{path: philly.csv}}\n"),
        &[(
            "philly.csv",
            &format!("timestamp,duration,num_gpus,gpu_time,cluster\n{rows}"),
        )],
    );
    let limits = InputLimits {
        trace_rows: 10,
        ..InputLimits::default()
    };
    let (message, _) = refused_within(&files.workload(), limits);
    assert_names(&message, &["philly.csv", "more than 10 rows"]);
    let within = InputLimits {
        trace_rows: 11,
        ..InputLimits::default()
    };
    Workload::load_with(&files.workload(), within)
        .unwrap()
        .scenario(1)
        .unwrap();
}

#[test]
fn numbers_that_must_be_finite_and_positive_refuse_nan_zero_and_negatives() {
    let template = |fields: &str| {
        format!(
            "{NODES}templates:\n  t: {{work: 10, {fields}}}\njobs:\n  - {{template: t, at: 0}}\n"
        )
    };
    for (fields, parts) in [
        (
            "speed: .nan",
            ["templates.t.speed", "got NaN", "finite number"],
        ),
        ("speed: 0", ["templates.t.speed", "got 0;", "above 0"]),
        ("cpus: -8", ["templates.t.cpus", "got -8;", "above 0"]),
        (
            "memory_gib: .inf",
            ["templates.t.memory_gib", "got inf;", "at most 1000000000"],
        ),
    ] {
        assert_names(&refused_yaml(&template(fields)), &parts);
    }
    let node = refused_yaml("cluster:\n  nodes: [{name: n, cpus: -8, memory_gib: 32}]\n");
    assert_names(&node, &["cluster.nodes[0].cpus", "got -8;", "above 0"]);
    let huge = refused_yaml("cluster:\n  nodes: [{name: n, cpus: 1e308, memory_gib: 32}]\n");
    assert_names(&huge, &["got 1e308;", "at most 1000000"]);
}

#[test]
fn an_infinite_poisson_rate_is_refused_as_not_finite_rather_than_not_positive() {
    let message = refused_yaml(&format!(
        "{NODES}templates:\n  t: {{work: 10}}\njobs:\n  - {{template: t, count: 3, poisson: .inf}}\n"
    ));
    assert_names(
        &message,
        &[
            "jobs[0].poisson",
            "got inf;",
            "finite number of jobs per second above 0",
        ],
    );
}

#[test]
fn a_node_named_by_a_group_and_again_by_another_node_is_refused_naming_both() {
    let message = refused_yaml(
        "cluster:\n  nodes:\n    - {name: gpu, count: 2, cpus: 8, memory_gib: 32}\n    \
         - {name: gpu-1, cpus: 8, memory_gib: 32}\n",
    );
    assert_names(
        &message,
        &[
            "cluster.nodes[1].name",
            "`gpu-1`",
            "cluster.nodes[0] gives too",
            "unique",
        ],
    );
}

#[test]
fn an_empty_name_and_a_megabyte_name_are_refused_quoting_only_its_start() {
    let empty = refused_yaml("cluster:\n  nodes: [{name: '', cpus: 8, memory_gib: 32}]\n");
    assert_names(
        &empty,
        &["cluster.nodes[0].name", "empty name", "1 to 253 bytes"],
    );
    let long = "j".repeat(1 << 20);
    let message = refused_yaml(&format!(
        "{NODES}templates:\n  t: {{work: 10}}\njobs:\n  - {{template: t, id: {long}, at: 0}}\n"
    ));
    assert_names(&message, &["jobs[0].id", "1048576 bytes", "1 to 253 bytes"]);
    assert!(
        message.len() < 300,
        "the message quotes the name's start only"
    );
    let forged = refused_yaml(&format!(
        "{NODES}templates:\n  t: {{work: 10}}\njobs:\n  - {{template: t, id: \"a\\nimport: x\", at: 0}}\n"
    ));
    assert_names(
        &forged,
        &["jobs[0].id", "`a\\nimport: x`", "control character"],
    );
}

#[test]
fn yaml_nested_two_hundred_thousand_levels_deep_is_refused_where_it_passes_the_limit() {
    let depth = 200_000;
    let message = refused_yaml(&format!("a: {}1{}\n", "[".repeat(depth), "]".repeat(depth)));
    // The mapping is level 1; the 64th `[`, at column 3 + 64, is level 65.
    assert_names(
        &message,
        &[
            "workload.yaml:1:67:",
            "deeper than 64 levels",
            "at most 64 levels",
        ],
    );
    let block = refused_yaml(&format!("{}x\n", "- ".repeat(depth)));
    assert_names(&block, &["deeper than 64 levels"]);
}

#[test]
fn a_workload_that_is_not_a_regular_file_or_too_large_is_refused_unread() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("workload.yaml");
    make_fifo(&fifo);
    for path in [fifo.as_path(), Path::new("/dev/zero"), dir.path()] {
        let (message, growth) = refused_within(path, InputLimits::default());
        assert!(growth < REFUSAL_BYTES, "{growth}");
        assert!(matches!(
            Workload::load(path),
            Err(WorkloadError::Read { .. })
        ));
        assert_names(&message, &["not a regular file"]);
    }
    let big = Files::new(&format!("{NODES}# {}\n", "x".repeat(4096)), &[]);
    let limits = InputLimits {
        yaml_bytes: 1024,
        ..InputLimits::default()
    };
    let (message, growth) = refused_within(&big.workload(), limits);
    assert!(growth < 64 << 10, "{growth}");
    assert_names(&message, &["workload.yaml", "limit of 1024 bytes"]);
}

#[test]
fn every_shipped_workload_is_within_the_default_limits() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut checked = 0;
    for entry in std::fs::read_dir(&examples).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        // Kubernetes manifests (a TrainingJob, the adopted kinds) are not workloads.
        let manifest = text.lines().any(|line| line.starts_with("apiVersion:"));
        if path.extension().is_none_or(|e| e != "yaml") || manifest {
            continue;
        }
        let workload = Workload::load(&path).unwrap_or_else(|e| panic!("{e}"));
        workload
            .scenario(workload.seed())
            .unwrap_or_else(|e| panic!("{e}"));
        checked += 1;
    }
    assert!(checked >= 20, "{checked} examples");
}
