//! A policies directory updated the way kubelet updates a mounted ConfigMap: a new
//! timestamped directory, a `..data` symlink swapped by renaming a temporary one, and
//! the visible files as symlinks into `..data`.

use crate::support;

use std::path::Path;
use std::time::Duration;

use switchyard_controller::{LiveConfig, PolicyDir, watch_policy_dir};

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
    let live = tokio.block_on(support::start_live(
        support::STREAM,
        50.0,
        Duration::from_millis(500),
    ));
    let controller = live.controller.clone();
    let dir = tempfile::tempdir().unwrap();
    // A policy of its own name: a file may not take a built-in's (see below).
    let published = support::hostile_guest_named("published");
    let looping = std::fs::read(support::guest("looping")).unwrap();

    kubelet_publish(
        dir.path(),
        "2026_11_22_10_00_00.000000001",
        &[
            ("looping.wasm", &looping),
            ("settings.yaml", b"active: default\n"),
        ],
    );
    let watched = PolicyDir::new(dir.path(), controller.clone(), tokio.handle().clone()).unwrap();
    let (watcher, first) = watch_policy_dir(watched).unwrap();
    assert_eq!(first.loaded, vec!["looping.wasm".to_string()]);
    assert!(controller.catalog().get("looping").is_ok());
    assert_eq!(controller.with_status(|s| s.active.clone()), "default");

    // The update: a new policy file and settings that activate it with a parameter.
    kubelet_publish(
        dir.path(),
        "2026_11_22_10_05_00.000000002",
        &[
            ("looping.wasm", &looping),
            ("published.wasm", &published),
            (
                "settings.yaml",
                b"active: published\nparameters:\n  default: {scoring: most-allocated}\n",
            ),
        ],
    );
    wait_until("published to become active", || {
        controller.with_status(|s| s.active.clone()) == "published"
    });
    let entry = controller.catalog().get("published").unwrap();
    assert!(entry.source.ends_with("published.wasm"), "{}", entry.source);
    assert_eq!(
        controller.catalog().get("default").unwrap().slot.settings["scoring"],
        "most-allocated"
    );
    let rounds = controller.with_status(|s| s.rounds);
    wait_until("rounds decided by published", || {
        controller.with_status(|s| {
            s.decisions
                .iter()
                .any(|d| d.round > rounds && d.arm_a.policy == "published")
        })
    });

    // A broken update of the active policy's file is refused and the running version stays.
    kubelet_publish(
        dir.path(),
        "2026_11_22_10_10_00.000000003",
        &[
            ("looping.wasm", &looping),
            ("published.wasm", b"\0asm\x0d\0\x01\0 truncated"),
            ("settings.yaml", b"active: published\n"),
        ],
    );
    wait_until("the broken file to be reported", || {
        controller
            .catalog()
            .failures()
            .iter()
            .any(|f| f.source.ends_with("published.wasm"))
    });
    assert_eq!(controller.with_status(|s| s.active.clone()), "published");
    assert!(
        controller
            .metrics()
            .render()
            .contains("switchyard_policy_load_errors_total")
    );
    let rounds = controller.with_status(|s| s.rounds);
    wait_until("published to keep deciding", || {
        controller.with_status(|s| {
            s.decisions.iter().any(|d| {
                d.round > rounds && d.arm_a.policy == "published" && d.arm_a.failure.is_none()
            })
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
    assert_eq!(controller.with_status(|s| s.active.clone()), "published");
    drop(watcher);
    tokio.block_on(live.stop());
}

/// A controller following a plain directory; returns it with the watcher and the tokio
/// runtime the watcher blocks on.
fn follow(
    dir: &Path,
) -> (
    tokio::runtime::Runtime,
    support::Live,
    switchyard_controller::DirWatcher,
    switchyard_controller::ScanReport,
) {
    follow_with(
        dir,
        LiveConfig {
            speed: 50.0,
            keep_decisions: 1_000_000,
            ..LiveConfig::default()
        },
    )
}

/// [`follow`] with the controller's whole configuration.
fn follow_with(
    dir: &Path,
    config: LiveConfig,
) -> (
    tokio::runtime::Runtime,
    support::Live,
    switchyard_controller::DirWatcher,
    switchyard_controller::ScanReport,
) {
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let live = tokio.block_on(support::start_live_with(
        support::STREAM,
        config,
        Duration::from_millis(500),
    ));
    let watched = PolicyDir::new(dir, live.controller.clone(), tokio.handle().clone()).unwrap();
    let (watcher, first) = watch_policy_dir(watched).unwrap();
    (tokio, live, watcher, first)
}

#[test]
fn a_file_that_takes_a_built_in_policys_name_is_refused_and_the_built_in_stays() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("default.wasm"),
        support::hostile_guest_named("default"),
    )
    .unwrap();
    let (tokio, live, watcher, first) = follow(dir.path());
    let (source, error) = &first.refused[0];
    assert!(source.ends_with("default.wasm"), "{source}");
    assert!(error.contains("reserved"), "{error}");
    let default = live.controller.catalog().get("default").unwrap();
    assert_eq!(default.source, "builtin:default");
    drop(watcher);
    tokio.block_on(live.stop());
}

#[test]
fn a_standing_refusal_is_reported_once_and_cleared_when_the_settings_are_fixed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("settings.yaml"), "active: no-such-policy\n").unwrap();
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let live = tokio.block_on(support::start_live(
        support::STREAM,
        50.0,
        Duration::from_millis(500),
    ));
    let refusals = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = refusals.clone();
    live.controller.on_refusal(std::sync::Arc::new(move |_, _| {
        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }));
    let watched =
        PolicyDir::new(dir.path(), live.controller.clone(), tokio.handle().clone()).unwrap();
    let (watcher, first) = watch_policy_dir(watched).unwrap();
    assert_eq!(first.refused.len(), 1, "{:?}", first.refused);
    // Touch the directory repeatedly: rescans find the same refusal standing.
    for i in 0..5 {
        std::fs::write(dir.path().join(format!("unrelated-{i}.txt")), "x").unwrap();
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(watcher.scans() > 1, "the directory was rescanned");
    assert_eq!(refusals.load(std::sync::atomic::Ordering::Relaxed), 1);
    std::fs::write(dir.path().join("settings.yaml"), "active: even\n").unwrap();
    wait_until("the fixed settings to apply", || {
        live.controller.with_status(|s| s.active.clone()) == "even"
    });
    assert!(live.controller.catalog().failures().is_empty());
    drop(watcher);
    tokio.block_on(live.stop());
}

