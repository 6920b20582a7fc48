//! The measured job model of the Pollux artifact: a model directory is read
//! whatever its model, a malformed one is refused with the file, line and column at
//! fault and never a panic, and the jobs of the real workloads carry the model.

use std::path::{Path, PathBuf};

use switchyard_control::{Advance, Cluster};
use switchyard_core::{Action, Assignment, Operation};
use switchyard_sim::{
    Scenario, SimConfig, Simulator, Speed, Workload, WorkloadError, load_application,
};

/// A small, valid model directory: two placements, one scalability shape, two runs.
struct ModelDir {
    dir: tempfile::TempDir,
}

const PLACEMENTS: &str = "placement,local_bsz,step_time,sync_time\n\
    1,32,0.10,0.00\n1,64,0.20,0.00\n\
    2,32,0.12,0.02\n2,64,0.22,0.02\n\
    11,32,0.20,0.10\n11,64,0.30,0.10\n";
const SCALABILITY: &str = "num_nodes,num_replicas,local_bsz,step_time,sync_time\n\
    4,8,32,0.40,0.30\n4,8,64,0.50,0.30\n";
const RUN_32: &str = "progress,iteration,metric,grad_sqr,grad_var\n\
    100,100,0.5,1.0,1.0\n200,200,0.7,1.0,1.0\n300,300,0.8,1.0,1.0\n";
const RUN_128: &str = "progress,iteration,metric,grad_sqr,grad_var\n\
    110,30,0.4,1.0,3.0\n220,60,0.6,1.0,3.0\n330,90,0.8,1.0,3.0\n";

impl ModelDir {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let model = Self { dir };
        model.write("placements.csv", PLACEMENTS);
        model.write("scalability.csv", SCALABILITY);
        model.write("validation-32.csv", RUN_32);
        model.write("validation-128.csv", RUN_128);
        model
    }

    fn path(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    fn write(&self, file: &str, text: &str) -> &Self {
        std::fs::write(self.dir.path().join(file), text).unwrap();
        self
    }

    fn remove(&self, file: &str) -> &Self {
        std::fs::remove_file(self.dir.path().join(file)).unwrap();
        self
    }

    fn error(&self) -> String {
        match load_application(&self.path()) {
            Ok(_) => panic!("the model loaded"),
            Err(e) => e.to_string(),
        }
    }
}

fn assert_names(error: &str, parts: &[&str]) {
    for part in parts {
        assert!(error.contains(part), "`{part}` missing from: {error}");
    }
}

#[test]
fn a_model_directory_in_the_artifacts_format_loads_whatever_the_model() {
    let model = load_application(&ModelDir::new().path()).unwrap();
    let limits = model.limits();
    assert_eq!((limits.init_batch_size, limits.max_batch_size), (32, 128));
    assert_eq!((limits.min_local_bsz, limits.max_local_bsz), (32, 64));
    assert_eq!(limits.max_epochs, 3);
    // A job is done at the end of the last epoch, the least any run needed.
    assert_eq!(model.total_progress(), 300.0);
    // `11` was measured: crossing nodes costs what it measured, no more.
    assert_eq!(model.step_time(&[1, 1], 32.0).step, 0.20);
}

#[test]
fn a_missing_column_is_named_with_its_file() {
    let dir = ModelDir::new();
    dir.write(
        "validation-32.csv",
        "progress,iteration,metric,grad_sqr\n100,100,0.5,1.0\n",
    );
    assert_names(
        &dir.error(),
        &["validation-32.csv", "missing column `grad_var`"],
    );
    let dir = ModelDir::new();
    dir.write(
        "placements.csv",
        "placement,local_bsz,step_time\n1,32,0.1\n",
    );
    assert_names(&dir.error(), &["placements.csv", "`sync_time`"]);
}

