//! Loading policies from a directory, typically a mounted ConfigMap: every `*.wasm` file
//! in it plus a settings file ([`settings`]) naming the active policy, parameters and an
//! optional experiment.
//!
//! kubelet updates a mounted ConfigMap by writing a new timestamped directory
//! (`..2026_11_22_10_00_00.123/`), pointing a temporary symlink at it and renaming that
//! over `..data`; the visible files are symlinks into `..data`. So this module never
//! trusts individual events: any change in the directory (debounced) triggers a rescan
//! that looks at every visible file through its symlinks, reads the ones whose size,
//! time or inode changed (regular files only, up to the upload limit) and compares
//! content digests with the last scan. A changed component is compiled, checked and swapped in through the
//! [`Controller`]; a broken one is refused and reported (log, load-error metric, the
//! status endpoint, and the controller's refusal hook: an Event in a cluster) and the
//! running policy stays. Every replica of a controller follows the directory, the
//! followers too, so whichever leads next runs what the directory says. A periodic
//! rescan catches anything a missed event would hide. The settings file is applied when
//! it changes, and is the one source of truth for what it names
//! ([`crate::live::OwnedBySettings`]); each refusal is reported once until it changes or
//! clears.

mod references;
mod settings;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use notify::{RecursiveMode, Watcher as _};

use crate::live::{ChangeBy, Controller, OwnedBySettings};
pub(crate) use settings::{DirSettings, SETTINGS_FILE};
use switchyard_core::ComponentDigest;

/// Quiet time after the last event before a rescan (kubelet's swap is several events).
pub(crate) const DEBOUNCE: Duration = Duration::from_millis(150);
/// Rescan this often even without events (a rescan reads only files whose size, time or
/// inode changed).
pub(crate) const RESCAN_EVERY: Duration = Duration::from_secs(10);

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
    /// Files or settings that were refused, with the reason (each refusal once: a file
    /// that stays as it is is not refused again).
    pub refused: Vec<(String, String)>,
    /// The policy activated by the settings file, if it changed.
    pub activated: Option<String>,
}

/// What identifies a file's content without reading it: a rescan reads a file again
/// only when this changes (kubelet's swap changes the inode the symlinks lead to).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<std::time::SystemTime>,
    inode: u64,
    device: u64,
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt as _;
        Self {
            len: meta.len(),
            modified: meta.modified().ok(),
            inode: meta.ino(),
            device: meta.dev(),
        }
    }
}

/// A file of the directory, read safely.
enum FileRead {
    /// Same stamp as last time: not read again.
    Unchanged,
    /// Its bytes (at most the limit) and stamp.
    Bytes(Vec<u8>, Stamp),
    /// Not a regular file, too large, or unreadable: why.
    Refused(String),
}

/// Reads `path` (through symlinks) when its stamp differs from `last`: only a regular
/// file, opened without blocking (a FIFO or device cannot hang the controller) and read
/// up to `limit` bytes.
fn read_file(path: &Path, limit: usize, last: Option<&Stamp>) -> FileRead {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(error) => return FileRead::Refused(format!("cannot read: {error}")),
    };
    if !meta.is_file() {
        return FileRead::Refused(
            "not a regular file (a directory, device, FIFO or socket is never read)".into(),
        );
    }
    let stamp = Stamp::of(&meta);
    if last == Some(&stamp) {
        return FileRead::Unchanged;
    }
    if meta.len() > limit as u64 {
        return FileRead::Refused(format!(
            "{} bytes, larger than the {limit}-byte limit of a policy component",
            meta.len()
        ));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path);
    let mut file = match file {
        Ok(file) => file,
        Err(error) => return FileRead::Refused(format!("cannot read: {error}")),
    };
    // The path may have been swapped for something else between the two looks.
    match file.metadata() {
        Ok(meta) if meta.is_file() => {}
        _ => return FileRead::Refused("not a regular file".into()),
    }
    let mut bytes = Vec::new();
    match file.by_ref().take(limit as u64 + 1).read_to_end(&mut bytes) {
        Ok(_) if bytes.len() > limit => FileRead::Refused(format!(
            "larger than the {limit}-byte limit of a policy component"
        )),
        Ok(_) => FileRead::Bytes(bytes, stamp),
        Err(error) => FileRead::Refused(format!("cannot read: {error}")),
    }
}

/// The state of the directory as last applied.
pub struct PolicyDir {
    dir: PathBuf,
    controller: Controller,
    runtime: tokio::runtime::Handle,
    max_file_bytes: usize,
    /// Per `*.wasm` file: its stamp and content digest when last read.
    files: BTreeMap<String, (Stamp, ComponentDigest)>,
    settings_stamp: Option<Stamp>,
    settings_digest: Option<ComponentDigest>,
    applied: DirSettings,
    /// Refusals reported and still standing, by source: the same one is not reported
    /// again until it changes or clears.
    reported: BTreeMap<String, String>,
}