#[test]
fn reading_the_directory_does_not_trigger_another_read() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.wasm"), support::hostile_guest_named("a")).unwrap();
    std::fs::write(dir.path().join("settings.yaml"), "active: a\n").unwrap();
    let (tokio, live, watcher, first) = follow(dir.path());
    assert_eq!(first.loaded, vec!["a.wasm".to_string()]);
    std::thread::sleep(Duration::from_secs(2));
    // Nothing changed: the first scan's own reads must not have caused more.
    assert_eq!(watcher.scans(), 1);
    drop(watcher);
    tokio.block_on(live.stop());
}

#[test]
fn a_fifo_or_a_device_in_the_directory_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("settings.yaml");
    support::make_fifo(&fifo);
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero.wasm")).unwrap();
    let (tokio, live, watcher, first) = follow(dir.path());
    let refused: Vec<&String> = first.refused.iter().map(|(source, _)| source).collect();
    assert_eq!(refused.len(), 2, "{:?}", first.refused);
    assert!(
        first
            .refused
            .iter()
            .all(|(_, error)| error.contains("not a regular file")),
        "{:?}",
        first.refused
    );
    drop(watcher);
    tokio.block_on(live.stop());
}

#[test]
fn a_directory_removed_and_created_again_is_watched_again() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("policies");
    std::fs::create_dir(&dir).unwrap();
    let (tokio, live, watcher, _) = follow(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("b.wasm"), support::hostile_guest_named("b")).unwrap();
    std::fs::write(dir.join("settings.yaml"), "active: b\n").unwrap();
    wait_until("the new directory's policy to become active", || {
        live.controller.with_status(|s| s.active.clone()) == "b"
    });
    drop(watcher);
    tokio.block_on(live.stop());
}

