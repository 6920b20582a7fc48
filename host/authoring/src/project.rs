//! What every new policy project is made of, whatever its language: its name checked
//! and turned into a type name, an empty folder, the templates filled in, the test
//! workload and expectations, the vendored SDK, and [`Created`], the account of what was
//! written. The languages' own files are in `scaffold` and its submodules; this module
//! must not name them.

use std::path::{Path, PathBuf};

use crate::files::{ScaffoldError, ensure_empty, write};
use crate::vendor::SDK_DIR;

/// What `switchyard policy new` made: a Rust, Python or JavaScript project.
#[derive(Debug)]
pub struct Created {
    /// The crate's directory.
    pub dir: PathBuf,
    /// Whether it joined the switchyard workspace.
    pub in_workspace: bool,
    /// Where the build command writes the component, relative to `dir`.
    pub wasm_path: String,
    /// The command that builds the component, run in `dir`.
    pub build: String,
    /// Every file written.
    pub files: Vec<PathBuf>,
}

/// A project in a guest language (Python, JavaScript) being written: the steps
/// `create_python_project` and `create_js_project` share. The name is checked and
/// the folder found empty before anything is written.
pub(crate) struct LanguageProject<'a> {
    name: &'a str,
    dir: &'a Path,
    /// The component the build command writes, relative to `dir`.
    pub(crate) wasm_path: String,
}

impl<'a> LanguageProject<'a> {
    pub(crate) fn start(name: &'a str, dir: &'a Path) -> Result<Self, ScaffoldError> {
        check_name(name)?;
        ensure_empty(dir)?;
        Ok(Self {
            name,
            dir,
            wasm_path: format!("{}.wasm", name.replace('-', "_")),
        })
    }

    /// `template` with the project's name, type name and component path filled in.
    pub(crate) fn fill(&self, template: &str) -> String {
        template
            .replace("{{name}}", self.name)
            .replace("{{type_name}}", &type_name(self.name))
            .replace("{{wasm_path}}", &self.wasm_path)
    }

    /// The test workload and expectations every new policy starts with, whatever its
    /// language.
    fn policy_tests(&self) -> [(&'static str, String); 2] {
        [
            (
                "policy-tests/workload.yaml",
                self.fill(include_str!("template/workload.yaml.in")),
            ),
            (
                "policy-tests/expect.yaml",
                self.fill(include_str!("template/expect.yaml.in")),
            ),
        ]
    }

    /// Writes `files`, then the language's SDK with `vendor_sdk` into the project's
    /// `switchyard-sdk/`; `build` is the command that builds the component.
    pub(crate) fn write(
        self,
        files: impl IntoIterator<Item = (&'static str, String)>,
        vendor_sdk: fn(&Path) -> Result<Vec<PathBuf>, ScaffoldError>,
        build: String,
    ) -> Result<Created, ScaffoldError> {
        let mut written = Vec::new();
        for (relative, text) in files.into_iter().chain(self.policy_tests()) {
            let path = self.dir.join(relative);
            write(&path, &text)?;
            written.push(path);
        }
        written.extend(vendor_sdk(&self.dir.join(SDK_DIR))?);
        Ok(Created {
            dir: self.dir.to_path_buf(),
            in_workspace: false,
            wasm_path: self.wasm_path,
            build,
            files: written,
        })
    }
}

pub(crate) fn check_name(name: &str) -> Result<(), ScaffoldError> {
    let ok = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(ScaffoldError::BadName {
            name: name.to_string(),
        })
    }
}

/// `least-loaded` -> `LeastLoadedPolicy`.
pub(crate) fn type_name(name: &str) -> String {
    let mut out: String = name
        .split('-')
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect();
    out.push_str("Policy");
    out
}

/// What the language modules' tests check of every new project.
#[cfg(test)]
pub(crate) mod checks {
    use std::path::{Path, PathBuf};

    use super::Created;
    use crate::files::ScaffoldError;

    /// The files of `created` that still hold a placeholder (as `is_placeholder` finds
    /// one in a file's text) or name the folder `here` it was created in.
    pub(crate) fn leftovers(
        created: &Created,
        here: &Path,
        is_placeholder: impl Fn(&str) -> bool,
    ) -> Vec<PathBuf> {
        let here = here.display().to_string();
        created
            .files
            .iter()
            .filter(|f| {
                let text = std::fs::read_to_string(f).unwrap();
                is_placeholder(&text) || text.contains(&here)
            })
            .cloned()
            .collect()
    }

    /// `create` refuses a folder that holds a file, and leaves the file as it was.
    pub(crate) fn refuses_a_non_empty_folder(
        create: impl Fn(&Path) -> Result<Created, ScaffoldError>,
    ) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("keep.txt"), "mine").unwrap();
        let error = create(dir.path()).unwrap_err();
        assert!(matches!(error, ScaffoldError::NotEmpty { .. }), "{error}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("keep.txt")).unwrap(),
            "mine"
        );
    }
}
