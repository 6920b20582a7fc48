//! `switchyard policy new`: a ready-to-build policy crate from the templates in
//! `template/`. Inside a switchyard repository's `policies/` folder the crate joins the
//! workspace (its SDK and profiles come from there); anywhere else it is a workspace of
//! its own, with the SDK and WIT this binary was built with vendored beside it
//! ([`crate::vendor`], in `switchyard-sdk/`), the lock file of the shipped policies, and
//! the pinned toolchain with the `wasm32-wasip2` target, so `cargo build` in it produces
//! a component wherever the folder is moved or shared.
//!
//! A Python policy (`--lang python`, [`create_python_project`]) or a JavaScript one
//! (`--lang js`, [`create_js_project`]) is a folder with the policy, its first tests, the same test workload and
//! expectations, and that language's SDK vendored beside it.

use std::path::{Path, PathBuf};

use crate::files::{ScaffoldError, ensure_empty, write};
use crate::project::{Created, check_name, type_name};
use crate::vendor;

mod js;
mod python;

pub use js::create_js_project;
pub use python::create_python_project;

/// The language of the new policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// A Rust crate on the guest SDK (`policies/sdk`), built with cargo.
    Rust,
    /// A Python project on the Python SDK (`sdk/python`), built with componentize-py.
    Python,
    /// A JavaScript project on the JavaScript SDK (`sdk/js`), built with
    /// componentize-js.
    #[value(alias = "javascript")]
    Js,
}

/// Where the new crate's SDK comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sdk {
    /// The SDK and WIT embedded in this binary, written into the crate's
    /// `switchyard-sdk/` (the default).
    Vendored,
    /// An SDK crate on disk, depended on by its absolute path (for SDK developers).
    Path(PathBuf),
}