#[test]
fn batch_sizes_that_do_not_rise_are_refused_with_line_and_column() {
    let dir = ModelDir::new();
    dir.write(
        "placements.csv",
        "placement,local_bsz,step_time,sync_time\n1,64,0.2,0.0\n1,32,0.1,0.0\n",
    );
    assert_names(
        &dir.error(),
        &[
            "placements.csv",
            "line 3",
            "column `local_bsz`",
            "placement `1`",
        ],
    );
    let dir = ModelDir::new();
    dir.write(
        "scalability.csv",
        "num_nodes,num_replicas,local_bsz,step_time,sync_time\n4,8,64,0.5,0.3\n4,8,64,0.5,0.3\n",
    );
    assert_names(&dir.error(), &["scalability.csv", "line 3", "`local_bsz`"]);
    let dir = ModelDir::new();
    dir.write(
        "validation-32.csv",
        "progress,iteration,metric,grad_sqr,grad_var\n200,1,0.5,1,1\n100,2,0.6,1,1\n",
    );
    assert_names(
        &dir.error(),
        &["validation-32.csv", "line 3", "column `progress`"],
    );
}

#[test]
fn a_file_of_one_row_is_a_model_of_one_epoch_or_one_measurement() {
    let dir = ModelDir::new();
    dir.write(
        "validation-32.csv",
        "progress,iteration,metric,grad_sqr,grad_var\n100,100,0.5,1,1\n",
    );
    dir.write(
        "placements.csv",
        "placement,local_bsz,step_time,sync_time\n1,32,0.1,0.0\n",
    );
    dir.write(
        "scalability.csv",
        "num_nodes,num_replicas,local_bsz,step_time,sync_time\n",
    );
    let model = load_application(&dir.path()).unwrap();
    assert_eq!(model.limits().max_epochs, 1);
    assert_eq!(model.total_progress(), 100.0);
    // Every placement and batch gets the one measurement.
    assert_eq!(model.step_time(&[4, 4], 512.0).step, 0.1);
}

#[test]
fn an_empty_or_absent_measurement_is_refused() {
    let dir = ModelDir::new();
    dir.write(
        "validation-128.csv",
        "progress,iteration,metric,grad_sqr,grad_var\n",
    );
    assert_names(&dir.error(), &["validation-128.csv", "no rows"]);
    let dir = ModelDir::new();
    dir.remove("validation-32.csv").remove("validation-128.csv");
    assert_names(&dir.error(), &["validation-<batch>.csv"]);
    let dir = ModelDir::new();
    dir.remove("scalability.csv");
    assert_names(&dir.error(), &["scalability.csv", "data/pollux/"]);
    let dir = ModelDir::new();
    dir.write("validation-big.csv", RUN_32);
    assert_names(&dir.error(), &["validation-big.csv", "`big`"]);
}

#[test]
fn application_yaml_sets_limits_and_refuses_what_the_runs_cannot_give() {
    let dir = ModelDir::new();
    dir.write("application.yaml", "max_epochs: 2\nmax_local_bsz: 32\n");
    let model = load_application(&dir.path()).unwrap();
    assert_eq!(model.total_progress(), 200.0);
    // 64 per replica is above 32: one accumulation step of 32.
    assert_eq!(model.split(2, 128).accum_steps, 1);
    dir.write("application.yaml", "max_epochs: 9\n");
    assert_names(&dir.error(), &["application.yaml", "max_epochs", "1 to 3"]);
    dir.write("application.yaml", "max_epoch: 2\n");
    assert_names(&dir.error(), &["application.yaml", "max_epoch"]);
}

/// Every cell of every file, replaced by each of a few bad values: the model loads or
/// is refused with the file named, and never panics.
#[test]
fn no_bad_cell_makes_the_reader_panic() {
    let files = [
        ("placements.csv", PLACEMENTS),
        ("scalability.csv", SCALABILITY),
        ("validation-32.csv", RUN_32),
    ];
    for (file, text) in files {
        let lines: Vec<&str> = text.lines().collect();
        for (l, line) in lines.iter().enumerate().skip(1) {
            let cells: Vec<&str> = line.split(',').collect();
            for c in 0..cells.len() {
                for bad in ["", "-1", "0", "abc", "1e400", "NaN", "0.5", "99999999999"] {
                    let mut row = cells.clone();
                    row[c] = bad;
                    let mut out = lines.clone();
                    let changed = row.join(",");
                    out[l] = &changed;
                    let dir = ModelDir::new();
                    dir.write(file, &(out.join("\n") + "\n"));
                    let loaded = std::panic::catch_unwind(|| load_application(&dir.path()));
                    match loaded {
                        Ok(Ok(model)) => {
                            // A model that loads must also answer without panicking.
                            let _ = model.step_time(&[2, 1], 40.0);
                            let _ = model.gain(64, 1);
                        }
                        Ok(Err(e)) => assert!(
                            e.to_string().contains(file),
                            "{file} line {l} cell {c} = `{bad}`: {e}"
                        ),
                        Err(_) => panic!("{file} line {l} cell {c} = `{bad}` panicked"),
                    }
                }
            }
        }
    }
}

