//! Workload files read into scenarios: errors that name the field and line, the labels
//! of a distributed template, generated arrivals, and the Pollux data and curves they
//! import.

use std::path::Path;

use switchyard_sim::{Speed, Workload};

#[test]
fn a_workload_with_a_misspelt_field_is_refused_with_the_field_and_its_line() {
    let text = "cluster:\n  nodes:\n    - name: n\n      cpus: 4\n      memory_gib: 8\ntemplates:\n  t:\n    wrok: 10\n";
    let error = Workload::parse(text, Path::new("typo.yaml"))
        .unwrap_err()
        .to_string();
    assert!(error.contains("typo.yaml:8"), "{error}");
    assert!(error.contains("templates.t"), "{error}");
    assert!(error.contains("wrok"), "{error}");
}

#[test]
fn a_distributed_template_labels_its_jobs_with_their_roles_and_task_count() {
    let text = "cluster:\n  nodes:\n    - {name: n, cpus: 4, memory_gib: 8}\ntemplates:\n  t:\n    work: 10\n    roles:\n      - {name: scheduler, cpus: 1, memory_gib: 1}\n      - {name: worker, count: 3, cpus: 1, memory_gib: 1, create_after: 5}\njobs:\n  - {template: t}\n";
    let scenario = Workload::parse(text, Path::new("w.yaml"))
        .unwrap()
        .scenario(0)
        .unwrap();
    let labels = &scenario.jobs[0].labels;
    assert_eq!(labels["roles"], "scheduler,worker");
    assert_eq!(labels["tasks"], "4");
    assert_eq!(scenario.jobs[0].roles[1].create_after, 5.0);
    let bad = text.replace("create_after: 5", "create_after: -1");
    let error = Workload::parse(&bad, Path::new("w.yaml"))
        .unwrap()
        .scenario(0)
        .unwrap_err()
        .to_string();
    assert!(error.contains("roles[1].create_after"), "{error}");
}

fn workload(text: &str) -> Result<switchyard_sim::Scenario, String> {
    Workload::parse(text, Path::new("w.yaml"))
        .and_then(|w| w.scenario(7))
        .map_err(|e| e.to_string())
}

const ARRIVALS: &str = "cluster:\n  nodes: [{name: n, cpus: 4, memory_gib: 8}]\n\
    templates:\n  t: {work: 10, speed: 1.0, cpus: 1, curve: none}\njobs:\n";

fn submit_times(jobs: &str) -> Vec<f64> {
    workload(&format!("{ARRIVALS}{jobs}"))
        .unwrap()
        .jobs
        .iter()
        .map(|j| j.submit_time)
        .collect()
}

#[test]
fn fixed_interval_arrivals_come_every_interval_from_the_start() {
    assert_eq!(
        submit_times("  - {template: t, count: 3, every: 50, start: 10}\n"),
        [10.0, 60.0, 110.0]
    );
}

#[test]
fn uniform_arrivals_fall_inside_their_window_in_order() {
    let times = submit_times("  - {template: t, count: 50, uniform: 300, start: 100}\n");
    assert_eq!(times.len(), 50);
    assert!(
        times.iter().all(|t| (100.0..=400.0).contains(t)),
        "{times:?}"
    );
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
    // Spread over the window, not bunched at one end.
    assert!(times[0] < 150.0 && times[49] > 350.0, "{times:?}");
}

#[test]
fn poisson_arrivals_have_mean_gaps_of_one_over_the_rate() {
    let times = submit_times("  - {template: t, count: 2000, poisson: 0.1}\n");
    let mean_gap = times.last().unwrap() / times.len() as f64;
    // 2,000 exponential gaps of mean 10 s: the mean is within 5% with overwhelming odds.
    assert!((9.5..10.5).contains(&mean_gap), "mean gap {mean_gap}");
}

