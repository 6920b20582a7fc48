//! The settings file's `policies` section: policies named by OCI registry reference
//! (`team-fair: oci://registry.example.com/team/fair:1.4@sha256:...`), pulled through
//! the controller and loaded like the directory's files. A reference is pulled when it
//! first appears or changes (a tag is resolved then, once); one that was refused is
//! tried again when the settings file changes. Nothing is kept by the component store:
//! the settings file is these policies' persistence, as the directory is its files'.
//! This module does not apply the rest of the settings (the scan does) and does not talk
//! to registries itself.

use std::collections::HashSet;

use super::{PolicyDir, SETTINGS_FILE, ScanReport};
use crate::policy_dir::DirSettings;

impl PolicyDir {
    /// Pulls and loads the references of `settings` that are new, changed or (when the
    /// file changed) refused before; returns the names of the policies loaded.
    pub(super) fn load_references(
        &mut self,
        settings: &DirSettings,
        changed: bool,
        report: &mut ScanReport,
    ) -> HashSet<String> {
        let settings_source = self.dir.join(SETTINGS_FILE).display().to_string();
        let mut loaded = HashSet::new();
        for (name, reference) in &settings.policies {
            let unchanged = self.applied.policies.get(name) == Some(reference);
            let refused = self.reported.contains_key(reference);
            if unchanged && !(refused && changed) {
                continue;
            }
            let pulled = self.runtime.block_on(self.controller.pull_and_load(
                reference,
                settings.parameters.clone(),
                reference,
            ));
            let entry = match pulled {
                Ok((entry, _, _)) => entry,
                // pull_and_load has logged, counted and recorded it.
                Err(error) => {
                    self.reported.insert(reference.clone(), error.to_string());
                    report.refused.push((reference.clone(), error.to_string()));
                    continue;
                }
            };
            self.reported.remove(reference);
            let source = format!("{settings_source}: policies.{name}");
            if entry.slot.name() != name {
                let error = format!(
                    "{reference} is a policy that calls itself `{}`, not `{name}`; name it `{}` \
                     under `policies` (it is loaded under its own name)",
                    entry.slot.name(),
                    entry.slot.name()
                );
                self.refuse(report, &source, error, "settings");
            } else {
                self.clear(&source);
            }
            report.loaded.push(reference.clone());
            loaded.insert(entry.slot.name().to_string());
        }
        loaded
    }
}
