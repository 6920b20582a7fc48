//! Builds the policy components the host ships and the test guests, so a plain
//! `cargo build` of the host is enough on a fresh clone.
//!
//! The guest crates are workspace members; they are compiled for `wasm32-wasip2` by a
//! nested cargo with its own target directory (so it never waits on the outer build's
//! lock) and the `guest` profile. The shipped policies are embedded with
//! `include_bytes!` through a generated table (`$OUT_DIR/builtin_policies.rs`); the test
//! guests stay in `<target>/guests/wasm32-wasip2/guest/`, where the tests of every host
//! crate find them (`host/test-support/src/guests.rs`).

use std::{
    env,
    path::{Path, PathBuf},
    process::Command,
};

/// Shipped policies are the crates `policies/<name>` for each name listed under
/// `[workspace.metadata.switchyard] builtin-policies` in the workspace manifest, so a
/// policy crate still being written never breaks the host build; every crate under
/// `tests/guests/` is a misbehaving guest the runtime tests load.
const POLICY_DIR: &str = "policies";
const TEST_GUEST_DIR: &str = "tests/guests";

const TARGET: &str = "wasm32-wasip2";

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    // host/runtime -> the workspace root.
    let workspace = manifest_dir.ancestors().nth(2).unwrap().to_path_buf();
    // Cargo.toml holds the `guest` profile the policies are built with.
    for watched in [
        "wit",
        "policies",
        "tests/guests",
        "Cargo.lock",
        "Cargo.toml",
    ] {
        println!(
            "cargo:rerun-if-changed={}",
            workspace.join(watched).display()
        );
    }

    // <target>/<profile>/build/<pkg>-<hash>/out -> <target>
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    let target_root = out_dir
        .ancestors()
        .nth(4)
        .expect("OUT_DIR is inside a target directory");
    let guest_target = target_root.join("guests");

    let builtin = builtin_policy_names(&workspace.join("Cargo.toml"));
    let policies: Vec<Guest> = guest_crates(&workspace.join(POLICY_DIR))
        .into_iter()
        .filter(|g| builtin.contains(&g.folder))
        .collect();
    for name in &builtin {
        assert!(
            policies.iter().any(|g| &g.folder == name),
            "builtin policy `{name}` is listed in Cargo.toml but policies/{name} is not a crate"
        );
    }
    let test_guests = guest_crates(&workspace.join(TEST_GUEST_DIR));

    let sysroot = rustc_sysroot();
    ensure_guest_target(sysroot.as_deref());
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&workspace)
        .args([
            "build",
            "--profile",
            "guest",
            "--target",
            TARGET,
            "--target-dir",
        ])
        .arg(&guest_target);
    for guest in policies.iter().chain(&test_guests) {
        cmd.args(["-p", &guest.package]);
    }
    // The outer build's flags (coverage, sanitizers, host-only -C options) must not leak
    // into the wasm build.
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_WRAPPER",
        "CARGO_PRIMARY_PACKAGE",
    ] {
        cmd.env_remove(var);
    }
    cmd.env(
        "CARGO_ENCODED_RUSTFLAGS",
        remap_flags(&workspace, sysroot.as_deref()).join("\x1f"),
    );
    let status = cmd
        .status()
        .expect("cannot run cargo to build the policy components");
    assert!(
        status.success(),
        "building the policy components for {TARGET} failed; the rust-toolchain.toml in the \
         repository pins that target, so `rustup target add {TARGET}` fixes a toolchain without it"
    );

    let wasm_dir = guest_target.join(TARGET).join("guest");
    let wasm_of = |guest: &Guest| {
        let path = wasm_dir.join(format!("{}.wasm", guest.package.replace('-', "_")));
        assert!(
            path.exists(),
            "{} built but {} is missing",
            guest.package,
            path.display()
        );
        path
    };
    for guest in &test_guests {
        wasm_of(guest);
    }
    let mut table = String::from("&[\n");
    for guest in &policies {
        table.push_str(&format!(
            "    BuiltinPolicy {{ name: {:?}, bytes: include_bytes!({:?}) }},\n",
            guest.folder,
            wasm_of(guest)
        ));
    }
    table.push_str("]\n");
    std::fs::write(out_dir.join("builtin_policies.rs"), table).unwrap();
}

