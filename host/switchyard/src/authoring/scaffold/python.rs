//! `switchyard policy new NAME --lang python`: a ready-to-build Python policy from the
//! templates in `template/python/`: `app.py` (the policy on the SDK), `test_app.py`
//! (its first pytest tests, run natively), `pytest.ini`, `requirements.txt`
//! (componentize-py and pytest), a README with the build command, the test workload and
//! expectations a Rust crate gets, and the Python SDK this binary was built with in
//! `switchyard-sdk/` ([`crate::authoring::vendor::python`]). Nothing in it names a
//! switchyard checkout, so it builds wherever it is moved.

use std::path::Path;

use super::{Created, ScaffoldError, check_name, type_name, write};
use crate::authoring::vendor;

/// The world the component exports: the SDK implements the incremental one.
pub const WORLD: &str = "switchyard:policy/incremental-policy@0.3.0";

/// Creates the Python project of policy `name` in `dir` (missing or empty).
pub fn create(name: &str, dir: &Path) -> Result<Created, ScaffoldError> {
    check_name(name)?;
    if std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some()) {
        return Err(ScaffoldError::NotEmpty {
            path: dir.to_path_buf(),
        });
    }
    let wasm_path = format!("{}.wasm", name.replace('-', "_"));
    let fill = |template: &str| {
        template
            .replace("{{name}}", name)
            .replace("{{type_name}}", &type_name(name))
            .replace("{{wasm_path}}", &wasm_path)
    };
    let files: [(&str, &str); 8] = [
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
        (
            "policy-tests/workload.yaml",
            include_str!("../template/workload.yaml.in"),
        ),
        (
            "policy-tests/expect.yaml",
            include_str!("../template/expect.yaml.in"),
        ),
    ];
    let mut written = Vec::new();
    for (relative, template) in files {
        let path = dir.join(relative);
        write(&path, &fill(template))?;
        written.push(path);
    }
    written.extend(vendor::python::write(&dir.join(vendor::SDK_DIR))?);
    Ok(Created {
        dir: dir.to_path_buf(),
        in_workspace: false,
        build: format!(
            ".venv/bin/componentize-py -w {WORLD} componentize -p . -p {}/src app -o {wasm_path}",
            vendor::SDK_DIR
        ),
        wasm_path,
        files: written,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_python_policy_gets_its_tests_its_build_command_and_the_sdk_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let created = create("first-fit", &dir.path().join("first-fit")).unwrap();
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
        let here = dir.path().display().to_string();
        let leftover: Vec<_> = created
            .files
            .iter()
            .filter(|f| {
                let text = std::fs::read_to_string(f).unwrap();
                text.contains("{{") || text.contains(&here)
            })
            .collect();
        assert!(leftover.is_empty(), "placeholders or paths in {leftover:?}");
    }

    #[test]
    fn a_non_empty_directory_is_never_written_into() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("keep.txt"), "mine").unwrap();
        let error = create("x", dir.path()).unwrap_err();
        assert!(matches!(error, ScaffoldError::NotEmpty { .. }), "{error}");
    }
}
