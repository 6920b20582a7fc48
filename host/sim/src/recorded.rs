//! A recording as a simulator workload: the counterfactual "what would another policy
//! have done with this load". The recorded arrivals keep their spec (roles, requests,
//! replicas and limits, priority, utility, labels, checkpoints) and the cluster its
//! nodes; what the recording cannot hold directly, each job's speed, work and loss
//! curve, is estimated from its progress over time at the sizes and placements it ran
//! with (the `fit` module). The result is a [`WorkloadFile`] a person can read, edit and feed to
//! `simulate`, and the recorded run itself as a [`RunResult`] to compare against.
//! `docs/recording.md` says how and what cannot be estimated.

mod fit;
mod history;

use std::fmt::Write as _;

use switchyard_control::{Recording, RecordingError, RunEnd};
use switchyard_core::Node;

use crate::report::{RunFacts, RunResult, SERIES_POINTS, Summary, downsample};
use crate::simulator::{JobOutcome, UtilPoint};
use crate::workload::{ClusterFile, InputLimits, JobEntry, NodeGroup, SimulatorFile, WorkloadFile};

/// A recording turned into a workload, with what the estimate left out or assumed.
#[derive(Clone, Debug)]
pub struct Counterfactual {
    /// The workload: the recorded nodes and arrivals, each job its own template.
    pub workload: WorkloadFile,
    /// Jobs that could not be estimated, and why; they are not in the workload.
    pub left_out: Vec<(String, String)>,
    /// What could not be told from the recording and was assumed, per job.
    pub assumed: Vec<(String, Vec<String>)>,
    /// What the workload format cannot say about the recorded cluster (node changes,
    /// placement rules, segments cut short).
    pub notes: Vec<String>,
    /// The recorded run, as a simulated one is reported (the jobs of the workload, in
    /// its order).
    pub recorded: RunResult,
    /// The recorded policy (the first round's).
    pub policy: String,
    /// Rounds read.
    pub rounds: u64,
}

/// Reads `recording` once, streaming, and estimates its workload.
pub fn estimate_counterfactual(recording: &Recording) -> Result<Counterfactual, RecordingError> {
    // A recording without a round is an error of the reader's.
    let history = history::read(recording)?;
    // A simulator counts time from 0; a Kubernetes recording from the host's clock,
    // which the workload starts at its first round (or earliest submission).
    let origin = if history.cluster.starts_with("sim:") {
        0.0
    } else {
        history
            .jobs
            .iter()
            .map(|j| j.first.submit_time)
            .fold(history.first_time, f64::min)
    };
    let mut notes = Vec::new();
    if let Some((first, rest)) = history.node_changes.split_first() {
        notes.push(format!(
            "the workload format has no node events: every node seen is in the cluster \
             from the start ({} change(s) not replayed, the first: {first}{})",
            rest.len() + 1,
            if rest.is_empty() { "" } else { ", ..." }
        ));
    }
    for cut in &history.cut_short {
        notes.push(format!(
            "{} ends early after {} record(s): {}",
            cut.path.display(),
            cut.records,
            cut.reason
        ));
    }
    if history.gaps > 0 {
        notes.push(format!(
            "{} gap(s) between rounds (deleted or damaged segments, a restart): the jobs' \
             states across a gap are read from the round after it",
            history.gaps
        ));
    }
    let constrained = history.jobs.iter().filter(|j| j.constrained).count();
    if constrained > 0 {
        notes.push(format!(
            "{constrained} job(s) were restricted to a set of nodes (node selector, \
             affinity, taints); the recording holds the sets, not the rules, so the \
             workload lets them run anywhere"
        ));
    }

    let mut order: Vec<usize> = (0..history.jobs.len()).collect();
    order.sort_by(|&a, &b| {
        history.jobs[a]
            .first
            .submit_time
            .total_cmp(&history.jobs[b].first.submit_time)
    });
    let mut templates = std::collections::BTreeMap::new();
    let mut entries = Vec::new();
    let mut outcomes = Vec::new();
    let mut left_out = Vec::new();
    let mut assumed = Vec::new();
    let names = InputLimits::default();
    for index in order {
        let job = &history.jobs[index];
        let id = job.first.id.clone();
        // A recorded id is whatever the cluster or a policy's recording said; the
        // workload takes only names its reader accepts back.
        let estimated = names
            .check_name(&id)
            .map_err(|why| format!("its id is not a workload name: {why}"))
            .and_then(|()| fit::estimate(job, history.last_time));
        match estimated {
            Err(why) => left_out.push((id, why)),
            Ok(estimate) => {
                if !estimate.assumed.is_empty() {
                    assumed.push((id.clone(), estimate.assumed));
                }
                templates.insert(id.clone(), estimate.template);
                entries.push(JobEntry {
                    template: id.clone(),
                    count: 1,
                    id: Some(id.clone()),
                    at: Some((job.first.submit_time - origin).max(0.0)),
                    every: None,
                    uniform: None,
                    poisson: None,
                    start: 0.0,
                });
                outcomes.push(JobOutcome {
                    id,
                    submit_time: job.first.submit_time - origin,
                    start_time: job.start_time.map(|t| t - origin),
                    finish_time: job.finished.map(|t| t - origin),
                    deadlocked: false,
                    migrations: job.migrations,
                    rescales: job.rescales,
                    preemptions: job.preemptions,
                    work_lost: 0.0,
                    policy_labels: Default::default(),
                });
            }
        }
    }
    let mut simulator = SimulatorFile::default();
    let span = history.last_time - origin;
    if span * 4.0 > simulator.max_time {
        simulator.max_time = fit::significant(span * 4.0);
    }
    let workload = WorkloadFile {
        seed: history.seed,
        cluster: ClusterFile {
            nodes: node_groups(&history.nodes),
        },
        simulator,
        templates,
        jobs: entries,
        import: None,
    };
    let mut utilisation = history.utilisation.clone();
    for point in &mut utilisation {
        point.time -= origin;
    }
    let recorded = recorded_run(
        &history.policy,
        outcomes,
        &utilisation,
        history.last_time - origin,
        history.rounds,
        history.policy_failures,
    );
    Ok(Counterfactual {
        workload,
        left_out,
        assumed,
        notes,
        recorded,
        policy: history.policy,
        rounds: history.rounds,
    })
}

