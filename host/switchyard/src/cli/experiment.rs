//! `switchyard simulate --shadow B` / `--split A:B:RATIO`: one offline run of the
//! workload with an A/B experiment in the control loop, and its report (the same figures
//! `GET /v1/experiment` gives on a live controller) as tables, or as JSON with `--json`.
//! `experiment.json` is written before anything is printed, so a reader that stops
//! early (`| head`) does not cost the file.

use std::path::Path;
use std::process::ExitCode;

mod report;

pub(super) use report::{describe, figures, with_interval};

use anyhow::Context as _;
use switchyard_control::{ControlLoop, Experiment, ExperimentMode, JobAssignment, PolicySlot};
use switchyard_runtime::{PolicyRef, Runtime};
use switchyard_sim::{InputLimits, Simulator, Workload};

use super::SandboxArgs;

/// What `simulate --shadow` or `--split` asked for, read from its flags by `simulate`.
pub(super) struct ExperimentArgs<'a> {
    /// The workload file.
    pub workload: &'a Path,
    /// The bounds the workload is read within.
    pub input_limits: InputLimits,
    /// Seed (overrides the workload's).
    pub seed: Option<u64>,
    /// Policy that decides a round when the tested one fails.
    pub fallback: &'a str,
    /// Directory for `experiment.json`.
    pub out: Option<&'a Path>,
    /// The policy the first `--policy` loads, arm A of a shadow experiment.
    pub first_policy: Option<&'a str>,
    /// `--shadow B`.
    pub shadow: Option<&'a str>,
    /// `--split A:B:RATIO`, read.
    pub split: Option<&'a SplitArms>,
    /// `--split-assign`: how the split assigns jobs.
    pub split_assign: &'a str,
    /// `--json`: the report as JSON instead of tables.
    pub json: bool,
}

/// `--split A:B:RATIO` read: the two arms' policies and the share of jobs B gets. The
/// ratio is the last field; either arm may be a registry reference, whose own colons
/// (a port, a tag, `@sha256:`) are told from the separators by its `oci://`.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct SplitArms {
    /// `--split` as given, for messages.
    pub text: String,
    /// Arm A's policy.
    pub a: String,
    /// Arm B's policy.
    pub b: String,
    /// The share of jobs sent to B.
    pub ratio: f64,
}

impl SplitArms {
    /// Reads `A:B:RATIO`.
    pub(super) fn parse(text: &str) -> anyhow::Result<Self> {
        let usage = || {
            anyhow::anyhow!(
                "--split {text}: expected A:B:RATIO, e.g. default:even:0.5 or \
                 default:oci://REGISTRY/REPOSITORY:TAG:0.5"
            )
        };
        let (arms, ratio) = text.rsplit_once(':').ok_or_else(usage)?;
        let reference_b = format!(":{}", switchyard_registry::SCHEME);
        let (a, b) = match arms.find(&reference_b) {
            Some(at) => (&arms[..at], &arms[at + 1..]),
            // Arm B is a plain name (no colon): arm A is what precedes the last colon,
            // whether a name or a reference.
            None if arms.starts_with(switchyard_registry::SCHEME) => {
                arms.rsplit_once(':').ok_or_else(usage)?
            }
            None => arms.split_once(':').ok_or_else(usage)?,
        };
        if a.is_empty() || b.is_empty() || (!arms.contains(&reference_b) && b.contains(':')) {
            return Err(usage());
        }
        let ratio: f64 = ratio
            .parse()
            .with_context(|| format!("--split {text}: RATIO `{ratio}` is not a number"))?;
        Ok(Self {
            text: text.to_string(),
            a: a.to_string(),
            b: b.to_string(),
            ratio,
        })
    }
}

fn slot(runtime: &Runtime, name: &str) -> anyhow::Result<PolicySlot> {
    let module = PolicyRef::parse(name)?.load(runtime)?;
    PolicySlot::configure(module, &Default::default())
        .with_context(|| format!("configuring {name}"))
}

