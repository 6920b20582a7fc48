//! `switchyard policy new NAME --lang js`: a ready-to-build JavaScript policy from the
//! templates in `template/js/`: `app.js` (the policy on the SDK), `app.test.js` (its
//! first tests, run natively with `node --test`), `package.json` with the `test` and
//! `build` scripts and `package-lock.json` pinning componentize-js (both derived from the
//! SDK's, [`crate::authoring::vendor::js`]), a README with the build command, the test
//! workload and expectations a Rust crate gets, and the JavaScript SDK this binary was
//! built with in `switchyard-sdk/`. Nothing in it names a switchyard checkout, so it
//! builds wherever it is moved.

use std::path::Path;

use super::{Created, ScaffoldError, check_name, type_name, write};
use crate::authoring::vendor;

/// Creates the JavaScript project of policy `name` in `dir` (missing or empty).
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
    let files: [(&str, String); 8] = [
        ("app.js", fill(include_str!("../template/js/app.js.in"))),
        (
            "app.test.js",
            fill(include_str!("../template/js/app.test.js.in")),
        ),
        (
            "README.md",
            fill(include_str!("../template/js/README.md.in")),
        ),
        (
            ".gitignore",
            fill(include_str!("../template/js/gitignore.in")),
        ),
        (
            "package.json",
            vendor::js::project_manifest(name, &wasm_path),
        ),
        ("package-lock.json", vendor::js::project_lock(name)),
        (
            "policy-tests/workload.yaml",
            fill(include_str!("../template/workload.yaml.in")),
        ),
        (
            "policy-tests/expect.yaml",
            fill(include_str!("../template/expect.yaml.in")),
        ),
    ];
    let mut written = Vec::new();
    for (relative, text) in files {
        let path = dir.join(relative);
        write(&path, &text)?;
        written.push(path);
    }
    written.extend(vendor::js::write(&dir.join(vendor::SDK_DIR))?);
    Ok(Created {
        dir: dir.to_path_buf(),
        in_workspace: false,
        build: "npm run build".to_string(),
        wasm_path,
        files: written,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_javascript_policy_gets_its_tests_its_build_script_and_the_sdk_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let created = create("first-fit", &dir.path().join("first-fit")).unwrap();
        let app = std::fs::read_to_string(created.dir.join("app.js")).unwrap();
        assert!(
            app.contains("class FirstFitPolicy extends Policy {"),
            "{app}"
        );
        assert!(app.contains("name = 'first-fit';"), "{app}");
        assert!(app.contains("exportPolicy(new FirstFitPolicy())"), "{app}");
        let manifest = std::fs::read_to_string(created.dir.join("package.json")).unwrap();
        assert!(
            manifest.contains("node switchyard-sdk/bin/build.js app.js -o first_fit.wasm"),
            "{manifest}"
        );
        let readme = std::fs::read_to_string(created.dir.join("README.md")).unwrap();
        assert!(readme.contains("-o first_fit.wasm"), "{readme}");
        assert!(created.dir.join("switchyard-sdk/bin/build.js").is_file());
        assert!(created.dir.join("switchyard-sdk/src/testing.js").is_file());
        let here = dir.path().display().to_string();
        // A template placeholder is `{{word}}`; JSDoc's `{{name: string}}` object types
        // in the SDK are not.
        let placeholder = |text: &str| {
            text.split("{{").skip(1).any(|after| {
                let word = after.split("}}").next().unwrap_or_default();
                after.contains("}}")
                    && !word.is_empty()
                    && word.chars().all(|c| c.is_ascii_lowercase() || c == '_')
            })
        };
        let leftover: Vec<_> = created
            .files
            .iter()
            .filter(|f| {
                let text = std::fs::read_to_string(f).unwrap();
                placeholder(&text) || text.contains(&here)
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
