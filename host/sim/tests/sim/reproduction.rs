//! The papers' experiments, re-run in the simulator (figures and commands in
//! `docs/reproduction.md`). Each test loads the example workload the docs run, runs it
//! under the paper's policy and its baseline through the same library code as
//! `switchyard simulate` ([`switchyard_sim::run_offline`]), and checks the paper's claim on
//! the example's own seed and on fresh seeds of the same setup.
//!
//! What does not hold in the simulator has no test claiming it does; `docs/reproduction.md`
//! gives the figures and the reasons: SpeCon on the fixed VAE schedule (with the paper's
//! alpha no job converges before it ends; with a larger alpha it migrates, and loses)
//! and on single seeds of the random ones (it wins on average over seeds),
//! FlowCon's makespan on five random jobs (it grows where the LSTM-CFC job ends the
//! schedule) and the thesis's makespan gains (none: ties), DRAGON's utilisation on some
//! arrival orders.

use crate::support;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use switchyard_control::PolicySlot;
use switchyard_runtime::Runtime;
use switchyard_sim::{Records, RunResult, Workload, load_slot, run_offline};

/// Seeds the examples were not calibrated on.
const FRESH_SEEDS: [u64; 3] = [101, 202, 303];

fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(support::generous_runtime)
}

fn example(name: &str) -> Workload {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name);
    Workload::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `workload` with `seed` under `policy` (`name` or `name:key=value,...`).
