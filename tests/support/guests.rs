//! The misbehaving test guests of `tests/guests/`, as built components. The runtime
//! crate's build script compiles every crate there into
//! `<target>/guests/wasm32-wasip2/guest/`, next to the test binaries' own target
//! directory, so a test finds them from its own path whichever crate it belongs to.

use std::path::PathBuf;

/// The built component of the test guest in `tests/guests/<folder>`.
pub(crate) fn path(folder: &str) -> String {
    let file = format!("switchyard_test_guest_{}.wasm", folder.replace('-', "_"));
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.ancestors()
        .map(|dir| {
            dir.join("guests")
                .join("wasm32-wasip2")
                .join("guest")
                .join(&file)
        })
        .find(|candidate| candidate.is_file())
        .map(|found: PathBuf| found.display().to_string())
        .unwrap_or_else(|| {
            panic!(
                "no {file} above {}: the runtime crate's build script builds tests/guests/{folder}",
                exe.display()
            )
        })
}