impl PolicyDir {
    /// A directory not scanned yet; async calls into the controller run on `runtime`.
    /// Files are read up to the default upload limit ([`PolicyDir::max_file_bytes`]).
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
            max_file_bytes: crate::api::DEFAULT_MAX_UPLOAD_BYTES,
            files: BTreeMap::new(),
            settings_stamp: None,
            settings_digest: None,
            applied: DirSettings::default(),
            reported: BTreeMap::new(),
        })
    }

    /// Reads no file larger than `bytes` (the API's upload limit, so a file and an
    /// upload have the same limit).
    pub fn max_file_bytes(mut self, bytes: usize) -> Self {
        self.max_file_bytes = bytes;
        self
    }

    /// Reads the directory and applies what changed since the last scan. Must not be
    /// called from inside the async runtime (it blocks on it).
    pub fn scan(&mut self) -> ScanReport {
        let mut report = ScanReport::default();
        let mut wasm = Vec::new();
        let mut settings_name = None;
        let dir_source = self.dir.display().to_string();
        match std::fs::read_dir(&self.dir) {
            Ok(entries) => {
                self.clear(&dir_source);
                for entry in entries.flatten() {
                    let name = entry.file_name().to_string_lossy().to_string();
                    // `..data` and the timestamped directories are kubelet's plumbing.
                    if name.starts_with('.') {
                        continue;
                    }
                    if name.ends_with(".wasm") {
                        wasm.push(name);
                    } else if name == SETTINGS_FILE || name == "settings.yml" {
                        settings_name = Some(name);
                    }
                }
            }
            Err(error) => {
                self.refuse(
                    &mut report,
                    &dir_source,
                    format!("cannot list the directory: {error}; the loaded policies stay"),
                    "read",
                );
                return report;
            }
        }
        wasm.sort();

        let (settings, settings_changed) = self.read_settings(settings_name, &mut report);
        let mut reloaded = self.load_files(&wasm, &settings, &mut report);
        reloaded.extend(self.load_references(&settings, settings_changed, &mut report));
        self.apply_settings(&settings, settings_changed, &reloaded, &mut report);
        self.applied = settings;
        for name in &report.loaded {
            tracing::info!(file = name, dir = %self.dir.display(), "policy loaded from the policies directory");
        }
        report
    }

    /// The settings in force after this scan, and whether the file changed.
    fn read_settings(
        &mut self,
        name: Option<String>,
        report: &mut ScanReport,
    ) -> (DirSettings, bool) {
        let Some(name) = name else {
            let changed = self.settings_digest.take().is_some();
            self.settings_stamp = None;
            self.own(None);
            return (DirSettings::default(), changed);
        };
        let path = self.dir.join(&name);
        let source = path.display().to_string();
        match read_file(&path, self.max_file_bytes, self.settings_stamp.as_ref()) {
            FileRead::Unchanged => (self.applied.clone(), false),
            FileRead::Refused(error) => {
                self.refuse(report, &source, error, "read");
                (self.applied.clone(), false)
            }
            FileRead::Bytes(bytes, stamp) => {
                self.settings_stamp = Some(stamp);
                let digest = ComponentDigest::of(&bytes);
                if self.settings_digest == Some(digest) {
                    return (self.applied.clone(), false);
                }
                self.settings_digest = Some(digest);
                // What the old file's settings refused no longer stands.
                let stale: Vec<String> = self
                    .reported
                    .keys()
                    .filter(|k| k.starts_with(&source))
                    .cloned()
                    .collect();
                for key in stale {
                    self.clear(&key);
                }
                match DirSettings::parse(&String::from_utf8_lossy(&bytes)) {
                    Ok(settings) => {
                        self.own(Some(settings.ownership(&source)));
                        (settings, true)
                    }
                    Err(error) => {
                        // A broken settings file keeps the last good one in force.
                        self.refuse(report, &source, error, "settings");
                        (self.applied.clone(), false)
                    }
                }
            }
        }
    }

    /// Tells the decision thread what the settings file in force owns, in order with
    /// the changes it applies after (a controller that stopped owns nothing any more).
    fn own(&self, owned: Option<OwnedBySettings>) {
        if let Err(error) = self
            .runtime
            .block_on(self.controller.set_owned_by_settings(owned))
        {
            tracing::warn!(%error, "the settings file's ownership was not recorded");
        }
    }

    /// Loads the `*.wasm` files that changed; returns the names of the policies loaded.
    fn load_files(
        &mut self,
        wasm: &[String],
        settings: &DirSettings,
        report: &mut ScanReport,
    ) -> HashSet<String> {
        let present: HashSet<&String> = wasm.iter().collect();
        let gone: Vec<String> = self
            .files
            .keys()
            .filter(|name| !present.contains(name))
            .cloned()
            .collect();
        for name in gone {
            self.files.remove(&name);
            let source = self.dir.join(&name).display().to_string();
            self.clear(&source);
        }
        let mut reloaded = HashSet::new();
        for name in wasm {
            let path = self.dir.join(name);
            let source = path.display().to_string();
            let last = self.files.get(name).map(|(stamp, _)| *stamp);
            let (bytes, stamp) = match read_file(&path, self.max_file_bytes, last.as_ref()) {
                FileRead::Unchanged => continue,
                FileRead::Refused(error) => {
                    self.files.remove(name);
                    self.refuse(report, &source, error, "read");
                    continue;
                }
                FileRead::Bytes(bytes, stamp) => (bytes, stamp),
            };
            let digest = ComponentDigest::of(&bytes);
            let same = self.files.get(name).is_some_and(|(_, d)| *d == digest);
            // Remembered even when refused: the same broken bytes are not tried again.
            self.files.insert(name.clone(), (stamp, digest));
            if same {
                continue;
            }
            let loaded = self.runtime.block_on(self.controller.load_policy(
                bytes,
                source.clone(),
                settings.parameters.clone(),
            ));
            match loaded {
                Ok((entry, _)) => {
                    self.reported.remove(&source);
                    reloaded.insert(entry.slot.name().to_string());
                    report.loaded.push(name.clone());
                }
                // load_policy has logged, counted and recorded it.
                Err(error) => {
                    self.reported.insert(source.clone(), error.to_string());
                    report.refused.push((source, error.to_string()));
                }
            }
        }
        reloaded
    }

    /// Applies the settings when the file changed (or the policy it names was just
    /// loaded): parameters, the active policy, the experiment. Between changes the file
    /// is not re-applied: what it names, the API does not change either (409).
    fn apply_settings(
        &mut self,
        settings: &DirSettings,
        changed: bool,
        reloaded: &HashSet<String>,
        report: &mut ScanReport,
    ) {
        let settings_source = self.dir.join(SETTINGS_FILE).display().to_string();
        for (policy, values) in &settings.parameters {
            if reloaded.contains(policy)
                || !(changed || self.applied.parameters.get(policy) != Some(values))
            {
                continue;
            }
            let source = format!("{settings_source}: parameters of {policy}");
            match self.runtime.block_on(self.controller.set_parameters_by(
                policy,
                values,
                ChangeBy::SettingsFile,
            )) {
                Ok(_) => self.clear(&source),
                Err(error) => self.refuse(report, &source, error.to_string(), "settings"),
            }
        }
        let named_reloaded = settings
            .active
            .as_ref()
            .is_some_and(|a| reloaded.contains(a));
        if let Some(active) = settings
            .active
            .as_ref()
            .filter(|_| changed || named_reloaded)
        {
            let source = format!("{settings_source}: active");
            let current = self.controller.with_status(|s| s.active.clone());
            if &current == active {
                self.clear(&source);
            } else {
                match self
                    .runtime
                    .block_on(self.controller.activate_by(active, ChangeBy::SettingsFile))
                {
                    Ok(applied) => {
                        self.clear(&source);
                        report.activated = Some(applied.active);
                    }
                    Err(error) => self.refuse(report, &source, error.to_string(), "settings"),
                }
            }
        }
        if changed && settings.experiment != self.applied.experiment {
            let source = format!("{settings_source}: experiment");
            let result = match &settings.experiment {
                Some(section) => {
                    section
                        .to_request()
                        .map_err(|e| e.to_string())
                        .and_then(|request| {
                            self.runtime
                                .block_on(
                                    self.controller
                                        .start_experiment_by(request, ChangeBy::SettingsFile),
                                )
                                .map(|_| ())
                                .map_err(|e| e.to_string())
                        })
                }
                None => self
                    .runtime
                    .block_on(self.controller.stop_experiment_by(ChangeBy::SettingsFile))
                    .map(|_| ())
                    .map_err(|e| e.to_string()),
            };
            match result {
                Ok(()) => self.clear(&source),
                Err(error) => self.refuse(report, &source, error, "settings"),
            }
        }
    }

    /// Reports a refusal (log, load-error metric, status, the refusal hook) unless the
    /// same one is already standing.
    fn refuse(&mut self, report: &mut ScanReport, source: &str, error: String, kind: &str) {
        if self.reported.get(source) == Some(&error) {
            return;
        }
        tracing::warn!(
            source,
            error,
            "refused from the policies directory; the running policy stays"
        );
        // The metric first: whoever sees the failure listed also sees it counted.
        self.controller.metrics().observe_load_error(kind);
        self.controller.catalog().record_failure(source, &error);
        self.controller.report_refusal(source, &error);
        self.reported.insert(source.to_string(), error.clone());
        report.refused.push((source.to_string(), error));
    }

    /// `source` is fine again: its standing refusal goes.
    fn clear(&mut self, source: &str) {
        if self.reported.remove(source).is_some() {
            self.controller.catalog().clear_failure(source);
        }
    }
}