/// Creates the crate of policy `name` in `dir`. Inside a switchyard repository's
/// `policies/` folder it joins that workspace; elsewhere it depends on `sdk`.
pub fn create_rust_project(name: &str, dir: &Path, sdk: &Sdk) -> Result<Created, ScaffoldError> {
    check_name(name)?;
    ensure_empty(dir)?;
    let in_workspace = absolute(dir).parent().is_some_and(is_policies_folder);
    if let (false, Sdk::Path(path)) = (in_workspace, sdk)
        && !path.join("Cargo.toml").is_file()
    {
        return Err(ScaffoldError::NoSdk { path: path.clone() });
    }
    let crate_name = if in_workspace {
        format!("switchyard-policy-{name}")
    } else {
        name.to_string()
    };
    let target = if in_workspace {
        "../../target"
    } else {
        "target"
    };
    let wasm_path = format!(
        "{target}/wasm32-wasip2/release/{}.wasm",
        crate_name.replace('-', "_")
    );
    let sdk_path = match sdk {
        Sdk::Vendored => vendor::SDK_DIR.to_string(),
        Sdk::Path(path) => absolute(path).display().to_string(),
    };
    let fill = |template: &str| {
        let (workspace_fields, sdk_dependency, sdk_test_dependency, profile) = if in_workspace {
            (
                "rust-version.workspace = true\nlicense.workspace = true\n".to_string(),
                "switchyard-policy-sdk.workspace = true".to_string(),
                "switchyard-policy-sdk = { workspace = true, features = [\"test-support\"] }"
                    .to_string(),
                String::new(),
            )
        } else {
            (
                String::new(),
                format!("switchyard-policy-sdk = {{ path = {sdk_path:?} }}"),
                format!(
                    "switchyard-policy-sdk = {{ path = {sdk_path:?}, features = [\"test-support\"] }}"
                ),
                STANDALONE_PROFILE.to_string(),
            )
        };
        let toolchain_note = if in_workspace {
            ""
        } else {
            " (`rust-toolchain.toml` installs that target with the toolchain)"
        };
        let sdk_note = match (in_workspace, sdk) {
            (true, _) => "It uses the SDK of the switchyard workspace it sits in (`policies/sdk`).",
            (false, Sdk::Vendored) => SDK_NOTE,
            (false, Sdk::Path(_)) => "It depends on the SDK checkout given to `policy new --sdk`.",
        };
        template
            .replace("{{name}}", name)
            .replace("{{crate}}", &crate_name)
            .replace("{{type_name}}", &type_name(name))
            .replace("{{wasm_path}}", &wasm_path)
            .replace("{{toolchain_note}}", toolchain_note)
            .replace("{{sdk_note}}", sdk_note)
            .replace("{{workspace_fields}}", &workspace_fields)
            .replace("{{sdk_dependency}}", &sdk_dependency)
            .replace("{{sdk_test_dependency}}", &sdk_test_dependency)
            .replace("{{profile}}", &profile)
    };
    let mut files: Vec<(&str, &str)> = vec![
        ("Cargo.toml", include_str!("template/Cargo.toml.in")),
        ("README.md", include_str!("template/README.md.in")),
        ("src/lib.rs", include_str!("template/lib.rs.in")),
        ("src/policy.rs", include_str!("template/policy.rs.in")),
        (
            ".cargo/config.toml",
            include_str!("template/cargo-config.toml.in"),
        ),
        (
            "policy-tests/workload.yaml",
            include_str!("template/workload.yaml.in"),
        ),
        (
            "policy-tests/expect.yaml",
            include_str!("template/expect.yaml.in"),
        ),
    ];
    if !in_workspace {
        files.push((
            "rust-toolchain.toml",
            // The repository's own pin: the same toolchain and the wasm32-wasip2 target.
            include_str!("../../../rust-toolchain.toml"),
        ));
        files.push((".gitignore", "/target\n"));
        files.push(("Cargo.lock", vendor::LOCK_FILE));
    }
    let mut written = Vec::new();
    for (relative, template) in files {
        let path = dir.join(relative);
        // The lock file is data, not a template.
        let text = if relative == "Cargo.lock" {
            template.to_string()
        } else {
            fill(template)
        };
        write(&path, &text)?;
        written.push(path);
    }
    if let (false, Sdk::Vendored) = (in_workspace, sdk) {
        written.extend(vendor::vendor_rust_sdk(&dir.join(vendor::SDK_DIR))?);
    }
    Ok(Created {
        dir: dir.to_path_buf(),
        in_workspace,
        wasm_path,
        build: "cargo build --release".into(),
        files: written,
    })
}

/// What the README says of a vendored SDK.
const SDK_NOTE: &str = "`switchyard-sdk/` is the policy SDK and the WIT contract of the \
`switchyard` binary that created this crate, vendored so that the crate builds on its own. \
To move to the SDK of a newer switchyard, run its `switchyard policy sdk --dir \
switchyard-sdk` here and rebuild.";

/// Whether `folder` is the `policies/` folder of a switchyard repository.
fn is_policies_folder(folder: &Path) -> bool {
    folder.file_name().is_some_and(|n| n == "policies")
        && folder.join("sdk/Cargo.toml").is_file()
        && folder
            .parent()
            .is_some_and(|repo| repo.join("wit/policy.wit").is_file())
}

/// A standalone crate is its own workspace (so it builds even inside another checkout)
/// and ships a small component.
const STANDALONE_PROFILE: &str = "
# Its own workspace, even when created inside another project's folder.
[workspace]

