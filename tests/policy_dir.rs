//! A policies directory updated the way kubelet updates a mounted ConfigMap: a new
//! timestamped directory, a `..data` symlink swapped by renaming a temporary one, and
//! the visible files as symlinks into `..data`.

mod live;
mod support;
use support::guests;

use std::path::Path;
use std::time::Duration;

use switchyard::policy_dir::{self, PolicyDir};
use switchyard_runtime::registry::builtin;

/// Publishes `files` as kubelet does and removes the previous timestamped directory.
fn kubelet_publish(dir: &Path, stamp: &str, files: &[(&str, &[u8])]) {
    let data = format!("..{stamp}");
    std::fs::create_dir(dir.join(&data)).unwrap();
    for (name, bytes) in files {
        std::fs::write(dir.join(&data).join(name), bytes).unwrap();
    }
    let old = std::fs::read_link(dir.join("..data")).ok();
    std::os::unix::fs::symlink(&data, dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    for (name, _) in files {
        let link = dir.join(name);
        if link.symlink_metadata().is_err() {
            std::os::unix::fs::symlink(Path::new("..data").join(name), link).unwrap();
        }
    }
    if let Some(old) = old {
        std::fs::remove_dir_all(dir.join(old)).unwrap();
    }
}

fn wait_until(what: &str, check: impl Fn() -> bool) {
    support::wait_until(what, Duration::from_secs(30), check);
}

#[test]
fn a_policy_published_through_a_kubelet_symlink_swap_becomes_active_and_a_broken_one_is_refused() {
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let live = tokio.block_on(live::start(live::STREAM, 50.0, Duration::from_millis(500)));
    let controller = live.controller.clone();
    let dir = tempfile::tempdir().unwrap();
    let even = builtin("even").unwrap().bytes;
    let looping = std::fs::read(guests::path("looping")).unwrap();

    kubelet_publish(
        dir.path(),
        "2026_11_22_10_00_00.000000001",
        &[
            ("looping.wasm", &looping),
            ("settings.yaml", b"active: default\n"),
        ],
    );
    let watched = PolicyDir::new(dir.path(), controller.clone(), tokio.handle().clone()).unwrap();
    let (watcher, first) = policy_dir::watch(watched).unwrap();
    assert_eq!(first.loaded, vec!["looping.wasm".to_string()]);
    assert!(controller.catalog().get("looping").is_ok());
    assert_eq!(controller.with_status(|s| s.active.clone()), "default");

    // The update: a new policy file and settings that activate it with a parameter.
    kubelet_publish(
        dir.path(),
        "2026_11_22_10_05_00.000000002",
        &[
            ("looping.wasm", &looping),
            ("even.wasm", even),
            (
                "settings.yaml",
                b"active: even\nparameters:\n  default: {scoring: most-allocated}\n",
            ),
        ],
    );
    wait_until("even to become active", || {
        controller.with_status(|s| s.active.clone()) == "even"
    });
    let even_entry = controller.catalog().get("even").unwrap();
    assert!(
        even_entry.source.ends_with("even.wasm"),
        "{}",
        even_entry.source
    );
    assert_eq!(
        controller.catalog().get("default").unwrap().slot.settings["scoring"],
        "most-allocated"
    );
    let rounds = controller.with_status(|s| s.rounds);
    wait_until("rounds decided by even", || {
        controller.with_status(|s| {
            s.decisions
                .iter()
                .any(|d| d.round > rounds && d.arm_a.policy == "even")
        })
    });

    // A broken update of the active policy's file is refused and even stays.
    kubelet_publish(
        dir.path(),
        "2026_11_22_10_10_00.000000003",
        &[
            ("looping.wasm", &looping),
            ("even.wasm", b"\0asm\x0d\0\x01\0 truncated"),
            ("settings.yaml", b"active: even\n"),
        ],
    );
    wait_until("the broken file to be reported", || {
        controller
            .catalog()
            .failures()
            .iter()
            .any(|f| f.source.ends_with("even.wasm"))
    });
    assert_eq!(controller.with_status(|s| s.active.clone()), "even");
    assert!(
        controller
            .metrics()
            .render()
            .contains("switchyard_policy_load_errors_total")
    );
    let rounds = controller.with_status(|s| s.rounds);
    wait_until("even to keep deciding", || {
        controller.with_status(|s| {
            s.decisions
                .iter()
                .any(|d| d.round > rounds && d.arm_a.policy == "even" && d.arm_a.failure.is_none())
        })
    });

    // A settings file that does not parse keeps the last good settings.
    kubelet_publish(
        dir.path(),
        "2026_11_22_10_15_00.000000004",
        &[
            ("looping.wasm", &looping),
            ("settings.yaml", b"activ: default\n"),
        ],
    );
    wait_until("the bad settings to be reported", || {
        controller
            .catalog()
            .failures()
            .iter()
            .any(|f| f.source.ends_with("settings.yaml") && f.error.contains("activ"))
    });
    assert_eq!(controller.with_status(|s| s.active.clone()), "even");
    drop(watcher);
    tokio.block_on(live.stop());
}