/// A running watch; dropping it stops the watch.
pub struct DirWatcher {
    stop: Arc<AtomicBool>,
    scans: Arc<std::sync::atomic::AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl DirWatcher {
    /// Scans run so far, the first included.
    pub fn scans(&self) -> u64 {
        self.scans.load(Ordering::Relaxed)
    }
}

impl Drop for DirWatcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The watch on the directory and the identity of the directory it watches, so a
/// directory removed and created again is watched again.
struct Watch {
    watcher: Option<notify::RecommendedWatcher>,
    watched: Option<(u64, u64)>,
}

impl Watch {
    fn identity(dir: &Path) -> Option<(u64, u64)> {
        use std::os::unix::fs::MetadataExt as _;
        std::fs::metadata(dir).ok().map(|m| (m.dev(), m.ino()))
    }

    /// Watches `dir` anew when it is not watched or is another directory now.
    fn renew(
        &mut self,
        dir: &Path,
        tx: &mpsc::Sender<notify::Result<notify::Event>>,
    ) -> Result<(), PolicyDirError> {
        let identity = Self::identity(dir);
        if identity.is_some() && identity == self.watched && self.watcher.is_some() {
            return Ok(());
        }
        self.watcher = None;
        self.watched = None;
        let Some(identity) = identity else {
            return Err(PolicyDirError::Missing(dir.to_path_buf()));
        };
        let tx = tx.clone();
        let mut watcher = notify::recommended_watcher(move |event| {
            let _ = tx.send(event);
        })
        .map_err(|source| PolicyDirError::Watch {
            path: dir.to_path_buf(),
            source,
        })?;
        watcher
            .watch(dir, RecursiveMode::NonRecursive)
            .map_err(|source| PolicyDirError::Watch {
                path: dir.to_path_buf(),
                source,
            })?;
        self.watcher = Some(watcher);
        self.watched = Some(identity);
        Ok(())
    }
}

/// Whether an event can change what the directory holds: reads (the scan's own among
/// them) cannot, and must not trigger the next scan.
fn changes_content(event: &notify::Event) -> bool {
    !matches!(
        event.kind,
        notify::EventKind::Access(_)
            | notify::EventKind::Modify(notify::event::ModifyKind::Metadata(
                notify::event::MetadataKind::AccessTime
            ))
    )
}

/// Scans `dir` once now, then rescans after every burst of changes (and every
/// `RESCAN_EVERY`) on a thread of its own. A directory that disappears is reported
/// once and watched again when it comes back.
pub fn watch_policy_dir(mut dir: PolicyDir) -> Result<(DirWatcher, ScanReport), PolicyDirError> {
    let (tx, rx) = mpsc::channel::<notify::Result<notify::Event>>();
    let mut watch = Watch {
        watcher: None,
        watched: None,
    };
    watch.renew(&dir.dir, &tx)?;
    let first = dir.scan();
    let stop = Arc::new(AtomicBool::new(false));
    let stop_thread = stop.clone();
    let scans = Arc::new(std::sync::atomic::AtomicU64::new(1));
    let scans_thread = scans.clone();
    let thread = std::thread::Builder::new()
        .name("switchyard-policy-dir".into())
        .spawn(move || {
            let tick = Duration::from_millis(50);
            let mut dirty = false;
            let mut quiet = Duration::ZERO;
            let mut since_scan = Duration::ZERO;
            while !stop_thread.load(Ordering::Relaxed) {
                match rx.recv_timeout(tick) {
                    Ok(Ok(event)) => {
                        if changes_content(&event) {
                            dirty = true;
                            quiet = Duration::ZERO;
                        }
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
                    if let Err(error) = watch.renew(&dir.dir, &tx) {
                        let mut report = ScanReport::default();
                        let source = dir.dir.display().to_string();
                        dir.refuse(
                            &mut report,
                            &source,
                            format!("{error}; the loaded policies stay"),
                            "read",
                        );
                        continue;
                    }
                    dir.scan();
                    scans_thread.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
        .expect("cannot start the policies-directory thread");
    Ok((
        DirWatcher {
            stop,
            scans,
            thread: Some(thread),
        },
        first,
    ))
}