# Optimised for speed (rounds run on kept instances), one codegen unit, no symbols:
# the profile the shipped policies build with.
[profile.release]
opt-level = 3
lto = true
codegen-units = 1
strip = true
";

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_rust_type_names() {
        assert_eq!(type_name("least-loaded"), "LeastLoadedPolicy");
        assert_eq!(type_name("x2"), "X2Policy");
    }

    #[test]
    fn a_name_with_capitals_or_spaces_is_refused() {
        for bad in ["Fancy", "two words", "-x", "x-", "", "9lives"] {
            assert!(check_name(bad).is_err(), "{bad:?} accepted");
        }
        assert!(check_name("my-policy-2").is_ok());
    }

    #[test]
    fn a_standalone_crate_vendors_the_sdk_names_no_absolute_path_and_pins_the_target() {
        let dir = tempfile::tempdir().unwrap();
        let created =
            create_rust_project("first-fit", &dir.path().join("first-fit"), &Sdk::Vendored)
                .unwrap();
        assert!(!created.in_workspace);
        let manifest = std::fs::read_to_string(created.dir.join("Cargo.toml")).unwrap();
        assert!(manifest.contains("name = \"first-fit\""), "{manifest}");
        assert!(
            manifest.contains("switchyard-policy-sdk = { path = \"switchyard-sdk\" }"),
            "{manifest}"
        );
        assert!(manifest.contains("[workspace]"), "{manifest}");
        assert!(created.dir.join("switchyard-sdk/wit/policy.wit").is_file());
        assert!(created.dir.join("Cargo.lock").is_file());
        let here = dir.path().display().to_string();
        let naming_a_path: Vec<_> = created
            .files
            .iter()
            .filter(|f| f.extension().is_some_and(|e| e == "toml" || e == "md"))
            .filter(|f| std::fs::read_to_string(f).unwrap().contains(&here))
            .collect();
        assert!(
            naming_a_path.is_empty(),
            "absolute paths in {naming_a_path:?}"
        );
        let toolchain = std::fs::read_to_string(created.dir.join("rust-toolchain.toml")).unwrap();
        assert!(toolchain.contains("wasm32-wasip2"));
        let lib = std::fs::read_to_string(created.dir.join("src/lib.rs")).unwrap();
        assert!(
            lib.contains("policy_binding!(FirstFitPolicy, policy)"),
            "{lib}"
        );
        assert_eq!(
            created.wasm_path,
            "target/wasm32-wasip2/release/first_fit.wasm"
        );
        let leftover: Vec<_> = created
            .files
            .iter()
            .filter(|f| std::fs::read_to_string(f).unwrap().contains("{{"))
            .collect();
        assert!(leftover.is_empty(), "unfilled placeholders in {leftover:?}");
    }

    #[test]
    fn a_crate_in_the_repositorys_policies_folder_joins_the_workspace() {
        let repo = tempfile::tempdir().unwrap();
        let sdk = repo.path().join("policies/sdk");
        std::fs::create_dir_all(&sdk).unwrap();
        std::fs::write(sdk.join("Cargo.toml"), "[package]\n").unwrap();
        std::fs::create_dir_all(repo.path().join("wit")).unwrap();
        std::fs::write(repo.path().join("wit/policy.wit"), "").unwrap();
        let created =
            create_rust_project("mine", &repo.path().join("policies/mine"), &Sdk::Vendored)
                .unwrap();
        assert!(created.in_workspace);
        let manifest = std::fs::read_to_string(created.dir.join("Cargo.toml")).unwrap();
        assert!(
            manifest.contains("name = \"switchyard-policy-mine\""),
            "{manifest}"
        );
        assert!(
            manifest.contains("switchyard-policy-sdk.workspace = true"),
            "{manifest}"
        );
        assert!(!manifest.contains("[workspace]"), "{manifest}");
        assert!(!created.dir.join("rust-toolchain.toml").exists());
        assert!(!created.dir.join("switchyard-sdk").exists());
    }

    #[test]
    fn a_missing_sdk_is_an_error_that_names_the_flag() {
        let dir = tempfile::tempdir().unwrap();
        let sdk = Sdk::Path(dir.path().join("nowhere"));
        let error = create_rust_project("x", &dir.path().join("x"), &sdk)
            .unwrap_err()
            .to_string();
        assert!(error.contains("--sdk"), "{error}");
    }

    #[test]
    fn a_non_empty_directory_is_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("keep.txt"), "mine").unwrap();
        let error = create_rust_project("x", dir.path(), &Sdk::Vendored).unwrap_err();
        assert!(matches!(error, ScaffoldError::NotEmpty { .. }), "{error}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("keep.txt")).unwrap(),
            "mine"
        );
    }
}
