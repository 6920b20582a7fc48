//! Loading policies from a directory, typically a mounted ConfigMap: every `*.wasm` file
//! in it plus a settings file ([`settings`]) naming the active policy, parameters and an
//! optional experiment.
//!
//! kubelet updates a mounted ConfigMap by writing a new timestamped directory
//! (`..2026_11_22_10_00_00.123/`), pointing a temporary symlink at it and renaming that
//! over `..data`; the visible files are symlinks into `..data`. So this module never
//! trusts individual events: any change in the directory (debounced) triggers a rescan
//! that reads every visible file through its symlinks and compares content digests with
//! the last scan. A changed component is compiled, checked and swapped in through the
//! [`Controller`]; a broken one is refused and reported (log, load-error metric, the
//! status endpoint, and the controller's refusal hook: an Event in a cluster) and the
//! running policy stays. Every replica of a controller follows the directory, the
//! followers too, so whichever leads next runs what the directory says. A periodic rescan catches anything a
//! missed event would hide.

pub mod settings;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use notify::{RecursiveMode, Watcher as _};

use crate::live::Controller;
pub use settings::{DirSettings, SETTINGS_FILE};
use switchyard_runtime::ComponentDigest;

/// Quiet time after the last event before a rescan (kubelet's swap is several events).
pub const DEBOUNCE: Duration = Duration::from_millis(150);
/// Rescan this often even without events.
pub const RESCAN_EVERY: Duration = Duration::from_secs(10);

/// The directory cannot be watched.
#[derive(Debug, thiserror::Error)]
pub enum PolicyDirError {
    /// It does not exist or is not a directory.
    #[error("policies directory {0} does not exist or is not a directory")]
    Missing(PathBuf),
    /// The watch could not be set up.
    #[error("cannot watch the policies directory {path}: {source}")]
    Watch {
        /// The directory.
        path: PathBuf,
        /// The watcher's error.
        #[source]
        source: notify::Error,
    },
}

/// What one scan did, for logs and tests.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScanReport {
    /// Files whose policy was (re)loaded.
    pub loaded: Vec<String>,
    /// Files or settings that were refused, with the reason.
    pub refused: Vec<(String, String)>,
    /// The policy activated by the settings file, if it changed.
    pub activated: Option<String>,
}

/// The state of the directory as last applied.
pub struct PolicyDir {
    dir: PathBuf,
    controller: Controller,
    runtime: tokio::runtime::Handle,
    file_digests: BTreeMap<String, ComponentDigest>,
    applied: DirSettings,
    settings_digest: Option<ComponentDigest>,
}