impl Counterfactual {
    /// The workload as YAML, headed by comments saying where it comes from, which jobs
    /// were left out and what was assumed. The workload is written by the YAML library's
    /// serialiser; the comments hold recorded text (job ids, policy names, reasons) with
    /// every line break and control character escaped, so no recorded string can end a
    /// comment and add a key.
    pub fn to_yaml(&self, source: &str) -> Result<String, serde_norway::Error> {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# Estimated from the recording {} ({} rounds under `{}`) by\n\
             # `switchyard replay --export-workload`: the recorded nodes and arrivals, each job its\n\
             # own template, its speed, work and loss curve fitted to what it did (the method and\n\
             # its limits: docs/recording.md). Edit it and run it with `switchyard simulate`.",
            Comment(source),
            self.rounds,
            Comment(&self.policy)
        );
        for note in &self.notes {
            let _ = writeln!(out, "# Note: {}", Comment(note));
        }
        for (job, why) in &self.left_out {
            let _ = writeln!(out, "# Left out: {}: {}", Comment(job), Comment(why));
        }
        for (job, what) in &self.assumed {
            for item in what {
                let _ = writeln!(out, "# Assumed for {}: {}", Comment(job), Comment(item));
            }
        }
        out.push_str(&serde_norway::to_string(&self.workload)?);
        Ok(out)
    }
}

/// Text inside a YAML comment: control characters and every character YAML reads as a
/// line break (NEL, LINE SEPARATOR, PARAGRAPH SEPARATOR besides CR and LF) escaped as
/// Rust escapes them (`\n`, `\u{2028}`), everything else as it is.
struct Comment<'a>(&'a str);

impl std::fmt::Display for Comment<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for c in self.0.chars() {
            if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') {
                write!(f, "{}", c.escape_debug())?;
            } else {
                f.write_char(c)?;
            }
        }
        Ok(())
    }
}