fn run(workload: &Workload, seed: u64, policy: &str) -> RunResult {
    let (name, settings) = match policy.split_once(':') {
        Some((name, sets)) => (
            name,
            sets.split(',')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        None => (policy, BTreeMap::new()),
    };
    let fallback: PolicySlot =
        load_slot(runtime(), "default", &BTreeMap::new()).expect("default policy");
    let scenario = workload.scenario(seed).unwrap_or_else(|e| panic!("{e}"));
    let run = run_offline(
        runtime(),
        name,
        &settings,
        &fallback,
        scenario,
        seed,
        Records::Stream,
        |_, _| {},
    )
    .unwrap_or_else(|e| panic!("{policy}: {e}"));
    let s = &run.result.summary;
    assert_eq!(s.policy_failures, 0, "{policy} failed rounds: {s:?}");
    run.result
}

/// The example's own seed, then the fresh ones.
fn seeds(workload: &Workload) -> Vec<u64> {
    std::iter::once(workload.seed())
        .chain(FRESH_SEEDS)
        .collect()
}

fn completion(r: &RunResult, id: &str) -> f64 {
    let j = r.jobs.iter().find(|j| j.id == id).expect("job in the run");
    j.finish_time.expect("finished") - j.submit_time
}

/// SpeCon's average completion time is below `even`'s on the example's seed and on
/// every fresh one, and the gain comes from migrations on each.
fn specon_beats_even_on_average_completion_time(file: &str) {
    let workload = example(file);
    for seed in seeds(&workload) {
        let even = run(&workload, seed, "even");
        let specon = run(&workload, seed, "specon");
        for r in [&even, &specon] {
            assert_eq!(r.summary.finished, r.summary.jobs, "{file} seed {seed}");
        }
        assert!(
            specon.summary.avg_completion < even.summary.avg_completion,
            "{file} seed {seed}: average completion time specon {:.1}s vs even {:.1}s",
            specon.summary.avg_completion,
            even.summary.avg_completion
        );
        assert!(
            specon.summary.migrations > 0,
            "{file} seed {seed}: the gain must come from SpeCon's migrations"
        );
    }
}

/// The fixed schedule (Fig. 5: 20 VAE jobs, one every 50 s, on 4 workers). `even` gives
/// each worker a job every 200 s and every job ends within 400 s of its arrival, so no
/// worker ever hosts three jobs: read per worker (`busy_scope=worker`), line 15 of
/// Algorithm 1 lets no converged job ask to move whatever the other parameters. Read
/// over the cluster (the default) a converged job may ask, and with the paper's Table III
/// threshold (alpha 0.1) SpeCon migrates. With Fig. 5's own alpha 0.01 every VAE job
/// reaches CC within one interval of its end, so none asks in time and SpeCon's run is
/// `even`'s to the millisecond. `docs/reproduction.md` gives the figures.
#[test]
fn specon_moves_jobs_on_the_fixed_schedule_only_when_line_15_counts_the_whole_cluster() {
    let file = "specon-fixed-vae.yaml";
    let workload = example(file);
    for seed in seeds(&workload) {
        let even = run(&workload, seed, "even");
        let longest = even
            .jobs
            .iter()
            .map(|j| j.finish_time.expect("finished") - j.submit_time)
            .fold(0.0, f64::max);
        assert!(
            longest < 400.0,
            "{file} seed {seed}: a job took {longest:.1}s, so three can share a worker"
        );
        let per_worker = run(&workload, seed, "specon:alpha=0.1,busy_scope=worker");
        assert_eq!(per_worker.summary.migrations, 0, "{file} seed {seed}");
        let cluster = run(&workload, seed, "specon:alpha=0.1");
        assert!(
            cluster.summary.migrations > 0,
            "{file} seed {seed}: read over the cluster, converged jobs move"
        );
        let specon = run(&workload, seed, "specon");
        assert_eq!(specon.summary.migrations, 0, "{file} seed {seed}");
        assert!(
            (specon.summary.avg_completion - even.summary.avg_completion).abs() < 1e-6,
            "{file} seed {seed}: specon {:.3}s vs even {:.3}s",
            specon.summary.avg_completion,
            even.summary.avg_completion
        );
    }
}

#[test]
fn specon_beats_even_on_20_random_jobs_of_three_models_on_4_workers() {
    specon_beats_even_on_average_completion_time("specon-random-20.yaml");
}

#[test]
fn specon_beats_even_on_30_random_jobs_of_three_models_on_4_workers() {
    specon_beats_even_on_average_completion_time("specon-random-30.yaml");
}

#[test]
fn specon_beats_even_on_50_random_jobs_on_8_workers() {
    specon_beats_even_on_average_completion_time("specon-8-workers-50.yaml");
}

/// FlowCon's makespan is at most equal sharing's (a millionth of slack for float noise).
fn assert_keeps_makespan(file: &str, seed: u64, flowcon: &RunResult, equal: &RunResult) {
    assert_eq!(
        flowcon.summary.finished, flowcon.summary.jobs,
        "{file} seed {seed}"
    );
    assert!(
        flowcon.summary.makespan <= equal.summary.makespan * (1.0 + 1e-6),
        "{file} seed {seed}: makespan flowcon {:.3}s vs equal sharing {:.3}s",
        flowcon.summary.makespan,
        equal.summary.makespan
    );
}

/// Ids of the `k` jobs submitted last, newest first.
fn newest(r: &RunResult, k: usize) -> Vec<String> {
    let mut jobs: Vec<_> = r.jobs.iter().collect();
    jobs.sort_by(|a, b| b.submit_time.total_cmp(&a.submit_time));
    jobs.iter().take(k).map(|j| j.id.clone()).collect()
}

#[test]
fn flowcon_keeps_the_makespan_of_equal_sharing_and_cuts_the_newest_jobs_time() {
    let file = "flowcon-three-jobs.yaml";
    let workload = example(file);
    for seed in seeds(&workload) {
        let equal = run(&workload, seed, "default");
        let flowcon = run(&workload, seed, "flowcon");
        assert_keeps_makespan(file, seed, &flowcon, &equal);
        let newest = "mnist-tensorflow";
        assert!(
            completion(&flowcon, newest) < 0.95 * completion(&equal, newest),
            "seed {seed}: {newest} takes {:.1}s under flowcon vs {:.1}s",
            completion(&flowcon, newest),
            completion(&equal, newest)
        );
    }
}

/// Ten random jobs of the thesis's five models: the makespan holds on every seed, the
/// newest job is never slower and the three newest are faster together.
#[test]
fn flowcon_keeps_the_makespan_on_ten_random_jobs_and_cuts_the_newest_ones() {
    let file = "flowcon-random-10.yaml";
    let workload = example(file);
    for seed in seeds(&workload) {
        let equal = run(&workload, seed, "default");
        let flowcon = run(&workload, seed, "flowcon");
        assert_keeps_makespan(file, seed, &flowcon, &equal);
        let three = newest(&equal, 3);
        assert!(
            completion(&flowcon, &three[0]) <= completion(&equal, &three[0]) * (1.0 + 1e-6),
            "seed {seed}: the newest job {} takes {:.1}s under flowcon vs {:.1}s",
            three[0],
            completion(&flowcon, &three[0]),
            completion(&equal, &three[0])
        );
        let total = |r: &RunResult| three.iter().map(|id| completion(r, id)).sum::<f64>();
        assert!(
            total(&flowcon) < total(&equal),
            "seed {seed}: the three newest jobs {three:?} take {:.1}s under flowcon vs {:.1}s",
            total(&flowcon),
            total(&equal)
        );
    }
}

/// Five random jobs: the makespan holds on every seed (the LSTM-CFC job, capped at 3 of
/// the 16 threads, is not held below them: `spare_capped`), and the newest job is cut on
/// most seeds. It is not cut on every one: on seed 101 the GRU job FlowCon held at the
/// floor is back in free competition when everything reaches CL, and the newest job ends
/// 0.7 s (0.2 %) later than under equal sharing (`docs/reproduction.md`). The test bounds
/// that: never more than 0.5 % slower, faster on at least half of the seeds.
#[test]
fn flowcon_keeps_the_makespan_of_five_random_jobs_and_mostly_cuts_the_newest() {
    let file = "flowcon-random-5.yaml";
    let workload = example(file);
    let seeds = seeds(&workload);
    let mut cut = 0;
    for &seed in &seeds {
        let equal = run(&workload, seed, "default");
        let flowcon = run(&workload, seed, "flowcon");
        assert_keeps_makespan(file, seed, &flowcon, &equal);
        let newest = &newest(&equal, 1)[0];
        let (theirs, ours) = (completion(&equal, newest), completion(&flowcon, newest));
        assert!(
            ours <= theirs * 1.005,
            "seed {seed}: the newest job {newest} takes {ours:.1}s under flowcon vs {theirs:.1}s"
        );
        if ours < theirs * (1.0 - 1e-6) {
            cut += 1;
        }
    }
    assert!(
        2 * cut >= seeds.len(),
        "the newest job is cut on {cut} of {} seeds",
        seeds.len()
    );
}

/// Table 1 with each job's arrival drawn at random over Table 1's window, so fresh
/// seeds change the order and spacing of arrivals, not just the noise.
fn dragon_setups() -> Vec<(String, Workload)> {
    let table = example("dragon-table1.yaml");
    let mut out = vec![(format!("table 1, seed {}", table.seed()), table.clone())];
    for seed in FRESH_SEEDS {
        let mut w = table.clone();
        w.file.seed = seed;
        for entry in &mut w.file.jobs {
            entry.at = None;
            entry.uniform = Some(52.0);
        }
        out.push((format!("random arrivals in [0, 52] s, seed {seed}"), w));
    }
    out
}

#[test]
fn dragon_beats_the_default_scheduler_on_average_elapsed_time() {
    for (label, workload) in dragon_setups() {
        let seed = workload.seed();
        let kubeflow = run(&workload, seed, "default");
        let dragon = run(&workload, seed, "dragon");
        assert_eq!(dragon.summary.finished, dragon.summary.jobs, "{label}");
        assert!(
            dragon.summary.avg_completion < kubeflow.summary.avg_completion,
            "{label}: dragon {:.0}s vs default {:.0}s",
            dragon.summary.avg_completion,
            kubeflow.summary.avg_completion
        );
    }
}

#[test]
fn dragon_without_scaling_never_rescales_and_dragon_with_it_does() {
    let workload = example("dragon-table1.yaml");
    let seed = workload.seed();
    let locality = run(&workload, seed, "dragon:scaling=false");
    assert_eq!(locality.summary.rescales, 0);
    assert_eq!(locality.summary.finished, locality.summary.jobs);
    assert!(run(&workload, seed, "dragon").summary.rescales > 0);
}

#[test]
fn gang_never_deadlocks_where_the_default_scheduler_strands_partial_gangs() {
    let workload = example("gang-three-ps-jobs.yaml");
    for seed in seeds(&workload) {
        let default = run(&workload, seed, "default");
        assert!(
            default.summary.deadlocked > 0,
            "seed {seed}: the setup must deadlock the default scheduler: {:?}",
            default.summary
        );
        for policy in ["gang", "gang:mode=thesis"] {
            let gang = run(&workload, seed, policy);
            assert_eq!(gang.summary.deadlocked, 0, "{policy} seed {seed}");
            assert_eq!(
                gang.summary.finished, gang.summary.jobs,
                "{policy} seed {seed}: {:?}",
                gang.summary
            );
        }
    }
}