#[test]
fn negative_intervals_and_costs_are_refused_with_the_field_named() {
    let every = workload(&format!(
        "{ARRIVALS}  - {{template: t, count: 2, every: -5}}\n"
    ))
    .unwrap_err();
    assert!(
        every.contains("jobs[0]") && every.contains("every"),
        "{every}"
    );
    let cost = workload(&format!(
        "simulator: {{migration_cost: -1}}\n{ARRIVALS}  - {{template: t, at: 0}}\n"
    ))
    .unwrap_err();
    assert!(cost.contains("simulator.migration_cost"), "{cost}");
}

#[test]
fn a_missing_data_file_is_an_error_naming_it_and_where_the_data_comes_from() {
    let nodes = "cluster:\n  nodes: [{name: n, cpus: 4, memory_gib: 8, gpus: 4}]\n";
    for (import, file) in [
        (
            "pollux: {path: data/pollux/workloads/workload-9.csv}",
            "workload-9.csv",
        ),
        ("philly: {path: nowhere/philly.csv}", "philly.csv"),
    ] {
        let error = workload(&format!("{nodes}import:\n  {import}\n")).unwrap_err();
        assert!(error.contains(file), "{error}");
        assert!(error.contains("data/pollux/"), "{error}");
        assert!(error.contains("README.md"), "{error}");
    }
    let replay = workload(&format!(
        "{nodes}templates:\n  t: {{work: 10, throughput: [1.0], replay: {{path: gone.csv}}}}\n\
         jobs:\n  - {{template: t, at: 0}}\n"
    ))
    .unwrap_err();
    assert!(
        replay.contains("gone.csv") && replay.contains("data/pollux/"),
        "{replay}"
    );
}

#[test]
fn a_replayed_pollux_curve_passes_through_the_measured_points() {
    let csv =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/pollux/cifar10/validation-128.csv");
    let (curve, total) = switchyard_sim::replay_curve(&csv).unwrap();
    assert_eq!(total, 39062.0);
    // The first and last rows of the file: (390, 0.4455) and (39062, 0.9448).
    assert!((curve.value(390.0 / total) - 0.4455).abs() < 1e-9);
    assert!((curve.value(1.0) - 0.9448).abs() < 1e-9);
    // Halfway between (390, 0.4455) and (781, 0.6007), linearly.
    let mid = curve.value(585.5 / total);
    assert!((mid - (0.4455 + 0.6007) / 2.0).abs() < 1e-6, "{mid}");
}

#[test]
fn a_pollux_workload_imports_every_measured_job_with_its_model_and_a_rate_for_any_size() {
    let example =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/pollux-workload-1.yaml");
    let scenario = Workload::load(&example).unwrap().scenario(1).unwrap();
    // 160 jobs, less the 7 bert and 4 imagenet ones the artifact has no data for.
    assert_eq!(scenario.jobs.len(), 149);
    // GPUs per node for `r` replicas packed four to a node.
    let packed = |r: u32| -> Vec<u32> {
        let mut p = vec![4; (r / 4) as usize];
        if !r.is_multiple_of(4) {
            p.push(r % 4);
        }
        p
    };
    for job in &scenario.jobs {
        let Speed::Goodput(goodput) = &job.speed else {
            panic!("{} has no measured model", job.id);
        };
        assert_eq!(job.work, goodput.model.total_progress(), "{}", job.id);
        assert_eq!(job.comm_penalty, 1.0, "{}: measured, no penalty", job.id);
        for r in 1..=job.max_replicas {
            let (rate, _) = goodput.rate(&packed(r), 0.0);
            assert!(
                rate.is_finite() && rate > 0.0,
                "{} with {r} replicas: {rate}",
                job.id
            );
        }
    }
    let ncf = scenario.jobs.iter().find(|j| j.id == "ncf-2").unwrap();
    assert_eq!(
        ncf.roles[0].count, 1,
        "workload-1 starts ncf-2 with one replica"
    );
    // cifar10's measurements make four GPUs on two nodes slower than on one.
    let cifar = scenario.jobs.iter().find(|j| j.id == "cifar10-0").unwrap();
    let Speed::Goodput(goodput) = &cifar.speed else {
        panic!("cifar10-0 has no measured model");
    };
    assert!(goodput.rate(&[2, 2], 0.0).0 < goodput.rate(&[4], 0.0).0);
}
