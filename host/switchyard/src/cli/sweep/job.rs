//! `sweep --emit-job`: the sweep as a Kubernetes Indexed Job, for when it outgrows one
//! machine. One pod per cell: pod N runs `switchyard sweep ... --cell N` with the same
//! arguments, so it numbers the cells as this machine does and runs cell N, and writes
//! `cells/cell-N.json` to the volume the user names; `sweep merge` reads them back. The
//! workload files travel in a ConfigMap beside the Job.
//!
//! It builds the objects with k8s-openapi's types (`batch/v1` Job, `v1` ConfigMap), so
//! the manifest has the API's field names and shapes; `tests/deploy/validate.sh` checks it
//! against the official schemas. It writes text and talks to no cluster.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMap, ConfigMapVolumeSource, Container, EnvVar, EnvVarSource,
    ObjectFieldSelector, PersistentVolumeClaimVolumeSource, PodSecurityContext, PodSpec,
    PodTemplateSpec, ResourceRequirements, SeccompProfile, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use switchyard_runtime::builtin;
use switchyard_sim::{SweepPlan as Plan, Workload};

use crate::cli::input_limits::limit_flags;

use super::table::seeds_text;

/// The image the manifest runs by default: the controller's (deploy/deployment.yaml).
const DEFAULT_IMAGE: &str = concat!(
    "ghcr.io/switchyard-sched/switchyard:",
    env!("CARGO_PKG_VERSION")
);
/// Where the pods mount the workloads' ConfigMap and the results' volume.
const WORKLOADS_MOUNT: &str = "/workloads";
const RESULTS_MOUNT: &str = "/results";
/// What a ConfigMap may hold.
const CONFIG_MAP_LIMIT: usize = 1 << 20;

/// The flags of `--emit-job`.
#[derive(Debug, clap::Args)]
pub(crate) struct JobArgs {
    /// Print a Kubernetes Indexed Job (and the ConfigMap of its workloads) that runs
    /// this sweep one cell per pod, instead of running it here; `sweep merge` then reads
    /// the cells' files from the volume.
    #[arg(long, requires = "results_claim")]
    pub emit_job: bool,
    /// With --emit-job: the PersistentVolumeClaim the cells write to (ReadWriteMany when
    /// pods run on several nodes), mounted at /results.
    #[arg(long, value_name = "CLAIM", requires = "emit_job")]
    pub results_claim: Option<String>,
    /// With --emit-job: the directory inside the volume for this sweep's files
    /// [default: the Job's name].
    #[arg(long, value_name = "PATH", requires = "emit_job")]
    pub results_path: Option<String>,
    /// With --emit-job: the Job's name (the ConfigMap is NAME-workloads).
    #[arg(
        long,
        default_value = "switchyard-sweep",
        value_name = "NAME",
        requires = "emit_job"
    )]
    pub job_name: String,
    /// With --emit-job: the image to run.
    #[arg(long, default_value = DEFAULT_IMAGE, value_name = "IMAGE", requires = "emit_job")]
    pub image: String,
    /// With --emit-job: pods running at once.
    #[arg(long, default_value_t = 10, value_name = "N", requires = "emit_job")]
    pub parallelism: i32,
}

/// What the pods run: the sweep's arguments as given.
pub(super) struct SweepCommand<'a> {
    /// The workload files.
    pub(super) workloads: &'a [PathBuf],
    /// `--policy` arguments.
    pub(super) policies: &'a [String],
    /// `--set` arguments.
    pub(super) sets: &'a [String],
}