fn workload_file(dir: &Path, rows: &str) -> PathBuf {
    std::fs::create_dir_all(dir.join("workloads")).unwrap();
    std::fs::write(
        dir.join("workloads/w.csv"),
        format!("name,time,application,num_replicas,batch_size\n{rows}"),
    )
    .unwrap();
    let yaml = dir.join("w.yaml");
    std::fs::write(
        &yaml,
        "cluster:\n  nodes: [{name: g, count: 2, cpus: 32, memory_gib: 128, gpus: 4}]\n\
         import:\n  pollux: {path: workloads/w.csv, data: .}\n",
    )
    .unwrap();
    yaml
}

#[test]
fn a_workload_row_below_the_smallest_measured_batch_is_refused_naming_the_job() {
    let root = tempfile::tempdir().unwrap();
    let model = ModelDir::new();
    let toy = root.path().join("toy");
    std::fs::create_dir(&toy).unwrap();
    for f in [
        "placements.csv",
        "scalability.csv",
        "validation-32.csv",
        "validation-128.csv",
    ] {
        std::fs::copy(model.path().join(f), toy.join(f)).unwrap();
    }
    let yaml = workload_file(root.path(), "toy-0,0,toy,2,16\n");
    let error = Workload::load(&yaml).unwrap().scenario(1).unwrap_err();
    assert!(matches!(error, WorkloadError::Import { .. }), "{error}");
    assert_names(
        &error.to_string(),
        &["w.csv", "line 2", "column `batch_size`", "toy-0", "(32)"],
    );
}

#[test]
fn a_measured_job_runs_epoch_by_epoch_at_its_placements_measured_speed() {
    let root = tempfile::tempdir().unwrap();
    let model = ModelDir::new();
    let toy = root.path().join("toy");
    std::fs::create_dir(&toy).unwrap();
    for f in [
        "placements.csv",
        "scalability.csv",
        "validation-32.csv",
        "validation-128.csv",
    ] {
        std::fs::copy(model.path().join(f), toy.join(f)).unwrap();
    }
    let yaml = workload_file(root.path(), "toy-0,0,toy,2,64\n");
    let scenario = Workload::load(&yaml).unwrap().scenario(1).unwrap();
    assert!(matches!(scenario.jobs[0].speed, Speed::Goodput(_)));
    let mut s = Simulator::new(Scenario {
        config: SimConfig::default(),
        ..scenario
    });
    s.advance(None);
    let place = |nodes: [&str; 2]| Action {
        op: Operation::Place {
            job: "toy-0".into(),
            assignments: (0..2)
                .map(|i| Assignment {
                    task: format!("worker-{i}"),
                    node: nodes[i].into(),
                })
                .collect(),
        },
        reason: "test".into(),
    };
    s.apply(&[place(["g-0", "g-0"])], &[]);
    // Two replicas on one node (`2`): local batch 32, 0.12 s a step. Batch 64 lies a
    // third of the way from the run at 32 (variance 1) to the one at 128 (3); scale 2.
    let var = 1.0 + (64.0 - 32.0) / 96.0 * 2.0;
    let gain = (var + 1.0) / (var / 2.0 + 1.0);
    let rate = s.job_rate("toy-0").unwrap();
    assert!((rate - gain / 0.12).abs() < 1e-9, "{rate}");
    while s.finish_time("toy-0").is_none() {
        if let Advance::Idle = s.advance(None) {
            break;
        }
    }
    let finish = s.finish_time("toy-0").unwrap();
    assert!((finish - 300.0 / rate).abs() < 1e-6, "{finish}");
}
