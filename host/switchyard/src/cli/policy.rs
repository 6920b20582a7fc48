//! `switchyard policy ...`: look at a component before trusting it, and ship it through a
//! registry.

use std::process::ExitCode;

use clap::Subcommand;
use switchyard_core::Settings;
use switchyard_runtime::{BUILTIN_POLICIES, CONTRACT_PACKAGE, PolicyRef};

use super::SandboxArgs;
use super::terminal::escaped;

mod author;
mod registry;

#[derive(Debug, Subcommand)]
pub(crate) enum PolicyCommand {
    /// Print a policy's world, version, name, parameters and whether it reads loss.
    Inspect {
        /// A built-in policy name or a `.wasm` file.
        policy: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Check that a component is a valid policy: it loads, describes itself and accepts
    /// its default settings (`configure`, under the call deadline); the exit status says
    /// whether it is.
    Validate {
        /// A built-in policy name or a `.wasm` file.
        policy: String,
    },
    /// List the built-in policies.
    List,
    /// Create a ready-to-build policy crate (README, first tests, build instructions).
    New(author::NewArgs),
    /// Write the policy SDK and WIT contract this binary was built with into a folder
    /// (to update a policy crate's vendored `switchyard-sdk/`).
    Sdk(author::SdkArgs),
    /// Run a policy on a workload or a fixture snapshot, and check what it did:
    /// expectations, a golden decision trace, or a diff against another policy.
    Test(Box<author::TestArgs>),
    /// Push a component to an OCI registry (the layout `wkg oci push` writes) and print
    /// the reference pinned to its digest.
    Push(registry::PushArgs),
    /// Pull a component from an OCI registry, verified against its digest, and print the
    /// reference pinned to that digest.
    Pull(registry::PullArgs),
}

pub(super) fn run(cmd: PolicyCommand, sandbox: &SandboxArgs) -> anyhow::Result<ExitCode> {
    match cmd {
        PolicyCommand::Inspect { policy, json } => {
            let reference = PolicyRef::parse(&policy)?;
            let module = reference.load(&sandbox.checking_runtime()?)?;
            let d = module.description();
            if json {
                let out = serde_json::json!({
                    "world": module.world(),
                    "package": CONTRACT_PACKAGE,
                    "source": reference.source_name(),
                    "digest": module.digest().to_hex(),
                    "description": d,
                });
                println!("{}", serde_json::to_string_pretty(&out)?);
                return Ok(ExitCode::SUCCESS);
            }
            println!("policy:   {} {}", escaped(&d.name), escaped(&d.version));
            println!("summary:  {}", escaped(&d.summary));
            println!("world:    {}", module.world());
            println!("source:   {}", reference.source_name());
            println!("digest:   {}", module.digest());
            println!(
                "loss:     {}",
                match d.reads_loss {
                    true => "read (jobs' loss series and their updates are sent)",
                    false => "not read (every job's loss series is sent empty)",
                }
            );
            if d.parameters.is_empty() {
                println!("parameters: none");
            } else {
                println!("parameters:");
                let width = d
                    .parameters
                    .iter()
                    .map(|p| escaped(&p.name).chars().count())
                    .max()
                    .unwrap_or(0);
                let dwidth = d
                    .parameters
                    .iter()
                    .map(|p| escaped(&p.default).chars().count())
                    .max()
                    .unwrap_or(0);
                for p in &d.parameters {
                    println!(
                        "  {:width$}  {:dwidth$}  {}",
                        escaped(&p.name),
                        escaped(&p.default),
                        escaped(&p.doc)
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        PolicyCommand::Validate { policy } => {
            let reference = PolicyRef::parse(&policy)?;
            let checked = reference
                .load(&sandbox.checking_runtime()?)
                .map_err(|error| error.to_string())
                .and_then(|module| {
                    // A policy that cannot be configured fails every run that uses it.
                    match module.configure(&Settings::new()) {
                        Ok(_) => Ok(module),
                        Err(error) => Err(format!(
                            "{}: calling `configure` with the default settings failed: {error}",
                            reference.source_name()
                        )),
                    }
                });
            match checked {
                Ok(module) => {
                    let d = module.description();
                    println!(
                        "ok: {} is a valid {CONTRACT_PACKAGE} policy ({} {}, {})",
                        reference.source_name(),
                        escaped(&d.name),
                        escaped(&d.version),
                        module.digest()
                    );
                    Ok(ExitCode::SUCCESS)
                }
                Err(error) => {
                    eprintln!("invalid: {error}");
                    Ok(ExitCode::FAILURE)
                }
            }
        }
        PolicyCommand::New(args) => author::new(args),
        PolicyCommand::Sdk(args) => author::sdk(args),
        PolicyCommand::Test(args) => author::test(*args, sandbox),
        PolicyCommand::Push(args) => registry::push(args),
        PolicyCommand::Pull(args) => registry::pull(args, sandbox),
        PolicyCommand::List => {
            for builtin in BUILTIN_POLICIES {
                println!("{}", builtin.name);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
