//! `switchyard openapi`: writes the HTTP API's OpenAPI document, generated from the
//! handlers, to `docs/openapi.json` (or another file, or standard output).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;

/// Arguments of `openapi`.
#[derive(Debug, clap::Args)]
pub(crate) struct OpenapiArgs {
    /// Where to write it; `-` prints it.
    #[arg(long, default_value = "docs/openapi.json", value_name = "FILE")]
    pub out: PathBuf,
}

pub(super) fn run(args: OpenapiArgs) -> anyhow::Result<ExitCode> {
    let text = switchyard_controller::openapi_json();
    if args.out.as_os_str() == "-" {
        print!("{text}");
    } else {
        std::fs::write(&args.out, text)
            .with_context(|| format!("writing {}", args.out.display()))?;
        eprintln!("wrote {}", args.out.display());
    }
    Ok(ExitCode::SUCCESS)
}