pub(super) fn run(args: &ExperimentArgs<'_>, sandbox: &SandboxArgs) -> anyhow::Result<ExitCode> {
    let (a, b, mode) = match (args.shadow, args.split) {
        (Some(b), _) => (
            args.first_policy.unwrap_or("default").to_string(),
            b.to_string(),
            ExperimentMode::Shadow,
        ),
        (None, Some(split)) => {
            let jobs =
                JobAssignment::by_name(args.split_assign, split.ratio).with_context(|| {
                    format!(
                        "--split {} --split-assign {}",
                        split.text, args.split_assign
                    )
                })?;
            (
                split.a.clone(),
                split.b.clone(),
                ExperimentMode::Split {
                    jobs,
                    nodes_b: None,
                },
            )
        }
        (None, None) => unreachable!("called only for an experiment"),
    };
    let workload = Workload::load_with(args.workload, args.input_limits)?;
    let seed = args.seed.unwrap_or(workload.seed());
    let runtime = sandbox.offline_runtime()?;
    let fallback = slot(&runtime, args.fallback)?;
    let mut sim = Simulator::new(workload.scenario(seed)?);
    let mut control = ControlLoop::new(slot(&runtime, &a)?, fallback, seed)
        .with_disruption_budget(sandbox.disruption.budget()?)
        .keep_records(false);
    control.start_experiment(Experiment::new(slot(&runtime, &b)?, mode));
    let ended = control.run(&mut sim, |_, _| {});
    let report = control
        .experiment_report()
        .context("the experiment report is missing")?;
    let json = serde_json::to_string_pretty(&serde_json::json!({
        "workload": args.workload.display().to_string(),
        "seed": seed,
        "ended": ended,
        "rounds": control.rounds(),
        "experiment": report,
    }))?;
    let written = match args.out {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            let file = dir.join("experiment.json");
            std::fs::write(&file, &json).with_context(|| format!("writing {}", file.display()))?;
            Some(file)
        }
        None => None,
    };
    if args.json {
        println!("{json}");
    } else {
        println!(
            "{} of {}, seed {seed}: {}",
            match report.mode {
                ExperimentMode::Shadow => "shadow",
                ExperimentMode::Split { .. } => "split",
            },
            args.workload.display(),
            describe(&report)
        );
        println!("\n{}", figures(&report));
    }
    if let Some(file) = written {
        eprintln!("wrote {}", file.display());
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arms(text: &str) -> (String, String, f64) {
        let split = SplitArms::parse(text).unwrap();
        (split.a, split.b, split.ratio)
    }

    #[test]
    fn a_split_of_plain_names_reads_as_before() {
        assert_eq!(
            arms("default:even:0.5"),
            ("default".into(), "even".into(), 0.5)
        );
    }

    #[test]
    fn either_arm_of_a_split_may_be_a_reference_with_a_port_a_tag_or_a_digest() {
        let pinned = format!("oci://127.0.0.1:5000/team/fair@sha256:{}", "a".repeat(64));
        assert_eq!(
            arms("default:oci://127.0.0.1:5000/team/fair:1.4:0.25"),
            (
                "default".into(),
                "oci://127.0.0.1:5000/team/fair:1.4".into(),
                0.25
            )
        );
        assert_eq!(
            arms(&format!("{pinned}:even:0.5")),
            (pinned.clone(), "even".into(), 0.5)
        );
        assert_eq!(
            arms("oci://reg/team/fair:1.4:oci://reg/team/fair:1.5:0.5"),
            (
                "oci://reg/team/fair:1.4".into(),
                "oci://reg/team/fair:1.5".into(),
                0.5
            )
        );
        assert_eq!(
            arms(&format!("oci://reg:5000/team/fair:{pinned}:0.5")),
            ("oci://reg:5000/team/fair".into(), pinned, 0.5)
        );
    }

    #[test]
    fn a_split_without_two_arms_and_a_ratio_says_what_it_takes() {
        for text in [
            "default:0.5",
            ":even:0.5",
            "default::0.5",
            "a:b:c:0.5",
            "0.5",
        ] {
            let error = SplitArms::parse(text).unwrap_err().to_string();
            assert!(error.contains("expected A:B:RATIO"), "{text}: {error}");
        }
        let error = SplitArms::parse("default:even:half")
            .unwrap_err()
            .to_string();
        assert!(error.contains("RATIO `half` is not a number"), "{error}");
    }
}