#[test]
fn the_api_cannot_change_what_the_settings_file_decides_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("settings.yaml"),
        "active: even\nparameters:\n  default: {scoring: most-allocated}\n",
    )
    .unwrap();
    let (tokio, live, watcher, _) = follow(dir.path());
    let (status, body) =
        tokio.block_on(live.post("/v1/policies/default/activate", serde_json::json!({})));
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("settings.yaml"),
        "{body}"
    );
    let (status, _) = tokio.block_on(live.put(
        "/v1/policies/default/parameters",
        serde_json::json!({"scoring": "least-allocated"}),
    ));
    assert_eq!(status, 409);
    // What the file does not name stays the API's: gang's parameters.
    let (status, body) =
        tokio.block_on(live.put("/v1/policies/gang/parameters", serde_json::json!({})));
    assert_eq!(status, 200, "{body}");
    assert_eq!(live.controller.with_status(|s| s.active.clone()), "even");
    drop(watcher);
    tokio.block_on(live.stop());
}

#[test]
fn parameters_kept_for_a_directory_policy_apply_when_it_loads_after_a_restart() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::copy(
        support::guest("log-flood"),
        dir.path().join("log-flood.wasm"),
    )
    .unwrap();
    let keeping = || LiveConfig {
        speed: 50.0,
        state_dir: Some(state.path().to_path_buf()),
        ..LiveConfig::default()
    };
    let quiet = serde_json::json!({"lines": "0", "bytes": "1", "every": "5"});
    let settings_of_log_flood = |tokio: &tokio::runtime::Runtime, live: &support::Live| {
        let (_, list) = tokio.block_on(live.get("/v1/policies"));
        list["policies"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "log-flood")
            .unwrap_or_else(|| panic!("log-flood is listed: {list}"))["settings"]
            .clone()
    };

    let (tokio, live, watcher, first) = follow_with(dir.path(), keeping());
    assert_eq!(first.loaded, ["log-flood.wasm"], "{first:?}");
    let (status, body) =
        tokio.block_on(live.put("/v1/policies/log-flood/parameters", quiet.clone()));
    assert_eq!(status, 200, "{body}");
    drop(watcher);
    tokio.block_on(live.stop());

    // The restarted controller starts before the directory's policy is loaded; the
    // parameters kept for it apply once it is.
    let (tokio, live, watcher, first) = follow_with(dir.path(), keeping());
    assert_eq!(first.loaded, ["log-flood.wasm"], "{first:?}");
    assert_eq!(settings_of_log_flood(&tokio, &live), quiet);
    drop(watcher);
    tokio.block_on(live.stop());
}

#[test]
fn an_api_activation_racing_a_settings_file_that_takes_the_active_policy_never_outlasts_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let live = tokio.block_on(support::start_live(
        support::STREAM,
        50.0,
        Duration::from_millis(500),
    ));
    let mut watched =
        PolicyDir::new(dir.path(), live.controller.clone(), tokio.handle().clone()).unwrap();
    let settings = dir.path().join("settings.yaml");
    let (mut refused, mut answered) = (0, 0);
    for attempt in 0..50 {
        // No settings file: the active policy is the API's.
        let _ = std::fs::remove_file(&settings);
        watched.scan();
        let (status, body) =
            tokio.block_on(live.post("/v1/policies/gang/activate", serde_json::json!({})));
        assert_eq!(status, 200, "{body}");
        // A settings file that names the active policy, read while the API activates
        // another one.
        let (status, body) = std::thread::scope(|scope| {
            let file = scope.spawn(|| {
                std::fs::write(&settings, "active: even\n").unwrap();
                watched.scan()
            });
            let answer =
                tokio.block_on(live.post("/v1/policies/default/activate", serde_json::json!({})));
            file.join().unwrap();
            answer
        });
        match status {
            200 => answered += 1,
            409 => refused += 1,
            _ => panic!("attempt {attempt}: {status} {body}"),
        }
        // Answered 200, the activation came before the file's; refused, after it.
        // Either way the file, which owns the active policy now, is what holds.
        assert_eq!(
            live.controller.with_status(|s| s.active.clone()),
            "even",
            "attempt {attempt}: the API's activation ({status} {body}) outlasted the settings file"
        );
    }
    eprintln!("{answered} activations answered 200 before the file, {refused} refused after it");
    drop(watched);
    tokio.block_on(live.stop());
}