/// The nodes as groups: consecutive nodes of one shape named `P-0`, `P-1`, ... become
/// one group `P` with their count, any other node a group of its own.
fn node_groups(nodes: &[Node]) -> Vec<NodeGroup> {
    let mut groups: Vec<(NodeGroup, Option<String>)> = Vec::new();
    for node in nodes {
        let numbered = node
            .name
            .rsplit_once('-')
            .and_then(|(prefix, k)| Some((prefix.to_string(), k.parse::<u32>().ok()?)))
            .filter(|(_, k)| k.to_string() == node.name.rsplit('-').next().unwrap_or(""));
        let group = NodeGroup {
            name: node.name.clone(),
            count: 1,
            cpus: node.allocatable.cpu_millis as f64 / 1000.0,
            memory_gib: node.allocatable.memory_bytes as f64 / (1u64 << 30) as f64,
            gpus: node.allocatable.gpus,
            labels: node.labels.clone(),
            taints: Vec::new(),
        };
        if let (Some((last, Some(prefix))), Some((p, k))) = (groups.last_mut(), &numbered)
            && prefix == p
            && last.count == *k
            && last.cpus == group.cpus
            && last.memory_gib == group.memory_gib
            && last.gpus == group.gpus
            && last.labels == group.labels
        {
            last.count += 1;
            last.name = p.clone();
            continue;
        }
        let prefix = numbered.filter(|(_, k)| *k == 0).map(|(p, _)| p);
        groups.push((group, prefix));
    }
    groups.into_iter().map(|(g, _)| g).collect()
}

/// The recorded run as `simulate` reports a run.
fn recorded_run(
    policy: &str,
    jobs: Vec<JobOutcome>,
    utilisation: &[UtilPoint],
    end: f64,
    rounds: u64,
    policy_failures: u64,
) -> RunResult {
    let facts = RunFacts {
        end,
        rounds,
        policy_failures,
        ended: RunEnd::Idle,
    };
    let summary = Summary {
        // A recorded job that is not finished may have started: only those that did
        // not are never started.
        never_started: jobs
            .iter()
            .filter(|j| j.finish_time.is_none() && j.start_time.is_none())
            .count(),
        ..Summary::of(&jobs, facts, |makespan| {
            mean_utilisation(utilisation, makespan)
        })
    };
    RunResult {
        policy: "recorded".into(),
        source: format!("the recording (under {policy})"),
        settings: Default::default(),
        summary,
        jobs,
        utilisation: downsample(utilisation, SERIES_POINTS),
    }
}

/// Time-weighted mean of the series' shares from 0 to `until`.
fn mean_utilisation(series: &[UtilPoint], until: f64) -> (f64, f64) {
    if until <= 0.0 {
        return (0.0, 0.0);
    }
    let (mut cpu, mut gpu) = (0.0, 0.0);
    for (i, point) in series.iter().enumerate() {
        let from = point.time.max(0.0);
        let to = series.get(i + 1).map_or(until, |next| next.time).min(until);
        if to > from {
            cpu += point.cpu * (to - from);
            gpu += point.gpu * (to - from);
        }
    }
    (cpu / until, gpu / until)
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_core::Resources;

    fn node(name: &str, cpus: u64) -> Node {
        Node {
            name: name.into(),
            allocatable: Resources {
                cpu_millis: cpus * 1000,
                memory_bytes: 1 << 30,
                gpus: 0,
            },
            requested: Resources::default(),
            usage: None,
            labels: Default::default(),
            schedulable: true,
        }
    }

    #[test]
    fn numbered_nodes_of_one_shape_group_back_and_others_stay_apart() {
        let nodes = [
            node("cpu-0", 8),
            node("cpu-1", 8),
            node("cpu-2", 8),
            node("gpu", 16),
            node("big-1", 32),
            node("big-2", 32),
            node("odd-0", 4),
            node("odd-1", 2),
        ];
        let groups: Vec<(String, u32)> = node_groups(&nodes)
            .into_iter()
            .map(|g| (g.name, g.count))
            .collect();
        let expected = [
            ("cpu", 3),
            ("gpu", 1),
            ("big-1", 1),
            ("big-2", 1),
            ("odd-0", 1),
            ("odd-1", 1),
        ];
        let expected: Vec<(String, u32)> =
            expected.iter().map(|(n, c)| (n.to_string(), *c)).collect();
        assert_eq!(groups, expected);
    }
}
