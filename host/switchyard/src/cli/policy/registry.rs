//! `switchyard policy push` and `switchyard policy pull`: ship a policy component through
//! an OCI registry. The work is `switchyard-registry`'s; this module reads the size limit,
//! runs one request through the client the registry flags describe (`cli::registry`) and
//! prints the pinned reference, which is what an operator writes down.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use switchyard_registry::{Error, Reference};

use crate::cli::SandboxArgs;
use crate::cli::registry::{RegistryArgs, block_on, with_flag_hint};

/// `policy push FILE.wasm oci://REGISTRY/REPOSITORY:TAG`.
#[derive(Debug, clap::Args)]
pub(crate) struct PushArgs {
    /// The component to push.
    file: PathBuf,
    /// Where to push it: `oci://REGISTRY/REPOSITORY:TAG`.
    reference: String,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// `policy pull REF [-o FILE]`.
#[derive(Debug, clap::Args)]
pub(crate) struct PullArgs {
    /// What to pull: `oci://REGISTRY/REPOSITORY:TAG`, `...@sha256:DIGEST`, or both.
    reference: String,
    /// Where to write the component [default: the repository's last name, with `.wasm`,
    /// in the current directory].
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// The largest component accepted, in MiB; a larger one is refused before it is
    /// downloaded (the default is the controller's upload limit).
    #[arg(long, default_value_t = (switchyard_controller::DEFAULT_MAX_UPLOAD_BYTES >> 20) as u64, value_name = "MIB")]
    max_size_mib: u64,
    #[command(flatten)]
    registry: RegistryArgs,
}

pub(super) fn push(args: PushArgs) -> anyhow::Result<ExitCode> {
    let reference = Reference::parse(&args.reference)?;
    let component = std::fs::read(&args.file)
        .with_context(|| format!("cannot read the component {}", args.file.display()))?;
    let client = args.registry.client(None)?;
    let pushed =
        block_on(client.push(&reference, component.into())).map_err(|error| match error {
            Error::NotComponent { .. } => {
                anyhow::Error::new(error).context(format!("cannot push {}", args.file.display()))
            }
            error => with_flag_hint(error, &reference),
        })?;
    eprintln!(
        "pushed {} ({} bytes, component {})",
        args.file.display(),
        pushed.size,
        pushed.component_digest
    );
    println!("{}", pushed.reference);
    Ok(ExitCode::SUCCESS)
}

pub(super) fn pull(args: PullArgs, sandbox: &SandboxArgs) -> anyhow::Result<ExitCode> {
    let reference = Reference::parse(&args.reference)?;
    let cache = sandbox.compile_cache()?.map(|dir| dir.join("oci"));
    let client = args.registry.client(cache)?;
    let limit = args.max_size_mib.saturating_mul(1 << 20);
    let pulled = block_on(client.pull(&reference, limit))
        .map_err(|error| with_flag_hint(error, &reference))?;
    let output = args.output.unwrap_or_else(|| default_output(&reference));
    std::fs::write(&output, &pulled.bytes)
        .with_context(|| format!("cannot write the component to {}", output.display()))?;
    eprintln!(
        "pulled {} bytes into {}{}",
        pulled.bytes.len(),
        output.display(),
        if pulled.cached {
            " (from the cache)"
        } else {
            ""
        }
    );
    println!("{}", pulled.reference);
    Ok(ExitCode::SUCCESS)
}

/// `team/fair` → `fair.wasm`.
fn default_output(reference: &Reference) -> PathBuf {
    let name = reference
        .repository()
        .rsplit('/')
        .next()
        .unwrap_or("policy");
    Path::new(&format!("{name}.wasm")).to_path_buf()
}
