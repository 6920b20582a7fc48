//! `switchyard policy new NAME --lang python`: a ready-to-build Python policy from the
//! templates in `template/python/`: `app.py` (the policy on the SDK), `test_app.py`
//! (its first pytest tests, run natively), `pytest.ini`, `requirements.txt`
//! (componentize-py and pytest), a README with the build command, the test workload and
//! expectations a Rust crate gets, and the Python SDK this binary was built with in
//! `switchyard-sdk/` ([`crate::vendor`]). Nothing in it names a
//! switchyard checkout, so it builds wherever it is moved.

use std::path::Path;

use crate::files::ScaffoldError;
use crate::project::{Created, LanguageProject};
use crate::vendor::{SDK_DIR, vendor_python_sdk};

/// The world a Python policy's component exports: the SDK implements the incremental
/// one.
const WORLD: &str = "switchyard:policy/incremental-policy@0.3.0";

/// Creates the Python project of policy `name` in `dir` (missing or empty).
pub fn create_python_project(name: &str, dir: &Path) -> Result<Created, ScaffoldError> {
    let project = LanguageProject::start(name, dir)?;
    let files = [
        ("app.py", include_str!("../template/python/app.py.in")),
        (
            "test_app.py",
            include_str!("../template/python/test_app.py.in"),
        ),
        (
            "pytest.ini",
            include_str!("../template/python/pytest.ini.in"),
        ),
        (
            "requirements.txt",
            include_str!("../template/python/requirements.txt.in"),
        ),
        ("README.md", include_str!("../template/python/README.md.in")),
        (
            ".gitignore",
            include_str!("../template/python/gitignore.in"),
        ),
    ]
    .map(|(relative, template)| (relative, project.fill(template)));
    let build = format!(
        ".venv/bin/componentize-py -w {WORLD} componentize -p . -p {SDK_DIR}/src app -o {}",
        project.wasm_path
    );
    project.write(files, vendor_python_sdk, build)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::project::checks;

    #[test]
    fn a_python_policy_gets_its_tests_its_build_command_and_the_sdk_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let created = create_python_project("first-fit", &dir.path().join("first-fit")).unwrap();
        let app = std::fs::read_to_string(created.dir.join("app.py")).unwrap();
        assert!(app.contains("class FirstFitPolicy(Policy):"), "{app}");
        assert!(app.contains("name = \"first-fit\""), "{app}");
        assert!(app.contains("IncrementalScheduler = export(FirstFitPolicy())"));
        let readme = std::fs::read_to_string(created.dir.join("README.md")).unwrap();
        assert!(readme.contains("-o first_fit.wasm"), "{readme}");
        assert!(created.build.ends_with("-o first_fit.wasm"));
        assert!(
            created
                .dir
                .join("switchyard-sdk/src/switchyard_policy/componentize-py.toml")
                .is_file()
        );
        let leftover = checks::leftovers(&created, dir.path(), |text| text.contains("{{"));
        assert!(leftover.is_empty(), "placeholders or paths in {leftover:?}");
    }

    #[test]
    fn a_non_empty_directory_is_never_written_into() {
        checks::refuses_a_non_empty_folder(|dir| create_python_project("x", dir));
    }
}