/// The `--remap-path-prefix` flags that keep this machine's paths out of the components:
/// panic messages name the source files of the guests and of their dependencies, which
/// live under the cargo home (the registry's sources), the toolchain (the standard
/// library's sources, when rust-src is installed) and the workspace. Remapped to fixed
/// names, the same sources give the same bytes wherever they are checked out, so a
/// golden trace can pin the digest of the component that made it. rustc applies the
/// last flag that matches, so the workspace (which may hold the cargo home or a target
/// directory) comes after the broader prefixes.
fn remap_flags(workspace: &Path, sysroot: Option<&Path>) -> Vec<String> {
    let mut prefixes: Vec<(PathBuf, &str)> = Vec::new();
    if let Some(home) = cargo_home() {
        prefixes.push((home, "/cargo"));
    }
    if let Some(sysroot) = sysroot {
        prefixes.push((sysroot.to_path_buf(), "/toolchain"));
    }
    prefixes.push((workspace.to_path_buf(), "/switchyard"));
    prefixes
        .into_iter()
        .flat_map(|(from, to)| {
            // The path as given and as resolved (a symlinked home or checkout): rustc
            // matches text, and either form may reach it.
            let resolved = from.canonicalize().ok().filter(|r| r != &from);
            [Some(from), resolved]
                .into_iter()
                .flatten()
                .map(move |from| format!("--remap-path-prefix={}={to}", from.display()))
        })
        .collect()
}

/// Where cargo keeps the registry's sources: `CARGO_HOME`, else `~/.cargo`.
fn cargo_home() -> Option<PathBuf> {
    env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|home| Path::new(&home).join(".cargo")))
}

/// The toolchain's root (`rustc --print sysroot`), none when rustc cannot say.
fn rustc_sysroot() -> Option<PathBuf> {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
}

/// rustup installs the targets `rust-toolchain.toml` lists only when it installs the
/// toolchain itself; a machine that already had the pinned toolchain lacks the target.
/// Adding it here keeps a fresh clone a one-command build either way.
fn ensure_guest_target(sysroot: Option<&Path>) {
    let installed = sysroot.is_some_and(|root| root.join("lib/rustlib").join(TARGET).is_dir());
    if installed {
        return;
    }
    println!("cargo:warning=the {TARGET} target is missing; running `rustup target add {TARGET}`");
    let mut add = Command::new("rustup");
    add.args(["target", "add", TARGET]);
    if let Ok(toolchain) = env::var("RUSTUP_TOOLCHAIN") {
        add.args(["--toolchain", &toolchain]);
    }
    match add.status() {
        Ok(status) if status.success() => {}
        Ok(status) => println!("cargo:warning=`rustup target add {TARGET}` failed ({status})"),
        Err(error) => println!("cargo:warning=cannot run rustup ({error})"),
    }
}

struct Guest {
    folder: String,
    package: String,
}

/// Crates directly under `dir`, sorted by folder name, with the package name read from
/// their manifest.
fn guest_crates(dir: &Path) -> Vec<Guest> {
    let mut guests: Vec<Guest> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .filter_map(Result::ok)
        .filter(|entry| entry.path().join("Cargo.toml").is_file())
        .filter_map(|entry| {
            let folder = entry.file_name().to_string_lossy().into_owned();
            let manifest = std::fs::read_to_string(entry.path().join("Cargo.toml")).ok()?;
            let package = manifest
                .lines()
                .find_map(|l| l.trim().strip_prefix("name = "))
                .map(|n| n.trim_matches('"').to_string())?;
            Some(Guest { folder, package })
        })
        .collect();
    guests.sort_by(|a, b| a.folder.cmp(&b.folder));
    guests
}

/// The names under `[workspace.metadata.switchyard] builtin-policies`.
fn builtin_policy_names(manifest: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(manifest).expect("workspace Cargo.toml is readable");
    let doc: toml::Table = text.parse().expect("workspace Cargo.toml is valid TOML");
    doc.get("workspace")
        .and_then(|w| w.get("metadata"))
        .and_then(|m| m.get("switchyard"))
        .and_then(|s| s.get("builtin-policies"))
        .and_then(|list| list.as_array())
        .expect("Cargo.toml lists [workspace.metadata.switchyard] builtin-policies")
        .iter()
        .map(|v| v.as_str().expect("policy names are strings").to_string())
        .collect()
}