/// The manifest: the ConfigMap, then the Job, as YAML documents.
pub(super) fn manifest(
    command: SweepCommand<'_>,
    job: &JobArgs,
    plan: &Plan,
) -> anyhow::Result<String> {
    let claim = job
        .results_claim
        .as_deref()
        .context("--emit-job needs --results-claim CLAIM")?;
    ensure!(
        job.parallelism >= 1,
        "--parallelism {}: at least one pod must run",
        job.parallelism
    );
    check_name("--job-name", &job.job_name)?;
    for run in &plan.runs {
        ensure!(
            builtin(&run.policy).is_some(),
            "--emit-job: run `{}` loads {}, which the image does not have; a Job runs \
             built-in policies only",
            run.name,
            run.policy
        );
    }
    // Each workload by its file name in the ConfigMap.
    let mut data = BTreeMap::new();
    let mut in_pod = Vec::new();
    for path in command.workloads {
        let workload = Workload::load_with(path, plan.limits)?;
        ensure!(
            workload.file.import.is_none(),
            "--emit-job: {} imports a trace, whose data a ConfigMap cannot carry; run that \
             sweep on one machine",
            path.display()
        );
        let key = config_map_key(path)?;
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        if data.insert(key.clone(), text).is_some() {
            bail!("--emit-job: two workloads are named {key}; rename one");
        }
        in_pod.push(format!("{WORKLOADS_MOUNT}/{key}"));
    }
    let size: usize = data.iter().map(|(k, v)| k.len() + v.len()).sum();
    ensure!(
        size < CONFIG_MAP_LIMIT,
        "--emit-job: the workload files add up to {size} bytes, more than a ConfigMap holds (1 MiB)"
    );
    let cells = plan.cells().len();
    let results_dir = format!(
        "{RESULTS_MOUNT}/{}",
        job.results_path.as_deref().unwrap_or(&job.job_name)
    );
    let mut pod_args = vec!["--no-cache".to_string(), "sweep".into()];
    pod_args.extend(in_pod);
    for run in command.policies {
        pod_args.extend(["--policy".into(), run.clone()]);
    }
    for set in command.sets {
        pod_args.extend(["--set".into(), set.clone()]);
    }
    pod_args.extend(limit_flags(&plan.limits));
    pod_args.extend([
        "--seeds".into(),
        seeds_text(&plan.seeds),
        "--baseline".into(),
        plan.baseline.clone(),
        "--fallback".into(),
        plan.fallback.clone(),
        // Kubernetes puts the index in the variable below and expands it here.
        "--cell".into(),
        "$(JOB_COMPLETION_INDEX)".into(),
        "--out".into(),
        results_dir,
    ]);
    let labels = BTreeMap::from([
        (
            "app.kubernetes.io/name".to_string(),
            "switchyard-sweep".to_string(),
        ),
        (
            "app.kubernetes.io/instance".to_string(),
            job.job_name.clone(),
        ),
    ]);
    let meta = |name: String| ObjectMeta {
        name: Some(name),
        labels: Some(labels.clone()),
        ..Default::default()
    };
    let config_map_name = format!("{}-workloads", job.job_name);
    let config_map = ConfigMap {
        metadata: meta(config_map_name.clone()),
        data: Some(data),
        ..Default::default()
    };
    let container = Container {
        name: "cell".into(),
        image: Some(job.image.clone()),
        args: Some(pod_args),
        env: Some(vec![EnvVar {
            name: "JOB_COMPLETION_INDEX".into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: "metadata.annotations['batch.kubernetes.io/job-completion-index']"
                        .into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }]),
        resources: Some(ResourceRequirements {
            requests: Some(BTreeMap::from([
                ("cpu".to_string(), Quantity("1".into())),
                ("memory".to_string(), Quantity("512Mi".into())),
            ])),
            limits: Some(BTreeMap::from([(
                "memory".to_string(),
                Quantity("2Gi".into()),
            )])),
            ..Default::default()
        }),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            read_only_root_filesystem: Some(true),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                ..Default::default()
            }),
            ..Default::default()
        }),
        volume_mounts: Some(vec![
            VolumeMount {
                name: "workloads".into(),
                mount_path: WORKLOADS_MOUNT.into(),
                read_only: Some(true),
                ..Default::default()
            },
            VolumeMount {
                name: "results".into(),
                mount_path: RESULTS_MOUNT.into(),
                ..Default::default()
            },
        ]),
        ..Default::default()
    };
    let pod = PodSpec {
        restart_policy: Some("Never".into()),
        security_context: Some(PodSecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(65532),
            fs_group: Some(65532),
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        containers: vec![container],
        volumes: Some(vec![
            Volume {
                name: "workloads".into(),
                config_map: Some(ConfigMapVolumeSource {
                    name: config_map_name,
                    ..Default::default()
                }),
                ..Default::default()
            },
            Volume {
                name: "results".into(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: claim.to_string(),
                    ..Default::default()
                }),
                ..Default::default()
            },
        ]),
        ..Default::default()
    };
    let cells = i32::try_from(cells).context("more cells than a Job has completions")?;
    let job_object = Job {
        metadata: meta(job.job_name.clone()),
        spec: Some(JobSpec {
            completion_mode: Some("Indexed".into()),
            completions: Some(cells),
            parallelism: Some(job.parallelism.min(cells)),
            // A failing cell writes its failure and exits 0; a pod fails only when its
            // node or the volume does, so each index is retried once on its own.
            backoff_limit_per_index: Some(1),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels.clone()),
                    ..Default::default()
                }),
                spec: Some(pod),
            },
            ..Default::default()
        }),
        ..Default::default()
    };
    let header = format!(
        "# switchyard sweep as an Indexed Job: {cells} cells ({} workloads x {} runs x {} \
         seeds), one per pod,\n# results in claim {claim}; when it completes, run `switchyard \
         sweep merge DIR` on that directory.\n",
        plan.workloads.len(),
        plan.runs.len(),
        plan.seeds.len()
    );
    Ok(format!(
        "{header}{}---\n{}",
        serde_norway::to_string(&config_map)?,
        serde_norway::to_string(&job_object)?
    ))
}

/// A workload's key in the ConfigMap: its file name, which must be a valid key.
fn config_map_key(path: &Path) -> anyhow::Result<String> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    ensure!(
        !name.is_empty()
            && name.len() <= 253
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')),
        "--emit-job: {}: a ConfigMap key is letters, digits, `-`, `_` and `.`; rename the file",
        path.display()
    );
    Ok(name)
}

/// A Job's name: a DNS label short enough for the pods' names built from it.
fn check_name(flag: &str, name: &str) -> anyhow::Result<()> {
    ensure!(
        !name.is_empty()
            && name.len() <= 52
            && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && name.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
        "{flag} {name}: a Job's name is 1 to 52 lowercase letters, digits and `-`, starting \
         and ending with a letter or digit"
    );
    Ok(())
}
