//! The misbehaving test guests of `tests/guests/` and the shipped policies of
//! `policies/`, as built components. The runtime crate's build script compiles them into
//! `<target>/guests/wasm32-wasip2/guest/`, next to the test binaries' own target
//! directory, so a test finds them from its own path whichever crate it belongs to. This
//! module finds and patches components; it must not build them.

use std::path::PathBuf;

/// The built component of the test guest in `tests/guests/<folder>`.
pub fn guest(folder: &str) -> String {
    let file = format!("switchyard_test_guest_{}.wasm", folder.replace('-', "_"));
    built(&file, &format!("tests/guests/{folder}"))
}

/// The built component of the shipped policy `policies/<name>`, which the same build
/// script compiles beside the test guests.
pub fn builtin_policy(name: &str) -> String {
    built(
        &format!("switchyard_policy_{name}.wasm"),
        &format!("policies/{name}"),
    )
}

/// The component `file` in the guests' target directory above the test binary;
/// `origin` names the crate it is built from.
fn built(file: &str, origin: &str) -> String {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.ancestors()
        .map(|dir| {
            dir.join("guests")
                .join("wasm32-wasip2")
                .join("guest")
                .join(file)
        })
        .find(|candidate| candidate.is_file())
        .map(|found: PathBuf| found.display().to_string())
        .unwrap_or_else(|| {
            panic!(
                "no {file} above {}: the runtime crate's build script builds {origin}",
                exe.display()
            )
        })
}

/// The `hostile` guest with its name placeholder overwritten by `name`, so one guest can
/// claim any name (a built-in's, a hostile one).
pub fn hostile_guest_named(name: &str) -> Vec<u8> {
    const MARKER: &[u8] = b"SWITCHYARD-TEST-NAME:";
    const ROOM: usize = 150 - MARKER.len();
    assert!(name.len() < ROOM, "a test name fits the placeholder");
    let mut bytes = std::fs::read(guest("hostile")).expect("the hostile guest is built");
    let at = bytes
        .windows(MARKER.len())
        .position(|w| w == MARKER)
        .expect("the hostile guest carries its name placeholder")
        + MARKER.len();
    let slot = &mut bytes[at..at + ROOM];
    slot.fill(0);
    slot[..name.len()].copy_from_slice(name.as_bytes());
    bytes
}

/// The component of the test guest in `tests/guests/<folder>` (`mirror`, `echo` or
/// `least-loaded`) saying whether it `reads_loss`: its flag after the marker
/// `SWITCHYARD-READS-LOSS:` set, so one built guest serves both answers.
pub fn guest_reading_loss(folder: &str, reads_loss: bool) -> Vec<u8> {
    const MARKER: &[u8] = b"SWITCHYARD-READS-LOSS:";
    let mut bytes = std::fs::read(guest(folder)).expect("the guest is built");
    let mut found = bytes
        .windows(MARKER.len())
        .enumerate()
        .filter(|(_, w)| *w == MARKER)
        .map(|(at, _)| at + MARKER.len());
    let at = found
        .next()
        .unwrap_or_else(|| panic!("the {folder} guest carries no loss flag"));
    assert!(found.next().is_none(), "the {folder} guest's flag is one");
    bytes[at] = if reads_loss { b'1' } else { b'0' };
    bytes
}