impl PolicyDir {
    /// A directory not scanned yet; async calls into the controller run on `runtime`.
    pub fn new(
        dir: &Path,
        controller: Controller,
        runtime: tokio::runtime::Handle,
    ) -> Result<Self, PolicyDirError> {
        if !dir.is_dir() {
            return Err(PolicyDirError::Missing(dir.to_path_buf()));
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            controller,
            runtime,
            file_digests: BTreeMap::new(),
            applied: DirSettings::default(),
            settings_digest: None,
        })
    }

    /// Reads the directory and applies what changed since the last scan. Must not be
    /// called from inside the async runtime (it blocks on it).
    pub fn scan(&mut self) -> ScanReport {
        let mut report = ScanReport::default();
        let catalog = self.controller.catalog();
        let mut wasm = Vec::new();
        let mut settings_text = None;
        match std::fs::read_dir(&self.dir) {
            Ok(entries) => {
                for entry in entries.flatten() {
                    let name = entry.file_name().to_string_lossy().to_string();
                    // `..data` and the timestamped directories are kubelet's plumbing.
                    if name.starts_with('.') {
                        continue;
                    }
                    if name.ends_with(".wasm") {
                        wasm.push(name);
                    } else if name == SETTINGS_FILE || name == "settings.yml" {
                        settings_text = Some(name);
                    }
                }
            }
            Err(error) => {
                let source = self.dir.display().to_string();
                self.refuse(
                    &mut report,
                    &source,
                    format!("cannot list the directory: {error}"),
                    "read",
                );
                return report;
            }
        }
        wasm.sort();

        let settings = match settings_text {
            None => Some(DirSettings::default()),
            Some(name) => {
                let path = self.dir.join(&name);
                let source = path.display().to_string();
                match std::fs::read(&path) {
                    Err(error) => {
                        self.refuse(
                            &mut report,
                            &source,
                            format!("cannot read: {error}"),
                            "read",
                        );
                        None
                    }
                    Ok(bytes) => {
                        let digest = ComponentDigest::of(&bytes);
                        if self.settings_digest == Some(digest) {
                            Some(self.applied.clone())
                        } else {
                            // Also when refused: the same broken file is reported once.
                            self.settings_digest = Some(digest);
                            match DirSettings::parse(&String::from_utf8_lossy(&bytes)) {
                                Ok(s) => {
                                    catalog.clear_failure(&source);
                                    Some(s)
                                }
                                Err(error) => {
                                    self.refuse(&mut report, &source, error, "settings");
                                    None
                                }
                            }
                        }
                    }
                }
            }
        };
        // A broken settings file keeps the last good one in force.
        let settings = settings.unwrap_or_else(|| self.applied.clone());

        let present: HashSet<&String> = wasm.iter().collect();
        self.file_digests.retain(|name, _| present.contains(name));
        let mut reloaded = HashSet::new();
        for name in &wasm {
            let path = self.dir.join(name);
            let source = path.display().to_string();
            let bytes = match std::fs::read(&path) {
                Ok(bytes) => bytes,
                Err(error) => {
                    self.refuse(
                        &mut report,
                        &source,
                        format!("cannot read: {error}"),
                        "read",
                    );
                    continue;
                }
            };
            let digest = ComponentDigest::of(&bytes);
            if self.file_digests.get(name) == Some(&digest) {
                continue;
            }
            // Remember the digest even when refused: the same broken bytes are reported
            // once, not on every rescan.
            self.file_digests.insert(name.clone(), digest);
            let loaded = self.runtime.block_on(self.controller.load_policy(
                bytes,
                source.clone(),
                settings.parameters.clone(),
            ));
            match loaded {
                Ok((entry, _)) => {
                    reloaded.insert(entry.slot.name().to_string());
                    report.loaded.push(name.clone());
                }
                // load_policy has logged, counted and recorded it.
                Err(error) => report.refused.push((source, error.to_string())),
            }
        }

        let settings_source = self.dir.join(SETTINGS_FILE).display().to_string();
        for (policy, values) in &settings.parameters {
            if reloaded.contains(policy) || self.applied.parameters.get(policy) == Some(values) {
                continue;
            }
            if let Err(error) = self
                .runtime
                .block_on(self.controller.set_parameters(policy, values))
            {
                let source = format!("{settings_source}: parameters of {policy}");
                self.refuse(&mut report, &source, error.to_string(), "settings");
            }
        }
        if let Some(active) = &settings.active {
            let current = self.controller.with_status(|s| s.active.clone());
            if &current != active {
                match self.runtime.block_on(self.controller.activate(active)) {
                    Ok(applied) => report.activated = Some(applied.active),
                    Err(error) => {
                        let source = format!("{settings_source}: active");
                        self.refuse(&mut report, &source, error.to_string(), "settings");
                    }
                }
            }
        }
        if settings.experiment != self.applied.experiment {
            let result = match &settings.experiment {
                Some(section) => {
                    section
                        .to_request()
                        .map_err(|e| e.to_string())
                        .and_then(|request| {
                            self.runtime
                                .block_on(self.controller.start_experiment(request))
                                .map(|_| ())
                                .map_err(|e| e.to_string())
                        })
                }
                None => self
                    .runtime
                    .block_on(self.controller.stop_experiment())
                    .map(|_| ())
                    .map_err(|e| e.to_string()),
            };
            if let Err(error) = result {
                let source = format!("{settings_source}: experiment");
                self.refuse(&mut report, &source, error, "settings");
            }
        }
        self.applied = settings;
        for name in &report.loaded {
            tracing::info!(file = name, dir = %self.dir.display(), "policy loaded from the policies directory");
        }
        report
    }

    fn refuse(&self, report: &mut ScanReport, source: &str, error: String, kind: &str) {
        tracing::warn!(
            source,
            error,
            "refused from the policies directory; the running policy stays"
        );
        self.controller.catalog().record_failure(source, &error);
        self.controller.metrics().observe_load_error(kind);
        self.controller.report_refusal(source, &error);
        report.refused.push((source.to_string(), error));
    }
}

/// A running watch; dropping it stops the watch.
pub struct DirWatcher {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    _watcher: notify::RecommendedWatcher,
}

impl Drop for DirWatcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Scans `dir` once now, then rescans after every burst of changes (and every
/// [`RESCAN_EVERY`]) on a thread of its own.
pub fn watch(mut dir: PolicyDir) -> Result<(DirWatcher, ScanReport), PolicyDirError> {
    let (tx, rx) = mpsc::channel::<notify::Result<notify::Event>>();
    let mut watcher = notify::recommended_watcher(tx).map_err(|source| PolicyDirError::Watch {
        path: dir.dir.clone(),
        source,
    })?;
    watcher
        .watch(&dir.dir, RecursiveMode::NonRecursive)
        .map_err(|source| PolicyDirError::Watch {
            path: dir.dir.clone(),
            source,
        })?;
    let first = dir.scan();
    let stop = Arc::new(AtomicBool::new(false));
    let stop_thread = stop.clone();
    let thread = std::thread::Builder::new()
        .name("switchyard-policy-dir".into())
        .spawn(move || {
            let tick = Duration::from_millis(50);
            let mut dirty = false;
            let mut quiet = Duration::ZERO;
            let mut since_scan = Duration::ZERO;
            while !stop_thread.load(Ordering::Relaxed) {
                match rx.recv_timeout(tick) {
                    Ok(Ok(_)) => {
                        dirty = true;
                        quiet = Duration::ZERO;
                        continue;
                    }
                    Ok(Err(error)) => {
                        tracing::warn!(%error, "policies directory watch error; rescanning");
                        dirty = true;
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Err(mpsc::RecvTimeoutError::Disconnected) => return,
                }
                quiet += tick;
                since_scan += tick;
                if (dirty && quiet >= DEBOUNCE) || since_scan >= RESCAN_EVERY {
                    dirty = false;
                    since_scan = Duration::ZERO;
                    dir.scan();
                }
            }
        })
        .expect("cannot start the policies-directory thread");
    Ok((
        DirWatcher {
            stop,
            thread: Some(thread),
            _watcher: watcher,
        },
        first,
    ))
}
