//! `switchyard policy new NAME --lang js`: a ready-to-build JavaScript policy from the
//! templates in `template/js/`: `app.js` (the policy on the SDK), `app.test.js` (its
//! first tests, run natively with `node --test`), `package.json` with the `test` and
//! `build` scripts and `package-lock.json` pinning componentize-js (both derived from the
//! SDK's, [`crate::vendor`]), a README with the build command, the test
//! workload and expectations a Rust crate gets, and the JavaScript SDK this binary was
//! built with in `switchyard-sdk/`. Nothing in it names a switchyard checkout, so it
//! builds wherever it is moved.

use std::path::Path;

use crate::files::ScaffoldError;
use crate::project::{Created, LanguageProject};
use crate::vendor::{js_project_lock, js_project_manifest, vendor_js_sdk};

/// Creates the JavaScript project of policy `name` in `dir` (missing or empty).
pub fn create_js_project(name: &str, dir: &Path) -> Result<Created, ScaffoldError> {
    let project = LanguageProject::start(name, dir)?;
    let files = [
        (
            "app.js",
            project.fill(include_str!("../template/js/app.js.in")),
        ),
        (
            "app.test.js",
            project.fill(include_str!("../template/js/app.test.js.in")),
        ),
        (
            "README.md",
            project.fill(include_str!("../template/js/README.md.in")),
        ),
        (
            ".gitignore",
            project.fill(include_str!("../template/js/gitignore.in")),
        ),
        (
            "package.json",
            js_project_manifest(name, &project.wasm_path),
        ),
        ("package-lock.json", js_project_lock(name)),
    ];
    project.write(files, vendor_js_sdk, "npm run build".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::project::checks;

    #[test]
    fn a_javascript_policy_gets_its_tests_its_build_script_and_the_sdk_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let created = create_js_project("first-fit", &dir.path().join("first-fit")).unwrap();
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
        let leftover = checks::leftovers(&created, dir.path(), placeholder);
        assert!(leftover.is_empty(), "placeholders or paths in {leftover:?}");
    }

    #[test]
    fn a_non_empty_directory_is_never_written_into() {
        checks::refuses_a_non_empty_folder(|dir| create_js_project("x", dir));
    }
}
